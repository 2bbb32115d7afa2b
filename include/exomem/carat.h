/* CARAT: compiler- and runtime-based address translation (Suchy et al., PLDI 2020), in user
 * space.
 *
 * A program compiled with the exomem CARAT plugin (`exomem-cc`, see docs/carat.md) tells
 * this runtime about every allocation (heap, globals, stack objects whose address escapes),
 * every pointer it stores into memory (an "escape"), and checks its loads, stores and calls
 * against the process's protection regions (guards). With that knowledge the runtime can
 * move a live allocation: it stops every thread, patches every escaped pointer and every
 * register and stack word that points into the allocation, copies it and frees the old copy.
 *
 * What differs from the paper: the program runs on virtual addresses under the kernel's
 * paging as usual (user space cannot turn paging off), so the regions are what this runtime
 * is told to enforce, not physical memory, and a move moves an allocation between heap
 * blocks rather than physical pages.
 *
 * Calls return 0 or a negative -EXO_ code and set errno, like the rest of exomem. The
 * exo_carat_hook_* and exo_carat_guard* functions are the plugin's calls into the runtime;
 * they never fail (a guard that fails reports the violation and raises SIGSEGV).
 */
#ifndef EXOMEM_CARAT_H
#define EXOMEM_CARAT_H

#include <exomem/error.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Access rights of a protection region, and the access a guard checks. */
enum {
    EXO_CARAT_READ = 1,
    EXO_CARAT_WRITE = 2,
    EXO_CARAT_EXEC = 4,
};

/* One protection region: [base, base + len) with rights (EXO_CARAT_READ|WRITE|EXEC). */
struct exo_carat_region {
    uintptr_t base;
    uintptr_t len;
    int rights;
};

/* Replace the process's protection regions with the n regions given (any order; they must
 * not overlap). n = 0 goes back to the default: the whole user address space but its first
 * page, readable and writable. With one region guards compare inline; with more they
 * search a sorted array (exo_carat_region_lookup). Errors: -EXO_EINVAL (overlapping or
 * empty region, bad rights, n over 65536), -EXO_ENOMEM. Blocks while a move is under way;
 * thread-safe (guards running meanwhile see the old or the new set, never a mix). */
int exo_carat_set_regions(const struct exo_carat_region *regions, size_t n);

/* The rights every byte of [addr, addr + len) has: those of the region that holds it, or
 * the rights common to regions that touch end to end and together hold it; 0 if some byte
 * is in no region. Never fails; thread-safe, does not block. */
int exo_carat_region_lookup(uintptr_t addr, uintptr_t len);

/* What the runtime knows of the allocation that contains addr. */
struct exo_carat_alloc_info {
    uintptr_t base;        /* its first byte */
    uintptr_t size;        /* its length in bytes: for a heap block, all malloc gave
                              (malloc_usable_size), which may exceed the size asked for */
    int kind;              /* EXO_CARAT_HEAP, EXO_CARAT_GLOBAL or EXO_CARAT_STACK */
    uint64_t escapes;      /* memory slots known to hold a pointer into it */
    const char *site;      /* where it was allocated ("file:line" or a function name) */
};
enum { EXO_CARAT_HEAP = 1, EXO_CARAT_GLOBAL = 2, EXO_CARAT_STACK = 3 };

/* Fill *info for the tracked allocation containing addr. Pending escape records and the
 * calling thread's pending blocks are processed first, so `escapes` is current; another
 * thread's pending block is found by a search of its ring. Stack objects are kept per thread: only the
 * calling thread's are found, with escapes 0 (not counted: they never move). Errors: -EXO_ENOENT (no tracked allocation
 * holds addr). Thread-safe; takes the runtime's lock. */
int exo_carat_alloc_find(const void *addr, struct exo_carat_alloc_info *info);

/* Buckets of exo_carat_stats.escape_hist: 0 escapes, 1, 2-3, 4-7, ..., 2^14 and more. */
#define EXO_CARAT_ESCAPE_BUCKETS 16

