/* A heap block's usable size when malloc has just handed it out: every byte malloc gave,
 * which is what the table tracks of it (hooks.c, heap_extent).
 *
 * glibc's malloc_usable_size reads the block's chunk header and, to check that the block is
 * in use, the next chunk's header too: a cache miss of its own at every allocation of a
 * program that allocates fast (2-3% of Lua's workload built with `track,shadow`). A block
 * malloc has just returned is in use, so its own header says all: the chunk's size less the
 * 8 bytes of header the block does not own. That is glibc's layout, which moves assume
 * already (docs/carat.md, "Derived addresses"). The program's first blocks are asked both
 * ways, and only when every answer agreed is the header read alone; a program whose malloc
 * lays its blocks out another way (AddressSanitizer's, jemalloc) goes on asking malloc. The
 * check uses the program's own blocks: a block of the runtime's, malloc'd and freed to
 * test, changes what malloc does next (freeing a mapped one raises glibc's threshold for
 * mapping blocks, and a 1 MiB block then comes from the heap). Blocks mapped on their own
 * are big and few: malloc is asked for those. */
#include "carat/carat_internal.h"

#include <malloc.h>
#include <string.h>

/* How many blocks are asked both ways first; agreed counts them, or is -1 once the two
 * answers differed. Read and changed atomically by any thread. */
#define CHECKS 16
static int agreed;

#define SIZE_FLAGS 7   /* the low bits of a chunk's size: previous in use, mapped, arena */
#define MAPPED 2

/* The usable size the header says, or 0 for a chunk mapped on its own. Not instrumented:
 * under AddressSanitizer the header is its allocator's, and poisoned. */
CARAT_NO_ASAN static uint64_t from_header(const void *p)
{
    uint64_t size;
    memcpy(&size, (const char *)p - 8, sizeof size);
    return (size & MAPPED) ? 0 : (size & ~(uint64_t)SIZE_FLAGS) - 8;
}

uint64_t exo_carat_usable_size(void *p)
{
    int n = __atomic_load_n(&agreed, __ATOMIC_RELAXED);
    if (__builtin_expect(n >= CHECKS, 1)) {
        uint64_t u = from_header(p);
        return u ? u : malloc_usable_size(p);
    }
    uint64_t asked = malloc_usable_size(p);
    if (n < 0)
        return asked;
    uint64_t u = from_header(p);
    if (u && u != asked)
        __atomic_store_n(&agreed, -1, __ATOMIC_RELAXED);
    else if (u)   /* a mapped block says nothing either way */
        __atomic_compare_exchange_n(&agreed, &n, n + 1, false, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED);
    return asked;
}
