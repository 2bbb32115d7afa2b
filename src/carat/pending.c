/* Heap blocks tracked without the runtime's lock: each thread's pending allocations.
 *
 * With the shadow on (shadow.h), a small heap block's node is named in the shadow word of
 * its malloc chunk's size field (its head word, alloc_table.h). That word is all a free
 * needs to find the node, so the indexes by interior address can wait: an allocation
 * takes a node from its thread's spare ones, fills it, names it in the head word and
 * lists it; a free of a block still on its thread's list forgets it there. Neither takes
 * the lock, nor a locked instruction. Only when the list fills, or the thread asks the
 * table something, are the blocks still live indexed (the drain, under the lock): most
 * blocks of a program that allocates fast are freed before that (Lua's workload: 79%
 * within 16,384 allocations), and never touch the table's indexes at all.
 *
 * Who may touch a pending node: the thread that allocated it, without the lock (to fill,
 * resize or forget it), and anyone holding the lock for a block of another thread's (a
 * free or realloc of it; the program frees a block once). An escape another thread notes
 * into it is kept aside (strays, below), never in its node. Its thread's free gives the
 * node straight back to its spares, so a search of the rings (exo_carat_pending_holding)
 * that races with the free of the block asked about may read the node refilled for the
 * next block: that is the program's race, and what it reads is still a node (the nodes'
 * arena is never given back). What other threads allocated since their last drain is not
 * in the table: a query sees it after their next drain, and a move, which stops the
 * world, drains every list first. */
#include "carat/carat_internal.h"
#include "carat/carat_mem.h"
#include "carat/page_index.h"

static struct carat_thread *owner_of(const struct alloc *n)
{
    return (struct carat_thread *)(void *)n->left;
}

static void drain_upto(struct carat_pending *q, uint32_t upto);
static void settle_strays(void);

/* Spare nodes for q, taken from the table's (lock not held). false: none to be had (the
 * nodes' arena is used up). */
static bool refill(struct carat_pending *q)
{
    pthread_mutex_lock(&exo_carat.lock);
    while (q->nspare < CARAT_NODE_CACHE / 2) {
        struct alloc *n = exo_carat_alloc_table_node_new(&exo_carat.table);
        if (!n)
            break;
        q->spare[q->nspare++] = n;
    }
    pthread_mutex_unlock(&exo_carat.lock);
    return q->nspare != 0;
}

/* t's ring, made at its first pending block (lock not held); NULL if out of memory. */
static struct carat_pending *make_ring(struct carat_thread *t)
{
    pthread_mutex_lock(&exo_carat.lock);   /* carat_mem is the table's */
    struct carat_pending *q = exo_carat_mem_alloc(sizeof *q);
    pthread_mutex_unlock(&exo_carat.lock);
    /* Read by other threads under the lock (exo_carat_pending_holding): published whole. */
    __atomic_store_n(&t->pend, q, __ATOMIC_RELEASE);
    return q;
}

bool exo_carat_pending_track(uintptr_t p, uint64_t size, const char *site)
{
    struct alloc_table *tab = &exo_carat.table;
    if (!tab->by_head || size > PAGE_INDEX_SMALL)
        return false;
    uintptr_t *h = exo_carat_alloc_table_head(tab, p);
    if (!h)
        return false;
    /* A head word in use names a block freed where the runtime could not see it: the
     * table's insert drops that one first. Read by an add of 0 (no lock: only the block's
     * owner writes it now), which the processor counts as a write: a shadow page never
     * touched is faulted in once, writable, not first as the zero page and again when the
     * head is written below (jq: 71,000 of its shadow's pages). */
    uintptr_t was = 0;
    __asm__ volatile("xaddq %0, %1" : "+r"(was), "+m"(*h));
    if (was)
        return false;
    struct carat_thread *t = exo_carat_thread_self();
    struct carat_pending *q = t ? t->pend : NULL;
    if (!q && (!t || !(q = make_ring(t))))
        return false;
    if (q->end - q->first == CARAT_PENDING_CAP) {
        /* The oldest quarter only: the rest keep their chance to be freed first. */
        pthread_mutex_lock(&exo_carat.lock);
        drain_upto(q, q->first + CARAT_PENDING_CAP / 4);
        pthread_mutex_unlock(&exo_carat.lock);
    }
    if (!q->nspare && !refill(q))
        return false;
    struct alloc *n = q->spare[--q->nspare];
    *n = (struct alloc){ .size = size ? size : 1, .site = site, .left = (struct alloc *)(void *)t,
                         .prio = q->end % CARAT_PENDING_CAP,
                         .align_shift = exo_carat_align_shift(p),
                         .kind = EXO_CARAT_HEAP, .index = INDEX_PENDING };
    __atomic_store_n(&n->base, p, __ATOMIC_RELAXED);
    /* Named after it is filled in: another thread that frees the block (under the lock)
     * reads the node through this word. */
    __atomic_store_n(h, exo_carat_alloc_table_head_word(n), __ATOMIC_RELEASE);
    q->ring[n->prio] = n;
    __atomic_store_n(&q->end, q->end + 1, __ATOMIC_RELEASE);
    exo_carat_alloc_table_widen(tab, p, p + n->size);
    __atomic_store_n(&t->allocs, t->allocs + 1, __ATOMIC_RELAXED);
    return true;
}

