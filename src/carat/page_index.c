/* The page index of small allocations (page_index.h): a hash from page number to two
 * bitmaps, of the 8-byte words where blocks start and of the words they cover.
 * A bitmap block is freed when its page covers nothing any more. */
#include "carat/page_index.h"
#include "carat/carat_mem.h"
#include "internal.h"

#include <stdbool.h>

#define PAGE_SHIFT 12
#define GRANULE_SHIFT 3
#define GRANULES (1u << (PAGE_SHIFT - GRANULE_SHIFT))   /* 512 a page */
#define UNIT_SHIFT 3
#define UNITS (1u << (PAGE_SHIFT - UNIT_SHIFT))         /* 512 a page */

/* 128 bytes. Coverage is kept by 8-byte words: then "is this pointer-sized slot in a
 * block" is one bit, exact (a block starts on a word, so if it covers any byte of an
 * aligned word it covers the word's first), and applying an escape asks that of every
 * slot. Starts are kept by words too, not by malloc's 16 bytes: the globals of a program
 * (8-byte aligned, most of them) then stay out of the tree, whose walk every failed lookup
 * paid for (oniguruma's scans of copied stacks fail millions of times). */
struct page_bits {
    uint64_t start[GRANULES / 64];   /* a block starts at this granule */
    uint64_t covered[UNITS / 64];    /* a block holds some of this word's bytes */
};

static unsigned granule_of(uintptr_t addr)
{
    return (unsigned)(addr >> GRANULE_SHIFT) & (GRANULES - 1);
}

static unsigned unit_of(uintptr_t addr)
{
    return (unsigned)(addr >> UNIT_SHIFT) & (UNITS - 1);
}

/* Bits [lo, hi] of w (lo <= hi < 64). */
static uint64_t word_mask(unsigned lo, unsigned hi)
{
    return (hi == 63 ? ~0ull : (1ull << (hi + 1)) - 1) & ~((1ull << lo) - 1);
}

/* Set or clear bits [lo, hi] of a bitmap. */
static void set_range(uint64_t *b, unsigned lo, unsigned hi, bool on)
{
    for (unsigned w = lo / 64; w <= hi / 64; w++) {
        unsigned a = w == lo / 64 ? lo % 64 : 0, z = w == hi / 64 ? hi % 64 : 63;
        if (on)
            b[w] |= word_mask(a, z);
        else
            b[w] &= ~word_mask(a, z);
    }
}

/* The lowest set bit in [lo, hi], or -1. */
static int lowest_in(const uint64_t *b, unsigned lo, unsigned hi)
{
    for (unsigned w = lo / 64; w <= hi / 64; w++) {
        unsigned a = w == lo / 64 ? lo % 64 : 0, z = w == hi / 64 ? hi % 64 : 63;
        uint64_t m = b[w] & word_mask(a, z);
        if (m)
            return (int)(w * 64 + (unsigned)__builtin_ctzll(m));
    }
    return -1;
}

/* The highest set bit at or below g, or -1. */
static int highest_upto(const uint64_t *b, unsigned g)
{
    for (int w = (int)(g / 64); w >= 0; w--) {
        uint64_t m = b[w] & word_mask(0, (unsigned)w == g / 64 ? g % 64 : 63);
        if (m)
            return w * 64 + 63 - __builtin_clzll(m);
    }
    return -1;
}

static struct page_bits *bits_of(const struct page_index *pi, uintptr_t page)
{
    return exo_carat_addr_map_get(&pi->map, page);
}

/* The page's bitmaps, made if it has none. NULL: no memory. */
static struct page_bits *bits_for(struct page_index *pi, uintptr_t page)
{
    struct page_bits *b = bits_of(pi, page);
    if (b)
        return b;
    if (exo_carat_addr_map_reserve(&pi->map) || !(b = exo_carat_mem_alloc(sizeof *b)))
        return NULL;
    exo_carat_addr_map_put(&pi->map, page, b);
    pi->bits_bytes += sizeof *b;
    return b;
}

/* Free the page's bitmaps if they cover nothing. */
static void release_if_empty(struct page_index *pi, uintptr_t page)
{
    uint32_t i = exo_carat_addr_map_find(&pi->map, page);
    if (i == UINT32_MAX)
        return;
    struct page_bits *b = pi->map.e[i].value;
    for (unsigned w = 0; w < UNITS / 64; w++)
        if (b->covered[w])
            return;
    exo_carat_mem_free(b, sizeof *b);
    pi->bits_bytes -= sizeof *b;
    exo_carat_addr_map_remove_at(&pi->map, i);
}

/* Most pages a block of the index overlaps. */
#define SPAN_PAGES (PAGE_INDEX_SMALL / (1u << PAGE_SHIFT) + 1)

/* Mark [base, base + size) on page p (b its bits) as covered, and its start if there, or
 * unmark it. */
