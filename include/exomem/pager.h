/* Application-level pager (AVM, Engler, Gupta and Kaashoek): memory whose residency the
 * application controls.
 *
 * A pager region is a range of memory of any size (larger than RAM included) used through
 * plain loads and stores. At most `budget` bytes of it are resident at a time; the rest lives
 * in a backing store the application chooses. The application also chooses the replacement
 * policy, the structure that maps units to frames and store slots (the paper's point that
 * page tables belong to the application), and the unit of paging, 4 KiB or 2 MiB.
 *
 * How it works on Linux (docs/pager.md): the region is private anonymous memory registered
 * with userfaultfd. A missing unit is filled with UFFDIO_COPY from the store, or with zeros
 * for a unit never written, installed write-protected so that the first write is seen (the
 * unit is then dirty and unprotected). Eviction drops a clean unit at once; a dirty one is
 * write-protected first (writers wait), written to the store, then dropped. Nothing written
 * is lost: a unit is dropped only once the store holds what it held.
 *
 * Faults are delivered either to handler threads that read the userfaultfd
 * (EXO_PAGER_THREADS), or to the faulting thread itself as SIGBUS (EXO_PAGER_SIGBUS, with
 * UFFD_FEATURE_SIGBUS), whose handler resolves the fault in that thread. A fault the store
 * cannot serve after a bounded retry is delivered as SIGBUS to the faulting thread with the
 * previous SIGBUS action (a crash by default); exo_pager_last_failure() says why.
 *
 * Calls return 0 or a negative code (-EXO_..., error.h), set errno and exomem_last_error(),
 * and leave the region as it was when they fail. All calls are thread-safe; those that move
 * data (advise, discard, flush, destroy) block while the region's lock is held by a fault
 * being served, and for the store's I/O.
 */
#ifndef EXOMEM_PAGER_H
#define EXOMEM_PAGER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct exo_pager exo_pager;             /* a pager region */
typedef struct exo_pager_store exo_pager_store; /* a backing store */

#define EXO_PAGER_UNIT_4K ((size_t)4 << 10)
#define EXO_PAGER_UNIT_2M ((size_t)2 << 20)

/* Replacement policies. References are what user space can see on this kernel (it has no
 * accessed bits for user space): a unit is referenced when it is filled and when it is first
 * written after a fill or a sample; docs/pager.md says what each policy makes of that. */
typedef enum exo_pager_policy {
    EXO_PAGER_FIFO = 1,   /* evict the unit filled longest ago */
    EXO_PAGER_CLOCK,      /* second chance: a referenced unit is passed over once */
    EXO_PAGER_LRU,        /* evict the unit referenced longest ago */
    EXO_PAGER_MRU,        /* evict the unit referenced most recently (cyclic scans) */
    EXO_PAGER_CUSTOM,     /* the application's callbacks (struct exo_pager_callbacks) */
} exo_pager_policy;

/* Structures mapping a unit to its frame or store slot. */
typedef enum exo_pager_table {
    EXO_PAGER_TABLE_RADIX = 1, /* a 4-level tree of 512-entry nodes: O(1), dense or sparse */
    EXO_PAGER_TABLE_HASH,      /* open addressing: O(1) expected, memory per unit in use */
    EXO_PAGER_TABLE_VECTOR,    /* sorted vector, binary search (AVM's prototype) */
} exo_pager_table;

/* Who serves faults. */
typedef enum exo_pager_delivery {
    EXO_PAGER_THREADS = 1, /* handler threads read fault events from the userfaultfd */
    EXO_PAGER_SIGBUS,      /* the faulting thread serves its own fault in a SIGBUS handler */
} exo_pager_delivery;

/* A policy the application writes (EXO_PAGER_CUSTOM). Every callback runs with the region's
 * lock held, in a handler thread or (EXO_PAGER_SIGBUS) a signal handler: it must not touch
 * the region's memory, call into this pager, or block. Units are indexes from the region's
 * start, in units of the region's unit size. */
typedef struct exo_pager_callbacks {
    void (*filled)(void *arg, size_t unit, int write);     /* unit became resident */
    void (*referenced)(void *arg, size_t unit, int write); /* a resident unit was used */
    /* Choose a resident, unpinned unit to evict; return SIZE_MAX to let FIFO choose. */
    size_t (*victim)(void *arg);
    void (*evicted)(void *arg, size_t unit);               /* unit is no longer resident */
    void *arg;
} exo_pager_callbacks;

