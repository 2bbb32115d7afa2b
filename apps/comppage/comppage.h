/* Data-compression paging (Appel and Li, "Virtual memory primitives for user programs",
 * application 6): pages that do not fit in the memory budget are kept compressed in
 * memory instead of going to disk, on the pager (include/exomem/pager.h).
 *
 * A comppage area is memory of any size used through plain loads and stores. At most
 * `budget` bytes of it are resident as plain pages; when a page must leave, the pager's
 * replacement policy picks it, and it is compressed (lz4, or zstd for more compression at
 * more CPU) into the area's store; a later access decompresses it back (TRAP, then the
 * fill). A page that compresses to nothing (zeros) costs nothing. Unlike the kernel's zram,
 * the budget, the codec and the policy are the application's, per area, and its statistics
 * say what the compression bought (comppage_stats).
 *
 * Calls return 0 or a negative exomem error code (errno set, exomem_last_error() says why).
 * An area's memory may be used by any thread; the calls themselves are thread-safe.
 */
#ifndef EXOMEM_COMPPAGE_H
#define EXOMEM_COMPPAGE_H

#include <exomem/pager.h>
#include <stddef.h>
#include <stdint.h>

enum comppage_codec { COMPPAGE_LZ4 = 1, COMPPAGE_ZSTD };

struct comppage_opts {
    size_t size;                /* bytes of the area, a multiple of 4 KiB */
    size_t budget;              /* bytes that may be resident uncompressed, >= 4 KiB */
    enum comppage_codec codec;  /* default COMPPAGE_LZ4 */
    exo_pager_policy policy;    /* default EXO_PAGER_CLOCK */
};

struct comppage_stats {
    uint64_t pages_compressed;  /* pages held compressed now */
    uint64_t compressed_bytes;  /* what they take */
    double ratio;               /* their plain bytes / compressed bytes (0: none yet) */
    uint64_t faults;            /* pages decompressed or zero-filled on access */
    uint64_t evictions;         /* pages that left the budget */
    double fault_median_us;     /* median service time of a fault */
};

typedef struct comppage comppage;

/* Make an area. -EXO_EINVAL (bad size, budget or codec), -EXO_ENOTSUP (no userfaultfd),
 * -EXO_ENOMEM. */
int comppage_open(const struct comppage_opts *opts, comppage **out);

/* The area's first byte (never NULL for an open area). */
void *comppage_base(comppage *area);

/* Fill *out. -EXO_EINVAL for NULL. */
int comppage_stats(comppage *area, struct comppage_stats *out);

/* Free the area and its compressed pages. NULL is a no-op. */
int comppage_close(comppage *area);

#endif
