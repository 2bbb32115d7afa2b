/* Per-thread caches of freed small chunks in front of the in-segment heaps (heap.h), so that
 * most seg_malloc/seg_free calls take no lock. A thread keeps a cache for each of a few heaps
 * (by segment id and heap address); freed chunks up to EXO_HEAP_STASH_MAX bytes are stashed
 * in their segment (marked as such, with this process named in them) and handed out again
 * to requests of their exact size class. */
#ifndef EXOMEM_THREAD_CACHE_H
#define EXOMEM_THREAD_CACHE_H

#include "alloc/heap.h"
#include "vas/view.h"

/* exo_heap_malloc() of writable heap h of segment sid (visible in view v), from the calling
 * thread's cache when it has a chunk of the size. */
void *exo_tcache_malloc(const struct exo_view *v, struct exo_heap *h, segid_t sid,
                        size_t size, int *code);

/* exo_heap_free() of p in h (of segment sid, visible in v), into the thread's cache when it
 * is small. -EXO_EINVAL for a pointer that is not a live allocation. */
int exo_tcache_free(const struct exo_view *v, struct exo_heap *h, segid_t sid, void *p);

/* Give the calling thread's cached chunks of h back to h's free lists. */
void exo_tcache_flush(struct exo_heap *h, segid_t sid);

#endif