/* How a region is made. Zero-initialise, then set what you need. */
typedef struct exo_pager_options {
    size_t size;               /* bytes, a multiple of unit (required) */
    size_t budget;             /* bytes that may be resident, at least one unit (required) */
    size_t unit;               /* EXO_PAGER_UNIT_4K (default when 0) or EXO_PAGER_UNIT_2M */
    exo_pager_policy policy;   /* default FIFO */
    exo_pager_table table;     /* default RADIX */
    exo_pager_delivery delivery; /* default THREADS */
    unsigned threads;          /* handler threads for EXO_PAGER_THREADS (default 1) */
    unsigned readahead;        /* units filled after a faulting one (0: none) */
    exo_pager_store *store;    /* required; stays the caller's (close it after the region) */
    exo_pager_callbacks callbacks; /* EXO_PAGER_CUSTOM only */
    unsigned flags;            /* EXO_PAGER_HUGE_PAGES */
} exo_pager_options;

/* exo_pager_options.flags: back the region with 2 MiB hugetlb pages (unit must be
 * EXO_PAGER_UNIT_2M): one TLB entry per unit. Needs budget / 2 MiB free pages in the 2 MiB
 * pool when the region is made (-EXO_ENOHUGE otherwise). */
#define EXO_PAGER_HUGE_PAGES 1u

/* exo_pager_advise() hints. */
typedef enum exo_pager_advice {
    EXO_PAGER_WILLNEED = 1, /* fill the range now, as far as the budget allows */
    EXO_PAGER_DONTNEED,     /* evict the range now (dirty units are written first) */
    EXO_PAGER_SEQUENTIAL,   /* faults in the range fill `arg` more units after the faulting one */
    EXO_PAGER_PIN,          /* fill the range and never evict it (until UNPIN) */
    EXO_PAGER_UNPIN,
} exo_pager_advice;

/* Counters since the region was made. */
#define EXO_PAGER_LATENCY_BUCKETS 32
typedef struct exo_pager_stats {
    uint64_t faults;           /* missing units filled on demand */
    uint64_t write_faults;     /* first writes to clean resident units */
    uint64_t zero_fills;       /* fills of units never written */
    uint64_t store_reads;      /* fills from the store */
    uint64_t readaheads;       /* units filled by read-ahead or WILLNEED */
    uint64_t evictions;        /* units dropped */
    uint64_t writebacks;       /* dirty units written to the store */
    uint64_t store_errors;     /* store calls that failed (each retried, then reported) */
    uint64_t resident_bytes;   /* now */
    uint64_t dirty_bytes;      /* now */
    uint64_t budget_bytes;
    uint64_t table_bytes;      /* memory of the page-table structure now */
    /* Fault service time (fault event read to unit installed): latency[i] counts faults that
     * took [2^i, 2^(i+1)) ns. */
    uint64_t latency[EXO_PAGER_LATENCY_BUCKETS];
} exo_pager_stats;

/* ---- stores ---- */

/* A store in a file: unit u at offset u * unit size, a sparse file that grows as units are
 * written (created if missing, mode 0600; an existing file's data is reused, so a region made
 * again over it sees what was written). -EXO_EINVAL (path NULL), the kernel's open errors.
 * Served with pread/pwrite. Usable from SIGBUS delivery. */
int exo_pager_store_file(const char *path, exo_pager_store **out);

/* The same file store, with its reads and writes going through io_uring (Debian's liburing)
 * instead of pread/pwrite: the same file layout and results (holes and the part past the end
 * read as never written, discard punches a hole, usage counts allocated blocks), so a region
 * can be made over a file with either store and then with the other. queue_depth: requests
 * each ring has room for (0: 4; each call has one in flight). A ring serves one caller at a
 * time; the store makes one more ring whenever every ring is busy (so one per thread calling
 * at the same time, at most 64; more callers wait for a free one), lazily, and frees them
 * at close. Every call blocks until its I/O completes. Thread-safe; usable from SIGBUS
 * delivery (taking a ring is atomic operations, and liburing calls io_uring_enter,
 * io_uring_setup and mmap itself without allocating). Not for a child process after fork():
 * the rings are shared with the parent.
 * -EXO_EINVAL (path or out NULL, queue_depth above 4096, path not a regular file),
 * -EXO_ENOTSUP when this kernel refuses io_uring (built without it, the sysctl
 * kernel.io_uring_disabled, a seccomp filter: exomem_last_error() says which), -EXO_ENOMEM,
 * the kernel's open errors. Measured on Linux 6.18 it is slower than exo_pager_store_file
 * for files in the page cache, and as fast for reads from the disk (docs/pager.md, Stores). */
int exo_pager_store_file_uring(const char *path, unsigned queue_depth, exo_pager_store **out);

/* Compression for exo_pager_store_memory(). */
typedef enum exo_pager_compression {
    EXO_PAGER_PLAIN = 0, /* units copied as they are */
    EXO_PAGER_LZ4,       /* Debian's liblz4, fast */
    EXO_PAGER_ZSTD,      /* Debian's libzstd, level 1: smaller, slower */
} exo_pager_compression;

