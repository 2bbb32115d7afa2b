/* The runtime's answers to the program: which allocation holds an address, the counters,
 * and the allocation with the most escapes (the mover's worst case). Each applies the
 * calling thread's own log and pending blocks first; what other threads did since their
 * last flush reaches the table later (a pending block of theirs is still found). */
#include "carat/carat_internal.h"
#include "carat/shadow.h"
#include "internal.h"

#include <string.h>

/* The calling thread's live stack object holding addr, or NULL. */
static const struct carat_stack_obj *own_stack_obj(uintptr_t addr)
{
    struct carat_tls *t = &exo_carat_tls;
    uint32_t n = t->stack_depth < CARAT_STACK_OBJS ? t->stack_depth : CARAT_STACK_OBJS;
    for (uint32_t i = n; i-- > 0;)
        if (addr - t->stack_objs[i].base < t->stack_objs[i].size)
            return &t->stack_objs[i];
    return NULL;
}

struct alloc *exo_carat_lookup(uintptr_t addr)
{
    exo_carat_flush_own();
    struct alloc *a = exo_carat_alloc_table_find(&exo_carat.table, addr);
    if (!a && exo_carat.table.by_head)
        a = exo_carat_pending_holding(addr);   /* another thread's, not drained */
    return a;
}

EXO_API int exo_carat_alloc_find(const void *addr, struct exo_carat_alloc_info *info)
{
    carat_ensure_init();
    /* Its stack's bounds: stores there are not counted (as in the sets). */
    if (exo_carat_shadow_on && !exo_carat_tls.thread)
        exo_carat_thread_self();
    carat_enter();
    pthread_mutex_lock(&exo_carat.lock);
    struct alloc *a = exo_carat_lookup((uintptr_t)addr);
    if (a && info) {
        info->base = a->base;
        info->size = a->size;
        info->kind = a->kind;
        info->escapes = a->escapes.count +
                        exo_carat_shadow_count(a->base, a->size, exo_carat_tls.stack_lo,
                                               exo_carat_tls.stack_end);
        info->site = a->site;
    }
    pthread_mutex_unlock(&exo_carat.lock);
    carat_leave();
    const struct carat_stack_obj *so = a ? NULL : own_stack_obj((uintptr_t)addr);
    if (so && info) {
        info->base = so->base;
        info->size = so->size;
        info->kind = EXO_CARAT_STACK;
        info->escapes = 0;   /* not kept for stack objects: they never move */
        info->site = so->site;
    }
    if (!a && !so)
        return exo_fail(EXO_ENOENT, "%p is in no tracked allocation", addr);
    return 0;
}

static bool add_escapes(struct alloc *a, void *arg)
{
    struct exo_carat_stats *st = arg;
    st->escapes_live += a->escapes.count;
    st->escape_hist[exo_carat_escape_bucket(a->escapes.count)]++;
    return false;
}

EXO_API void exo_carat_get_stats(struct exo_carat_stats *st)
{
    memset(st, 0, sizeof *st);
    carat_enter();
    pthread_mutex_lock(&exo_carat.lock);
    exo_carat_flush_own();
    st->allocations = exo_carat.table.count;
    st->table_bytes = exo_carat_alloc_table_bytes(&exo_carat.table);
    exo_carat_alloc_table_each(&exo_carat.table, add_escapes, st);
    st->table_peak_bytes = exo_carat.table.peak_bytes;
    for (int b = 0; b < EXO_CARAT_ESCAPE_BUCKETS; b++)
        st->escape_hist[b] += exo_carat.table.escape_hist[b];
    /* Escapes are counted as their logs are applied; add the ones other threads have
     * logged since (read while they run: a count, not a snapshot). */
    for (struct carat_thread *t = exo_carat.threads; t; t = t->next) {
        st->allocs_total += __atomic_load_n(&t->allocs, __ATOMIC_RELAXED);
        st->frees_total += __atomic_load_n(&t->frees, __ATOMIC_RELAXED);
        st->escape_hist[0] += __atomic_load_n(&t->frees, __ATOMIC_RELAXED);
        st->escapes_total += __atomic_load_n(&t->n, __ATOMIC_RELAXED);
        st->stack_objects_total += __atomic_load_n(&t->tls->stack_released, __ATOMIC_RELAXED) +
                                   __atomic_load_n(&t->tls->stack_depth, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&exo_carat.lock);
    carat_leave();
    st->allocs_total += atomic_load(&exo_carat.count.allocs);
    st->frees_total += atomic_load(&exo_carat.count.frees);
    st->escapes_total += atomic_load(&exo_carat.count.escapes);
    st->guard_slow = atomic_load(&exo_carat.count.guard_slow);
    st->moves = atomic_load(&exo_carat.count.moves);
    for (int why = 0; why < EXO_CARAT_REFUSALS; why++) {
        st->refused_by[why] = atomic_load(&exo_carat.count.refused_by[why]);
        st->moves_refused += st->refused_by[why];
    }
    st->stack_objects_total += atomic_load(&exo_carat.count.stack_objects);
    st->move_ns = atomic_load(&exo_carat.count.move_ns);
    st->stale_writes = atomic_load(&exo_carat.count.stale_writes);
    st->pinned = atomic_load(&exo_carat.count.pinned);
}

uintptr_t exo_carat_worst_heap(void)
{
    exo_carat_flush_own();
    if (exo_carat_shadow_on) {
        uintptr_t w = exo_carat_shadow_pick();
        if (w)
            return w;
    }
    struct alloc *best = exo_carat_alloc_table_worst(&exo_carat.table);
    return best ? best->base : 0;
}

EXO_API void *exo_carat_worst_allocation(void)
{
    carat_enter();
    pthread_mutex_lock(&exo_carat.lock);
    uintptr_t b = exo_carat_worst_heap();
    pthread_mutex_unlock(&exo_carat.lock);
    carat_leave();
    return (void *)b;
}
