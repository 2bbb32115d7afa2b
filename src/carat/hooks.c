/* The calls the CARAT plugin inserts into a program: allocations, frees and escapes go into
 * the allocation table (escapes through a per-thread log applied in batches), and the
 * runtime's lazy set-up. */
#include "carat/carat_internal.h"
#include "carat/carat_mem.h"
#include "carat/shadow.h"
#include "internal.h"
#include "os/os.h"

#include <string.h>

/* Both visible to the program and its shared libraries: the plugin's inline code reads and
 * writes them (carat_abi.h), from a library built with exomem-cc too. */
EXO_API struct carat_runtime exo_carat = { .lock = PTHREAD_MUTEX_INITIALIZER };
EXO_API _Thread_local struct carat_tls exo_carat_tls __attribute__((tls_model("initial-exec")));
_Atomic bool exo_carat_ready;

static pthread_key_t thread_key;
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;

int exo_carat_mover_autostart(void);

/* Add n to c, a counter whose every writer holds the lock (readers, without it, only need
 * a count that is not torn): a load and a store, not a locked add. A locked add after the
 * lock's release waited for the stores before it, a free's clearing of its block's shadow
 * among them, to reach the cache: 4% of Lua's workload stood on that one instruction. */
static inline void count_locked(_Atomic uint64_t *c, uint64_t n)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

/* A thread that ends hands its log to the table and leaves the list. */
static void thread_gone(void *p)
{
    struct carat_thread *t = p;
    carat_enter();
    pthread_mutex_lock(&exo_carat.lock);
    exo_carat_pending_drain(t);
    exo_carat_flush_thread(t, true);   /* its stores are done */
    exo_carat_pending_thread_gone(t);
    exo_carat.table.escape_hist[0] += t->frees;   /* freed while pending: no escape */
    count_locked(&exo_carat.count.allocs, t->allocs);
    count_locked(&exo_carat.count.frees, t->frees);
    atomic_fetch_add_explicit(&exo_carat.count.stack_objects,
                              exo_carat_tls.stack_released + exo_carat_tls.stack_depth,
                              memory_order_relaxed);
    exo_carat_tls.stack_released = 0;
    if (t->prev)
        t->prev->next = t->next;
    else
        exo_carat.threads = t->next;
    if (t->next)
        t->next->prev = t->prev;
    exo_carat_mem_free(t, sizeof *t);
    pthread_mutex_unlock(&exo_carat.lock);
    exo_carat_tls.thread = NULL;
    carat_leave();
}

void exo_carat_init(void)
{
    pthread_mutex_lock(&init_lock);
    if (!atomic_load(&exo_carat_ready)) {
        pthread_key_create(&thread_key, thread_gone);
        exo_carat_world_install();
        exo_carat_fork_init();
        atomic_store_explicit(&exo_carat_ready, true, memory_order_release);
        exo_carat_mover_autostart();
        exo_carat_report_at_exit();
    }
    pthread_mutex_unlock(&init_lock);
}

/* NULL if out of memory: its escapes are then applied one by one. */
struct carat_thread *exo_carat_thread_self(void)
{
    struct carat_thread *t = exo_carat_tls.thread;
    if (__builtin_expect(t != NULL, 1))
        return t;
    carat_ensure_init();
    carat_enter();   /* no parking while holding the lock, or inside the C library here */
    pthread_mutex_lock(&exo_carat.lock);
    t = exo_carat_mem_alloc(sizeof *t);
    if (t) {
        t->next = exo_carat.threads;
        if (t->next)
            t->next->prev = t;
        exo_carat.threads = t;
    }
    pthread_mutex_unlock(&exo_carat.lock);
    if (t) {
        t->tls = &exo_carat_tls;
        exo_carat_tls.thread = t;
        pthread_setspecific(thread_key, t);
        uintptr_t lo, hi;
        if (exo_os_thread_stack(&lo, &hi) == 0) {
            exo_carat_tls.stack_lo = lo;
            exo_carat_tls.stack_end = hi;
        }
    }
    carat_leave();
    return t;
}

