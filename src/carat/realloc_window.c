/* Reallocs in flight: the window between the C library's free of a block realloc moved
 * (or of the tail it cut off in place) and the hook that forgets it.
 *
 * The plugin's hook comes after realloc returns, but realloc frees the old block before
 * that. Another thread's malloc can hand out that memory in between and track it, and the
 * hook then forgot the other thread's block (removed by base) and cleared the shadow of
 * what it had stored there: the block was lost to the table, and a move left those
 * pointers stale. (A free has no such window: its hook comes before the call.)
 *
 * So the realloc's thread publishes the old block's range before the call
 * (exo_carat_realloc_open) and withdraws it once its hook has forgotten the block
 * (exo_carat_realloc_close); a thread that tracks a heap block overlapping a published
 * range waits for that (exo_carat_realloc_wait). The wait cannot be circular: the block a
 * waiter got was freed by a realloc that had already got its own new block. A shared
 * count tells the waiters' check, one load, that no range is published. */
#include "carat/carat_internal.h"
#include "os/os.h"

#include <malloc.h>
#include <sys/single_threaded.h>

/* How many threads have a range published (their struct carat_thread's realloc_lo/hi). A
 * line of its own: every realloc of a block in a process with threads writes it, every
 * allocation reads it. */
static struct {
    _Alignas(64) _Atomic uint32_t n;
    char pad[64 - sizeof(uint32_t)];
} open_count;

void exo_carat_realloc_forget_all(void)
{
    for (struct carat_thread *t = exo_carat.threads; t; t = t->next)
        __atomic_store_n(&t->realloc_hi, 0, __ATOMIC_RELAXED);
    atomic_store_explicit(&open_count.n, 0, memory_order_relaxed);
}

void exo_carat_realloc_open(void *old)
{
    /* A process with one thread has no other to hand old's memory to, nor can it start one
     * before the hook (glibc's flag only goes false, at the first pthread_create): nothing
     * to publish, and no locked add at every realloc of a block (Lua's workload: 5%). */
    if (!old || __libc_single_threaded)
        return;
    struct carat_thread *t = exo_carat_thread_self();
    if (!t)   /* out of memory: no record to publish in (the window stays as it was) */
        return;
    uintptr_t lo = (uintptr_t)old;
    __atomic_store_n(&t->realloc_lo, lo, __ATOMIC_RELAXED);
    __atomic_store_n(&t->realloc_hi, lo + malloc_usable_size(old), __ATOMIC_RELAXED);
    /* Before the call that frees old: a thread that gets its memory from malloc (after
     * this, through the C library's own locks) sees the count. */
    atomic_fetch_add_explicit(&open_count.n, 1, memory_order_seq_cst);
}

void exo_carat_realloc_close(void)
{
    struct carat_thread *t = exo_carat_tls.thread;
    if (!t || !__atomic_load_n(&t->realloc_hi, __ATOMIC_RELAXED))
        return;
    /* After the hook's work on old (its record and its shadow) is done and visible. */
    __atomic_store_n(&t->realloc_hi, 0, __ATOMIC_RELEASE);
    atomic_fetch_sub_explicit(&open_count.n, 1, memory_order_release);
}

/* Does another thread have a published range overlapping [p, p + size)? Lock held. */
static bool overlaps_open(const struct carat_thread *self, uintptr_t p, uint64_t size)
{
    for (const struct carat_thread *t = exo_carat.threads; t; t = t->next) {
        if (t == self)
            continue;
        uintptr_t hi = __atomic_load_n(&t->realloc_hi, __ATOMIC_ACQUIRE);
        if (hi && p < hi && p + size > __atomic_load_n(&t->realloc_lo, __ATOMIC_RELAXED))
            return true;
    }
    return false;
}

void exo_carat_realloc_wait(uintptr_t p, uint64_t size)
{
    if (__builtin_expect(!atomic_load_explicit(&open_count.n, memory_order_acquire), 1))
        return;
    const struct carat_thread *self = exo_carat_tls.thread;
    for (;;) {
        pthread_mutex_lock(&exo_carat.lock);
        bool wait = overlaps_open(self, p, size);
        pthread_mutex_unlock(&exo_carat.lock);
        if (!wait)
            return;
        exo_os_yield();   /* the other thread is in its hook, not waiting on anything */
    }
}
