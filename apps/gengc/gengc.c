/* The generational collector (see gengc.h).
 *
 * The old generation is filled by page-respecting bump allocation (lh_bump_up) with the tail
 * of a page zeroed when an object does not fit, so every word below old_top is a header, a
 * field or zero: a remembered-set scan can look at any range of it word by word (headers and
 * fixnums are never mistaken for pointers) without knowing where objects start. That is what
 * lets both variants scan exactly what they were told: a dirty page, or a 512-byte card.
 *
 * The old generation is a MAP2 (both variants, so that both use the same kind of memory): the
 * mutator uses view a, the only one that is dirty-tracked; the collector writes through view
 * b. So the collector's own writes (promoted copies, updated fields), which leave no
 * old-to-young pointer behind (the nursery is empty afterwards), neither fault nor show up
 * in the next DIRTY report: DIRTY reports exactly the mutator's writes. Each semispace is its
 * own dirty-tracking region, so a minor collection asks only about the current one.
 */
#include "gengc.h"

#include <exomem/error.h>

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PAGE ((size_t)LH_PAGE)
#define CARD_SHIFT 9 /* 512-byte cards */

struct dirty_run {
    char *addr;
    size_t len;
};

struct gengc_heap {
    struct gengc_config cfg;
    char *nursery, *nur_top, *nur_end;
    char *old;            /* both old semispaces, 2 * old_semi bytes: view a of `map` */
    exo_vm_map2 map;
    ptrdiff_t b_off;      /* view b = view a + b_off: where the collector writes */
    size_t old_semi;
    char *old_lo, *old_hi, *old_top;
    int cur;
    exo_vm_region *region[2]; /* dirty tracking of each old semispace (GENGC_RS_DIRTY): a
                                 minor collection asks only the current one */
    uint8_t *cards;        /* one byte per card of `old` (GENGC_RS_CARDS) */
    struct dirty_run *runs;
    size_t nruns, cap_runs;
    int exhausted;
    struct gengc_stats st;
    struct lh_roots roots;
};

/* The collector's (untracked) address of old-generation address p. */
static void *view_b(const gengc_heap *h, const void *p)
{
    return (char *)(uintptr_t)p + h->b_off;
}

static int in_old(const gengc_heap *h, const void *p)
{
    return (uintptr_t)p - (uintptr_t)h->old < 2 * h->old_semi;
}

static int in_nursery(const gengc_heap *h, lh_val v)
{
    return (uintptr_t)v - (uintptr_t)h->nursery < (uintptr_t)(h->nur_end - h->nursery);
}

/* ---- copying ---- */

/* Old-generation room for one object (the caller made sure there is enough). */
static char *old_alloc(gengc_heap *h, char **top, char *limit, size_t bytes)
{
    char *pad = NULL;
    char *p = lh_bump_up(top, limit, bytes, &pad);
    if (!p)
        lh_fatal("gengc", "old generation exhausted while copying");
    if (pad)
        memset(view_b(h, pad), 0, PAGE - ((uintptr_t)pad % PAGE));
    return p;
}

/* Where the object v points to lives after this collection: copy it to [*top, limit) if it
 * lies in [lo, hi) (the space being evacuated) and was not copied yet. */
static lh_val evacuate(gengc_heap *h, lh_val v, const char *lo, const char *hi, char **top,
                       char *limit)
{
    if (!lh_is_ptr(v) || (char *)(uintptr_t)v < lo || (char *)(uintptr_t)v >= hi)
        return v;
    lh_val *src = lh_obj(v);
    if (!lh_is_header(src[0]))
        return src[0]; /* forwarded */
    size_t bytes = lh_hdr_bytes(src[0]);
    char *dst = old_alloc(h, top, limit, bytes);
    memcpy(view_b(h, dst), src, bytes);
    *(in_old(h, src) ? (lh_val *)view_b(h, src) : src) = (lh_val)(uintptr_t)dst;
    h->st.promoted_bytes += bytes;
    return (lh_val)(uintptr_t)dst;
}

/* Cheney scan of the copies in [scan, *top) until no more are made. */
static void cheney(gengc_heap *h, char *scan, const char *lo, const char *hi, char **top,
                   char *limit)
{
    while (scan < *top) {
        lh_val *o = view_b(h, scan);
        if (o[0] == 0) { /* the zeroed tail of a page */
            scan = (char *)(((uintptr_t)scan + PAGE) & ~(uintptr_t)(PAGE - 1));
            continue;
        }
        unsigned n = lh_hdr_nfields(o[0]);
        for (unsigned i = 1; i <= n; i++)
            o[i] = evacuate(h, o[i], lo, hi, top, limit);
        scan += 8 * (1 + (size_t)n);
    }
}

