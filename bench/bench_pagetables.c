/* bench_pagetables: SpaceJMP Figure 1 redone on stock Linux -- what building page tables
 * (mmap + MAP_POPULATE) and removing them (munmap) costs as a mapping grows from 1 MiB to
 * 16 GiB, for 4 KiB pages, 2 MiB hugetlb and 1 GiB hugetlb pages.
 *
 * Two backings per page size:
 *   anon  MAP_PRIVATE|MAP_ANONYMOUS (4K) or MAP_HUGETLB (2M/1G): populating allocates and
 *         zeroes every page, so it includes the zeroing the paper's figure leaves out;
 *   shm   MAP_SHARED of a memfd (tmpfs, or hugetlb memfd) whose pages were filled once
 *         before timing: populate only builds page tables for pages that already exist,
 *         which is what the paper measures ("does not include page zeroing costs").
 * Sizes stop where MemAvailable minus a 2 GiB margin stops them. Huge page pools are grown
 * for each page size's turn and put back to their original values afterwards -- on every
 * exit path, including SIGINT/SIGTERM. One JSON object per line on stdout (one per repeat):
 *   {"name":"pt_build","unit":"ms","value":V,"params":{"page":"2M","bytes":N,"backing":"anon"}}
 * and {"name":"skip",...,"reason":"..."} for sizes that could not be measured.
 * Self-contained: uses no exomem call (it measures the kernel the library stands on).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <exomem/exomem.h>

#include "os/os.h"

#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)
#define MARGIN (2 * GIB)

/* Debian 12's headers may lack the size-encoded flags; the values are kernel ABI. */
#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif
#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB (21 << MAP_HUGE_SHIFT)
#endif
#ifndef MAP_HUGE_1GB
#define MAP_HUGE_1GB (30 << MAP_HUGE_SHIFT)
#endif
#ifndef MFD_HUGETLB
#define MFD_HUGETLB 0x0004U
#endif
#ifndef MFD_HUGE_2MB
#define MFD_HUGE_2MB (21U << 26)
#endif
#ifndef MFD_HUGE_1GB
#define MFD_HUGE_1GB (30U << 26)
#endif

struct page_kind {
    const char *label;
    uint64_t size;
    int map_flags;        /* extra mmap flags for the anonymous backing */
    unsigned mfd_flags;   /* extra memfd_create flags for the shm backing */
    const char *pool_dir; /* sysfs directory of the huge page pool, NULL for 4K */
};

static const struct page_kind kinds[] = {
    { "4K", 4096, 0, 0, NULL },
    { "2M", 2 * MIB, MAP_HUGETLB | MAP_HUGE_2MB, MFD_HUGETLB | MFD_HUGE_2MB,
      "/sys/kernel/mm/hugepages/hugepages-2048kB" },
    { "1G", GIB, MAP_HUGETLB | MAP_HUGE_1GB, MFD_HUGETLB | MFD_HUGE_1GB,
      "/sys/kernel/mm/hugepages/hugepages-1048576kB" },
};
#define NKINDS (sizeof kinds / sizeof kinds[0])

static struct {
    int repeats;
    uint64_t min_size, max_size;
    bool page[NKINDS];
    bool anon, shm;
} opt = { 5, MIB, 16 * GIB, { true, true, true }, true, true };

/* ---- huge page pools: saved once, restored on every way out ---- */

static volatile sig_atomic_t pool_dirty[NKINDS]; /* we changed it; saved value is valid */
static long pool_saved[NKINDS];

/* Signal-safe (exo_os_pool_restore writes a constant path with open/write/close). */
static void restore_pool(size_t k)
{
    if (pool_dirty[k] && exo_os_pool_restore(kinds[k].size, pool_saved[k]) == 0)
        pool_dirty[k] = 0;
}

static void restore_all_pools(void)
{
    for (size_t k = 0; k < NKINDS; k++)
        restore_pool(k);
}

static void on_fatal_signal(int sig)
{
    restore_all_pools();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install_signal_handlers(void)
{
    static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGBUS, SIGSEGV, SIGABRT };
    struct sigaction sa = { .sa_handler = on_fatal_signal };
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaction(sigs[i], &sa, NULL);
}

/* Free pages of kind k's pool after trying to make `want` of them free (root only; without
 * the right to grow the pool it uses whatever is free). */