/* The tracked allocation value points into, or one past the end of (glibc puts no other
 * block there), or whose malloc chunk header it lies in, or NULL (lock held). A header
 * address that no block before owns (its last word or end: found first) is a base for
 * 1-based indexing, `a - 1`, as programs store them: a move patches it with the block
 * (move_patch.h, exo_carat_in_own_chunk), where before it was dropped and kept the old
 * address. */
static struct alloc *target_of(uintptr_t value)
{
    struct alloc *a = exo_carat_alloc_table_find(&exo_carat.table, value);
    if (!a) {
        a = exo_carat_alloc_table_find(&exo_carat.table, value - 1);
        if (a && value != a->base + a->size)
            a = NULL;
    }
    if (!a) {
        a = exo_carat_alloc_table_at(&exo_carat.table,
                                     (value | (EXO_CARAT_CHUNK_HEADER - 1)) + 1);
        if (a && a->kind != EXO_CARAT_HEAP)
            a = NULL;
    }
    return a;
}

void exo_carat_note_escape(uintptr_t slot, uintptr_t value, bool settled)
{
    struct alloc *a = target_of(value);
    if (!a && exo_carat.table.by_head)   /* a block some thread allocated since its drain */
        a = exo_carat_pending_escape_target(slot, value);
    if (!a)
        return;
    bool in_alloc = exo_carat_alloc_table_holds(&exo_carat.table, slot);
    if (exo_carat_escape_set_add(&exo_carat.table, &a->escapes, slot, value, in_alloc,
                                 settled) == 0)
        exo_carat_alloc_table_consider(&exo_carat.table, a);
}

/* Slots already applied in the flush under way (stamped with the flush's number, so that
 * nothing needs clearing between flushes; at most half full). A flush uses only the first
 * power of two at least twice its log's length: most flushes are of a few entries (a
 * thread flushes before each free and realloc), and those then touch a few cache lines
 * instead of lines all over the table. Under the lock. */
#define SEEN_CAP (2 * CARAT_LOG_CAP)
static struct {
    uintptr_t slot;
    uint32_t flush;
} seen[SEEN_CAP];
static uint32_t flush_number;

/* Was slot seen before in this flush? Marks it seen. mask: the part of the table in use. */
static bool seen_before(uintptr_t slot, uint32_t mask)
{
    uint32_t i = (uint32_t)((slot >> 3) * 0x9e3779b97f4a7c15ull >> 40) & mask;
    for (; seen[i].flush == flush_number; i = (i + 1) & mask)
        if (seen[i].slot == slot)
            return true;
    seen[i].slot = slot;
    seen[i].flush = flush_number;
    return false;
}

/* The escapes of a flush left after dropping older ones (their log indexes), and what the
 * lookups found for each. Under the lock. */
static uint32_t survivor[CARAT_LOG_CAP];
static struct {
    struct alloc *target;   /* NULL: the value is in no tracked allocation */
    bool in_alloc;
} found[CARAT_LOG_CAP];

/* Each applied escape is a chain of cache misses: the value's hash entry, its allocation's
 * node, its escape set. The last is started for a group of escapes before any is added,
 * so that those misses overlap the next escapes' lookups (Lua: 15% of its tracked time was
 * that one miss, paid in turn). Starting the lookups' own misses ahead too (the hash entry,
 * the node) did not pay: it takes a second lookup. */
#define FLUSH_GROUP 32

static void apply_survivors(const struct carat_thread *t, uint32_t from, uint32_t to,
                            bool settled)
{
    struct alloc_table *tab = &exo_carat.table;
    for (uint32_t k = from; k < to; k++) {
        const struct escape_entry *e = &t->log[survivor[k]];
        struct alloc *a = target_of(e->value);
        found[k].target = a;
        if (a) {
            found[k].in_alloc = exo_carat_alloc_table_holds(tab, e->slot);
            exo_carat_escape_set_prefetch(&a->escapes, e->slot);
        }
    }
    /* Nothing below changes the table (only escape sets), so what was found still holds. */
    for (uint32_t k = from; k < to; k++) {
        struct alloc *a = found[k].target;
        const struct escape_entry *e = &t->log[survivor[k]];
        if (a && exo_carat_escape_set_add(tab, &a->escapes, e->slot, e->value,
                                          found[k].in_alloc, settled) == 0)
            exo_carat_alloc_table_consider(tab, a);
    }
}

