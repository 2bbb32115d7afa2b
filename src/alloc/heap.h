/* A heap that lives entirely inside one region of memory (a segment), pointers included.
 *
 * The region starts with a header (magic, version, size, a process-shared robust mutex, the
 * root pointer, free-list heads); chunks follow, each with boundary tags so neighbours
 * coalesce. Because state is addressed by absolute pointers, the region must always be
 * mapped at the same base, which exomem segments guarantee. All calls are thread-safe and
 * process-safe through the header's mutex; a holder that died is detected (EOWNERDEAD) and
 * the heap is checked before use continues.
 */
#ifndef EXOMEM_HEAP_H
#define EXOMEM_HEAP_H

#include <exomem/alloc.h>
#include <stddef.h>
#include <stdint.h>

struct exo_heap;

/* Use the region [base, base+size) as a heap: formats it if it is all-zero at the header
 * (a fresh segment), else validates the header. -EXO_ECORRUPT if the header is not a heap's
 * or its size disagrees, -EXO_EINVAL if size is too small to hold a heap. */
int exo_heap_open(void *base, size_t size, struct exo_heap **out);

/* The allocation calls set *code (code may be NULL) to 0, or to a negative exomem code when
 * they return NULL: -EXO_ENOMEM (also for sizes near SIZE_MAX, which never wrap), -EXO_EINVAL
 * (bad alignment, foreign pointer), -EXO_ECORRUPT. exo_heap_realloc(h, NULL, n) allocates;
 * exo_heap_realloc(h, p, 0) frees p and returns NULL with *code 0; on failure p is kept. */
void *exo_heap_malloc(struct exo_heap *h, size_t size, int *code);
void *exo_heap_memalign(struct exo_heap *h, size_t align, size_t size, int *code);
void *exo_heap_realloc(struct exo_heap *h, void *p, size_t size, int *code);
/* -EXO_EINVAL for a pointer not handed out by h (or already freed, where detectable). */
int exo_heap_free(struct exo_heap *h, void *p);
size_t exo_heap_usable_size(struct exo_heap *h, void *p);
/* Does p lie inside h's chunk area? */
int exo_heap_owns(struct exo_heap *h, const void *p);

int exo_heap_set_root(struct exo_heap *h, void *root);
void *exo_heap_get_root(struct exo_heap *h);

/* Walk every chunk and free list; 0 if consistent, else -EXO_ECORRUPT. Fills st if not
 * NULL. */
int exo_heap_check(struct exo_heap *h, struct seg_heap_stats *st);

/* As exo_heap_open(), for a region mapped read-only: validates and never writes. A region
 * whose header is all zero holds no heap yet: returns 0 with *out = NULL. */
int exo_heap_open_ro(const void *base, size_t size, struct exo_heap **out);

/* exo_heap_check() without taking the heap's mutex, for a read-only mapping (whose segment
 * lock keeps every writer out, so the mutex, which locking would write, is not needed). */
int exo_heap_check_nolock(struct exo_heap *h, struct seg_heap_stats *st);

/* How often a holder of the heap's mutex died (EOWNERDEAD seen) and how often the free
 * lists then had to be rebuilt from the chunk tags. Either pointer may be NULL. */
void exo_heap_recoveries(struct exo_heap *h, uint64_t *owner_deaths, uint64_t *rebuilds);

/* ---- thread caches (thread_cache.c) ----
 * A freed chunk of at most EXO_HEAP_STASH_MAX bytes can be "stashed": kept by one thread's
 * cache, without the mutex, and handed out again by that thread. `owner` names the process
 * (pid << 32 | low 32 bits of its start time): stashed chunks of a process that is gone are
 * given back when the heap runs out of space or recovers from a dead mutex holder. */
#define EXO_HEAP_STASH_MAX 4112   /* the chunk of a 4 KiB request */

/* The chunk size that a request of `size` bytes takes, SIZE_MAX if none could hold it. */
size_t exo_heap_chunk_size(const struct exo_heap *h, size_t size);
/* Stash live allocation p at the head of lists[chunk size / 16] (a cache's lists, linked
 * through the chunks): 1, or 0 if its chunk is larger than EXO_HEAP_STASH_MAX (not
 * stashed: free it), or -EXO_EINVAL if p is not a live allocation. *chunk gets its chunk
 * size. Takes no lock; safe against a concurrent free of p in another thread (one of them
 * fails). */
int exo_heap_stash(struct exo_heap *h, void *p, uint64_t owner, void *lists[], size_t *chunk);
/* Make stashed p live again: p, with *next its list link; NULL if p is not a chunk that
 * owner stashed (a damaged list: drop it). No lock: only the stashing thread may call it. */
void *exo_heap_unstash(struct exo_heap *h, void *p, uint64_t owner, void **next);
/* Free up to max stashed chunks of the list starting at `list` under one lock; *rest gets
 * the rest of the list. 0, or -EXO_ECORRUPT (a damaged list: drop the rest) or the lock's
 * error. */
int exo_heap_unstash_free(struct exo_heap *h, void *list, uint64_t owner, unsigned max,
                          void **rest);

/* Test hook: take the heap's mutex and keep it (the caller is expected to die holding it);
 * with drop_free_lists, also forget every free list, as a death in mid-operation might.
 * Returns 0 or the locking error. */
int exo_heap_test_hold(struct exo_heap *h, int drop_free_lists);

/* Where the header's parts lie, for the fuzz target (fuzz/fuzz_heap_header.c): the header's
 * size and the process-shared mutex inside it. The mutex is not fuzzed: a process that may
 * write the segment can hold it, and a waiter then waits (docs/spacejmp.md says so). */
void exo_heap_header_layout(size_t *header, size_t *lock_offset, size_t *lock_size);

#endif