/* Counters of the runtime since start. */
/* Why a move was refused (exo_carat_stats.refused_by): each such move changed nothing. */
enum exo_carat_refusal {
    EXO_CARAT_REFUSED_NO_COPY,   /* no free block at the block's address modulo its alignment */
    EXO_CARAT_REFUSED_LOGGED,    /* too many stores into the block logged and not yet applied */
    EXO_CARAT_REFUSED_DERIVED,   /* a stopped thread held an address derived from the block */
    EXO_CARAT_REFUSED_LIBC,      /* a thread stopped in the C library held the block in a
                                  * call-clobbered register (its memory functions at work) */
    EXO_CARAT_REFUSED_ALTSTACK,  /* a thread stopped on its alternate signal stack */
    EXO_CARAT_REFUSALS
};

struct exo_carat_stats {
    /* Live tracked allocations. With the escapes in the shadow, another thread's newest
     * small blocks count once its ring of pending ones is drained (docs/carat-shadow.md). */
    uint64_t allocations;
    uint64_t allocs_total;     /* allocation events seen (heap and globals) */
    uint64_t stack_objects_total; /* stack objects whose address escaped, registered */
    uint64_t frees_total;      /* free events seen */
    uint64_t escapes_total;    /* escape events seen (pointer stores reported) */
    uint64_t escapes_live;     /* slots in the escape map now */
    uint64_t table_bytes;      /* memory the allocation table and escape map use */
    uint64_t table_peak_bytes; /* the most table_bytes has been */
    /* Allocations by their number of escapes (the paper's Figure 5): those freed, counted
     * when freed, and those live now. Bucket b > 0 holds 2^(b-1) to 2^b - 1 escapes. */
    uint64_t escape_hist[EXO_CARAT_ESCAPE_BUCKETS];
    uint64_t guard_slow;       /* guards that left the inline fast path */
    uint64_t moves;            /* completed moves */
    uint64_t moves_refused;    /* moves refused: the sum of refused_by */
    uint64_t refused_by[EXO_CARAT_REFUSALS];   /* moves refused, by enum exo_carat_refusal */
    uint64_t move_ns;          /* time spent in moves, world stopped */
    /* Writes found in the old copies of moved blocks (EXOMEM_CARAT_QUARANTINE): writes
     * through pointers a move did not patch. 0 without the quarantine. */
    uint64_t stale_writes;
    /* Heap allocations pinned because the program formatted their address as text
     * (exo_carat_hook_pin): never moved. */
    uint64_t pinned;
};

/* Fill *st. Never fails; thread-safe, does not block (counters may lag by one event). */
void exo_carat_get_stats(struct exo_carat_stats *st);

/* Cost breakdown of the last move (the paper's Table 3), in nanoseconds. */
struct exo_carat_move_cost {
    uint64_t stop_ns;       /* signalling the other threads and waiting for all to park */
    uint64_t find_ns;       /* flushing escape logs and finding the allocation */
    uint64_t patch_ns;      /* patching escaped pointers */
    uint64_t register_ns;   /* patching the parked threads' registers and stacks */
    uint64_t copy_ns;       /* copying the data */
    uint64_t resume_ns;     /* releasing the threads */
    uint64_t patched;       /* pointers patched (escapes + registers + stack words) */
    uint64_t threads;       /* threads stopped */
};

/* Move the heap allocation that contains addr to freshly allocated memory (malloc), while
 * every other thread of the process is stopped: each escaped pointer into it, and each
 * register or stack word of a stopped thread (and of the caller's stack) that points into
 * it, is changed to point to the same offset of the new copy; the old block is freed after
 * the threads resume (or, with EXOMEM_CARAT_QUARANTINE, kept filled for a while to catch
 * pointers the move missed: docs/carat.md). *new_base (may be NULL) gets the new address of the allocation's
 * first byte, still its address when the call returns (the mover's own moves wait until
 * then; a later one patches *new_base like any other word); *cost (may be NULL) the breakdown. Errors: -EXO_ENOENT (addr is in no tracked
 * heap allocation), -EXO_ENOMEM, -EXO_EAGAIN (the allocation was freed or resized while
 * the world stopped, or a stopped thread held an address derived from it but outside it,
 * such as a loop's base or bound, that no patching can recognise, or a thread stopped on
 * its alternate signal stack (in a handler, or a coroutine run on that memory) and where
 * its own stack is could not be found:
 * nothing moved; try again later), -EXO_EINUSE (the allocation is pinned: the program formatted its address
 * as text, exo_carat_hook_pin), -EXO_EBUSY (a thread did not stop within a second:
 * nothing moved). Blocks: stops and resumes all threads; one move at a time (others wait).
 * Thread-safe. Must not be called from a signal handler. */
