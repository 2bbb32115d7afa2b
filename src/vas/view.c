/* The allocator's view of the current address space without a lock (see view.h).
 *
 * Readers: each thread has a slot with an `inside` flag. Entering stores inside = 1, then
 * reads the generation (both sequentially consistent: x86 makes the store an xchg, the only
 * fence on the fast path). Writers store an odd generation, then wait for every slot's flag
 * to be 0. By the store-then-load order on both sides, either the reader sees the odd (or
 * newer) generation and falls back to the mutex, or the writer sees the reader inside and
 * waits for it: a reader never trusts a snapshot while the view it describes changes.
 *
 * Slots live in a list that only grows (a slot is reused after its thread exits), so a
 * writer can walk it without a lock. */
#include "vas/view.h"
#include "internal.h"
#include "vas/space.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct reader {
    atomic_uint inside;
    atomic_int used;
    struct reader *next;
    struct exo_view snap;          /* the thread's snapshot */
} __attribute__((aligned(64)));   /* own cache lines: readers never share one */

#define GEN_NONE UINT64_MAX        /* odd: a snapshot no generation matches */

static _Atomic uint64_t view_gen;  /* even: stable; odd: a change is under way */
/* Changes under way. A switch that waits for a segment lock lets go of the space mutex in
 * mid-change, so another thread's change can begin and end inside it: the generation turns
 * even only when the last one ends. Read and written with the space mutex held. */
static unsigned changing;
static _Atomic(struct reader *) readers;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t reader_key;

/* Initial-exec: a plain %fs-relative load on the fast path, not a __tls_get_addr() call
 * (a few bytes of the static TLS surplus if the library is dlopen()ed). */
#define TLS_FAST __attribute__((tls_model("initial-exec")))
static _Thread_local struct reader *me TLS_FAST;
static _Thread_local bool me_locked TLS_FAST;   /* this call holds the space mutex */
/* The snapshot of a thread without a slot (out of memory), used under the mutex only. */
static _Thread_local struct exo_view fallback_snap;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* The thread exits: its slot is free for the next thread. A later destructor that calls
 * the allocator takes a slot again (and this runs once more for it). */
static void reader_exit(void *r)
{
    me = NULL;
    atomic_store_explicit(&((struct reader *)r)->inside, 0, memory_order_release);
    atomic_store_explicit(&((struct reader *)r)->used, 0, memory_order_release);
}

static void make_key(void)
{
    pthread_key_create(&reader_key, reader_exit);
}

/* This thread's slot: a free one of an exited thread, else a new one. NULL only when out of
 * memory (the caller then uses the mutex). */
static struct reader *my_slot(void)
{
    if (me)
        return me;
    pthread_once(&key_once, make_key);
    struct reader *r;
    for (r = atomic_load_explicit(&readers, memory_order_acquire); r; r = r->next) {
        int unused = 0;
        if (atomic_compare_exchange_strong(&r->used, &unused, 1))
            break;
    }
    if (!r) {
        r = aligned_alloc(64, sizeof *r);
        if (!r)
            return NULL;
        memset(r, 0, sizeof *r);
        r->snap.gen = GEN_NONE;
        atomic_store(&r->used, 1);
        r->next = atomic_load(&readers);
        while (!atomic_compare_exchange_weak(&readers, &r->next, r))
            ;
    }
    pthread_setspecific(reader_key, r);
    me = r;
    return r;
}

/* Fill the snapshot from the space (mutex held). */
static void take_snapshot(struct space *s, struct exo_view *v, uint64_t gen)
{
    v->nsegs = 0;
    v->last = 0;
    for (size_t i = 0; i < s->npsegs && v->nsegs < VAS_SEGS_MAX; i++) {
        const struct pseg *ps = s->psegs[i];
        if (ps->where == PSEG_VISIBLE)
            v->segs[v->nsegs++] = (struct exo_view_seg){ps->sid, ps->base, ps->size,
                                                         ps->access == EXO_ACCESS_RW};
    }
    const struct attachment *a = s->current;
    v->heap_rc = a ? -EXO_ENOHEAP : -EXO_ENOTMAPPED;
    v->vas_name[0] = 0;
    if (a) {
        memcpy(v->vas_name, a->name, sizeof v->vas_name);
        if (a->heap) {
            v->heap = a->heap;
            v->heap_rc = 0;
        }
        for (unsigned i = 0; i < a->nsegs && v->heap_rc; i++) {
            if (a->segs[i].flags == SEG_RDWR) {
                v->heap = a->segs[i].ps->sid;
                v->heap_rc = 0;
            }
        }
    }
    v->gen = gen & 1 ? GEN_NONE : gen;
}

