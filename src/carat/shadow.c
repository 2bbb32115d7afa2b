/* The lazy escape map (shadow.h): the shadow's reservation, its upkeep on frees, copies
 * and reallocs, and the scans a move, a query and the mover's choice of a worst case make
 * over it. */
#include "carat/shadow.h"
#include "carat/carat_internal.h"
#include "carat/carat_mem.h"
#include "carat/words.h"
#include "internal.h"
#include "os/os.h"

#include <exomem/access.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool exo_carat_shadow_on;

#define PAGE 4096u
#define SUB EXO_CARAT_ABI_SHADOW_SUB
/* The reservation: the shadow of the window, in whole pages. */
#define SHADOW_LO ((EXO_CARAT_ABI_SHADOW_USER_LO - SUB) & ~(uintptr_t)(PAGE - 1))
#define SHADOW_LEN \
    (((EXO_CARAT_ABI_SHADOW_USER_HI - SUB + PAGE - 1) & ~(uintptr_t)(PAGE - 1)) - SHADOW_LO)

int exo_carat_shadow_reserve(void)
{
    static pthread_mutex_t once = PTHREAD_MUTEX_INITIALIZER;
    static int rc = 1;   /* 1: not tried yet */
    pthread_mutex_lock(&once);
    if (rc == 1) {
        /* Without memory behind it (MAP_NORESERVE): only the pages of the shadow that
         * pointers are stored into are ever backed. Inherited by fork, unlike the pager's
         * regions: a child runs the same instrumented code. */
        rc = exo_os_reserve_fixed(SHADOW_LO, SHADOW_LEN);
        if (rc == 0)
            rc = exo_os_protect(SHADOW_LO, SHADOW_LEN, EXO_ACCESS_RW);
        if (rc == 0) {
            __atomic_store_n(&exo_carat_shadow_on, true, __ATOMIC_RELEASE);
            pthread_mutex_lock(&exo_carat.lock);
            /* heap blocks named in their head words; without the arena, in the hash */
            (void)exo_carat_alloc_table_use_heads(&exo_carat.table);
            pthread_mutex_unlock(&exo_carat.lock);
        }
    }
    pthread_mutex_unlock(&once);
    return rc;
}

/* The part of [addr, addr + len) that has a shadow, as [*lo, *hi); false if none. */
static bool shadowed(uintptr_t addr, uint64_t len, uintptr_t *lo, uintptr_t *hi)
{
    uintptr_t a = addr, b = addr + len;
    if (b < a || b <= EXO_CARAT_ABI_SHADOW_USER_LO || a >= EXO_CARAT_ABI_SHADOW_USER_HI)
        return false;
    *lo = a < EXO_CARAT_ABI_SHADOW_USER_LO ? EXO_CARAT_ABI_SHADOW_USER_LO : a;
    *hi = b > EXO_CARAT_ABI_SHADOW_USER_HI ? EXO_CARAT_ABI_SHADOW_USER_HI : b;
    return *lo < *hi;
}

/* Shadows of at least this many bytes are cleared by giving their whole pages back to the
 * kernel rather than writing zeros over them. */
#define DROP_MIN ((uint64_t)256 << 10)

void exo_carat_shadow_clear(uintptr_t addr, uint64_t len)
{
    uintptr_t lo, hi;
    if (!exo_carat_shadow_on || !shadowed(addr, len, &lo, &hi))
        return;
    uintptr_t s = lo - SUB, e = hi - SUB;
    uintptr_t ps = (s + PAGE - 1) & ~(uintptr_t)(PAGE - 1), pe = e & ~(uintptr_t)(PAGE - 1);
    if (e - s < DROP_MIN || exo_os_drop_pages(ps, pe - ps) != 0) {
        memset((void *)s, 0, e - s);
        return;
    }
    memset((void *)s, 0, ps - s);
    memset((void *)pe, 0, e - pe);
}