/* Forget the pending node n at p: no head names it, and its zero base marks it for the
 * drain to recycle. Its size. */
static uint64_t forget(struct alloc *n, uintptr_t p)
{
    __atomic_store_n(exo_carat_alloc_table_head(&exo_carat.table, p), 0, __ATOMIC_RELAXED);
    uint64_t size = n->size;
    __atomic_store_n(&n->base, 0, __ATOMIC_RELAXED);
    return size;
}

uint64_t exo_carat_pending_untrack(uintptr_t p)
{
    struct carat_thread *t = exo_carat_tls.thread;
    if (!t)
        return 0;
    struct alloc *n = exo_carat_alloc_table_pending_at(&exo_carat.table, p);
    /* A node with an escape set (this thread's unaligned store into it was noted, under
     * the lock) has memory only the lock may free: the locked path drains it and frees it
     * there. */
    if (!n || owner_of(n) != t || n->escapes.cap)
        return 0;
    __atomic_store_n(&t->frees, t->frees + 1, __ATOMIC_RELAXED);
    uint64_t size = forget(n, p);
    struct carat_pending *q = t->pend;   /* there: n is on it */
    /* Straight back to the spare nodes, and off the list (its index there is in prio),
     * so that the drain reads no node but the live ones. The node is reused while its
     * line is still in the cache. */
    __atomic_store_n(&q->ring[n->prio], NULL, __ATOMIC_RELAXED);
    q->spare[q->nspare++] = n;
    return size;
}

uint64_t exo_carat_pending_forget(uintptr_t p)
{
    struct alloc *n = exo_carat_alloc_table_pending_at(&exo_carat.table, p);
    return n ? forget(n, p) : 0;
}

void exo_carat_pending_resize(uintptr_t p, uint64_t size, const char *site)
{
    struct alloc *n = exo_carat_alloc_table_pending_at(&exo_carat.table, p);
    bool own = n && owner_of(n) == exo_carat_tls.thread;
    if (!own) {   /* another thread's, perhaps: only its drain, under the lock, changes it */
        pthread_mutex_lock(&exo_carat.lock);
        if (!(n = exo_carat_alloc_table_pending_at(&exo_carat.table, p)))
            exo_carat_alloc_table_resize(&exo_carat.table, p, size, EXO_CARAT_HEAP, site);
    }
    if (n) {   /* its drain indexes it with its new size */
        n->size = size ? size : 1;
        exo_carat_alloc_table_widen(&exo_carat.table, p, p + n->size);
    }
    if (!own)
        pthread_mutex_unlock(&exo_carat.lock);
}

