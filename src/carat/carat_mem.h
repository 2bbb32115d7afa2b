/* The runtime's own memory for its tables. It never calls malloc: a move stops threads that
 * may be inside malloc holding its locks, and the runtime must still be able to grow its
 * tables while they are stopped. Not thread-safe: used under the runtime's lock. */
#ifndef EXOMEM_CARAT_MEM_H
#define EXOMEM_CARAT_MEM_H

#include <stddef.h>

/* Zeroed memory of at least n bytes, or NULL. */
void *exo_carat_mem_alloc(size_t n);
/* Give back p, which exo_carat_mem_alloc(n) returned (NULL: nothing). */
void exo_carat_mem_free(void *p, size_t n);

#endif