/* Remembered-set scan: every word of [lo, hi) that points into the nursery is updated. */
static void scan_words(gengc_heap *h, char *lo, char *hi)
{
    if (lo < h->old_lo)
        lo = h->old_lo;
    if (hi > h->old_top)
        hi = h->old_top;
    for (lh_val *w = view_b(h, lo); (char *)w < (char *)view_b(h, hi); w++)
        if (lh_is_ptr(*w) && in_nursery(h, *w))
            *w = evacuate(h, *w, h->nursery, h->nur_end, &h->old_top, h->old_hi);
    if (hi > lo)
        h->st.rs_bytes += (uint64_t)(hi - lo);
}

static int collect_run(void *addr, size_t len, void *arg)
{
    gengc_heap *h = arg;
    if (h->nruns == h->cap_runs) {
        size_t cap = h->cap_runs ? 2 * h->cap_runs : 256;
        struct dirty_run *r = realloc(h->runs, cap * sizeof *r);
        if (!r)
            return 1; /* stop: the rest stays dirty for the next call */
        h->runs = r;
        h->cap_runs = cap;
    }
    h->runs[h->nruns++] = (struct dirty_run){addr, len};
    return 0;
}

/* The old-to-young pointers, updated in place (their targets promoted). */
static void scan_remembered_set(gengc_heap *h)
{
    char *top = h->old_top; /* the promoted copies above are Cheney-scanned anyway */
    if (h->cfg.rs == GENGC_RS_DIRTY) {
        for (size_t i = 0; i < h->nruns && !h->cfg.test_drop_dirty; i++)
            scan_words(h, h->runs[i].addr, h->runs[i].addr + h->runs[i].len < top
                                               ? h->runs[i].addr + h->runs[i].len
                                               : top);
        return;
    }
    size_t first = (size_t)(h->old_lo - h->old) >> CARD_SHIFT;
    size_t last = ((size_t)(top - h->old) + (1u << CARD_SHIFT) - 1) >> CARD_SHIFT;
    for (size_t c = first; c < last; c++) {
        if (c % 8 == 0 && c + 8 <= last) { /* skip clean cards eight at a time */
            uint64_t eight;
            memcpy(&eight, h->cards + c, 8);
            if (!eight) {
                c += 7;
                continue;
            }
        }
        if (!h->cards[c])
            continue;
        h->cards[c] = 0;
        if (h->cfg.test_drop_dirty)
            continue;
        char *card = h->old + (c << CARD_SHIFT);
        scan_words(h, card, card + (1u << CARD_SHIFT) < top ? card + (1u << CARD_SHIFT) : top);
    }
}

/* ---- collections ---- */

void gengc_major(gengc_heap *h)
{
    uint64_t t0 = lh_now_ns();
    char *lo = h->old + (size_t)(1 - h->cur) * h->old_semi, *hi = lo + h->old_semi;
    char *top = lo;
    /* Evacuate both the nursery and the current old semispace: everything live moves. */
    for (size_t i = 0; i < h->roots.n; i++) {
        lh_val v = h->roots.slot[i];
        if (in_nursery(h, v))
            v = evacuate(h, v, h->nursery, h->nur_end, &top, hi);
        h->roots.slot[i] = evacuate(h, v, h->old_lo, h->old_hi, &top, hi);
    }
    for (char *scan = lo; scan < top;) {
        lh_val *o = view_b(h, scan);
        if (o[0] == 0) {
            scan = (char *)(((uintptr_t)scan + PAGE) & ~(uintptr_t)(PAGE - 1));
            continue;
        }
        unsigned n = lh_hdr_nfields(o[0]);
        for (unsigned i = 1; i <= n; i++) {
            lh_val v = o[i];
            if (in_nursery(h, v))
                v = evacuate(h, v, h->nursery, h->nur_end, &top, hi);
            o[i] = evacuate(h, v, h->old_lo, h->old_hi, &top, hi);
        }
        scan += 8 * (1 + (size_t)n);
    }
    h->cur = 1 - h->cur;
    h->old_lo = lo;
    h->old_hi = hi;
    h->old_top = top;
    h->nur_top = h->nursery;
    if (h->cards)
        memset(h->cards, 0, (2 * h->old_semi) >> CARD_SHIFT);
    h->exhausted = (size_t)(hi - top) < (size_t)(h->nur_end - h->nursery) + 2 * PAGE;
    h->st.major++;
    h->st.major_ns += lh_now_ns() - t0;
    if (h->cfg.verify_each_gc)
        h->st.verify_errors += (uint64_t)gengc_verify(h);
}