struct alloc *exo_carat_pending_holding(uintptr_t addr)
{
    for (struct carat_thread *t = exo_carat.threads; t; t = t->next) {
        const struct carat_pending *q = __atomic_load_n(&t->pend, __ATOMIC_ACQUIRE);
        if (!q)
            continue;
        uint32_t end = __atomic_load_n(&q->end, __ATOMIC_ACQUIRE);
        for (uint32_t i = end; i-- != q->first;) {
            struct alloc *a = __atomic_load_n(&q->ring[i % CARAT_PENDING_CAP],
                                              __ATOMIC_RELAXED);
            uintptr_t base = a ? __atomic_load_n(&a->base, __ATOMIC_RELAXED) : 0;
            if (base && addr - base <= a->size)   /* one past its end counts (target_of) */
                return a;
        }
    }
    return NULL;
}

void exo_carat_pending_drain(struct carat_thread *t)
{
    if (t->pend)
        drain_upto(t->pend, t->pend->end);
}

/* How far ahead the drain asks for the nodes it will read, and (half as far) for their
 * head words: the live blocks left on a ring are old, and each of their nodes and head words
 * was a cache miss in turn (7% of Lua's workload was the drain). */
#define DRAIN_AHEAD 16

static void drain_upto(struct carat_pending *q, uint32_t upto)
{
    struct alloc_table *tab = &exo_carat.table;
    for (uint32_t i = q->first; i != upto; i++) {
        if (upto - i > DRAIN_AHEAD) {
            const struct alloc *far = q->ring[(i + DRAIN_AHEAD) % CARAT_PENDING_CAP];
            const struct alloc *near = q->ring[(i + DRAIN_AHEAD / 2) % CARAT_PENDING_CAP];
            if (far)
                __builtin_prefetch(far);
            if (near && near->base)   /* asked for DRAIN_AHEAD / 2 steps ago */
                __builtin_prefetch(exo_carat_alloc_table_head(tab, near->base));
        }
        struct alloc *n = q->ring[i % CARAT_PENDING_CAP];
        if (!n)   /* freed by its thread, and reused */
            continue;
        uintptr_t *h = n->base ? exo_carat_alloc_table_head(tab, n->base) : NULL;
        if (h && *h == exo_carat_alloc_table_head_word(n)) {
            (void)exo_carat_alloc_table_adopt(tab, n);   /* -EXO_ENOMEM: left untracked */
        } else if (!n->escapes.cap) {
            /* Freed by another thread while pending (or its head word overwritten: a
             * free the runtime did not see). Counted as freed with no escape, as the
             * table's drop would. */
            tab->escape_hist[0]++;
            q->spare[q->nspare++] = n;
        } else {
            exo_carat_alloc_table_node_recycle(tab, n, true);
        }
    }
    __atomic_store_n(&q->first, upto, __ATOMIC_RELEASE);
    settle_strays();
}

/* ---- escapes into another thread's pending blocks (strays) ----
 *
 * An escape noted under the lock (a store into a slot that is not 8-byte aligned) into a
 * block another thread has pending cannot go into that block's node: its thread frees the
 * block and reuses the node without the lock, having read the node's escape set as empty
 * before the set was made; the set was then lost, or named a block made since (a thread
 * storing pointers to another's blocks as it freed them leaked 4 MB of sets in 100,000
 * stores: tests/carat/pending_blocks.c, `strays`). Such an escape is kept here, in a table
 * by slot (one entry a slot: a store into it again keeps only the newest value), and noted
 * again after each drain: into the table, if its block is there now; dropped, if its block
 * is gone; kept, if it is still pending. A move drains every ring first, so its block has
 * every escape noted into it. Under the lock. */
struct stray {
    uintptr_t slot, value;   /* slot 0: a free entry */
};
static struct stray *strays;
static uint32_t strays_cap, nstrays;   /* cap: a power of two, at most half full */

static uint32_t stray_home(uintptr_t slot, uint32_t cap)
{
    return (uint32_t)(slot * 0x9e3779b97f4a7c15ull >> 40) & (cap - 1);
}

/* Its entry for slot: the one there, or the free one it goes into. */
static struct stray *stray_at(struct stray *table, uint32_t cap, uintptr_t slot)
{
    uint32_t i = stray_home(slot, cap);
    while (table[i].slot && table[i].slot != slot)
        i = (i + 1) & (cap - 1);
    return &table[i];
}