/* A store in this process's memory (outside the budget), each unit kept compressed:
 * Appel and Li's data-compression paging. A unit of zeros takes no memory. -EXO_EINVAL for
 * an unknown compression. */
int exo_pager_store_memory(exo_pager_compression compression, exo_pager_store **out);

/* A store the application writes. The pager calls these with the region's lock held, from
 * a handler thread or (EXO_PAGER_SIGBUS) a signal handler: they must not touch the region's
 * memory or call into the pager. read fills buf (size bytes) with unit `unit` and returns
 * 0, 1 when the store has never held the unit (the pager then fills zeros), or a negative
 * exomem code (the fill fails as any store failure does: retried, then SIGBUS); write keeps
 * buf as unit `unit` (0 or a negative code; the unit then stays dirty and resident);
 * discard (may be NULL) forgets it. */
typedef struct exo_pager_store_callbacks {
    int (*read)(void *arg, uint64_t unit, size_t size, void *buf);
    int (*write)(void *arg, uint64_t unit, size_t size, const void *buf);
    int (*discard)(void *arg, uint64_t unit, size_t size);
    void *arg;
} exo_pager_store_callbacks;

/* Make a store of the application's callbacks (copied). -EXO_EINVAL (cb, its read or write,
 * or out NULL), -EXO_ENOMEM. exo_pager_store_usage() counts what write accepted. */
int exo_pager_store_custom(const exo_pager_store_callbacks *cb, exo_pager_store **out);

/* A store in one redis-server (Debian's hiredis): unit u is the string key
 * "<key_prefix>:<u>" holding exactly the unit's bytes; a fill is GET (no key: the unit was
 * never written), a write-back SET, a discard DEL. address is "unix:/path/to/socket" or
 * "host:port" ("[v6 address]:port"). The keys stay in the server after the store is closed,
 * so a store opened again with the same prefix sees them (as long as the server keeps its
 * data). Makes one connection and PINGs at once; -EXO_EINVAL (NULL, a bad address, a prefix
 * empty or over 200 bytes), -EXO_EIO (the server cannot be reached or refuses, with
 * hiredis's reason in exomem_last_error()), -EXO_ENOMEM. Blocks for the connection, at most
 * the 2 s connect timeout. The store's calls are thread-safe and run concurrently over a
 * pool of 4 connections; each command is bounded by a 2 s timeout and a broken connection
 * is made again once, so a dead or hung server makes store calls fail (-EXO_EIO) within a
 * few seconds and the pager then delivers SIGBUS, never hangs (docs/pager.md). They
 * allocate: usable from SIGBUS delivery on the terms of the memory store. */
int exo_pager_store_redis(const char *address, const char *key_prefix,
                          exo_pager_store **out);

/* A store spanning a Redis Cluster: the keys of exo_pager_store_redis(), each sent to the
 * node that owns its hash slot (CRC16 of the key, or of its {hash tag}, modulo 16384). The
 * slot map comes from CLUSTER SLOTS of the first of the nseeds seeds ("host:port") that
 * answers; -MOVED replies correct it, -ASK replies (a slot being migrated) are followed once
 * with ASKING, and a node that cannot be reached makes the map be loaded again once.
 * -EXO_EINVAL (NULL, nseeds 0, a bad seed address, a bad prefix), -EXO_EIO (no seed gave a
 * slot map: unreachable, not a cluster node, or no slot assigned; the reason in
 * exomem_last_error()), -EXO_ENOMEM. Blocks for the seeds, up to 2 s of connect timeout
 * each. Calls are thread-safe, with a pool of 4 connections per node and the timeouts and
 * failures of exo_pager_store_redis(). */
int exo_pager_store_redis_cluster(const char *const *seeds, size_t nseeds,
                                  const char *key_prefix, exo_pager_store **out);

/* Bytes a store holds (compressed, for the memory store; allocated blocks for the file) and
 * units it holds (for the Redis stores: the keys this store's writes made and its discards
 * have not removed, at the unit size each). Never fails for a valid store (-EXO_EINVAL for
 * NULL). */
int exo_pager_store_usage(exo_pager_store *store, uint64_t *bytes, uint64_t *units);

/* Close a store no region uses any more (-EXO_EBUSY while one does). The file store's file
 * stays, and so do the Redis stores' keys. */
int exo_pager_store_close(exo_pager_store *store);

/* Test hook: make the store's next `count` reads or writes fail with -EXO_EIO (count 0:
 * stop), as a disk or server failure would. */
int exo_pager_store_fail(exo_pager_store *store, unsigned count);

/* ---- regions ---- */

