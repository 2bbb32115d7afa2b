/* Where a benchmark's big table lives: anonymous memory, or an exomem segment with 4K pages,
 * transparent huge pages (a SEG_THP segment), 2M or 1G pages -- the memory kinds of the
 * paging-versus-segmentation study -- and how to tell what the kernel really gave.
 *
 * The library does the huge page set-up itself (docs/hugepages.md): as root, seg_alloc_ex()
 * mounts a private huge tmpfs or hugetlbfs under the registry and grows the pool for the
 * segment; seg_delete() gives the pages back and unmounts. So a table's segment must be
 * deleted however its process ends: at exit (bench_memory_map() arranges it) or, after a
 * kill, by whoever waited for the process (bench_in_child() in bench_child.h). */
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

/* The kind named `name` (a command-line argument); anything else prints the names that are
 * known and exits with status 2. */
enum bench_memory bench_memory_arg(const char *name);

/* The page size of a kind (4K for anonymous memory and THP: what a segment is made with). */
uint64_t bench_memory_page(enum bench_memory m);

/* bytes rounded up to a whole number of the kind's pages (2 MiB for THP, so that every
 * part of the table can be a huge page). */
uint64_t bench_memory_round(enum bench_memory m, uint64_t bytes);

/* Worker side: `bytes` (a multiple of the kind's page) of memory of kind m, anonymous
 * anywhere or a segment `name` at `base` (a multiple of 1 GiB) switched in read-write,
 * deleted again at exit (giving back the huge pages the library added to the pool). NULL
 * with *why set (the library's exomem_last_error(), ready for a JSON string) when the
 * library refuses huge pages (EXO_ENOHUGE); any other failure exits. */
void *bench_memory_map(enum bench_memory m, const char *name, uint64_t base, uint64_t bytes,
                       const char **why);

/* Bytes of [p, p+len) that /proc/self/smaps shows mapped by huge pages, transparent
 * (anonymous, shmem or file PMD mappings) or hugetlb: what the kernel really gave, so that
 * a "thp" or "seg2m" result is never claimed without huge pages. */
uint64_t bench_memory_huge_bytes(const void *p, uint64_t len);

/* MemAvailable from /proc/meminfo in bytes (0 if unknown): whether a size can run. */
uint64_t bench_mem_available(void);

/* Print a "skip" JSON line: `params` is the inside of the params object, `reason` a string
 * without quotes or backslashes (bench_memory_map()'s *why is). */
void bench_emit_skip(const char *params, const char *reason);

#endif