void exo_carat_shadow_copy(uintptr_t dst, uintptr_t src, uint64_t len)
{
    uintptr_t dlo, dhi, slo, shi;
    if (!exo_carat_shadow_on || !shadowed(dst, len, &dlo, &dhi))
        return;
    if (shadowed(src, len, &slo, &shi) && dlo - dst == slo - src && dhi - dlo == shi - slo)
        memmove((void *)(dlo - SUB), (const void *)(slo - SUB), dhi - dlo);
    else   /* a source without (all of) a shadow: nothing known there */
        memset((void *)(dlo - SUB), 0, dhi - dlo);
}

CARAT_NO_ASAN void exo_carat_shadow_take(uintptr_t dst, uintptr_t src, uint64_t len,
                                         uintptr_t lo, uintptr_t hi)
{
    if (!exo_carat_shadow_on || len < 8)
        return;
    uint64_t words = len / 8;
    uintptr_t *first = exo_carat_shadow_word(dst);
    if (first && exo_carat_shadow_word(dst + 8 * (words - 1))) {   /* all in the window */
        exo_carat_words_keep_in((unsigned char *)first, (const unsigned char *)src, words, lo,
                                hi - lo);
        return;
    }
    for (uint64_t off = 0; off + 8 <= len; off += 8) {   /* at the window's edge */
        uintptr_t *s = exo_carat_shadow_word(dst + off);
        if (s)
            exo_carat_words_keep_in((unsigned char *)s, (const unsigned char *)(src + off), 1,
                                    lo, hi - lo);
    }
}

bool exo_carat_shadow_escape(uintptr_t slot, uintptr_t value)
{
    /* Bracketed before the shadow word's address is taken: that address is derived from
     * the slot but lies in no block, so a move that stopped the thread between the two
     * would patch slot and leave the store to the old slot's shadow. */
    carat_ensure_init();
    carat_enter();
    uintptr_t *s = exo_carat_shadow_word(slot);
    if (s && !(slot & 7)) {
        *s = value;
        atomic_signal_fence(memory_order_seq_cst);   /* before the store, as the hook is */
        carat_leave();
        return true;
    }
    pthread_mutex_lock(&exo_carat.lock);
    exo_carat_note_escape(slot, value, false);
    atomic_fetch_add_explicit(&exo_carat.count.escapes, 1, memory_order_relaxed);
    pthread_mutex_unlock(&exo_carat.lock);
    carat_leave();
    return true;
}

CARAT_NO_ASAN void exo_carat_shadow_copy_hook(uintptr_t dst, uintptr_t src, uint64_t len,
                                              bool unknown)
{
    uintptr_t lo = exo_carat.table.lo, hi = exo_carat.table.hi;
    /* Whole shadow words only when the slots are aligned at both ends: copied byte for byte,
     * the shadow of slots off their boundaries would be pieces of two words. */
    if (!((dst | src) & 7)) {
        if (unknown)
            exo_carat_shadow_take(dst, src, len, lo, hi);
        else
            exo_carat_shadow_copy(dst, src, len);
        return;
    }
    for (uint64_t off = 0; off + 8 <= len; off += 8) {
        uintptr_t v, *s = exo_carat_shadow_word(src + off);
        memcpy(&v, (const void *)(src + off), sizeof v);
        if (v - lo < hi - lo && (unknown || !s || *s == v))
            exo_carat_shadow_escape(dst + off, v);
    }
}

EXO_API void exo_carat_hook_shadow_init(void)
{
    int rc = exo_carat_shadow_reserve();
    if (rc) {
        /* The program's inline stores would fault on the first pointer it stores. */
        fprintf(stderr, "exomem carat: cannot reserve the escape shadow at %#llx (%llu bytes): "
                "%s; the program must be a position-independent executable with nothing "
                "mapped there\n", (unsigned long long)SHADOW_LO,
                (unsigned long long)SHADOW_LEN, exomem_strerror(-rc));
        abort();
    }
    carat_ensure_init();
}

/* ---- scans ---- */

#define RESIDENT_CHUNK 65536u   /* pages asked about per mincore call (256 MiB of shadow) */
static unsigned char resident[RESIDENT_CHUNK];

/* Visit the slots of [lo, hi) (8-byte aligned, shadowed) whose shadow holds a value in
 * [vlo, vhi]. Their shadow is read page by page, the pages in memory only (all of them if
 * mincore fails: exo_carat_shadow_visit). */