int exo_carat_move(const void *addr, void **new_base, struct exo_carat_move_cost *cost);

/* The heap allocation with the most escapes (the paper's worst case for a move), or NULL
 * if none is tracked. Never fails; thread-safe. */
void *exo_carat_worst_allocation(void);

/* Start a thread that moves the worst-case allocation rate times a second until
 * exo_carat_mover_stop() (EXOMEM_CARAT_MOVES=rate starts it at program start in
 * instrumented programs). Errors: -EXO_EINVAL (rate not in 1..1000000), -EXO_EEXIST (one is
 * running), -EXO_ENOMEM. Thread-safe. */
int exo_carat_mover_start(double rate);
/* Stop the mover thread and wait for it; no-op if none runs. Never fails. */
void exo_carat_mover_stop(void);

/* ---- the plugin's calls (not for hand-written code) ---- */

/* An allocation of size bytes at p was made at site (NULL p: a failed allocation, ignored).
 * Waits (yielding) while another thread's realloc that freed p's memory is still before
 * the end of its hook. */
void exo_carat_hook_alloc(void *p, uint64_t size, const char *site);
/* The same for C++'s operator new (every form): tracked only when that operator new gives
 * malloc's blocks (the C++ library's, or one defined by the allocator that defines malloc),
 * not when the program replaced it with its own (docs/carat.md, "C++"). */
void exo_carat_hook_alloc_new(void *p, uint64_t size, const char *site);
/* Before realloc(old, ...) (or getline; qsort with NULL old): no move may stop this thread,
 * nor may another thread track a block in old's memory, until exo_carat_hook_realloc. */
void exo_carat_hook_realloc_begin(void *old);
/* realloc(old, size) returned p (old may be NULL; NULL p: failed, old unchanged). */
void exo_carat_hook_realloc(void *old, void *p, uint64_t size, const char *site);
/* p is about to be freed (NULL: nothing). */
void exo_carat_hook_free(void *p);
/* The same for C++'s operator delete (every form), paired with exo_carat_hook_alloc_new:
 * nothing when the program replaced operator new. */
void exo_carat_hook_delete(void *p);
/* A global of size bytes at p (module constructors, before main). */
void exo_carat_hook_global(void *p, uint64_t size, const char *name);
/* A stack object whose address escapes: made at function entry, gone at return. */
void exo_carat_hook_stack_alloc(void *p, uint64_t size, const char *site);
/* A function that made n stack objects returns; its frame ends at frame_end (the address of
 * its return address): its objects are gone, and so are any below it that frames skipped
 * by a longjmp left. One call per return, not one per object. */
void exo_carat_hook_stack_release(void *frame_end, uint64_t n);
/* The pointer value is about to be stored into *slot (called before the store, so that a
 * move in between finds the slot). */
void exo_carat_hook_escape(void *slot, const void *value);
/* len bytes are about to be copied from src to dst (memcpy, memmove): the pointers among
 * them escape to dst. */
void exo_carat_hook_copy(void *dst, const void *src, uint64_t len);
/* A module built to keep its escapes in the shadow (EXOMEM_CARAT_PARTS=shadow) calls this
 * from its first constructor: the runtime reserves the shadow (idempotent, thread-safe).
 * If it cannot (something mapped there, a program not position-independent) it prints why
 * and aborts: the module's stores would fault. */
void exo_carat_hook_shadow_init(void);
/* qsort rearranged the len bytes at base (bracketed by exo_carat_hook_realloc_begin before
 * it: no move came in between): the pointers there escape with their new values. */
void exo_carat_hook_rearranged(void *base, uint64_t len);
/* p is about to be formatted as text (a %p conversion): the heap allocation it points into
 * is pinned, never moved again, since no move can patch its address in the text (a test
 * harness that hands handles to a script as strings, as SQLite's testfixture does). */
void exo_carat_hook_pin(const void *p);

