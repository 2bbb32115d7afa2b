/* Per-segment heaps.
 *
 * A segment used with these calls holds its own heap: all allocator state lives inside the
 * segment, from its base, so raw pointers stored in it stay valid in every process that
 * attaches it, and another process can go on allocating and freeing after this one exits.
 * The segment must be visible (switched in, SEG_RDWR) when these are called. Threads and
 * processes may share a heap; a process-shared robust mutex inside it serialises them.
 * Each thread also caches blocks of up to 4 KiB that it freed and hands them out again
 * without the mutex; a cached block is free for every other purpose (another seg_free of
 * it fails, the stats count it as free), and the cache goes back to the heap when the
 * thread exits, the process exits, or the thread calls seg_heap_stats() (each while the
 * segment is visible); a dead process's cached blocks are reclaimed by the next process
 * that runs out of space in the heap.
 *
 * Like malloc, the allocating calls return NULL and set errno on failure (ENOMEM, and
 * EFAULT for a segment that is not visible, EINVAL for a bad alignment); the precise exomem
 * code is available from exomem_last_error() and seg_heap_last_code(). A successful call
 * leaves exomem_last_error() as it was (read it only after a failure).
 *
 * Blocking and thread safety, for every call here: thread- and process-safe. A call waits
 * for the heap's mutex inside the segment while another thread or process is in a heap
 * call on the same segment (never longer than that call; a holder that died is detected and
 * the heap checked and repaired before use goes on). The segment's mapping is found without
 * a lock, except while another thread of the process switches, attaches or detaches: then
 * the call waits for that to finish (and a vas_switch() waits for calls under way, so the
 * heap is never unmapped under a call). No call waits for a segment lock or the registry.
 */
#ifndef EXOMEM_ALLOC_H
#define EXOMEM_ALLOC_H

#include <exomem/seg.h>

#ifdef __cplusplus
extern "C" {
#endif

struct seg_heap_stats {
    uint64_t heap_bytes;    /* bytes managed by the heap */
    uint64_t used_bytes;    /* bytes in live allocations, headers included */
    uint64_t free_bytes;    /* bytes in free chunks */
    uint64_t allocations;   /* live allocations */
    uint64_t free_chunks;   /* free chunks (fragmentation) */
};

/* Allocate `size` bytes, 16-byte aligned, in segment `sid`'s heap. NULL on failure: errno
 * ENOMEM (-EXO_ENOMEM: no free space), EFAULT (-EXO_ENOTMAPPED: sid not visible), EACCES
 * (-EXO_EACCES: attached read-only), or -EXO_ECORRUPT for a damaged heap header. */
void *seg_malloc(segid_t sid, size_t size);

/* Allocate n*size zeroed bytes: NULL with -EXO_ENOMEM if n*size overflows, other errors as
 * seg_malloc(). */
void *seg_calloc(segid_t sid, size_t n, size_t size);

/* Allocate `size` bytes aligned to `align` (a power of two, else NULL with -EXO_EINVAL);
 * other errors as seg_malloc(). */
void *seg_memalign(segid_t sid, size_t align, size_t size);

/* Resize an allocation of any segment heap, as realloc(). The heap is found from p, so p
 * must not be NULL (-EXO_EINVAL); use seg_malloc() for a first allocation. size 0 frees p
 * and returns NULL. On failure (-EXO_ENOMEM, -EXO_EINVAL for a foreign pointer,
 * -EXO_EACCES, -EXO_ECORRUPT) p is left as it was. */
void *seg_realloc(void *p, size_t size);

/* Free an allocation of any segment heap (found from p); NULL is a no-op. Returns 0, or
 * -EXO_EINVAL for a pointer that no visible segment heap handed out (or freed already),
 * -EXO_EACCES (its segment is attached read-only), -EXO_ECORRUPT. */
int seg_free(void *p);

/* Usable size of an allocation (at least what was asked). 0 for NULL or a foreign pointer;
 * never fails otherwise. */
size_t seg_malloc_usable_size(void *p);

/* Store or read the heap's root pointer: one pointer kept in the heap header so that a later
 * process can find the data structure (e.g. the head of a list). -EXO_ENOTMAPPED (not
 * visible), -EXO_EACCES (seg_set_root on a read-only attachment), -EXO_EINVAL (root NULL),
 * -EXO_ECORRUPT. seg_get_root of a heap never formatted gives NULL. */
int seg_set_root(segid_t sid, void *root);
int seg_get_root(segid_t sid, void **root);

/* Heap statistics, after checking the heap's consistency (-EXO_ECORRUPT if it is broken);
 * -EXO_ENOTMAPPED, -EXO_EINVAL (st NULL). Walks every chunk: time grows with the heap.
 * Gives the calling thread's cached blocks of the heap back first (other threads' and
 * processes' cached blocks count as free bytes and free chunks). */
int seg_heap_stats(segid_t sid, struct seg_heap_stats *st);

/* Allocate in the current VAS's heap segment (vas_ctl VAS_CTL_SET_HEAP, by default the
 * VAS's first SEG_RDWR segment), as seg_malloc(). NULL at home (-EXO_ENOTMAPPED) or without
 * a heap segment (-EXO_ENOHEAP). */
void *vas_malloc(size_t size);

/* vas_malloc() of n*size zeroed bytes; -EXO_ENOMEM if n*size overflows, other errors as
 * vas_malloc(). */
void *vas_calloc(size_t n, size_t size);

/* The exomem code of the last failed allocating call in this thread (negative), 0 if none.
 * Never fails or blocks. */
int seg_heap_last_code(void);

/* ---- The same heap in memory the caller maps itself ----
 *
 * For stores that keep their data somewhere other than a segment (a file the application
 * maps at a fixed address, say: apps/pstore). The heap's state lives in the memory, from its
 * base, so it must be mapped at the same address every time. Thread- and process-safe as
 * above (a robust mutex in the memory); the calls block only on that mutex. */
typedef struct exo_heap seg_heap;

/* Use [base, base+size) as a heap: format it if its header is all zero, else check the
 * header. -EXO_ECORRUPT if the header is not a heap's of this size, -EXO_EINVAL if size is
 * too small for a heap or an argument is NULL. *heap stays valid while the memory is mapped;
 * there is nothing to close. */
int seg_heap_open(void *base, size_t size, seg_heap **heap);

/* Allocate `size` bytes, 16-byte aligned: NULL with errno (ENOMEM) and seg_heap_last_code()
 * (-EXO_ENOMEM, -EXO_ECORRUPT, -EXO_EINVAL) on failure. */
void *seg_heap_malloc(seg_heap *heap, size_t size);

/* Free an allocation of `heap`; NULL is a no-op. -EXO_EINVAL for a pointer it did not hand
 * out (or freed already), -EXO_ECORRUPT if the heap around it is damaged. */
int seg_heap_free(seg_heap *heap, void *p);

/* 1 if p lies inside heap's allocation area, else 0 (a cheap range check; never blocks). */
int seg_heap_owns(seg_heap *heap, const void *p);

/* Check every chunk and free list (-EXO_ECORRUPT if broken); fill st when not NULL. */
int seg_heap_check(seg_heap *heap, struct seg_heap_stats *st);

#ifdef __cplusplus
}
#endif
#endif