static void visit_range(uintptr_t lo, uintptr_t hi, uintptr_t vlo, uintptr_t vhi,
                        exo_carat_shadow_fn fn, void *arg)
{
    uintptr_t slo = lo - SUB, shi = hi - SUB;
    uintptr_t first = slo & ~(uintptr_t)(PAGE - 1);
    uintptr_t end = (shi + PAGE - 1) & ~(uintptr_t)(PAGE - 1);
    for (uintptr_t at = first; at < end;) {
        uintptr_t pages = (end - at) / PAGE;
        if (pages > RESIDENT_CHUNK)
            pages = RESIDENT_CHUNK;
        if (exo_os_resident(at, pages * PAGE, resident) != 0)
            memset(resident, 1, pages);
        for (uintptr_t pg = 0; pg < pages; pg++) {
            if (!(resident[pg] & 1))
                continue;
            uintptr_t a = at + pg * PAGE, b = a + PAGE;
            a = a < slo ? slo : a;
            b = b > shi ? shi : b;
            for (uintptr_t *sw = (uintptr_t *)a; (uintptr_t)sw < b; sw++)
                if (*sw - vlo <= vhi - vlo)
                    fn((uintptr_t)sw + SUB, sw, arg);
        }
        at += pages * PAGE;
    }
}

void exo_carat_shadow_visit(const uintptr_t *ranges, int n, uintptr_t vlo, uintptr_t vhi,
                            exo_carat_shadow_fn fn, void *arg)
{
    if (!exo_carat_shadow_on)
        return;
    for (int i = 0; i < n; i++) {
        uintptr_t lo, hi;
        if (shadowed(ranges[2 * i], ranges[2 * i + 1] - ranges[2 * i], &lo, &hi))
            visit_range(lo, hi, vlo, vhi, fn, arg);
    }
}

/* The writable mappings now, for the scans made outside a move (the runtime's own copy). */
#define MAX_RANGES 65536
#define MAPS_BUF (8u << 20)
static int load_ranges(const uintptr_t **out)
{
    static uintptr_t *ranges;
    static char *buf;
    if (!ranges)
        ranges = exo_carat_mem_alloc(2 * MAX_RANGES * sizeof *ranges);
    if (!buf)
        buf = exo_carat_mem_alloc(MAPS_BUF);
    if (!ranges || !buf)
        return -EXO_ENOMEM;
    *out = ranges;
    return exo_os_writable_ranges(ranges, MAX_RANGES, buf, MAPS_BUF);
}

struct count {
    uintptr_t skip_lo, skip_hi;
    uint64_t n;
};

static void count_slot(uintptr_t slot, uintptr_t *shadow, void *arg)
{
    struct count *c = arg;
    uintptr_t word;
    bool ok = false;
    if (slot - c->skip_lo < c->skip_hi - c->skip_lo)
        return;
    if (exo_os_read_self(&slot, &word, &ok, 1) == 0 && ok && word == *shadow)
        c->n++;
}

uint64_t exo_carat_shadow_count(uintptr_t base, uintptr_t size, uintptr_t skip_lo,
                                uintptr_t skip_hi)
{
    const uintptr_t *ranges;
    int n = exo_carat_shadow_on ? load_ranges(&ranges) : 0;
    struct count c = { skip_lo, skip_hi, 0 };
    if (n > 0)
        exo_carat_shadow_visit(ranges, n, base, base + size, count_slot, &c);
    return c.n;
}

/* The mover's worst case: shadow words counted by the allocation they point into, in a
 * table of WORST_CAP allocations (those found after it fills are not counted: "a" worst
 * case, as the escape sets' is). */
#define WORST_CAP 65536u
static struct {
    uintptr_t base;
    uint64_t n;
} tally[WORST_CAP];
static uint32_t tallied;