void exo_carat_flush_thread(struct carat_thread *t, bool settled)
{
    uint32_t n = t->n;
    if (!n)
        return;
    exo_carat_pending_drain(t);   /* the escapes' targets first */
    /* Newest first, and only the newest escape of each slot: the slot holds that value (or
     * is about to: a thread stopped between a hook and its store overwrites the slot with
     * it), so its earlier values in the log would only add entries that never match again.
     * A slot is written over and over in the programs that store pointers the most (99% of
     * oniguruma's escapes rewrite a slot logged in the same window, 90% of Lua's). */
    if (++flush_number == 0) {   /* wrapped: stamps of long ago could look current */
        memset(seen, 0, sizeof seen);
        flush_number = 1;
    }
    uint32_t mask = 15;
    while (mask + 1 < 2 * n)
        mask = 2 * mask + 1;
    /* A zero slot is an entry the mover applied already (a thread it stopped in the inline
     * append counts it after resuming) or cleared by a flush the count raced with. */
    uint32_t m = 0, logged = 0;
    for (uint32_t i = n; i-- > 0;) {
        uintptr_t slot = t->log[i].slot;
        if (!slot)
            continue;
        logged++;
        if (!seen_before(slot, mask))
            survivor[m++] = i;
    }
    for (uint32_t k = 0; k < m; k += FLUSH_GROUP)
        apply_survivors(t, k, m - k < FLUSH_GROUP ? m : k + FLUSH_GROUP, settled);
    count_locked(&exo_carat.count.escapes, logged);   /* every flush holds the lock */
    /* Cleared, so that every entry past n is zero again (carat_internal.h): the mover then
     * knows an entry at n for one a stopped thread is writing. */
    memset(t->log, 0, n * sizeof t->log[0]);
    t->n = 0;
}

void exo_carat_flush_own(void)
{
    if (exo_carat_tls.thread) {
        exo_carat_pending_drain(exo_carat_tls.thread);
        exo_carat_flush_thread(exo_carat_tls.thread, true);
    }
}

void exo_carat_claim_inflight(void)
{
    for (struct carat_thread *t = exo_carat.threads; t; t = t->next) {
        uint32_t n = t->n;
        t->partial = NULL;
        if (n == CARAT_LOG_CAP)
            continue;
        /* The append writes the value, then the slot, then n + 1 (hook_escape, and the
         * plugin's inline copy of it). A slot written means the entry is whole; the thread
         * will store n + 1 itself when it resumes, over whatever a flush left in n, and find
         * the entry cleared. A value alone is a half-written entry: the mover patches that
         * word like a register (the thread writes the slot, from a register the move patches
         * too, and counts the entry). */
        if (t->log[n].slot)
            t->n = n + 1;
        else if (t->log[n].value)
            t->partial = &t->log[n];
    }
}

void exo_carat_flush_all(void)
{
    exo_carat_pending_drain_all();
    for (struct carat_thread *t = exo_carat.threads; t; t = t->next)
        exo_carat_flush_thread(t, false);
}

/* The allocation v points into, given the one the previous word of a scan pointed into
 * (NULL: none): the words of a copy mostly point into one block (a matcher's saved
 * positions in its text), and that test spares a lookup per word (oniguruma copies its
 * backtracking stack out of its frame at every search). Only an address strictly inside
 * last is taken from it: one past its end may be the next block's start, which target_of
 * prefers. The scans change escape sets only, never the table, so last stays valid. */
static inline struct alloc *target_near(struct alloc *last, uintptr_t v)
{
    if (last && v - last->base < last->size)
        return last;
    return target_of(v);
}

/* Do all of [dst, dst + len) lie in one tracked allocation? (A copy's destination is
 * usually one block: its slots are then not looked up one by one.) */
static bool within_one_alloc(uintptr_t dst, uint64_t len)
{
    const struct alloc *d = exo_carat_alloc_table_find(&exo_carat.table, dst);
    return d && len <= d->base + d->size - dst;
}

/* The word at addr (*value), and the tracked allocation it points into (or one past the end
 * of), or NULL. *last is what the scan's previous word found, tried first: a copy's
 * pointers point into a few blocks. Lock held. */
