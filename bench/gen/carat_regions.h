/* The synthetic protection regions of bench_carat_guards (CARAT Figure 4): region i is
 * 1 MiB at CARAT_REGION_BASE(i), with a 1 MiB hole after it. Shared by the benchmark and the
 * generator of its if-tree guards. */
#ifndef CARAT_REGIONS_H
#define CARAT_REGIONS_H
#include <stdint.h>

#define CARAT_MAX_REGIONS 1024
#define CARAT_REGION_LEN ((uint64_t)1 << 20)
#define CARAT_REGION_BASE(i) ((uint64_t)0x100000000000ull + (uint64_t)(i) * 2 * CARAT_REGION_LEN)
#define CARAT_RIGHTS 3   /* read and write */

typedef int (*carat_iftree_fn)(uintptr_t a, uintptr_t len);
/* carat_iftrees[k]: the if-tree for 2^k regions. */
extern const carat_iftree_fn carat_iftrees[];
#endif
