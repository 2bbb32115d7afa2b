/* Where a benchmark's big table lives: anonymous memory, or an exomem segment with 4K pages,
 * THP (a 4K segment with MADV_HUGEPAGE), 2M or 1G pages -- the memory kinds of the
 * paging-versus-segmentation study. Huge page pools are grown in the parent process before
 * the measuring worker starts and given back afterwards, however the worker ended. */
#ifndef EXOMEM_BENCH_MEMORY_H
#define EXOMEM_BENCH_MEMORY_H

#include <stdint.h>

enum bench_memory {
    BENCH_MEM_ANON,
    BENCH_MEM_SEG4K,
    BENCH_MEM_THP,
    BENCH_MEM_SEG2M,
    BENCH_MEM_SEG1G,
    BENCH_MEM_KINDS
};

/* "anon", "seg4k", "thp", "seg2m", "seg1g", indexed by enum bench_memory. */
extern const char *const bench_memory_names[BENCH_MEM_KINDS];

/* The kind named `name`, or -1 for none. */
int bench_memory_parse(const char *name);

/* The page size of a kind (4K for anonymous memory and THP: what a segment is made with). */
uint64_t bench_memory_page(enum bench_memory m);

/* bytes rounded up to a whole number of the kind's pages. */
uint64_t bench_memory_round(enum bench_memory m, uint64_t bytes);

/* Parent side, before the worker: for 2M/1G kinds make sure `bytes` of huge pages can be
 * had (a hugetlbfs mount, free pages in the pool, growing it if root). NULL when ready (or
 * nothing is needed), else why not, for a skip line. */
const char *bench_memory_reserve(enum bench_memory m, uint64_t bytes);

/* Parent side, after the worker: give the pool back what bench_memory_reserve() added. */
void bench_memory_release(void);

/* Worker side: `bytes` (a multiple of the kind's page) of memory of kind m, anonymous
 * anywhere or a segment `name` at `base` switched in read-write (deleted again at exit). NULL
 * with *why set when huge pages cannot be had; any other failure exits. */
void *bench_memory_map(enum bench_memory m, const char *name, uint64_t base, uint64_t bytes,
                       const char **why);

#endif
