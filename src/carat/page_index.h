/* The small allocations of the allocation table listed by the pages they overlap (one or
 * two, as they are at most PAGE_INDEX_SMALL bytes): "which allocation contains this
 * address" reads one page's list instead of walking a tree with a cache miss per level, and
 * an allocation or free changes one or two lists. Programs with millions of small blocks
 * (an interpreter's objects) spent most of their tracking time in the tree. Not
 * thread-safe: the runtime's lock guards it, as it does the table. */
#ifndef EXOMEM_CARAT_PAGE_INDEX_H
#define EXOMEM_CARAT_PAGE_INDEX_H

#include "carat/addr_map.h"

#include <stdint.h>

#define PAGE_INDEX_SMALL 4096

struct alloc;

/* An allocation in a page's list, with its range copied so a scan reads no node. */
struct page_item {
    uintptr_t base, size;
    struct alloc *node;
};

/* The allocations overlapping one page, in no order. */
struct page_list {
    uint32_t n, cap;
    struct page_item items[];
};

/* Pages with a list: page number (address >> 12) to its list. */
struct page_index {
    struct addr_map lists;
    uint64_t list_bytes;     /* memory of the lists (the map counts its own) */
};

/* List [base, base + size) (size at most PAGE_INDEX_SMALL) as node's. -EXO_ENOMEM, and
 * nothing changed. */
int exo_carat_page_index_add(struct page_index *pi, struct alloc *node, uintptr_t base,
                             uintptr_t size);
/* Take node, listed with [base, base + size), out of its pages' lists. */
void exo_carat_page_index_remove(struct page_index *pi, const struct alloc *node,
                                 uintptr_t base, uintptr_t size);
/* The listed allocation containing addr, or NULL. */
struct alloc *exo_carat_page_index_find(const struct page_index *pi, uintptr_t addr);
/* A listed allocation overlapping [base, end), or NULL. */
struct alloc *exo_carat_page_index_overlapping(const struct page_index *pi, uintptr_t base,
                                               uintptr_t end);

#endif