static long reserve_pool(size_t k, long want)
{
    long saved, free_after;
    int rc = exo_os_pool_grow(kinds[k].size, want, &saved, &free_after);
    if (rc == -EXO_ENOHUGE || rc == -EXO_EPAGESIZE)
        return -1;
    if (saved >= 0 && !pool_dirty[k]) {
        pool_saved[k] = saved;
        pool_dirty[k] = 1;
    }
    if (rc)
        fprintf(stderr, "bench_pagetables: cannot grow %s pool: %s\n", kinds[k].label,
                exomem_strerror(rc));
    return free_after < 0 ? 0 : free_after;
}

/* ---- measuring ---- */

static uint64_t mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "re");
    char line[256];
    uint64_t kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %" SCNu64 " kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb * 1024;
}

/* Bytes that may be mapped and populated now, keeping MARGIN free for everything else. */
static uint64_t memory_budget(void)
{
    uint64_t avail = mem_available();
    return avail > MARGIN ? avail - MARGIN : 0;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void emit(const char *name, double ms, const struct page_kind *pk, uint64_t bytes,
                 const char *backing)
{
    printf("{\"name\":\"%s\",\"unit\":\"ms\",\"value\":%.4f,\"params\":{\"page\":\"%s\","
           "\"bytes\":%" PRIu64 ",\"backing\":\"%s\"}}\n", name, ms, pk->label, bytes, backing);
    fflush(stdout);
}

static void emit_skip(const struct page_kind *pk, uint64_t bytes, const char *backing,
                      const char *reason)
{
    printf("{\"name\":\"skip\",\"params\":{\"page\":\"%s\",\"bytes\":%" PRIu64
           ",\"backing\":\"%s\"},\"reason\":\"%s\"}\n", pk->label, bytes, backing, reason);
    fflush(stdout);
}

/* Map `bytes` (anonymous if fd < 0, else the start of fd) with MAP_POPULATE and unmap it,
 * opt.repeats times, printing both times. Returns false (errno set) if mmap failed.
 * One untimed round first: in a VM the first touch of guest memory also faults in the
 * host's memory (seen here: 13 s instead of 1.7 s for 4 GiB), which is not page tables. */
static bool measure(const struct page_kind *pk, int fd, uint64_t bytes)
{
    int flags = MAP_POPULATE | (fd < 0 ? MAP_PRIVATE | MAP_ANONYMOUS | pk->map_flags : MAP_SHARED);
    const char *backing = fd < 0 ? "anon" : "shm";
    for (int r = -1; r < opt.repeats; r++) {
        double t0 = now_ms();
        void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, flags, fd, 0);
        double t1 = now_ms();
        if (p == MAP_FAILED)
            return false;
        munmap(p, bytes);
        double t2 = now_ms();
        if (r < 0)
            continue;
        emit("pt_build", t1 - t0, pk, bytes, backing);
        emit("pt_remove", t2 - t1, pk, bytes, backing);
    }
    return true;
}

/* Every size from opt.min_size doubling up to opt.max_size that is a whole number of pages;
 * sizes above `limit` get a skip line naming `why`. fd < 0: anonymous, else a shm file. */
static void measure_sizes(const struct page_kind *pk, bool shm, int fd, uint64_t limit,
                          const char *why)
{
    const char *backing = shm ? "shm" : "anon";
    for (uint64_t bytes = opt.min_size; bytes <= opt.max_size; bytes *= 2) {
        if (bytes % pk->size != 0)
            continue;
        /* Anonymous 4K memory comes from MemAvailable: look again before each size. */
        if (!shm && !pk->pool_dir && bytes > memory_budget()) {
            emit_skip(pk, bytes, backing, "MemAvailable minus 2 GiB margin");
            continue;
        }
        if (bytes > limit) {
            emit_skip(pk, bytes, backing, why);
            continue;
        }
        if (!measure(pk, fd, bytes)) {
            fprintf(stderr, "bench_pagetables: %s %s %" PRIu64 " bytes: mmap: %s\n", pk->label,
                    backing, bytes, strerror(errno));
            emit_skip(pk, bytes, backing, "mmap failed");
        }
    }
}

/* Largest measured size not above limit: the shm file only needs to be that big. */
static uint64_t largest_size(const struct page_kind *pk, uint64_t limit)
{
    uint64_t best = 0;
    for (uint64_t b = opt.min_size; b <= opt.max_size && b <= limit; b *= 2)
        if (b % pk->size == 0)
            best = b;
    return best;
}