/* The guard's slow path, called by inline guards when [addr, addr + len) is outside the
 * one-region fast path (or, for a constant len, in its last EXO_CARAT_FAST_MIN_SPAN bytes);
 * returns if the access is allowed, else reports and raises SIGSEGV. */
void exo_carat_guard_slow(uintptr_t addr, uintptr_t len, int access, const char *site);
/* (On x86-64 the plugin calls exo_carat_guard_slow_pm instead: the same function through an
 * assembly entry that keeps every general-purpose register but r11, LLVM's preserve_most
 * convention; not for C callers.) */
/* The one-region fast path the inline guards compare with: an access [a, a + len) with
 * a - exo_carat_fast_base <= exo_carat_fast_span - len (unsigned) needs no call. The span is
 * never below EXO_CARAT_FAST_MIN_SPAN, so that a constant len up to it needs one compare,
 * with exo_carat_fast_span - EXO_CARAT_FAST_MIN_SPAN (the same for every such access); when
 * there is no fast path the base is EXO_CARAT_FAST_CLOSED, an address no access can have.
 * exo_carat_fast_limit is that value, kept by the runtime for guards that read it from
 * memory rather than keeping it in a register. */
extern uintptr_t exo_carat_fast_base, exo_carat_fast_span, exo_carat_fast_limit;
/* The one-compare form the plugin uses for a load, store or call (constant len up to
 * EXO_CARAT_FAST_MIN_SPAN): a <= exo_carat_fast_end needs no call. It is the fast path's
 * end less EXO_CARAT_FAST_MIN_SPAN when its region starts at or below the lowest address
 * the kernel maps (vm.mmap_min_addr), so that an access below the region that passes it
 * faults in the hardware, with SIGSEGV as a guard's violation raises but without its
 * report; else 0, and every such guard takes the slow path (exact). Only a program with
 * CAP_SYS_RAWIO that maps memory below vm.mmap_min_addr itself can reach memory there
 * that no region holds: build it with -mllvm -carat-guard-one-compare=false. */
extern uintptr_t exo_carat_fast_end;
/* What the plugin's versioned code (a loop or function entered after one check that every
 * address its accesses can form is allowed) checks a reach [a, b) against: b -
 * exo_carat_fast_reach_base <= exo_carat_fast_reach, with a - exo_carat_fast_reach_base
 * not above that (no wrap). Only single accesses (loads and stores of at most
 * EXO_CARAT_FAST_MIN_SPAN bytes) are dropped on it, so it is open where every such access
 * faults in the hardware: below the fast path's region when that starts at or below the
 * lowest address the kernel maps (as for exo_carat_fast_end), and above it when it runs to
 * the top of user space (2^47) and the kernel cannot map above that (no 5-level paging:
 * the addresses there are non-canonical or the kernel's; asked at start-up with a probe
 * mapping at 2^47, since a processor with 5-level paging may run a kernel without). Open
 * at the bottom, the base is minus EXO_CARAT_FAST_OPEN (a reach from a null pointer,
 * whose code the program never runs, passes); open at the top, the reach is
 * EXO_CARAT_FAST_OPEN past the region's end or more (memory mapped near the top, thread
 * arenas and big blocks, passes reaches that run past it). Otherwise they are the fast
 * path's base and span. */
extern uintptr_t exo_carat_fast_reach_base, exo_carat_fast_reach;
#define EXO_CARAT_FAST_OPEN ((uintptr_t)1 << 62)
#define EXO_CARAT_FAST_MIN_SPAN ((uintptr_t)4096)
#define EXO_CARAT_FAST_CLOSED ((uintptr_t)1 << 63)
/* The runtime's state that the plugin's inline hooks read and write in place of calls: the
 * allocation table's bounds (the first two words of exo_carat) and the calling thread's
 * escape log and stack objects (exo_carat_tls, initial-exec TLS). Their layout is the
 * runtime's (src/carat/carat_abi.h); opaque here, and not for programs to touch. */
struct carat_runtime;
extern struct carat_runtime exo_carat;
#ifndef __cplusplus
struct carat_tls;
extern _Thread_local struct carat_tls exo_carat_tls;
#endif

#ifdef __cplusplus
}
#endif
#endif