CARAT_NO_ASAN static struct alloc *word_target(uintptr_t addr, uintptr_t *value,
                                               struct alloc **last)
{
    uintptr_t v;
    memcpy(&v, (const void *)addr, sizeof v);
    *value = v;
    if (v < exo_carat.table.lo || v >= exo_carat.table.hi)
        return NULL;
    struct alloc *a = target_near(*last, v);
    if (a)
        *last = a;
    return a;
}

CARAT_NO_ASAN void exo_carat_scan_copy(uintptr_t dst, uintptr_t src, uint64_t len)
{
    bool dst_in_alloc = within_one_alloc(dst, len);
    struct alloc *last = NULL;
    /* Words at 8-byte offsets from the start: a copy keeps offsets, and pointers in the
     * copied data sit at aligned offsets of its source. */
    for (uint64_t off = 0; off + 8 <= len; off += 8) {
        uintptr_t v;
        struct alloc *a = word_target(src + off, &v, &last);
        if (!a)
            continue;
        bool in_alloc = dst_in_alloc ||
                        exo_carat_alloc_table_holds(&exo_carat.table, dst + off);
        /* not settled: dst may not be written yet */
        if (exo_carat_escape_set_add(&exo_carat.table, &a->escapes, dst + off, v, in_alloc,
                                     false) == 0)
            exo_carat_alloc_table_consider(&exo_carat.table, a);
    }
}

/* May the escape sets hold anything? Always, unless the program stores its escapes in the
 * shadow (shadow.h): then only the stores the shadow cannot take (into slots not on an
 * 8-byte boundary) go to the sets, applied at once and counted, and a program without any
 * skips the sets' upkeep on copies and reallocs. */
static bool sets_in_use(void)
{
    return !exo_carat_shadow_on ||
           atomic_load_explicit(&exo_carat.count.escapes, memory_order_relaxed) != 0;
}

/* Has another thread logged escapes the table has not seen yet? Only the thread itself
 * appends to its log, and emptying it takes the lock the caller holds, so a count read
 * while it appends can only err toward yes. */
static bool others_unflushed(void)
{
    for (struct carat_thread *t = exo_carat.threads; t; t = t->next)
        if (t != exo_carat_tls.thread && __atomic_load_n(&t->n, __ATOMIC_RELAXED))
            return true;
    return false;
}

CARAT_NO_ASAN void exo_carat_scan_known(uintptr_t dst, uintptr_t from, uint64_t len,
                                        bool from_gone)
{
    uintptr_t words = from_gone ? dst : from;
    /* Every caller applied its own log first (a copy's or realloc's hook, or a move, which
     * applies every log): a word unknown here is no pointer, unless another thread logged
     * its store and has not applied it yet. */
    bool complete = !others_unflushed();
    bool dst_in_alloc = exo_carat_alloc_table_holds(&exo_carat.table, dst);
    /* A memmove up within one block goes from the end, so that no slot is looked up after
     * the entry of a word copied onto it replaced its own. */
    bool backward = dst > from && dst - from < len;
    uint64_t n = len / 8;
    struct alloc *last = NULL;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t off = 8 * (backward ? n - 1 - i : i);
        uintptr_t v;
        struct alloc *a = word_target(words + off, &v, &last);
        if (!a)
            continue;
        bool known = exo_carat_escape_set_holds(&a->escapes, from + off, v);
        if (!known && complete)
            continue;
        if (known && from_gone)
            exo_carat_escape_set_remove(&a->escapes, from + off);
        if (exo_carat_escape_set_add(&exo_carat.table, &a->escapes, dst + off, v,
                                     dst_in_alloc, false) == 0)
            exo_carat_alloc_table_consider(&exo_carat.table, a);
    }
}

/* The extent of the heap block p in the table: every byte malloc gave, not only the size
 * asked for (UINT64_MAX: the plugin could not tell, as for strdup and getline). Programs use
 * the rest too, sized by malloc_usable_size: SQLite fits as many VDBE instructions in an
 * array as its usable size holds. Tracked by the size asked for, the last instruction's
 * pointer lay outside the block: realloc copied it, but the runtime carried over the
 * escapes of the asked-for bytes only, and the next move left that pointer stale. */
