/* The CARAT runtime's shared state: the allocation table under one lock, the registered
 * threads with their escape logs, and the "in the runtime" flag that keeps a stop request
 * from parking a thread while it holds the lock. */
#ifndef EXOMEM_CARAT_INTERNAL_H
#define EXOMEM_CARAT_INTERNAL_H

#include <exomem/carat.h>
#include "carat/alloc_table.h"
#include "carat/carat_abi.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* For the code that reads the program's memory conservatively (stacks, stale slots). */
#define CARAT_NO_ASAN __attribute__((no_sanitize_address, no_sanitize("undefined")))

/* Escapes are logged per thread and applied to the table in batches (as the paper does):
 * the map changes fast, the log is cheap, and a move flushes every log first. The plugin
 * appends to the log inline (carat_abi.h): an entry is written value first, then slot, and
 * counted last, with no call and no "in the runtime" bracket, so a move may stop the thread
 * half-way. Every entry at or past n is zero (a flush clears what it applied), so the mover
 * can tell what the entry at n holds (exo_carat_claim_inflight). */
#define CARAT_LOG_CAP EXO_CARAT_ABI_LOG_CAP
struct escape_entry {
    uintptr_t slot, value;
};

struct carat_tls;

/* The length of a thread's ring of pending allocations (a power of two), of which the
 * oldest quarter is indexed when it is full. Of Lua's workload's blocks, 79% are
 * freed within 16,384 allocations of their own, 90% within 65,536. */
#define CARAT_PENDING_CAP 65536
#define CARAT_NODE_CACHE 256

/* A thread's pending allocations (pending.c): most of them are freed again before the ring
 * fills, without the lock. Appended by the thread only; drained under the lock by the
 * thread, or by a move with the world stopped. Its own mapping of about 1 MiB, made at the
 * thread's first such block: a thread of a program without the shadow has none. */
struct carat_pending {
    struct alloc *ring[CARAT_PENDING_CAP];   /* [first, end), counted from 0 */
    uint32_t first, end;
    /* Nodes ready for its next allocations. Never full: the thread holds at most its
     * pending blocks' nodes and one refill (CARAT_NODE_CACHE / 2) taken when it had none. */
    uint32_t nspare;
    struct alloc *spare[CARAT_PENDING_CAP + CARAT_NODE_CACHE];
};

struct carat_thread {
    struct escape_entry log[CARAT_LOG_CAP];
    uint32_t n;
    /* Stack objects this thread registered and released since: its tls's stack_released
     * (a shared counter costs a locked add per call of functions like oniguruma's match_at);
     * the live ones are its tls's stack_depth. */
    /* An entry a stopped thread had half written (its value, not yet its slot), found by
     * exo_carat_claim_inflight: a move patches its value like a register. NULL: none. */
    struct escape_entry *partial;
    const struct carat_tls *tls;   /* the thread's: read by exo_carat_get_stats */
    struct carat_thread *next, *prev;
    /* Heap blocks it allocated and the table has not indexed yet (pending.c); NULL until
     * its first one (never, without the shadow). */
    struct carat_pending *pend;
    uint64_t allocs, frees;                /* those it counted without the lock */
    /* The block its realloc in flight may free, [realloc_lo, realloc_hi) (realloc_hi 0:
     * none): realloc_window.c. */
    uintptr_t realloc_lo, realloc_hi;
};
_Static_assert(sizeof(struct escape_entry) == EXO_CARAT_ABI_ENTRY_BYTES &&
                   offsetof(struct escape_entry, slot) == EXO_CARAT_ABI_ENTRY_SLOT &&
                   offsetof(struct escape_entry, value) == EXO_CARAT_ABI_ENTRY_VALUE &&
                   offsetof(struct carat_thread, n) == EXO_CARAT_ABI_THREAD_N,
               "the escape log's layout is what the plugin's inline append writes");

/* Stack objects whose address escapes are kept per thread, not in the shared table: they
 * never move, and a function called at every position of a text (oniguruma's match_at
 * registers eleven) would otherwise insert and remove table nodes under the runtime's
 * lock at every call. The newest CARAT_STACK_OBJS are recorded; deeper ones only counted.
 * The plugin registers them inline (carat_abi.h). */
#define CARAT_STACK_OBJS EXO_CARAT_ABI_STACK_OBJS
struct carat_stack_obj {
    uintptr_t base, size;
    const char *site;
};

