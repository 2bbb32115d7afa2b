/* Baker's copying collector, concurrent through TRAP/PROTN/UNPROT/MAP2 (see baker.h).
 *
 * To-space layout during a collection (view a addresses):
 *
 *   to_lo .. scanned and unscanned copies .. copy_ptr .. (reserve) .. copy_limit  free
 *   alloc_ptr .. new (black) objects .. to_hi
 *
 * Copies grow up from to_lo, new objects down from to_hi. While collecting, the mutator may
 * allocate down to copy_limit, a reserve big enough to copy all of from-space (copying can
 * also grow it into the free middle); once the collection is complete, down to the end of
 * the copies plus a headroom: it flips when only the headroom is left, which is then what it
 * allocates in while the next collection runs. The pages that receive copies are made
 * no-access in view a ahead of the copy pointer, a chunk at a time (PROTN); a page becomes
 * accessible when it has been scanned (all its pointers lead to to-space). The page holding
 * copy_ptr may still receive copies: scanning it closes it (the rest is padded), so a
 * scanned page never gets new unscanned objects.
 *
 * Who scans: the collector thread, page after page in address order (unprotecting runs of
 * pages in one call); the TRAP handler, the page the mutator touched; the mutator while
 * allocating when it falls behind (Baker's pacing); and the mutator at a flip or when out of
 * room, the rest of the collection (a long pause, which pacing makes rare).
 *
 * Concurrency: one spin lock (mutator first, see spin_lock) orders them all. Whoever holds
 * it scans one page at a time through view b, which is never protected, so nothing faults
 * while holding it, and the mutator thread never holds it where it can fault. The handler
 * only spins: it waits at most for the page the thread is scanning.
 */
#include "baker.h"

#include <exomem/error.h>
#include <exomem/vm.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PAGE ((size_t)LH_PAGE)
#define PROTECT_CHUNK (64 * PAGE) /* pages made no-access ahead of the copy pointer at once */
#define DEFAULT_MAX_PAUSES 65536
#define ASSIST_PAGES 8 /* most pages the mutator scans per page it allocates (pacing) */