static uint64_t heap_extent(void *p, uint64_t asked)
{
    uint64_t usable = exo_carat_usable_size(p);
    return asked == UINT64_MAX || usable > asked ? usable : asked;
}

/* p, of size bytes (a heap block's extent, heap_extent), is now tracked. */
static void track(void *p, uint64_t size, int kind, const char *site)
{
    if (!p)
        return;
    carat_ensure_init();
    if (kind == EXO_CARAT_HEAP)   /* its memory may be what another thread's realloc freed */
        exo_carat_realloc_wait((uintptr_t)p, size);
    carat_enter();
    if (kind == EXO_CARAT_HEAP && exo_carat_pending_track((uintptr_t)p, size, site)) {
        carat_leave();
        return;
    }
    pthread_mutex_lock(&exo_carat.lock);
    /* This thread's pending blocks are older: indexed first, so that the insert drops
     * any of them it overlaps (freed where the runtime did not see it), not they it. */
    if (exo_carat_tls.thread)
        exo_carat_pending_drain(exo_carat_tls.thread);
    exo_carat_alloc_table_insert(&exo_carat.table, (uintptr_t)p, size, kind, site);
    count_locked(&exo_carat.count.allocs, 1);
    pthread_mutex_unlock(&exo_carat.lock);
    carat_leave();
}

/* p is freed, or about to be. gone: its memory may be unmapped already (realloc moved it),
 * so the log is applied without purging sets (a purge reads the slots of live tracked
 * blocks, and p still counts as one: it crashed on a realloc'ed Lua string table). */
static void untrack(void *p, bool gone)
{
    if (!p)
        return;
    carat_enter();
    uint64_t pending = exo_carat_pending_untrack((uintptr_t)p);
    if (pending) {   /* this thread's, not in the table yet: forgotten without the lock */
        exo_carat_shadow_clear((uintptr_t)p, pending);
        carat_leave();
        return;
    }
    pthread_mutex_lock(&exo_carat.lock);
    /* This thread's stores into the block, noted while it is still tracked: their slots
     * then die with it (struct escape_slot's in_alloc). */
    if (exo_carat_tls.thread)
        exo_carat_flush_thread(exo_carat_tls.thread, !gone);
    uintptr_t size = exo_carat_alloc_table_remove(&exo_carat.table, (uintptr_t)p);
    if (!size)   /* another thread's pending block */
        size = exo_carat_pending_forget((uintptr_t)p);
    count_locked(&exo_carat.count.frees, 1);
    pthread_mutex_unlock(&exo_carat.lock);
    /* Its slots hold no pointer of the program's any more. For a block realloc freed
     * already (gone), after realloc's copy (the caller copied its shadow first): another
     * thread that got the block from malloc in between loses the shadow of what it stored
     * there, as the table loses its record (removed by base here): the window the realloc
     * hook has always had. */
    if (size)
        exo_carat_shadow_clear((uintptr_t)p, size);
    carat_leave();
}

EXO_API void exo_carat_hook_alloc(void *p, uint64_t size, const char *site)
{
    if (p)   /* NULL: a failed allocation */
        track(p, heap_extent(p, size), EXO_CARAT_HEAP, site);
}

EXO_API void exo_carat_hook_alloc_new(void *p, uint64_t size, const char *site)
{
    if (exo_carat_cxx_new_is_malloc())   /* else a replacement's block: free cannot take it */
        exo_carat_hook_alloc(p, size, site);
}

EXO_API void exo_carat_hook_realloc_begin(void *old)
{
    carat_ensure_init();
    carat_enter();   /* left at the end of exo_carat_hook_realloc */
    exo_carat_realloc_open(old);   /* closed there too, once old is forgotten */
}