void gengc_minor(gengc_heap *h)
{
    size_t young = (size_t)(h->nur_top - h->nursery);
    /* Worst case every young object survives, plus page padding (objects do not cross
     * pages: at most a third of a page is lost, for objects just over a third of a page). */
    if ((size_t)(h->old_hi - h->old_top) < young + young / 2 + 2 * PAGE) {
        gengc_major(h);
        return;
    }
    uint64_t t0 = lh_now_ns();
    h->nruns = 0;
    if (h->cfg.rs == GENGC_RS_DIRTY && exo_vm_dirty(h->region[h->cur], collect_run, h) < 0)
        lh_fatal("gengc", "DIRTY failed");
    char *scan = h->old_top;
    for (size_t i = 0; i < h->roots.n; i++)
        h->roots.slot[i] = evacuate(h, h->roots.slot[i], h->nursery, h->nur_end, &h->old_top,
                                    h->old_hi);
    scan_remembered_set(h);
    h->st.rs_ns += lh_now_ns() - t0;
    cheney(h, scan, h->nursery, h->nur_end, &h->old_top, h->old_hi);
    h->nur_top = h->nursery;
    h->st.minor++;
    h->st.minor_ns += lh_now_ns() - t0;
    if (h->cfg.verify_each_gc)
        h->st.verify_errors += (uint64_t)gengc_verify(h);
}

/* ---- the mutator's side ---- */

lh_val gengc_alloc(gengc_heap *h, unsigned type, unsigned nfields)
{
    size_t bytes = 8 * (1 + (size_t)nfields);
    if (nfields > LH_MAX_FIELDS || h->exhausted)
        return LH_NIL;
    if (bytes > (size_t)(h->nur_end - h->nur_top)) {
        gengc_minor(h);
        if (h->exhausted)
            return LH_NIL;
    }
    lh_val *o = (lh_val *)h->nur_top;
    h->nur_top += bytes;
    o[0] = lh_header(type, nfields);
    memset(o + 1, 0, 8 * (size_t)nfields);
    return (lh_val)(uintptr_t)o;
}

void gengc_store(gengc_heap *h, lh_val obj, unsigned i, lh_val v)
{
    lh_val *field = lh_obj(obj) + 1 + i;
    *field = v;
    size_t off = (size_t)((char *)field - h->old);
    if (h->cards && off < 2 * h->old_semi)
        h->cards[off >> CARD_SHIFT] = 1;
}

struct lh_roots *gengc_roots(gengc_heap *h)
{
    return &h->roots;
}

static lh_val if_alloc(void *heap, unsigned type, unsigned nfields)
{
    return gengc_alloc(heap, type, nfields);
}

/* The card-marking write barrier. */
static void if_store_card(void *heap, lh_val obj, unsigned i, lh_val v)
{
    gengc_store(heap, obj, i, v);
}

void gengc_heap_if(gengc_heap *h, struct lh_heap_if *out)
{
    out->heap = h;
    out->alloc = if_alloc;
    out->store = h->cfg.rs == GENGC_RS_CARDS ? if_store_card : lh_store_plain;
    out->roots = &h->roots;
}

/* ---- verification ---- */