const struct exo_view *exo_view_enter(void)
{
    struct reader *r = my_slot();
    if (r) {
        atomic_store(&r->inside, 1);
        if (atomic_load(&view_gen) == r->snap.gen)
            return &r->snap;
        atomic_store_explicit(&r->inside, 0, memory_order_release);
    }
    /* A change is under way or the snapshot is old: read the view under the mutex, which
     * this call keeps (the generation may be odd, so the snapshot is not trusted later). */
    struct exo_view *v = r ? &r->snap : &fallback_snap;
    struct space *s = exo_space();
    pthread_mutex_lock(&s->lock);
    me_locked = true;
    take_snapshot(s, v, atomic_load(&view_gen));
    return v;
}

int exo_view_enter_locked(struct exo_view *buf, bool try_only)
{
    struct space *s = exo_space();
    if (try_only ? pthread_mutex_trylock(&s->lock) != 0 : pthread_mutex_lock(&s->lock) != 0)
        return -EXO_EBUSY;
    me_locked = true;
    take_snapshot(s, buf, GEN_NONE);
    return 0;
}

void exo_view_leave(const struct exo_view *v)
{
    (void)v;
    if (me_locked) {
        me_locked = false;
        pthread_mutex_unlock(&exo_space()->lock);
    } else {
        atomic_store_explicit(&me->inside, 0, memory_order_release);
    }
}

int exo_view_find(const struct exo_view *v, segid_t sid, const struct exo_view_seg **out)
{
    if (v->last < v->nsegs && v->segs[v->last].sid == sid) {
        *out = &v->segs[v->last];
        return 0;
    }
    for (unsigned i = 0; i < v->nsegs; i++) {
        if (v->segs[i].sid == sid) {
            ((struct exo_view *)v)->last = i;   /* the thread's own snapshot */
            *out = &v->segs[i];
            return 0;
        }
    }
    return exo_fail(EXO_ENOTMAPPED, "segment %llu is not visible in the current address "
                    "space", (unsigned long long)sid);
}

int exo_view_find_at(const struct exo_view *v, const void *p, const struct exo_view_seg **out)
{
    uint64_t addr = (uint64_t)(uintptr_t)p;
    unsigned n = v->nsegs;
    for (unsigned k = 0; k < n; k++) {
        unsigned i = k == 0 ? v->last : (k == v->last ? 0 : k);
        if (i >= n)
            continue;
        const struct exo_view_seg *vs = &v->segs[i];
        if (addr >= vs->base && addr - vs->base < vs->size) {
            ((struct exo_view *)v)->last = i;
            *out = vs;
            return 0;
        }
    }
    return exo_fail(EXO_ENOTMAPPED, "address %p is in no visible segment", p);
}

int exo_view_heap(const struct exo_view *v, segid_t *sid)
{
    if (v->heap_rc == -EXO_ENOTMAPPED)
        return exo_fail(EXO_ENOTMAPPED, "vas_malloc at home: switch into a VAS first");
    if (v->heap_rc)
        return exo_fail(EXO_ENOHEAP, "VAS '%s' has no read-write segment for a heap",
                        v->vas_name);
    *sid = v->heap;
    return 0;
}

void exo_view_change_begin(void)
{
    if (changing++ == 0)
        atomic_store(&view_gen, atomic_load_explicit(&view_gen, memory_order_relaxed) + 1);
    for (struct reader *r = atomic_load(&readers); r; r = r->next) {
        for (unsigned spins = 0; atomic_load(&r->inside); spins++) {
            if (spins < 1000)
                cpu_relax();
            else
                exo_os_yield();
        }
    }
}

/* The next even generation. */
static void gen_settle(void)
{
    uint64_t g = atomic_load_explicit(&view_gen, memory_order_relaxed);
    atomic_store_explicit(&view_gen, (g | 1) + 1, memory_order_release);
}

void exo_view_change_end(void)
{
    if (--changing == 0)
        gen_settle();
}

void exo_view_after_fork_child(void)
{
    for (struct reader *r = atomic_load(&readers); r; r = r->next) {
        if (r != me) {
            atomic_store(&r->inside, 0);
            atomic_store(&r->used, 0);
        }
    }
    me_locked = false;
    changing = 0;
    gen_settle();
}