struct baker_heap {
    struct baker_config cfg;
    exo_vm_map2 map;
    exo_vm_region *region; /* view a, signal engine (concurrent mode only) */
    ptrdiff_t b_off;       /* view b address = view a address + b_off */
    size_t semi;
    size_t headroom;       /* concurrent: kept free after a collection for the next one */
    int to;                /* which semispace is to-space */
    char *to_lo, *to_hi, *from_lo, *from_hi;
    char *copy_ptr, *copy_limit, *prot_end, *scan;
    char *alloc_ptr;
    _Atomic(char *) alloc_floor; /* the mutator allocates no lower (raised by copying) */
    _Atomic(char *) alloc_pub;   /* alloc_ptr, published while collecting */
    uint8_t *scanned;      /* per to-space page */
    unsigned epoch;        /* collections started (changes under the lock) */
    size_t from_pages;     /* this collection's expected work, in pages (pacing) */
    size_t scanned_pages;  /* ... and the pages scanned so far */
    int skip_pending;      /* test hook armed for this collection */
    atomic_flag lock;      /* the scan lock */
    atomic_int mutator_wants;
    atomic_int collecting;
    struct baker_stats st;
    uint64_t *pauses;
    size_t npauses;
    struct lh_roots roots;
    /* the collector thread */
    pthread_t thread;
    int has_thread, work, quit;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

/* ---- small helpers ---- */

static lh_val *view_b(const baker_heap *h, const void *a_addr)
{
    return (lh_val *)((char *)(uintptr_t)a_addr + h->b_off);
}

static char *page_ceil(const char *p)
{
    return (char *)(((uintptr_t)p + PAGE - 1) & ~(uintptr_t)(PAGE - 1));
}

/* The scan lock: a test-and-set spin lock (async-signal-safe: atomics only) that gives the
 * mutator priority. The mutator says it wants the lock; the collector thread does not take
 * it while the mutator wants it (else the thread, which takes it again at once, would starve
 * a faulting mutator for a whole collection). Not a ticket lock: with more runnable threads
 * than cores, a preempted waiter would hold up everyone queued behind it. */
static void lock_spin(baker_heap *h)
{
    unsigned spins = 0;
    while (atomic_flag_test_and_set_explicit(&h->lock, memory_order_acquire)) {
        if (++spins % 256 == 0)
            sched_yield(); /* the holder may have been preempted */
    }
}

/* Taken on the mutator thread (fault handler, flip, finishing, assists). */
static void spin_lock(baker_heap *h)
{
    atomic_store(&h->mutator_wants, 1);
    lock_spin(h);
    atomic_store(&h->mutator_wants, 0);
}

/* Taken by the collector thread: only when the mutator does not want it. */
static void thread_lock(baker_heap *h)
{
    for (;;) {
        unsigned spins = 0;
        while (atomic_load(&h->mutator_wants))
            if (++spins % 256 == 0)
                sched_yield();
        lock_spin(h);
        if (!atomic_load(&h->mutator_wants))
            return;
        atomic_flag_clear_explicit(&h->lock, memory_order_release); /* let it go first */
    }
}

static void spin_unlock(baker_heap *h)
{
    atomic_flag_clear_explicit(&h->lock, memory_order_release);
}

/* Pauses are recorded only on the mutator thread (flips and its own faults). */
static void record_pause(baker_heap *h, uint64_t ns, uint64_t *kind_max)
{
    if (ns > *kind_max)
        *kind_max = ns;
    if (h->npauses < h->cfg.max_pauses)
        h->pauses[h->npauses++] = ns;
    h->st.pause_total_ns += ns;
}

/* ---- copying and scanning (all under the lock) ---- */

/* Make the view-a pages from prot_end up past copy_ptr no-access, a chunk at a time. */
static void protect_ahead(baker_heap *h)
{
    char *end = h->prot_end;
    while (end < h->copy_ptr)
        end += PROTECT_CHUNK;
    if (end > h->copy_limit)
        end = h->copy_limit;
    if (exo_vm_protect(h->region, h->prot_end, (size_t)(end - h->prot_end), EXO_VM_NOACCESS))
        lh_fatal("baker", "cannot protect to-space");
    h->prot_end = end;
}

/* Grow the copy reserve by at least `bytes` into the free middle of to-space. On the mutator
 * thread (fault handler, finishing) the mutator is not allocating, so its alloc_ptr is the
 * bound. The collector thread races with allocation: it raises alloc_floor, then checks that
 * the mutator's published alloc_pub is still above (the mutator does the mirror image: both
 * sides store, then load, sequentially consistent). 0, or -1 when there is no room. */
static int extend_reserve(baker_heap *h, size_t bytes, int on_thread)
{
    char *want = h->copy_limit + (bytes > PROTECT_CHUNK ? (size_t)page_ceil((char *)bytes)
                                                        : PROTECT_CHUNK);
    char *top = (char *)((uintptr_t)atomic_load(&h->alloc_pub) & ~(uintptr_t)(PAGE - 1));
    if (want > top)
        want = top;
    if (want <= h->copy_limit)
        return -1;
    if (on_thread) {
        if (atomic_load(&h->alloc_floor) < want)
            atomic_store(&h->alloc_floor, want);
        if (atomic_load(&h->alloc_pub) < want)
            return -1; /* the mutator got there first: leave the rest to it */
    } else if (atomic_load(&h->alloc_floor) < want) {
        atomic_store(&h->alloc_floor, want);
    }
    h->copy_limit = want;
    return 0;
}

/* Room for one copy of `bytes`; NULL only on the collector thread (no room: stop). */
static char *copy_alloc(baker_heap *h, size_t bytes, int on_thread)
{
    char *pad = NULL, *p;
    while (!(p = lh_bump_up(&h->copy_ptr, h->copy_limit, bytes, &pad))) {
        if (extend_reserve(h, bytes + PAGE, on_thread) != 0) {
            if (on_thread)
                return NULL;
            lh_fatal("baker",
                     "heap exhausted while copying (semispace too small for the live data)");
        }
    }
    if (pad)
        *view_b(h, pad) = LH_PAD;
    if (h->cfg.mode == BAKER_CONCURRENT && h->copy_ptr > h->prot_end)
        protect_ahead(h);
    return p;
}

/* The to-space address of the object v points to, copying it if v is a from-space pointer.
 * On the collector thread a copy may find no room: then v comes back and *failed is set. */
static lh_val forward(baker_heap *h, lh_val v, int on_thread, int *failed)
{
    if (!lh_is_ptr(v) || (char *)(uintptr_t)v < h->from_lo || (char *)(uintptr_t)v >= h->from_hi)
        return v;
    lh_val *src = view_b(h, (void *)(uintptr_t)v);
    lh_val hd = src[0];
    if (!lh_is_header(hd))
        return hd; /* already copied: the header is the forwarding pointer */
    size_t bytes = lh_hdr_bytes(hd);
    char *dst = copy_alloc(h, bytes, on_thread);
    if (!dst) {
        *failed = 1;
        return v;
    }
    memcpy(view_b(h, dst), src, bytes);
    src[0] = (lh_val)(uintptr_t)dst;
    h->st.bytes_copied += bytes;
    return (lh_val)(uintptr_t)dst;
}

/* Who scans: the collector thread (may run out of room; unprotects runs of pages it scanned
 * in one call), the fault handler (unprotects the page), or the mutator finishing a
 * collection (unprotects everything at the end). */
enum scanner { SCAN_THREAD, SCAN_FAULT, SCAN_SYNC };

/* Scan the objects on to-space page pg (forwarding every field), close it if copies are
 * still going to it, mark it scanned and make it accessible in view a. -1 if the collector
 * thread found no room to copy: the page stays unscanned (scanning it again is harmless,
 * forwarding a to-space pointer changes nothing). */
static int scan_page(baker_heap *h, char *pg, enum scanner who)
{
    char *end = pg + PAGE, *pos = pg;
    int failed = 0;
    if (h->skip_pending) { /* test hook: a broken collector */
        h->skip_pending = 0;
        pos = end;
    }
    for (;;) {
        char *lim = (h->copy_ptr >= pg && h->copy_ptr < end) ? h->copy_ptr : end;
        if (pos >= lim)
            break;
        lh_val *o = view_b(h, pos);
        if (o[0] == LH_PAD)
            break;
        if (!lh_header_valid(o[0]))
            lh_fatal("baker", "scan found no object header");
        unsigned n = lh_hdr_nfields(o[0]);
        for (unsigned i = 1; i <= n; i++) {
            o[i] = forward(h, o[i], who == SCAN_THREAD, &failed);
            if (failed)
                return -1;
        }
        pos += 8 * (1 + (size_t)n);
    }
    if (h->copy_ptr > pg && h->copy_ptr < end) {
        *view_b(h, h->copy_ptr) = LH_PAD;
        h->copy_ptr = end;
    }
    h->scanned[(size_t)(pg - h->to_lo) / PAGE] = 1;
    h->scanned_pages++;
    if (h->cfg.mode == BAKER_CONCURRENT) {
        if (who == SCAN_FAULT && exo_vm_unprot(h->region, pg))
            lh_fatal("baker", "cannot unprotect a scanned page");
    }
    return 0;
}

/* Scan the next unscanned page in address order: 1 done one, 0 none left (the collection is
 * complete), -1 no room (collector thread only). */
static int scan_step(baker_heap *h, enum scanner who, uint64_t *counter, char **page)
{
    while (h->scan < h->copy_ptr) {
        char *pg = h->scan;
        if (h->scanned[(size_t)(pg - h->to_lo) / PAGE]) {
            h->scan += PAGE;
            continue;
        }
        if (scan_page(h, pg, who) != 0)
            return -1;
        h->scan += PAGE;
        (*counter)++;
        if (page)
            *page = pg;
        return 1;
    }
    return 0;
}

/* Every copy is scanned: make all of the copies' part of to-space accessible (one call:
 * pages the collector thread scanned but had not unprotected yet are among them), let
 * allocation use the rest, but (concurrent mode) keep the headroom free: the next flip comes
 * when only that is left, so the mutator can allocate while the next collection runs. */
static void complete(baker_heap *h)
{
    char *floor = page_ceil(h->copy_ptr);
    if (h->cfg.mode == BAKER_CONCURRENT) {
        if (h->prot_end > h->to_lo &&
            exo_vm_protect(h->region, h->to_lo, (size_t)(h->prot_end - h->to_lo),
                           EXO_VM_READWRITE))
            lh_fatal("baker", "cannot unprotect to-space");
        floor = (size_t)(h->to_hi - floor) > h->headroom ? floor + h->headroom : h->to_hi;
    }
    atomic_store_explicit(&h->alloc_floor, floor, memory_order_release);
    atomic_store(&h->collecting, 0);
}

/* ---- the trap handler and the collector thread ---- */

static exo_vm_action on_fault(exo_vm_fault *f, void *arg)
{
    baker_heap *h = arg;
    uint64_t t0 = lh_now_ns();
    char *pg = f->page;
    spin_lock(h);
    if (pg < h->to_lo || pg >= h->copy_ptr) { /* not a copy: not ours */
        spin_unlock(h);
        return EXO_VM_DECLINE;
    }
    if (!h->scanned[(size_t)(pg - h->to_lo) / PAGE]) {
        scan_page(h, pg, SCAN_FAULT);
        h->st.fault_scans++;
    } else if (exo_vm_unprot(h->region, pg)) { /* scanned by the thread, not yet unprotected */
        lh_fatal("baker", "cannot unprotect a scanned page");
    }
    h->st.faults++;
    spin_unlock(h);
    record_pause(h, lh_now_ns() - t0, &h->st.max_fault_ns);
    return EXO_VM_RESUME;
}

/* Make the thread's run of scanned pages [lo, lo + n pages) accessible (under the lock). */
static void unprot_run(baker_heap *h, char *lo, size_t *n)
{
    if (*n && exo_vm_protect(h->region, lo, *n * PAGE, EXO_VM_READWRITE))
        lh_fatal("baker", "cannot unprotect scanned pages");
    *n = 0;
}

/* One collection's worth of scanning, a page per lock hold, so that a fault waits at most
 * for one page. Scanned pages are unprotected in runs of up to UNPROT_RUN. */
#define UNPROT_RUN 16
static void thread_collect(baker_heap *h)
{
    char *run_lo = NULL, *pg = NULL;
    size_t run_n = 0;
    unsigned epoch = 0;
    for (;;) {
        thread_lock(h);
        if (!atomic_load(&h->collecting)) { /* the mutator finished it (and unprotected all) */
            spin_unlock(h);
            return;
        }
        if (epoch != h->epoch) /* a run left from a collection the mutator finished */
            run_n = 0;
        epoch = h->epoch;
        int r = scan_step(h, SCAN_THREAD, &h->st.thread_scans, &pg);
        if (r > 0 && run_n && pg == run_lo + run_n * PAGE) {
            run_n++;
        } else if (r > 0) {
            unprot_run(h, run_lo, &run_n);
            run_lo = pg;
            run_n = 1;
        }
        if (r < 0 || run_n == UNPROT_RUN)
            unprot_run(h, run_lo, &run_n);
        if (r == 0)
            complete(h);
        spin_unlock(h);
        if (r <= 0) /* done, or no room: the mutator finishes when it needs to */
            return;
    }
}

static void *collector_main(void *arg)
{
    baker_heap *h = arg;
    for (;;) {
        pthread_mutex_lock(&h->mu);
        while (!h->work && !h->quit)
            pthread_cond_wait(&h->cv, &h->mu);
        int quit = h->quit;
        h->work = 0;
        pthread_mutex_unlock(&h->mu);
        if (quit)
            return NULL;
        thread_collect(h);
    }
}

/* ---- the mutator's side ---- */

void baker_finish(baker_heap *h)
{
    if (!atomic_load(&h->collecting))
        return;
    spin_lock(h);
    if (atomic_load(&h->collecting)) {
        while (scan_step(h, SCAN_SYNC, &h->st.sync_scans, NULL) > 0)
            ;
        complete(h);
    }
    spin_unlock(h);
}

static void set_spaces(baker_heap *h, int to)
{
    char *a = h->map.a;
    h->to = to;
    h->to_lo = a + (size_t)to * h->semi;
    h->to_hi = h->to_lo + h->semi;
    h->from_lo = a + (size_t)(1 - to) * h->semi;
    h->from_hi = h->from_lo + h->semi;
    h->copy_ptr = h->scan = h->prot_end = h->to_lo;
    h->alloc_ptr = h->to_hi;
}

static void flip(baker_heap *h)
{
    uint64_t t0 = lh_now_ns();
    baker_finish(h);
    if (h->cfg.verify_each_gc)
        h->st.verify_errors += (uint64_t)baker_verify(h);
    /* Reserve room for copying all of from-space (and some page padding), so the copies
     * always fit; the mutator allocates the rest meanwhile (at least the headroom). */
    size_t from_used = (size_t)(h->copy_ptr - h->to_lo) + (size_t)(h->to_hi - h->alloc_ptr);
    size_t last_copied = (size_t)(h->copy_ptr - h->to_lo);
    set_spaces(h, 1 - h->to);
    size_t reserve = (size_t)page_ceil((char *)(from_used + from_used / 16 + 64 * PAGE));
    h->copy_limit = h->to_lo + (reserve < h->semi ? reserve : h->semi);
    /* pacing bound: about what the last collection copied (live data changes slowly); if
     * it grows more, the mutator may have to wait for the rest of the collection */
    size_t expect = last_copied + last_copied / 4 + 64 * PAGE;
    h->from_pages = (expect < from_used ? expect : from_used) / PAGE;
    h->scanned_pages = 0;
    atomic_store(&h->alloc_floor, h->copy_limit);
    atomic_store(&h->alloc_pub, h->to_hi);
    memset(h->scanned, 0, h->semi / PAGE);
    h->skip_pending = h->cfg.test_skip_page;
    spin_lock(h);
    h->epoch++;
    atomic_store(&h->collecting, 1);
    for (size_t i = 0; i < h->roots.n; i++)
        h->roots.slot[i] = forward(h, h->roots.slot[i], 0, NULL);
    spin_unlock(h);
    h->st.flips++;
    if (h->cfg.mode == BAKER_STW) {
        baker_finish(h);
    } else if (h->has_thread) {
        pthread_mutex_lock(&h->mu);
        h->work = 1;
        pthread_cond_signal(&h->cv);
        pthread_mutex_unlock(&h->mu);
    }
    record_pause(h, lh_now_ns() - t0, &h->st.max_flip_ns);
}

void baker_collect(baker_heap *h)
{
    flip(h);
}

/* Baker's pacing. The work left is about from_pages (what the last collection copied, and
 * a quarter more) less the pages scanned so far; the mutator's room is what it may still
 * allocate before it must wait for the collection. Whenever it starts a new page while the
 * work left exceeds its room, it scans pages itself (a short pause) until it does not, so it
 * rarely runs out of room and has to wait for the whole rest of the collection. */
static int behind(const baker_heap *h)
{
    size_t room = h->alloc_ptr > h->copy_limit ? (size_t)(h->alloc_ptr - h->copy_limit) / PAGE
                                               : 0;
    size_t done = h->scanned_pages;
    return h->from_pages > done && h->from_pages - done > room;
}

static void assist(baker_heap *h)
{
    if (!behind(h)) /* a racy first look; rechecked under the lock */
        return;
    uint64_t t0 = lh_now_ns();
    spin_lock(h);
    for (int i = 0; i < ASSIST_PAGES && atomic_load(&h->collecting) && behind(h); i++)
        if (scan_step(h, SCAN_FAULT, &h->st.assist_scans, NULL) == 0)
            complete(h);
    spin_unlock(h);
    record_pause(h, lh_now_ns() - t0, &h->st.max_assist_ns);
}

/* Bump-allocate below alloc_ptr. While collecting, publish the new alloc_ptr before
 * checking the floor again (the collector thread raises the floor, then checks alloc_pub). */
static char *bump(baker_heap *h, size_t bytes)
{
    char *top = h->alloc_ptr;
    char *p = lh_bump_down(&top, atomic_load_explicit(&h->alloc_floor, memory_order_acquire),
                           bytes);
    if (!p)
        return NULL;
    if (atomic_load_explicit(&h->collecting, memory_order_relaxed)) {
        atomic_store(&h->alloc_pub, p);
        if (p < atomic_load(&h->alloc_floor)) {
            atomic_store(&h->alloc_pub, h->alloc_ptr);
            return NULL;
        }
    }
    if (((uintptr_t)p ^ (uintptr_t)h->alloc_ptr) >= PAGE && atomic_load(&h->collecting))
        assist(h);
    h->alloc_ptr = p;
    return p;
}

/* No room: finish a running collection (the copies' reserve may be smaller than it looked),
 * else flip; both are pauses. */
static char *alloc_slow(baker_heap *h, size_t bytes)
{
    char *p;
    for (int attempt = 0; attempt < 3; attempt++) {
        if (atomic_load(&h->collecting)) {
            uint64_t t0 = lh_now_ns();
            baker_finish(h);
            record_pause(h, lh_now_ns() - t0, &h->st.max_wait_ns);
        } else {
            flip(h);
        }
        if ((p = bump(h, bytes)))
            return p;
    }
    return NULL;
}

lh_val baker_alloc(baker_heap *h, unsigned type, unsigned nfields)
{
    if (nfields > LH_MAX_FIELDS)
        return LH_NIL;
    size_t bytes = 8 * (1 + (size_t)nfields);
    char *p = bump(h, bytes);
    if (!p && !(p = alloc_slow(h, bytes)))
        return LH_NIL;
    lh_val *o = (lh_val *)p;
    o[0] = lh_header(type, nfields);
    memset(o + 1, 0, 8 * (size_t)nfields);
    return (lh_val)(uintptr_t)p;
}

int baker_collecting(const baker_heap *h)
{
    return atomic_load(&((baker_heap *)h)->collecting);
}

struct lh_roots *baker_roots(baker_heap *h)
{
    return &h->roots;
}

static lh_val if_alloc(void *heap, unsigned type, unsigned nfields)
{
    return baker_alloc(heap, type, nfields);
}

void baker_heap_if(baker_heap *h, struct lh_heap_if *out)
{
    out->heap = h;
    out->alloc = if_alloc;
    out->store = lh_store_plain;
    out->roots = &h->roots;
}

/* ---- verification ---- */

struct vstack {
    lh_val *v;
    size_t n, cap;
};

static int in_used_tospace(const baker_heap *h, const char *p)
{
    return (p >= h->to_lo && p < h->copy_ptr) || (p >= h->alloc_ptr && p < h->to_hi);
}

/* Check one value; push an unvisited object. Returns 1 for a bad pointer. */
static int verify_val(const baker_heap *h, lh_val v, uint8_t *mark, struct vstack *s)
{
    if (!lh_is_ptr(v))
        return 0;
    char *p = (char *)(uintptr_t)v;
    if (!in_used_tospace(h, p))
        return 1;
    lh_val hd = *view_b(h, p);
    size_t off = (size_t)(p - h->to_lo) / 8;
    if (!lh_header_valid(hd) || ((uintptr_t)p % PAGE) + lh_hdr_bytes(hd) > PAGE)
        return 1;
    if (mark[off / 8] & (1u << (off % 8)))
        return 0;
    mark[off / 8] |= (uint8_t)(1u << (off % 8));
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 4096;
        lh_val *nv = realloc(s->v, cap * sizeof *nv);
        if (!nv)
            lh_fatal("baker", "out of memory verifying");
        s->v = nv;
        s->cap = cap;
    }
    s->v[s->n++] = v;
    return 0;
}