/* Room for one more entry. false: out of memory. */
static bool strays_reserve(void)
{
    if (2 * (nstrays + 1) <= strays_cap)
        return true;
    uint32_t cap = strays_cap ? 2 * strays_cap : 16;
    struct stray *bigger = exo_carat_mem_alloc(cap * sizeof *bigger);
    if (!bigger)
        return false;
    for (uint32_t i = 0; i < strays_cap; i++)
        if (strays[i].slot)
            *stray_at(bigger, cap, strays[i].slot) = strays[i];
    exo_carat_mem_free(strays, strays_cap * sizeof *strays);
    /* counted as the escape map's memory */
    exo_carat.table.bytes += (uint64_t)(cap - strays_cap) * sizeof *strays;
    exo_carat_alloc_table_note_peak(&exo_carat.table);
    strays = bigger;
    strays_cap = cap;
    return true;
}

struct alloc *exo_carat_pending_escape_target(uintptr_t slot, uintptr_t value)
{
    struct alloc *a = exo_carat_pending_holding(value);
    if (!a || owner_of(a) == exo_carat_tls.thread)
        return a;
    if (strays_reserve()) {   /* else dropped, as a set that cannot grow drops it */
        struct stray *e = stray_at(strays, strays_cap, slot);
        nstrays += !e->slot;
        *e = (struct stray){ slot, value };
    }
    return NULL;
}

/* Note each stray again: its block may be in the table now. */
static void settle_strays(void)
{
    if (!nstrays)
        return;
    struct stray *was = strays;
    uint32_t cap = strays_cap;
    strays = NULL;
    strays_cap = nstrays = 0;
    /* Back into strays if its block is still another thread's pending one. */
    for (uint32_t i = 0; i < cap; i++)
        if (was[i].slot)
            exo_carat_note_escape(was[i].slot, was[i].value, false);
    exo_carat_mem_free(was, cap * sizeof *was);
    exo_carat.table.bytes -= (uint64_t)cap * sizeof *was;
}

void exo_carat_pending_drain_all(void)
{
    for (struct carat_thread *t = exo_carat.threads; t; t = t->next)
        exo_carat_pending_drain(t);
}

bool exo_carat_pending_any(void)
{
    for (struct carat_thread *t = exo_carat.threads; t; t = t->next)
        if (t->pend && __atomic_load_n(&t->pend->end, __ATOMIC_RELAXED) != t->pend->first)
            return true;
    return false;
}

void exo_carat_pending_thread_gone(struct carat_thread *t)
{
    struct carat_pending *q = t->pend;
    if (!q)
        return;
    while (q->nspare)
        exo_carat_alloc_table_node_recycle(&exo_carat.table, q->spare[--q->nspare], false);
    exo_carat_mem_free(q, sizeof *q);
    t->pend = NULL;
}

void exo_carat_pending_drain_everyone(void)
{
    struct carat_parked *parked;
    int nparked;
    if (exo_carat_world_stop(&parked, &nparked, 1000000000ull))
        return;   /* not stopped: what is not in the table stays out, as before */
    pthread_mutex_lock(&exo_carat.lock);
    exo_carat_pending_drain_all();
    pthread_mutex_unlock(&exo_carat.lock);
    exo_carat_world_resume();
}

/* How many of a thread's newest pending blocks a copy's source is looked for in before its
 * ring is drained: a program copies mostly out of blocks it has just made (jq's arrays as
 * they grow), and a drain at every such copy left it no window (800,000 drains in jq's
 * workload, 70% of its blocks indexed). */
#define RECENT 32

bool exo_carat_pending_own_holds(uintptr_t addr)
{
    struct carat_thread *t = exo_carat_tls.thread;
    struct carat_pending *q = t ? t->pend : NULL;
    if (!q)
        return false;
    uint32_t stop = q->end - q->first > RECENT ? q->end - RECENT : q->first;
    for (uint32_t i = q->end; i-- != stop;) {
        const struct alloc *a = q->ring[i % CARAT_PENDING_CAP];
        if (a && addr - a->base < a->size)
            return true;
    }
    if (q->end == q->first)
        return false;
    exo_carat_pending_drain(t);
    return exo_carat_alloc_table_find(&exo_carat.table, addr) != NULL;
}