/* Make a region as opt says and store it in *out. -EXO_EINVAL (size or budget 0, not a
 * multiple of unit, budget above size, an unknown policy/table/delivery, CUSTOM without a
 * victim callback, no store, threads > 64), -EXO_ENOTSUP (userfaultfd or a needed feature
 * missing, with the reason in exomem_last_error()), -EXO_ENOMEM, -EXO_EBUSY (the store serves
 * another region). Starts the handler threads (EXO_PAGER_THREADS) or installs the SIGBUS
 * handler (EXO_PAGER_SIGBUS). */
int exo_pager_create(const exo_pager_options *opt, exo_pager **out);

/* The region's first byte (the region is size bytes from there), or NULL for NULL. Never
 * fails otherwise; never blocks. */
void *exo_pager_base(const exo_pager *pager);

/* Write every dirty unit to the store, then unmap the region and free it. A unit the store
 * cannot take (after a bounded retry) is lost with the region: -EXO_EIO then, the region
 * freed all the same. -EXO_EINVAL for NULL. Blocks for the write-back. Must not race with
 * accesses to the region or other calls on it. */
int exo_pager_destroy(exo_pager *pager);

/* A hint about [addr, addr+len), which must lie in the region (-EXO_EINVAL otherwise; addr
 * and len are rounded out to units). SEQUENTIAL takes arg units of read-ahead; the others
 * ignore arg. PIN fails with -EXO_ENOMEM when the pinned units would fill the budget (one
 * unit must stay free to serve faults). Blocks for the I/O. -EXO_EIO when the store fails. */
int exo_pager_advise(exo_pager *pager, void *addr, size_t len, exo_pager_advice advice,
                     size_t arg);

/* Forget [addr, addr+len) (rounded in to whole units): resident units are dropped without
 * write-back and the store forgets them, so they read as zeros afterwards. -EXO_EINVAL
 * outside the region. Never blocks for I/O except the store's discard. */
int exo_pager_discard(exo_pager *pager, void *addr, size_t len);

/* Write every dirty unit to the store; they stay resident, clean. -EXO_EIO when the store
 * fails (the units that could not be written stay dirty). Blocks for the I/O. */
int exo_pager_flush(exo_pager *pager);

/* exo_pager_query() state bits. */
#define EXO_PAGER_RESIDENT 1u /* in memory now */
#define EXO_PAGER_DIRTY 2u    /* written since it was filled or last written back */
#define EXO_PAGER_STORED 4u   /* the store holds a copy (possibly older than memory's) */

/* The state of the unit holding addr, from the region's own page table (AVM's "is this page
 * dirty?" query): a mask of EXO_PAGER_RESIDENT, _DIRTY and _STORED in *state, 0 for a unit
 * never written. -EXO_EINVAL (NULL, or addr outside the region). Takes the region's lock;
 * never blocks for I/O. */
int exo_pager_query(exo_pager *pager, const void *addr, unsigned *state);

/* The bucket of stats->latency in which fraction q (0 < q <= 1) of the timed faults is
 * reached: the q-quantile of the fault service time lies in [2^i, 2^(i+1)) ns. Never fails:
 * -1 when no fault was timed, q is out of range or stats is NULL. Pure; thread-safe. */
int exo_pager_latency_bucket(const exo_pager_stats *stats, double q);

/* Copy the region's counters into *out. -EXO_EINVAL for NULL. Never blocks for I/O. */
int exo_pager_get_stats(exo_pager *pager, exo_pager_stats *out);

/* A region as another process sees it (exo_pager_list). */
typedef struct exo_pager_info {
    int pid;
    uint64_t base, size, unit;
    exo_pager_policy policy;
    exo_pager_table table;
    exo_pager_delivery delivery;
    unsigned threads;          /* handler threads (EXO_PAGER_THREADS) */
    char store[32];            /* the store's kind: "file", "memory-lz4", ... */
    exo_pager_stats stats;     /* live counters, each read once (not one snapshot) */
} exo_pager_info;

/* The pager regions of process pid (this process's own too), oldest first: out[0..cap)
 * filled, *count set to how many there are (may exceed cap). Each region publishes its
 * counters in the registry (EXOMEM_ROOT's pager/ directory) while it lives, best effort: a
 * region made while the registry could not be written is not listed. Records left by a
 * process that died are removed here. -EXO_ENOENT (with a message) when pid has no region,
 * -EXO_EINVAL (count NULL, or out NULL with cap > 0), the registry's errors. Reads a few
 * small files; thread-safe. */
int exo_pager_list(int pid, exo_pager_info *out, size_t cap, size_t *count);

/* Why the last fault of this region that could not be served failed ("store read of unit 7
 * failed: Input/output error"), or "" when none has. The text is valid until the region is
 * destroyed. Never fails. */
const char *exo_pager_last_failure(const exo_pager *pager);

/* Names, for messages and reports; never NULL. */
const char *exo_pager_policy_name(exo_pager_policy policy);
const char *exo_pager_table_name(exo_pager_table table);

#ifdef __cplusplus
}
#endif
#endif
