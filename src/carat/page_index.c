/* The page index of small allocations (page_index.h): a hash from page number to the list
 * of allocations overlapping that page. Lists live in the runtime's own memory, in blocks
 * of a power of two bytes, and are freed when their page has none left. */
#include "carat/page_index.h"
#include "carat/carat_mem.h"
#include "internal.h"

#include <string.h>

#define PAGE_SHIFT 12
#define FIRST_LIST_BYTES 128

/* The block a list of capacity cap lives in: the power of two it was given. */
static size_t block_bytes(uint32_t cap)
{
    size_t want = sizeof(struct page_list) + cap * sizeof(struct page_item), b = FIRST_LIST_BYTES;
    while (b < want)
        b *= 2;
    return b;
}

static struct page_list *new_list(size_t bytes)
{
    struct page_list *l = exo_carat_mem_alloc(bytes);
    if (l)
        l->cap = (uint32_t)((bytes - sizeof *l) / sizeof(struct page_item));
    return l;
}

static int add_to_page(struct page_index *pi, uintptr_t page, struct page_item item)
{
    uint32_t i = exo_carat_addr_map_find(&pi->lists, page);
    struct page_list *l;
    if (i == UINT32_MAX) {
        if (exo_carat_addr_map_reserve(&pi->lists) || !(l = new_list(FIRST_LIST_BYTES)))
            return -EXO_ENOMEM;
        pi->list_bytes += FIRST_LIST_BYTES;
        exo_carat_addr_map_put(&pi->lists, page, l);
    } else {
        l = pi->lists.e[i].value;
        if (l->n == l->cap) {
            size_t old = block_bytes(l->cap);
            struct page_list *bigger = new_list(2 * old);
            if (!bigger)
                return -EXO_ENOMEM;
            bigger->n = l->n;
            memcpy(bigger->items, l->items, l->n * sizeof *l->items);
            exo_carat_mem_free(l, old);
            pi->list_bytes += old;
            pi->lists.e[i].value = l = bigger;
        }
    }
    l->items[l->n++] = item;
    return 0;
}

static void remove_from_page(struct page_index *pi, uintptr_t page, const struct alloc *node)
{
    uint32_t i = exo_carat_addr_map_find(&pi->lists, page);
    if (i == UINT32_MAX)
        return;
    struct page_list *l = pi->lists.e[i].value;
    for (uint32_t k = 0; k < l->n; k++)
        if (l->items[k].node == node) {
            l->items[k] = l->items[--l->n];
            break;
        }
    if (l->n == 0) {
        size_t bytes = block_bytes(l->cap);
        exo_carat_mem_free(l, bytes);
        pi->list_bytes -= bytes;
        exo_carat_addr_map_remove_at(&pi->lists, i);
    }
}

int exo_carat_page_index_add(struct page_index *pi, struct alloc *node, uintptr_t base,
                             uintptr_t size)
{
    struct page_item item = { base, size, node };
    uintptr_t first = base >> PAGE_SHIFT, last = (base + size - 1) >> PAGE_SHIFT;
    if (add_to_page(pi, first, item))
        return -EXO_ENOMEM;
    if (last != first && add_to_page(pi, last, item)) {
        remove_from_page(pi, first, node);
        return -EXO_ENOMEM;
    }
    return 0;
}

void exo_carat_page_index_remove(struct page_index *pi, const struct alloc *node,
                                 uintptr_t base, uintptr_t size)
{
    uintptr_t first = base >> PAGE_SHIFT, last = (base + size - 1) >> PAGE_SHIFT;
    remove_from_page(pi, first, node);
    if (last != first)
        remove_from_page(pi, last, node);
}

struct alloc *exo_carat_page_index_find(const struct page_index *pi, uintptr_t addr)
{
    const struct page_list *l = exo_carat_addr_map_get(&pi->lists, addr >> PAGE_SHIFT);
    if (l)
        for (uint32_t k = 0; k < l->n; k++)
            if (addr - l->items[k].base < l->items[k].size)
                return l->items[k].node;
    return NULL;
}

static struct alloc *overlap_in(const struct page_list *l, uintptr_t base, uintptr_t end)
{
    for (uint32_t k = 0; k < l->n; k++)
        if (l->items[k].base < end && base < l->items[k].base + l->items[k].size)
            return l->items[k].node;
    return NULL;
}

struct alloc *exo_carat_page_index_overlapping(const struct page_index *pi, uintptr_t base,
                                               uintptr_t end)
{
    if (!pi->lists.count || end <= base)
        return NULL;
    uintptr_t first = base >> PAGE_SHIFT, last = (end - 1) >> PAGE_SHIFT;
    struct alloc *hit = NULL;
    if (last - first < pi->lists.count) {   /* fewer pages in the range than listed */
        for (uintptr_t p = first; p <= last && !hit; p++) {
            const struct page_list *l = exo_carat_addr_map_get(&pi->lists, p);
            if (l)
                hit = overlap_in(l, base, end);
        }
    } else {                                /* a huge range: go through the listed pages */
        for (uint32_t i = 0; i < pi->lists.cap && !hit; i++)
            if (pi->lists.e[i].value && pi->lists.e[i].key - first <= last - first)
                hit = overlap_in(pi->lists.e[i].value, base, end);
    }
    return hit;
}