long baker_verify(baker_heap *h)
{
    baker_finish(h);
    uint8_t *mark = calloc(h->semi / 64 + 1, 1);
    struct vstack s = {0};
    if (!mark)
        lh_fatal("baker", "out of memory verifying");
    long bad = 0;
    for (size_t i = 0; i < h->roots.n; i++)
        bad += verify_val(h, h->roots.slot[i], mark, &s);
    while (s.n > 0) {
        lh_val *o = view_b(h, (void *)(uintptr_t)s.v[--s.n]);
        unsigned n = lh_hdr_nfields(o[0]);
        for (unsigned i = 1; i <= n; i++)
            bad += verify_val(h, o[i], mark, &s);
    }
    free(s.v);
    free(mark);
    return bad;
}

/* ---- life cycle and statistics ---- */

int baker_create(const struct baker_config *cfg, baker_heap **out)
{
    baker_heap *h = calloc(1, sizeof *h);
    if (!h)
        return -EXO_ENOMEM;
    h->cfg = *cfg;
    atomic_flag_clear(&h->lock);
    if (!h->cfg.max_pauses)
        h->cfg.max_pauses = DEFAULT_MAX_PAUSES;
    h->semi = (size_t)page_ceil((char *)(cfg->semispace_bytes < 64 * PAGE ? 64 * PAGE
                                                                           : cfg->semispace_bytes));
    h->headroom = (size_t)page_ceil((char *)(h->semi * (cfg->headroom_pct ? cfg->headroom_pct
                                                                          : 25) / 100));
    h->pauses = calloc(h->cfg.max_pauses, sizeof *h->pauses);
    h->scanned = calloc(h->semi / PAGE, 1);
    int rc = -EXO_ENOMEM;
    if (!h->pauses || !h->scanned)
        goto fail;
    rc = exo_vm_map2_create(2 * h->semi, EXO_VM_READWRITE, EXO_VM_READWRITE, &h->map);
    if (rc)
        goto fail;
    h->b_off = (char *)h->map.b - (char *)h->map.a;
    memset(h->map.b, 0, 2 * h->semi); /* touch every page now, not during the measurements */
    if (cfg->mode == BAKER_CONCURRENT) {
        exo_vm_options opt = {.engine = EXO_VM_ENGINE_SIGNAL, .handler = on_fault, .arg = h};
        rc = exo_vm_region_create(h->map.a, 2 * h->semi, &opt, &h->region);
        if (rc)
            goto fail_map;
    }
    set_spaces(h, 0);
    /* As after a collection that copied nothing: the first flip leaves the headroom too. */
    atomic_store(&h->alloc_floor, cfg->mode == BAKER_CONCURRENT ? h->to_lo + h->headroom
                                                                : h->to_lo);
    if (cfg->mode == BAKER_CONCURRENT && !cfg->no_thread) {
        pthread_mutex_init(&h->mu, NULL);
        pthread_cond_init(&h->cv, NULL);
        if (pthread_create(&h->thread, NULL, collector_main, h) != 0) {
            rc = -EXO_ENOMEM;
            goto fail_region;
        }
        h->has_thread = 1;
    }
    *out = h;
    return 0;
fail_region:
    if (h->region)
        exo_vm_region_destroy(h->region);
fail_map:
    exo_vm_map2_destroy(&h->map);
fail:
    free(h->pauses);
    free(h->scanned);
    free(h);
    return rc;
}