/* The shm backing: one memfd filled once up front; each size maps a prefix of it. */
static void measure_shm(const struct page_kind *pk, uint64_t limit, const char *why)
{
    uint64_t len = largest_size(pk, limit);
    if (len == 0) { /* nothing fits: every size gets its skip line */
        measure_sizes(pk, true, -1, 0, why);
        return;
    }
    int fd = memfd_create("exomem-bench-pt", MFD_CLOEXEC | pk->mfd_flags);
    if (fd < 0 || fallocate(fd, 0, 0, (off_t)len) != 0) {
        fprintf(stderr, "bench_pagetables: %s shm file of %" PRIu64 " bytes: %s\n", pk->label,
                len, strerror(errno));
        if (fd >= 0)
            close(fd);
        return;
    }
    measure_sizes(pk, true, fd, len, why);
    close(fd);
}

static void run_kind(size_t k)
{
    const struct page_kind *pk = &kinds[k];
    uint64_t limit = opt.max_size;
    const char *why = "larger than --max-size";
    if (pk->pool_dir) {
        if (access(pk->pool_dir, F_OK) != 0) {
            fprintf(stderr, "bench_pagetables: no %s huge page pool on this machine\n",
                    pk->label);
            emit_skip(pk, 0, "any", "no huge page pool of this size");
            return;
        }
        uint64_t budget = memory_budget();
        uint64_t want = (limit < budget ? limit : budget) / pk->size;
        long got = reserve_pool(k, (long)want);
        fprintf(stderr, "bench_pagetables: %s pool: wanted %" PRIu64 " free pages, have %ld\n",
                pk->label, want, got);
        limit = got > 0 ? (uint64_t)got * pk->size : 0;
        why = "huge page pool too small";
    }
    if (opt.anon)
        measure_sizes(pk, false, -1, limit, why);
    if (opt.shm) {
        /* For 4K the file's pages come out of MemAvailable, like anon's did. */
        uint64_t shm_limit = pk->pool_dir ? limit : memory_budget();
        if (shm_limit > limit)
            shm_limit = limit;
        measure_shm(pk, shm_limit, pk->pool_dir ? why : "MemAvailable minus 2 GiB margin");
    }
    if (pk->pool_dir)
        restore_pool(k);
}

/* ---- options ---- */

/* "1048576", "64M", "16G" (K/M/G/T, powers of 1024) -> bytes; 0 on junk. */
static uint64_t parse_size(const char *s)
{
    char *end;
    errno = 0;
    uint64_t v = strtoull(s, &end, 10);
    if (errno || end == s)
        return 0;
    static const char units[] = "KMGT";
    const char *u = *end ? strchr(units, *end & ~0x20) : NULL;
    if (u) {
        int shift = 10 * (int)(u - units + 1);
        if (v > (UINT64_MAX >> shift))
            return 0;
        v <<= shift;
        end++;
    }
    return *end ? 0 : v;
}

static bool parse_pages(const char *list)
{
    for (size_t k = 0; k < NKINDS; k++)
        opt.page[k] = strstr(list, kinds[k].label) != NULL;
    for (size_t k = 0; k < NKINDS; k++)
        if (opt.page[k])
            return true;
    return false;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_pagetables [--repeats N] [--min-size BYTES] [--max-size BYTES]\n"
               "       [--pages 4K,2M,1G] [--backing anon|shm|both] [--quick]\n"
               "Sizes take K/M/G suffixes. --quick: 2 repeats, up to 2 GiB.\n");
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) /* --quick first, so explicit options override it */
        if (!strcmp(argv[i], "--quick")) {
            opt.repeats = 2;
            opt.max_size = 2 * GIB;
        }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true;
        if (!strcmp(a, "--quick")) {
            continue;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!v) {
            ok = false;
        } else if (!strcmp(a, "--repeats")) {
            opt.repeats = atoi(v);
            ok = opt.repeats > 0;
        } else if (!strcmp(a, "--min-size")) {
            opt.min_size = parse_size(v);
            ok = opt.min_size >= 4096;
        } else if (!strcmp(a, "--max-size")) {
            opt.max_size = parse_size(v);
            ok = opt.max_size > 0;
        } else if (!strcmp(a, "--pages")) {
            ok = parse_pages(v);
        } else if (!strcmp(a, "--backing")) {
            opt.anon = !strcmp(v, "anon") || !strcmp(v, "both");
            opt.shm = !strcmp(v, "shm") || !strcmp(v, "both");
            ok = opt.anon || opt.shm;
        } else {
            ok = false;
        }
        if (!ok) {
            usage(stderr);
            return 2;
        }
        i++;
    }
    install_signal_handlers();
    atexit(restore_all_pools);
    /* 4K must mean 4K even where THP is "always". */
    if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0)
        fprintf(stderr, "bench_pagetables: PR_SET_THP_DISABLE: %s\n", strerror(errno));
    for (size_t k = 0; k < NKINDS; k++)
        if (opt.page[k])
            run_kind(k);
    restore_all_pools();
    return 0;
}
