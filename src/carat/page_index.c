/* The page index of small allocations (page_index.h): a hash from page number to the list
 * of allocations overlapping that page. Lists live in the runtime's own memory, in blocks
 * of a power of two bytes, and are freed when their page has none left. */
#include "carat/page_index.h"
#include "carat/carat_mem.h"
#include "internal.h"

#include <string.h>

#define PAGE_SHIFT 12
#define FIRST_LIST_BYTES 128

static uint32_t page_hash(uintptr_t page, uint32_t cap)
{
    return (uint32_t)(page * 0x9e3779b97f4a7c15ull >> 32) & (cap - 1);
}

static uint32_t slot_index(const struct page_index *pi, uintptr_t page)
{
    for (uint32_t i = page_hash(page, pi->cap); pi->slots[i].list; i = (i + 1) & (pi->cap - 1))
        if (pi->slots[i].page == page)
            return i;
    return UINT32_MAX;
}

static struct page_list *list_of(const struct page_index *pi, uintptr_t page)
{
    uint32_t i = pi->cap ? slot_index(pi, page) : UINT32_MAX;
    return i == UINT32_MAX ? NULL : pi->slots[i].list;
}

static void slot_put(struct page_index *pi, uintptr_t page, struct page_list *l)
{
    uint32_t i = page_hash(page, pi->cap);
    while (pi->slots[i].list)
        i = (i + 1) & (pi->cap - 1);
    pi->slots[i] = (struct page_slot){ page, l };
}

/* Room for one more page in the hash (kept at most half full). -EXO_ENOMEM. */
static int reserve_slot(struct page_index *pi)
{
    if ((pi->count + 1) * 2 <= pi->cap)
        return 0;
    uint32_t old_cap = pi->cap, cap = old_cap ? old_cap * 2 : 1024;
    struct page_slot *old = pi->slots, *bigger = exo_carat_mem_alloc(cap * sizeof *bigger);
    if (!bigger)
        return -EXO_ENOMEM;
    pi->slots = bigger;
    pi->cap = cap;
    for (uint32_t i = 0; i < old_cap; i++)
        if (old[i].list)
            slot_put(pi, old[i].page, old[i].list);
    exo_carat_mem_free(old, old_cap * sizeof *old);
    pi->bytes += (uint64_t)(cap - old_cap) * sizeof *bigger;
    return 0;
}

/* Empty slot i, shifting the rest of its probe run back so none is cut off from home. */
static void slot_remove(struct page_index *pi, uint32_t i)
{
    uint32_t mask = pi->cap - 1;
    for (uint32_t j = (i + 1) & mask; pi->slots[j].list; j = (j + 1) & mask) {
        uint32_t home = page_hash(pi->slots[j].page, pi->cap);
        if (((j - home) & mask) >= ((j - i) & mask)) {   /* home at or before the hole */
            pi->slots[i] = pi->slots[j];
            i = j;
        }
    }
    pi->slots[i] = (struct page_slot){ 0, NULL };
    pi->count--;
}

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
    uint32_t i = pi->cap ? slot_index(pi, page) : UINT32_MAX;
    struct page_list *l;
    if (i == UINT32_MAX) {
        if (reserve_slot(pi) || !(l = new_list(FIRST_LIST_BYTES)))
            return -EXO_ENOMEM;
        pi->bytes += FIRST_LIST_BYTES;
        slot_put(pi, page, l);
        pi->count++;
    } else {
        l = pi->slots[i].list;
        if (l->n == l->cap) {
            size_t old = block_bytes(l->cap);
            struct page_list *bigger = new_list(2 * old);
            if (!bigger)
                return -EXO_ENOMEM;
            bigger->n = l->n;
            memcpy(bigger->items, l->items, l->n * sizeof *l->items);
            exo_carat_mem_free(l, old);
            pi->bytes += old;
            pi->slots[i].list = l = bigger;
        }
    }
    l->items[l->n++] = item;
    return 0;
}

static void remove_from_page(struct page_index *pi, uintptr_t page, const struct alloc *node)
{
    uint32_t i = pi->cap ? slot_index(pi, page) : UINT32_MAX;
    if (i == UINT32_MAX)
        return;
    struct page_list *l = pi->slots[i].list;
    for (uint32_t k = 0; k < l->n; k++)
        if (l->items[k].node == node) {
            l->items[k] = l->items[--l->n];
            break;
        }
    if (l->n == 0) {
        size_t bytes = block_bytes(l->cap);
        exo_carat_mem_free(l, bytes);
        pi->bytes -= bytes;
        slot_remove(pi, i);
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
    const struct page_list *l = list_of(pi, addr >> PAGE_SHIFT);
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
    if (!pi->count || end <= base)
        return NULL;
    uintptr_t first = base >> PAGE_SHIFT, last = (end - 1) >> PAGE_SHIFT;
    struct alloc *hit = NULL;
    if (last - first < pi->count) {   /* fewer pages in the range than listed: look them up */
        for (uintptr_t p = first; p <= last && !hit; p++) {
            const struct page_list *l = list_of(pi, p);
            if (l)
                hit = overlap_in(l, base, end);
        }
    } else {                          /* a huge range: go through the listed pages instead */
        for (uint32_t i = 0; i < pi->cap && !hit; i++)
            if (pi->slots[i].list && pi->slots[i].page - first <= last - first)
                hit = overlap_in(pi->slots[i].list, base, end);
    }
    return hit;
}