static void mark(struct page_bits *b, uintptr_t p, uintptr_t base, uintptr_t size, bool on)
{
    uintptr_t end = base + size;
    if (base >> PAGE_SHIFT == p)
        set_range(b->start, granule_of(base), granule_of(base), on);
    unsigned u0 = base >> PAGE_SHIFT == p ? unit_of(base) : 0;
    unsigned u1 = (end - 1) >> PAGE_SHIFT == p ? unit_of(end - 1) : UNITS - 1;
    set_range(b->covered, u0, u1, on);
}

int exo_carat_page_index_add(struct page_index *pi, uintptr_t base, uintptr_t size)
{
    if (base & ((1u << GRANULE_SHIFT) - 1))
        return -EXO_EINVAL;
    uintptr_t fp = base >> PAGE_SHIFT, lp = (base + size - 1) >> PAGE_SHIFT;
    struct page_bits *b[SPAN_PAGES];
    for (uintptr_t p = fp; p <= lp; p++)
        if (!(b[p - fp] = bits_for(pi, p))) {
            while (p-- > fp)   /* nothing marked yet: drop the pages made for it */
                release_if_empty(pi, p);
            return -EXO_ENOMEM;
        }
    for (uintptr_t p = fp; p <= lp; p++)
        mark(b[p - fp], p, base, size, true);
    return 0;
}

void exo_carat_page_index_remove(struct page_index *pi, uintptr_t base, uintptr_t size)
{
    uintptr_t fp = base >> PAGE_SHIFT, lp = (base + size - 1) >> PAGE_SHIFT;
    for (uintptr_t p = fp; p <= lp; p++) {
        struct page_bits *b = bits_of(pi, p);
        if (b) {
            mark(b, p, base, size, false);
            release_if_empty(pi, p);
        }
    }
}

/* The base of the block holding word u of page (whose bits are b, u covered): the last
 * start at or before it, in this page or one of the few before (a block spans at most
 * SPAN_PAGES). */
static uintptr_t start_before(const struct page_index *pi, uintptr_t page,
                              const struct page_bits *b, unsigned u)
{
    int s = highest_upto(b->start, u >> (GRANULE_SHIFT - UNIT_SHIFT));
    for (uintptr_t back = 1; s < 0 && back < SPAN_PAGES; back++) {
        if (!(b = bits_of(pi, page - back)))
            return 0;
        if ((s = highest_upto(b->start, GRANULES - 1)) >= 0)
            page -= back;
    }
    return s < 0 ? 0 : (page << PAGE_SHIFT) | ((uintptr_t)s << GRANULE_SHIFT);
}

uintptr_t exo_carat_page_index_find(const struct page_index *pi, uintptr_t addr)
{
    uintptr_t page = addr >> PAGE_SHIFT;
    const struct page_bits *b = bits_of(pi, page);
    unsigned u = unit_of(addr);
    if (!b || !(b->covered[u / 64] >> (u % 64) & 1))
        return 0;
    return start_before(pi, page, b, u);
}

bool exo_carat_page_index_covers(const struct page_index *pi, uintptr_t addr)
{
    const struct page_bits *b = bits_of(pi, addr >> PAGE_SHIFT);
    unsigned u = unit_of(addr);
    return b && (b->covered[u / 64] >> (u % 64) & 1);
}

/* A covered word of page in the part of [base, end) on that page, as a block base. */
static uintptr_t overlap_in(const struct page_index *pi, uintptr_t page,
                            const struct page_bits *b, uintptr_t base, uintptr_t end)
{
    unsigned u0 = base >> PAGE_SHIFT == page ? unit_of(base) : 0;
    unsigned u1 = (end - 1) >> PAGE_SHIFT == page ? unit_of(end - 1) : UNITS - 1;
    int c = lowest_in(b->covered, u0, u1);
    return c < 0 ? 0 : start_before(pi, page, b, (unsigned)c);
}

uintptr_t exo_carat_page_index_overlapping(const struct page_index *pi, uintptr_t base,
                                           uintptr_t end)
{
    if (!pi->map.count || end <= base)
        return 0;
    uintptr_t first = base >> PAGE_SHIFT, last = (end - 1) >> PAGE_SHIFT;
    if (last - first < pi->map.count) {   /* fewer pages in the range than indexed */
        for (uintptr_t p = first; p <= last; p++) {
            const struct page_bits *b = bits_of(pi, p);
            uintptr_t hit = b ? overlap_in(pi, p, b, base, end) : 0;
            if (hit)
                return hit;
        }
    } else {                              /* a huge range: go through the indexed pages */
        for (uint32_t i = 0; i < pi->map.cap; i++) {
            uintptr_t p = pi->map.e[i].key;
            uintptr_t hit = pi->map.e[i].value && p - first <= last - first
                                ? overlap_in(pi, p, pi->map.e[i].value, base, end)
                                : 0;
            if (hit)
                return hit;
        }
    }
    return 0;
}