struct carat_tls {
    struct carat_thread *thread;          /* NULL until the thread's first escape */
    uintptr_t stack_lo, stack_end;        /* its stack, found then (0, 0: not known) */
    uint32_t stack_depth;                 /* live stack objects of this thread */
    volatile sig_atomic_t in_runtime;     /* depth: a park request waits until it is 0 */
    volatile sig_atomic_t park_pending;   /* one came while in_runtime */
    uint32_t parked_epoch;                /* the last stop this thread arrived at */
    uint64_t stack_released;              /* stack objects registered and released since */
    struct carat_stack_obj stack_objs[CARAT_STACK_OBJS];
    uintptr_t own_sp;   /* its stack pointer at a stop that found it off any alternate signal
                         * stack: an address in its own stack (0: none yet) */
};
_Static_assert(offsetof(struct carat_tls, thread) == EXO_CARAT_ABI_TLS_THREAD &&
                   offsetof(struct carat_tls, stack_lo) == EXO_CARAT_ABI_TLS_STACK_LO &&
                   offsetof(struct carat_tls, stack_end) == EXO_CARAT_ABI_TLS_STACK_END &&
                   offsetof(struct carat_tls, stack_depth) == EXO_CARAT_ABI_TLS_STACK_DEPTH &&
                   offsetof(struct carat_tls, stack_released) ==
                       EXO_CARAT_ABI_TLS_STACK_RELEASED &&
                   offsetof(struct carat_tls, stack_objs) == EXO_CARAT_ABI_TLS_STACK_OBJS &&
                   sizeof(struct carat_stack_obj) == EXO_CARAT_ABI_STACK_OBJ_BYTES &&
                   offsetof(struct carat_stack_obj, base) == EXO_CARAT_ABI_STACK_OBJ_BASE &&
                   offsetof(struct carat_stack_obj, size) == EXO_CARAT_ABI_STACK_OBJ_SIZE &&
                   offsetof(struct carat_stack_obj, site) == EXO_CARAT_ABI_STACK_OBJ_SITE,
               "the thread-local layout is what the plugin's inline code reads and writes");
extern _Thread_local struct carat_tls exo_carat_tls __attribute__((tls_model("initial-exec")));

struct carat_counters {
    _Atomic uint64_t allocs, frees, escapes, guard_slow, moves, move_ns,
        stack_objects, stale_writes, pinned;
    _Atomic uint64_t refused_by[EXO_CARAT_REFUSALS];   /* their sum: moves refused */
};

struct carat_runtime {
    struct alloc_table table;        /* first: the plugin reads its bounds (carat_abi.h) */
    pthread_mutex_t lock;            /* the table, the thread list, the logs' flushes */
    struct carat_thread *threads;
    struct carat_counters count;
};
extern struct carat_runtime exo_carat;
_Static_assert(offsetof(struct carat_runtime, table) + offsetof(struct alloc_table, lo) ==
                       EXO_CARAT_ABI_RUNTIME_LO &&
                   offsetof(struct carat_runtime, table) + offsetof(struct alloc_table, hi) ==
                       EXO_CARAT_ABI_RUNTIME_HI,
               "the table's bounds are where the plugin's inline filter reads them");

/* ---- the quarantine of old copies (quarantine.c, EXOMEM_CARAT_QUARANTINE) ---- */

/* A move has copied the block at old (span bytes) to now: keep the old copy filled with a
 * pattern instead of freeing it, after checking the copies kept before for writes. Returns
 * what the caller frees once the threads resume: old itself when the quarantine is off, the
 * copy it pushed out of a full quarantine, or NULL. World stopped, lock held. */
void *exo_carat_quarantine_keep(uintptr_t old, uintptr_t span, uintptr_t now, const char *site);
/* Print what the last check found (stderr). After the threads resume; mover thread only. */
void exo_carat_quarantine_report(void);

/* With EXOMEM_CARAT_REPORT set, append the process's counters to that file at exit (once
 * a process, however often asked; thread-safe). */
void exo_carat_report_at_exit(void);

/* Set up the runtime once (signal handler, thread key, a mover from EXOMEM_CARAT_MOVES). */
void exo_carat_init(void);
extern _Atomic bool exo_carat_ready;
static inline void carat_ensure_init(void)
{
    if (__builtin_expect(!atomic_load_explicit(&exo_carat_ready, memory_order_acquire), 0))
        exo_carat_init();
}

/* Bracket every runtime entry from instrumented code. They nest (a realloc is bracketed
 * from before the call to the end of its hook, and the hook's own steps bracket themselves):
 * the thread parks only when the outermost one ends. */
static inline void carat_enter(void)
{
    exo_carat_tls.in_runtime++;
    atomic_signal_fence(memory_order_seq_cst);
}
void exo_carat_park_self(void);
static inline void carat_leave(void)
{
    atomic_signal_fence(memory_order_seq_cst);
    exo_carat_tls.in_runtime--;
    atomic_signal_fence(memory_order_seq_cst);
    if (__builtin_expect(exo_carat_tls.park_pending && !exo_carat_tls.in_runtime, 0))
        exo_carat_park_self();
}

/* ---- reallocs in flight (realloc_window.c) ---- */