EXO_API void exo_carat_hook_realloc(void *old, void *p, uint64_t size, const char *site)
{
    if (p) {   /* NULL: failed, old is untouched and still tracked */
        size = heap_extent(p, size);
        /* realloc copied the old block's bytes at most (none for realloc(NULL, n)): the rest
         * of p is uninitialized, old data and glibc's free-list links, and no pointer of the
         * program's. */
        if (old == p) {   /* in place: the pointers to it stay good, and so do its escapes */
            exo_carat_pending_resize((uintptr_t)p, size, site);
        } else {
            uint64_t old_size = 0;   /* 0: old was not tracked (or NULL) */
            if (old) {
                pthread_mutex_lock(&exo_carat.lock);
                const struct alloc *was = exo_carat_alloc_table_find(&exo_carat.table,
                                                                     (uintptr_t)old);
                if (!was || was->base != (uintptr_t)old)
                    was = exo_carat_alloc_table_pending_at(&exo_carat.table, (uintptr_t)old);
                if (was)
                    old_size = was->size < size ? was->size : size;
                pthread_mutex_unlock(&exo_carat.lock);
                /* The shadow: old's known pointers are p's now (before untrack clears
                 * old's); the rest of p holds none. */
                if (old_size)
                    exo_carat_shadow_copy((uintptr_t)p, (uintptr_t)old, old_size);
                else
                    exo_carat_shadow_take((uintptr_t)p, (uintptr_t)p, size,
                                          exo_carat.table.lo, exo_carat.table.hi);
                untrack(old, true);
            }
            if (old_size)   /* not for realloc(NULL, n): a malloc, as the alloc hook */
                exo_carat_shadow_clear((uintptr_t)p + old_size, size - old_size);
            track(p, size, EXO_CARAT_HEAP, site);
            /* the pointers old held are in p now */
            if (old && sets_in_use()) {   /* realloc(NULL, n), a malloc, copied nothing: no scan, no flush */
                pthread_mutex_lock(&exo_carat.lock);
                exo_carat_flush_own();   /* older than the scan: applied first (hook_copy) */
                /* A block the runtime never saw: whatever looks like a pointer (with the
                 * shadow, taken there above). */
                if (old_size)
                    exo_carat_scan_known((uintptr_t)p, (uintptr_t)old, old_size, true);
                else if (!exo_carat_shadow_on)
                    exo_carat_scan_copy((uintptr_t)p, (uintptr_t)p, size);
                pthread_mutex_unlock(&exo_carat.lock);
            }
        }
    }
    exo_carat_realloc_close();   /* old's memory is no longer ours: others may track it */
    carat_leave();   /* the bracket exo_carat_hook_realloc_begin opened */
}

EXO_API void exo_carat_hook_free(void *p)
{
    untrack(p, false);
}

EXO_API void exo_carat_hook_delete(void *p)
{
    if (exo_carat_cxx_new_is_malloc())   /* else a replacement's: new did not track it */
        exo_carat_hook_free(p);
}

EXO_API void exo_carat_hook_global(void *p, uint64_t size, const char *name)
{
    track(p, size, EXO_CARAT_GLOBAL, name);
}

EXO_API void exo_carat_hook_stack_alloc(void *p, uint64_t size, const char *site)
{
    struct carat_tls *t = &exo_carat_tls;
    uint32_t d = t->stack_depth;
    if (d < CARAT_STACK_OBJS)
        t->stack_objs[d] = (struct carat_stack_obj){ (uintptr_t)p, size ? size : 1, site };
    t->stack_depth = d + 1;   /* counted when released (struct carat_thread) */
}

/* Every object of the returning frame and of deeper frames lies below its return address,
 * every object of its callers above. Objects past CARAT_STACK_OBJS were only counted: for
 * those the frame's own count is trusted. */
EXO_API void exo_carat_hook_stack_release(void *frame_end, uint64_t n)
{
    struct carat_tls *t = &exo_carat_tls;
    uint32_t was = t->stack_depth, d = was;
    for (; d > CARAT_STACK_OBJS && n > 0; n--)
        d--;
    if (d <= CARAT_STACK_OBJS)
        while (d > 0 && t->stack_objs[d - 1].base < (uintptr_t)frame_end)
            d--;
    /* Registered, so that exo_carat_get_stats finds the count (and thread_gone adds it up). */
    if (__builtin_expect(t->thread != NULL, 1) || exo_carat_thread_self())
        __atomic_store_n(&t->stack_released, t->stack_released + (was - d), __ATOMIC_RELAXED);
    else
        atomic_fetch_add_explicit(&exo_carat.count.stack_objects, was - d, memory_order_relaxed);
    t->stack_depth = d;
}

/* Append to t's log, in the order exo_carat_claim_inflight expects of an append a move may
 * interrupt: value, slot, count (the plugin's inline append does the same). */