void baker_destroy(baker_heap *h)
{
    if (!h)
        return;
    if (h->has_thread) {
        pthread_mutex_lock(&h->mu);
        h->quit = 1;
        pthread_cond_signal(&h->cv);
        pthread_mutex_unlock(&h->mu);
        pthread_join(h->thread, NULL);
        pthread_mutex_destroy(&h->mu);
        pthread_cond_destroy(&h->cv);
    }
    baker_finish(h);
    if (h->region)
        exo_vm_region_destroy(h->region);
    exo_vm_map2_destroy(&h->map);
    free(h->pauses);
    free(h->scanned);
    free(h);
}

void baker_get_stats(const baker_heap *h, struct baker_stats *out)
{
    *out = h->st;
}

size_t baker_pauses(const baker_heap *h, const uint64_t **ns)
{
    *ns = h->pauses;
    return h->npauses;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

uint64_t *baker_pauses_sorted(const baker_heap *h, size_t *n)
{
    *n = h->npauses;
    uint64_t *sorted = malloc((*n ? *n : 1) * sizeof *sorted);
    if (!sorted)
        return NULL;
    if (*n)
        memcpy(sorted, h->pauses, *n * sizeof *sorted);
    qsort(sorted, *n, sizeof *sorted, cmp_u64);
    return sorted;
}

void baker_reset_stats(baker_heap *h)
{
    memset(&h->st, 0, sizeof h->st);
    h->npauses = 0;
}
