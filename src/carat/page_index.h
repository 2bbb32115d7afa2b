/* The small allocations of the allocation table by the pages they overlap: for each such
 * page, a bitmap of the 8-byte words where a block starts and one of the words a block
 * covers. "Which allocation contains this address" and "does anything overlap this
 * range" are then a hash lookup and a few bit operations, with no walk over the blocks of
 * a page (Lua's pages hold dozens of small blocks each, and a list of them was scanned at
 * every allocation, free and lookup). Only blocks of at most PAGE_INDEX_SMALL bytes that
 * start on an 8-byte boundary (every malloc block, most globals) are indexed here: two such
 * blocks that do not overlap never share a word, so the bits are exact. Not thread-safe: the
 * runtime's lock guards it, as it does the table. */
#ifndef EXOMEM_CARAT_PAGE_INDEX_H
#define EXOMEM_CARAT_PAGE_INDEX_H

#include "carat/addr_map.h"

#include <stdbool.h>
#include <stdint.h>

/* Up to 16 KiB: the match stacks oniguruma saves (4-8 KiB, at every match attempt) and
 * Lua's bigger arrays stay out of the tree, whose walk a failed lookup pays for. */
#define PAGE_INDEX_SMALL 16384

/* Pages with a bitmap: page number (address >> 12) to its struct page_bits. */
struct page_index {
    struct addr_map map;
    uint64_t bits_bytes;     /* memory of the bitmaps (the map counts its own) */
};

/* Index [base, base + size) (size at most PAGE_INDEX_SMALL). -EXO_EINVAL if base is not
 * 8-byte aligned (the caller keeps such a block elsewhere), -EXO_ENOMEM; either way
 * nothing changed. */
int exo_carat_page_index_add(struct page_index *pi, uintptr_t base, uintptr_t size);
/* Take [base, base + size), added before, out of the index. */
void exo_carat_page_index_remove(struct page_index *pi, uintptr_t base, uintptr_t size);
/* The base of the indexed block that covers part of addr's 8-byte word, or 0. The block
 * may end before addr, in the same word: the caller checks its size. */
uintptr_t exo_carat_page_index_find(const struct page_index *pi, uintptr_t addr);
/* Does an indexed block cover part of addr's 8-byte word? Exact for an 8-byte aligned
 * addr: the block then holds addr. */
bool exo_carat_page_index_covers(const struct page_index *pi, uintptr_t addr);
/* The base of an indexed block covering part of a word in [base, end), or 0. Only one
 * whose last word is base's can end before base (when base is not aligned): the caller
 * checks. */
uintptr_t exo_carat_page_index_overlapping(const struct page_index *pi, uintptr_t base,
                                           uintptr_t end);

#endif