long gengc_verify(gengc_heap *h)
{
    size_t words = h->old_semi / 8;
    uint8_t *mark = calloc(words / 8 + 1, 1);
    size_t cap = 4096, n = 0;
    lh_val *stack = malloc(cap * sizeof *stack);
    if (!mark || !stack)
        lh_fatal("gengc", "out of memory verifying");
    long bad = 0;
    size_t next_root = 0;
    for (;;) {
        lh_val v;
        if (n > 0)
            v = stack[--n];
        else if (next_root < h->roots.n)
            v = h->roots.slot[next_root++];
        else
            break;
        /* v is a value to check; an object's fields are pushed once. */
        if (!lh_is_ptr(v))
            continue;
        char *p = (char *)(uintptr_t)v;
        if (p < h->old_lo || p >= h->old_top || !lh_header_valid(lh_obj(v)[0]) ||
            (uintptr_t)p % PAGE + lh_hdr_bytes(lh_obj(v)[0]) > PAGE) {
            bad++;
            continue;
        }
        size_t off = (size_t)(p - h->old_lo) / 8;
        if (mark[off / 8] & (1u << (off % 8)))
            continue;
        mark[off / 8] |= (uint8_t)(1u << (off % 8));
        unsigned nf = lh_hdr_nfields(lh_obj(v)[0]);
        if (n + nf > cap) {
            cap = 2 * (n + nf);
            lh_val *s = realloc(stack, cap * sizeof *s);
            if (!s)
                lh_fatal("gengc", "out of memory verifying");
            stack = s;
        }
        for (unsigned i = 0; i < nf; i++)
            stack[n++] = lh_field(v, i);
    }
    free(stack);
    free(mark);
    return bad;
}

/* ---- life cycle ---- */

static void *map_anon(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    memset(p, 0, len); /* populate now: no first-touch faults inside the measurements */
    return p;
}

int gengc_create(const struct gengc_config *cfg, gengc_heap **out)
{
    gengc_heap *h = calloc(1, sizeof *h);
    if (!h)
        return -EXO_ENOMEM;
    h->cfg = *cfg;
    size_t nbytes = (cfg->nursery_bytes + PAGE - 1) & ~(PAGE - 1);
    h->old_semi = (cfg->old_bytes + PAGE - 1) & ~(PAGE - 1);
    if (nbytes < PAGE || h->old_semi < 4 * nbytes) {
        free(h);
        return -EXO_EINVAL;
    }
    int rc = -EXO_ENOMEM;
    h->nursery = map_anon(nbytes);
    if (!h->nursery)
        goto fail;
    rc = exo_vm_map2_create(2 * h->old_semi, EXO_VM_READWRITE, EXO_VM_READWRITE, &h->map);
    if (rc)
        goto fail;
    h->old = h->map.a;
    h->b_off = (char *)h->map.b - (char *)h->map.a;
    /* populate both views now: no first-touch faults inside the measurements */
    memset(h->map.a, 0, 2 * h->old_semi);
    for (size_t off = 0; off < 2 * h->old_semi; off += PAGE)
        (void)*(volatile char *)((char *)h->map.b + off);
    h->nur_top = h->nursery;
    h->nur_end = h->nursery + nbytes;
    h->old_lo = h->old_top = h->old;
    h->old_hi = h->old + h->old_semi;
    if (cfg->rs == GENGC_RS_CARDS) {
        h->cards = calloc((2 * h->old_semi) >> CARD_SHIFT, 1);
        rc = h->cards ? 0 : -EXO_ENOMEM;
    } else {
        exo_vm_options opt = {.engine = cfg->engine, .flags = EXO_VM_TRACK_DIRTY};
        for (int i = 0; i < 2 && rc == 0; i++)
            rc = exo_vm_region_create(h->old + (size_t)i * h->old_semi, h->old_semi, &opt,
                                      &h->region[i]);
    }
    if (rc == 0) {
        *out = h;
        return 0;
    }
    for (int i = 0; i < 2; i++)
        if (h->region[i])
            exo_vm_region_destroy(h->region[i]);
fail:
    if (h->nursery)
        munmap(h->nursery, nbytes);
    if (h->old)
        exo_vm_map2_destroy(&h->map);
    free(h);
    return rc;
}

void gengc_destroy(gengc_heap *h)
{
    if (!h)
        return;
    for (int i = 0; i < 2; i++)
        if (h->region[i])
            exo_vm_region_destroy(h->region[i]);
    munmap(h->nursery, (size_t)(h->nur_end - h->nursery));
    exo_vm_map2_destroy(&h->map);
    free(h->cards);
    free(h->runs);
    free(h);
}

void gengc_get_stats(const gengc_heap *h, struct gengc_stats *out)
{
    *out = h->st;
}

void gengc_reset_stats(gengc_heap *h)
{
    memset(&h->st, 0, sizeof h->st);
}

exo_vm_engine gengc_engine(const gengc_heap *h)
{
    return h->region[0] ? exo_vm_region_engine(h->region[0]) : EXO_VM_ENGINE_AUTO;
}