/* The calling thread is about to realloc old (NULL: nothing to publish): until
 * exo_carat_realloc_close, no other thread tracks a block in old's memory. */
void exo_carat_realloc_open(void *old);
/* The calling thread's hook has forgotten what realloc freed: others may track it now.
 * Nothing if it published nothing. */
void exo_carat_realloc_close(void);
/* The heap block [p, p + size) is about to be tracked: wait while another thread's realloc
 * that freed its memory has not closed (lock not held). One load when none is open. */
void exo_carat_realloc_wait(uintptr_t p, uint64_t size);
/* In a forked child (lock held): every range is dropped. The threads that published them
 * do not exist there and would never close them; the forking thread had none open (it is
 * not inside a realloc). */
void exo_carat_realloc_forget_all(void);

/* ---- fork (fork.c, mover.c) ---- */

/* Once, at the runtime's set-up: the fork handlers. */
void exo_carat_fork_init(void);
/* The mover's part of a fork: before it, no move in progress or asked for; in the child,
 * no mover thread (started again by the child's first move or its own rate). */
void exo_carat_mover_fork_prepare(void);
void exo_carat_mover_fork_parent(void);
void exo_carat_mover_fork_child(void);

/* ---- a block's usable size (usable_size.c) ---- */

/* The usable size of the heap block p, which malloc has just returned (so is in use): read
 * from glibc's chunk header once the program's first blocks showed that its malloc is
 * glibc's, else malloc_usable_size. Thread-safe, never blocks. */
uint64_t exo_carat_usable_size(void *p);

/* ---- where a move's copy goes (copy_place.c) ---- */

/* A move's copy keeps the block's address modulo this at least (and its alignment). */
#define EXO_CARAT_COPY_KEEP_LOW 256
/* What a copy of a block aligned to align keeps of its address: the address modulo this. */
static inline uintptr_t exo_carat_copy_modulo(uintptr_t align)
{
    return align > EXO_CARAT_COPY_KEEP_LOW ? align : EXO_CARAT_COPY_KEEP_LOW;
}
/* A malloc'd block for the copy of the span bytes at base (aligned to align): the same
 * address modulo exo_carat_copy_modulo(align) and the same usable size where the heap
 * allows. NULL: out of memory, or (*refused set) no fitting block could be had. Not
 * with the world stopped (it calls malloc); no lock needed. */
void *exo_carat_copy_place(uintptr_t base, uintptr_t align, uintptr_t span, bool *refused);

/* ---- C++'s operator new (cxx_new.c) ---- */

/* Whether the operator new the program calls gives malloc's blocks (the C++ library's, or
 * one defined with malloc by the same object): only then are the blocks of the new
 * family's call sites tracked, as a move frees with free. The dynamic loader is asked at
 * the first call (which may call malloc), a load after that. Thread-safe. */
bool exo_carat_cxx_new_is_malloc(void);

/* ---- pending allocations (pending.c) ---- */

/* The calling thread's record (its escape log), registered on first use (lock not held);
 * NULL if out of memory. */
struct carat_thread *exo_carat_thread_self(void);
/* Track the heap block p of size bytes without the lock, as a pending node of this thread,
 * if it can be: a small block on a 16-byte boundary, with the shadow's head words on.
 * false: the caller tracks it in the table. In the runtime (carat_enter). */
bool exo_carat_pending_track(uintptr_t p, uint64_t size, const char *site);
/* p is freed: if it is a pending block of this thread's, it is forgotten without the lock
 * and its size returned; 0 otherwise (the caller takes the locked path). In the runtime. */
uint64_t exo_carat_pending_untrack(uintptr_t p);
/* A pending block of any thread at p (lock held): exo_carat_pending_untrack's work for a
 * block another thread allocated; its size, or 0 if there is none. */
uint64_t exo_carat_pending_forget(uintptr_t p);
/* realloc kept the heap block p in place with size bytes: a pending block of this thread
 * gets its new size without the lock; another thread's, or one in the table, under the
 * lock (taken here). In the runtime. */
void exo_carat_pending_resize(uintptr_t p, uint64_t size, const char *site);
/* A pending node of any thread holding addr, or one ending at it (lock held; a search of
 * every thread's list: for the rare unaligned escapes only). */
struct alloc *exo_carat_pending_holding(uintptr_t addr);
/* The pending node an escape of value at slot goes into (lock held): the calling thread's
 * one holding value (or ending at it), or NULL. If another thread's block holds it, the
 * escape is kept aside and noted again after a drain (pending.c, strays); NULL. */
struct alloc *exo_carat_pending_escape_target(uintptr_t slot, uintptr_t value);
/* Does addr lie in one of the calling thread's pending blocks? Its newest are searched;
 * if none holds it, its ring is drained and the table asked (lock held). */