static void tally_slot(uintptr_t slot, uintptr_t *shadow, void *arg)
{
    (void)slot;
    (void)arg;
    struct alloc *a = exo_carat_alloc_table_find(&exo_carat.table, *shadow);
    if (!a || a->kind != EXO_CARAT_HEAP || a->pinned)   /* pinned: never moved */
        return;
    uint32_t i = (uint32_t)((a->base >> 4) * 0x9e3779b97f4a7c15ull >> 40) & (WORST_CAP - 1);
    while (tally[i].base && tally[i].base != a->base)
        i = (i + 1) & (WORST_CAP - 1);
    if (!tally[i].base) {
        if (2 * tallied >= WORST_CAP)
            return;
        tally[i].base = a->base;
        tallied++;
    }
    tally[i].n++;
}

/* The TOP heap allocations with the most shadow words, most first (0: none), from the last
 * count. */
#define TOP 16
static uintptr_t top[TOP];

/* Blocks whose move was refused within the last second (PICK_NS), left out of the counts. A
 * block next to an address a stopped frame keeps for good (a dead `char *` into freed memory
 * just below it) is refused at every try, and the count starts again from the first
 * whenever the mover's pick is freed: Lua's workload had one such block tried about 26 times
 * a second, 778 refusals in one run. */
#define PICK_NS 1000000000ull   /* counted again after a second */
static struct refusal {
    uintptr_t base;
    uint64_t ns;
} refused[TOP];
static unsigned refused_next;

static bool refused_lately(uintptr_t base, uint64_t now)
{
    for (unsigned i = 0; i < TOP; i++)
        if (refused[i].base == base && now - refused[i].ns < PICK_NS)
            return true;
    return false;
}

bool exo_carat_shadow_refused_lately(uintptr_t base)
{
    return refused_lately(base, exo_os_now_ns());
}

static void count_worst(void)
{
    const uintptr_t *ranges;
    int n = exo_carat_shadow_on ? load_ranges(&ranges) : 0;
    memset(top, 0, sizeof top);
    if (n <= 0)
        return;
    memset(tally, 0, sizeof tally);
    tallied = 0;
    exo_carat_shadow_visit(ranges, n, exo_carat.table.lo, exo_carat.table.hi, tally_slot,
                           NULL);
    uint64_t most[TOP] = { 0 };
    uint64_t now = exo_os_now_ns();
    for (uint32_t i = 0; i < WORST_CAP; i++) {
        if (!tally[i].n || tally[i].n <= most[TOP - 1] || refused_lately(tally[i].base, now))
            continue;
        int k = TOP - 1;
        for (; k > 0 && most[k - 1] < tally[i].n; k--) {
            most[k] = most[k - 1];
            top[k] = top[k - 1];
        }
        most[k] = tally[i].n;
        top[k] = tally[i].base;
    }
}

uintptr_t exo_carat_shadow_worst(void)
{
    count_worst();
    return top[0];
}

/* The mover's current pick (an index into top), followed across its moves, and when it
 * was counted. A pick whose move is refused gives way to the next of the count, and after
 * the last the caller's own choice (the table's): a block that always sits next to memory
 * the runtime does not track (bzip2's 24-byte block before a block of the C library's,
 * which a stopped thread points to) is refused at every try. */
static unsigned pick;
static uint64_t pick_ns;

uintptr_t exo_carat_shadow_pick(void)
{
    uint64_t now = exo_os_now_ns();
    uintptr_t b = pick < TOP ? top[pick] : 0;
    struct alloc *a = b ? exo_carat_alloc_table_find(&exo_carat.table, b) : NULL;
    if ((b && (!a || a->base != b || a->kind != EXO_CARAT_HEAP)) || !pick_ns ||
        now - pick_ns > PICK_NS) {
        count_worst();
        pick = 0;
        pick_ns = now;
    }
    return pick < TOP ? top[pick] : 0;   /* 0: every one counted was refused */
}

void exo_carat_shadow_moved(uintptr_t from, uintptr_t to)
{
    for (unsigned i = 0; i < TOP; i++)
        if (top[i] == from)
            top[i] = to;
}

void exo_carat_shadow_refused(uintptr_t base)
{
    if (pick < TOP && top[pick] == base)
        pick++;
    refused[refused_next] = (struct refusal){ base, exo_os_now_ns() };
    refused_next = (refused_next + 1) % TOP;
}