static inline void log_append(struct carat_thread *t, uintptr_t slot, uintptr_t value)
{
    uint32_t n = t->n;
    t->log[n].value = value;
    atomic_signal_fence(memory_order_seq_cst);
    t->log[n].slot = slot;
    atomic_signal_fence(memory_order_seq_cst);
    t->n = n + 1;
}

/* The escape hook's rare cases: the thread's first escape, a full log, no memory for a log.
 * Out of line, so that the common case saves no registers. */
static __attribute__((noinline)) void escape_slow(uintptr_t slot, uintptr_t value)
{
    carat_enter();
    struct carat_thread *t = exo_carat_thread_self();
    if (t && t->n == CARAT_LOG_CAP) {
        pthread_mutex_lock(&exo_carat.lock);
        exo_carat_flush_thread(t, true);   /* every store it announces is done */
        pthread_mutex_unlock(&exo_carat.lock);
    }
    if (t) {
        /* Into the log even after a flush: this store is not done yet (the hook comes
         * first), so its slot must not be where a purge can see it. */
        log_append(t, slot, value);
    } else {
        pthread_mutex_lock(&exo_carat.lock);
        exo_carat_note_escape(slot, value, false);
        /* under the lock, as flushes add to the count without a locked instruction */
        atomic_fetch_add_explicit(&exo_carat.count.escapes, 1, memory_order_relaxed);
        pthread_mutex_unlock(&exo_carat.lock);
    }
    carat_leave();
}

EXO_API void exo_carat_hook_escape(void *slot, const void *value)
{
    /* Two kinds of store need no record, and are most of them in some programs (a regex
     * matcher's backtracking stack in its frame, integers that the plugin could not tell
     * from pointers):
     * - into a live frame of this thread's stack (between this call's frame and the stack's
     *   end; a handler on an alternate stack is not below stack_lo and is not skipped):
     *   a move scans every stopped thread's stack and patches the words there;
     * - of a value in no tracked allocation, nor one past the end of one, now: it can only
     *   come to be in one by being stored again. */
    struct carat_tls *tls = &exo_carat_tls;
    uintptr_t frame = (uintptr_t)__builtin_frame_address(0);
    if (frame >= tls->stack_lo && (uintptr_t)slot >= frame && (uintptr_t)slot < tls->stack_end)
        return;
    uintptr_t lo = __atomic_load_n(&exo_carat.table.lo, __ATOMIC_RELAXED);
    uintptr_t hi = __atomic_load_n(&exo_carat.table.hi, __ATOMIC_RELAXED);
    if ((uintptr_t)value - lo > hi - lo)
        return;
    if (exo_carat_shadow_on && exo_carat_shadow_escape((uintptr_t)slot, (uintptr_t)value))
        return;
    struct carat_thread *t = tls->thread;
    if (__builtin_expect(!t || t->n == CARAT_LOG_CAP, 0)) {
        escape_slow((uintptr_t)slot, (uintptr_t)value);
        return;
    }
    /* No bracket: a move that stops the thread half-way finds the entry (claim_inflight). */
    log_append(t, (uintptr_t)slot, (uintptr_t)value);
}

/* Does any word the copy scans (at 8-byte offsets of src) look like a pointer into
 * [lo, hi)? Read without the lock: the program is about to read src itself. */
CARAT_NO_ASAN static bool any_pointer_like(const void *src, uint64_t len)
{
    uintptr_t lo = __atomic_load_n(&exo_carat.table.lo, __ATOMIC_RELAXED);
    uintptr_t hi = __atomic_load_n(&exo_carat.table.hi, __ATOMIC_RELAXED);
    for (uint64_t off = 0; off + 8 <= len; off += 8) {
        uintptr_t v;
        memcpy(&v, (const char *)src + off, sizeof v);
        if (v - lo < hi - lo)
            return true;
    }
    return false;
}