bool exo_carat_pending_own_holds(uintptr_t addr);
/* The allocation holding addr, for a query (lock held): the caller's own log and pending
 * blocks applied first; another thread's pending block found by a search (queries.c). */
struct alloc *exo_carat_lookup(uintptr_t addr);
/* Index t's pending blocks (lock held; by t itself, or with the world stopped). */
void exo_carat_pending_drain(struct carat_thread *t);
/* Every thread's (lock held, world stopped). */
void exo_carat_pending_drain_all(void);
/* Every thread's, stopping the world for it (lock not held; the caller not in the
 * runtime's bracket, or the stop waits for it). Nothing happens if the stop fails. */
void exo_carat_pending_drain_everyone(void);
/* Are any pending anywhere? (A count read without the lock: a hint.) */
bool exo_carat_pending_any(void);
/* A thread that ends gives back its spare nodes (lock held, after its drain). */
void exo_carat_pending_thread_gone(struct carat_thread *t);

/* Apply every registered thread's escape log to the table (lock held). Only while the
 * world is stopped: a running thread appends to its log without the lock. */
void exo_carat_flush_all(void);
/* World stopped, lock held, before the logs are read: a thread stopped inside the plugin's
 * inline append has written its entry at log[n] and not counted it; count it now, so that
 * it is applied (and kept, if it is a store into the block that moves) like the others. */
void exo_carat_claim_inflight(void);
/* Apply the calling thread's own log (lock held). Queries made while threads run use this:
 * what other threads logged since their last flush is not in the table yet. */
void exo_carat_flush_own(void);
/* Apply t's log (lock held). `settled`: every store the log announces has been done (the
 * log's own thread flushes it, outside a move), so sets that must grow may first be purged
 * of slots that hold something else now (exo_carat_escape_set_purge). A hook comes before
 * its store: while the world is stopped, a thread may sit between the two, and its slot,
 * not yet written, must not be purged. */
void exo_carat_flush_thread(struct carat_thread *t, bool settled);
/* Record that slot holds (or is about to hold) a pointer to value, if value is in a tracked
 * allocation (lock held). `settled` as for exo_carat_flush_thread. */
void exo_carat_note_escape(uintptr_t slot, uintptr_t value, bool settled);
/* Note, for every word of [src, src + len) that points into a tracked allocation, that the
 * same offset of dst will hold it (lock held). src == dst: the pointers a block holds. For
 * memory the runtime knows nothing of (a stack, data an uninstrumented library wrote). */
void exo_carat_scan_copy(uintptr_t dst, uintptr_t src, uint64_t len);
/* Copies out of tracked memory (lock held): note, for every word of [from, from + len) that
 * the runtime knows to be a pointer there (its escape set has that slot with that very
 * value), that the same offset of dst holds it too. Any other word that merely looks like
 * one is not taken: a TValue's type tag over the low byte of a stale pointer in its padding,
 * the value bytes Lua leaves in an emptied slot, glibc's links in a free chunk; a move would
 * rewrite them. Unknown words are still taken while another thread's log may hold their
 * stores; the caller applied its own log first. from_gone: the words were copied to dst already and from is freed (realloc, a
 * move): they are read at dst, and the old slots' entries are dropped. */
void exo_carat_scan_known(uintptr_t dst, uintptr_t from, uint64_t len, bool from_gone);

/* ---- stopping the world (world.c) ---- */

struct carat_parked {
    pid_t tid;
    void *ucontext;   /* the thread's registers, saved by the kernel on its stack */
    bool on_alternate_stack;   /* stopped in a handler on its alternate signal stack */
    uintptr_t own_stack;   /* then an address in its own stack, which holds the program's
                            * frames (0: not known) */
    /* Words at the top of a thread's stack mapping that are not the program's (move.c's
     * patch_stack_words): the thread's exo_carat_tls, and the C library's descriptor of
     * it, from its thread pointer up. */
    uintptr_t runtime_tls;
    uintptr_t thread_pointer;
};
/* Stop every thread of the process but the caller; *parked gets the array, *n its length.
 * -EXO_EBUSY if one did not stop within timeout_ns (then all are resumed). */
int exo_carat_world_stop(struct carat_parked **parked, int *n, uint64_t timeout_ns);
void exo_carat_world_resume(void);
int exo_carat_world_install(void);

/* ---- moves (move.c) and the mover thread (mover.c) ---- */
/* requester: the thread waiting in exo_carat_move for this move (0: the mover's own);
 * requester_floor: its stack pointer inside exo_carat_move, below which lie only the
 * runtime's and the C library's frames (0: not known). */
int exo_carat_move_now(uintptr_t addr, pid_t requester, uintptr_t requester_floor,
                       void **new_base, struct exo_carat_move_cost *cost);
uintptr_t exo_carat_worst_heap(void);   /* lock held */

#endif