EXO_API void exo_carat_hook_copy(void *dst, const void *src, uint64_t len)
{
    if (len < sizeof(void *) || !src || !dst)
        return;
    /* Most copies carry no pointer at all (Lua's strings, a matcher's text): both scans
     * below would note nothing, and then the order of this thread's log against the copy
     * does not matter either, so neither the lock nor a flush is needed. A logged store to
     * a slot the copy overwrites stays in the map as a stale slot, as it would after the
     * flush: a move patches only a slot that still holds its recorded value. */
    /* Bracketed from here on: the scans below keep values derived from dst and src in
     * registers (a shadow address, an index from the shadow's start), which no move can
     * patch, as they point into no block. A move that stopped the thread inside them moved
     * the block under a patched dst while the scan went on at the old one's offsets:
     * SQLite's speedtest1 in WAL mode faulted in the shadow's copy scan, 5 runs in 150
     * at 10,000 moves a second. (any_pointer_like, read the same way, could miss the
     * pointers of a source moved under it; not seen to, as such.) */
    carat_enter();
    if (!any_pointer_like(src, len)) {
        carat_leave();
        return;
    }
    if (exo_carat_shadow_on) {
        /* Memory the runtime knows nothing of (the thread's stack, whose stores into its
         * own frames have no shadow; an uninstrumented library's data): every word that
         * may be a pointer is taken, as scan_copy does. */
        struct carat_tls *tls = &exo_carat_tls;
        if (!tls->thread)
            exo_carat_thread_self();   /* for its stack's bounds */
        bool unknown = (uintptr_t)src - tls->stack_lo < tls->stack_end - tls->stack_lo;
        if (!unknown) {
            pthread_mutex_lock(&exo_carat.lock);
            /* its pending blocks are tracked memory too */
            unknown = !exo_carat_alloc_table_find(&exo_carat.table, (uintptr_t)src) &&
                      !exo_carat_pending_own_holds((uintptr_t)src);
            pthread_mutex_unlock(&exo_carat.lock);
        }
        exo_carat_shadow_copy_hook((uintptr_t)dst, (uintptr_t)src, len, unknown);
        if (!sets_in_use()) {
            carat_leave();
            return;
        }
    }
    pthread_mutex_lock(&exo_carat.lock);
    /* The scan writes the table directly: this thread's logged escapes are older and must
     * go in first. Applied later, a logged store to a slot the copy then overwrote would
     * put the slot's old value back, and a move would leave the slot unpatched (SQLite's
     * lookaside slots are stored to, freed and copied into again all the time). */
    exo_carat_flush_own();
    /* Out of tracked memory (a stack, an uninstrumented library's data) the runtime heard of
     * no store: every word that points into an allocation is taken (with the shadow, taken
     * there already: only the escape sets' own slots are carried). */
    if (exo_carat_alloc_table_find(&exo_carat.table, (uintptr_t)src))
        exo_carat_scan_known((uintptr_t)dst, (uintptr_t)src, len, false);
    else if (!exo_carat_shadow_on)
        exo_carat_scan_copy((uintptr_t)dst, (uintptr_t)src, len);
    pthread_mutex_unlock(&exo_carat.lock);
    carat_leave();
}

EXO_API void exo_carat_hook_rearranged(void *base, uint64_t len)
{
    if (base && len >= sizeof(void *))   /* the sort moved words the shadow does not know */
        exo_carat_shadow_take((uintptr_t)base, (uintptr_t)base, len, exo_carat.table.lo,
                              exo_carat.table.hi);
    if (base && len >= sizeof(void *) && sets_in_use()) {
        pthread_mutex_lock(&exo_carat.lock);
        exo_carat_flush_own();
        exo_carat_scan_copy((uintptr_t)base, (uintptr_t)base, len);
        pthread_mutex_unlock(&exo_carat.lock);
    }
    carat_leave();   /* the bracket exo_carat_hook_realloc_begin opened before the call */
}

EXO_API void exo_carat_hook_pin(const void *p)
{
    carat_ensure_init();
    carat_enter();
    pthread_mutex_lock(&exo_carat.lock);
    struct alloc *a = exo_carat_lookup((uintptr_t)p);
    if (a && a->kind == EXO_CARAT_HEAP && !a->pinned) {
        a->pinned = 1;
        exo_carat_alloc_table_unconsider(&exo_carat.table, a);
        atomic_fetch_add(&exo_carat.count.pinned, 1);
    }
    pthread_mutex_unlock(&exo_carat.lock);
    carat_leave();
}
