/* bench_gups: Figure 5 of the hybrid segmentation paper redone on Linux -- HPCC RandomAccess
 * (apps/gups: the official update stream and verification) with its table in anonymous
 * memory or an exomem segment of 4K, THP, 2M or 1G pages, 1 and 2 threads, tables of
 * 64 MiB .. 8 GiB; plus the cost of a software base+bounds check on every update.
 *
 * Lines: "gups" (GUP/s; baseline: the same table and threads in a 4K segment; the
 * bounds-checked runs name the unchecked run of the same memory instead), "gups_huge" (how
 * much of the table the kernel really mapped with huge pages, from /proc/self/smaps, so
 * that "thp" is never claimed without huge pages) and "skip" lines. Every run is verified as
 * HPCC does (at most 1% of the table wrong); a failed verification prints a "gups_failed"
 * skip line and makes the exit status 1.
 *
 * HPCC does 4 updates per table entry. On this VM that is ~0.02 GUP/s at 8 GiB (minutes per
 * run), so a run does min(4 x entries, UPDATE_CAP) updates: the first positions of the
 * official stream, verified exactly like a full run.
 *
 * Structure: one private registry and worker (bench_util); the worker runs one child per
 * (table size, memory kind) (bench_child). The library grows the huge page pool for a 2M or
 * 1G segment and mounts what it needs (as root), and gives both back when the child
 * deletes its segment at exit -- or the worker does, if the child was killed. SIGTERM
 * (run.py's timeout) stops at the next step boundary and still cleans up.
 */
#include "bench_child.h"
#include "bench_memory.h"
#include "bench_util.h"
#include "gups.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TABLE_BASE UINT64_C(0x320000000000) /* 1 GiB aligned, clear of the tests' bases */
#define UPDATE_CAP (UINT64_C(1) << 25)

static struct {
    unsigned log2_min, log2_max; /* table sizes: 2^log2 words */
    int repeats;
    long budget_s; /* no new table size once it would likely end after this many seconds */
    bool quick;
} opt = { 23, 30, 3, 600, false };

static const enum bench_memory kinds[] = { BENCH_MEM_SEG4K, BENCH_MEM_ANON, BENCH_MEM_THP,
                                           BENCH_MEM_SEG2M, BENCH_MEM_SEG1G };

/* The bounds-check cost is measured at these sizes (log2 words), in a 4K segment and in
 * the biggest-page segment the run has, one thread: one cache-resident table (where
 * the check's instructions are not hidden behind memory misses), one of 64 MiB and one of
 * 1 GiB. Small tables get min_updates updates, enough to time. */
static const unsigned bounds_sizes[] = { 15, 23, 27 };
static uint64_t min_updates = UINT64_C(1) << 24;

static uint64_t updates_for(unsigned log2)
{
    uint64_t n = gups_updates(log2);
    if (n > UPDATE_CAP)
        n = UPDATE_CAP;
    if (n < min_updates)
        n = min_updates;
    return n;
}

static uint64_t table_bytes(unsigned log2)
{
    return sizeof(uint64_t) << log2;
}

static void params(char *buf, size_t cap, enum bench_memory m, unsigned log2, unsigned threads,
                   bool bounds)
{
    snprintf(buf, cap,
             "\"mem\":\"%s\",\"table_bytes\":%llu,\"threads\":%u,\"updates\":%llu,\"bounds\":%d",
             bench_memory_names[m], (unsigned long long)table_bytes(log2), threads,
             (unsigned long long)updates_for(log2), bounds ? 1 : 0);
}

/* One timed, verified run; false when verification failed. */
static bool run_once(uint64_t *table, enum bench_memory m, unsigned log2, unsigned threads,
                     bool bounded)
{
    uint64_t n = updates_for(log2);
    struct gups_bounds bounds = { .base = 0, .len = UINT64_C(1) << log2 };
    bool oob = false;
    uint64_t t0 = bench_now_ns();
    if (gups_run_count(table, log2, n, threads, bounded ? &bounds : NULL, &oob) != 0) {
        fprintf(stderr, "bench_gups: starting threads: %s\n", strerror(errno));
        exit(1);
    }
    double gups = (double)n / (double)(bench_now_ns() - t0);
    uint64_t errors = gups_verify_count(table, log2, n);
    char p[256];
    params(p, sizeof p, m, log2, threads, bounded);
    if (oob || !gups_passes_count(errors, n)) {
        char why[200];
        snprintf(why, sizeof why, "gups_failed: verification found %llu of %llu entries wrong "
                 "after %llu updates (allowed: 0.25%% of the updates)%s",
                 (unsigned long long)errors, (unsigned long long)(UINT64_C(1) << log2),
                 (unsigned long long)n,
                 oob ? " and the bounds check fired inside the table" : "");
        bench_emit_skip(p, why);
        gups_init(table, log2);
        return false;
    }
    if (errors) /* the verification undid all but the lost updates: start clean again */
        gups_init(table, log2);
    printf("{\"name\":\"gups\",\"unit\":\"GUP/s\",\"value\":%.5f,\"params\":{%s}", gups, p);
    if (bounded) {
        params(p, sizeof p, m, log2, threads, false);
        printf(",\"baseline\":\"gups\",\"baseline_params\":{%s}", p);
    } else if (m != BENCH_MEM_SEG4K) {
        params(p, sizeof p, BENCH_MEM_SEG4K, log2, threads, false);
        printf(",\"baseline\":\"gups\",\"baseline_params\":{%s}", p);
    }
    printf(",\"note\":\"%llu wrong entries after verification\"}\n", (unsigned long long)errors);
    fflush(stdout);
    return true;
}

static bool bounds_size(unsigned log2)
{
    for (size_t i = 0; i < sizeof bounds_sizes / sizeof bounds_sizes[0]; i++)
        if (bounds_sizes[i] == log2)
            return true;
    return false;
}

/* What one child measures: a memory kind, a table size, the Figure 5 runs and/or the
 * bounds-check runs. */
struct job {
    enum bench_memory m;
    unsigned log2;
    bool fig5, bounds;
};

/* Child: the table of one kind and size, every thread count and repeat; exit status 1 if
 * a verification failed, 3 when the memory could not be had (skip line printed). */
static int measure(void *arg)
{
    const struct job *job = arg;
    enum bench_memory m = job->m;
    unsigned log2 = job->log2;
    bool fig5 = job->fig5, bounds = job->bounds;
    char name[64], p[256];
    snprintf(name, sizeof name, "gups-%s-%u", bench_memory_names[m], log2);
    const char *why = NULL;
    uint64_t bytes = bench_memory_round(m, table_bytes(log2));
    uint64_t *table = bench_memory_map(m, name, TABLE_BASE, bytes, &why);
    params(p, sizeof p, m, log2, 1, false);
    if (!table) {
        bench_emit_skip(p, why);
        return 3;
    }
    gups_init(table, log2);
    snprintf(p, sizeof p, "\"mem\":\"%s\",\"table_bytes\":%llu", bench_memory_names[m],
             (unsigned long long)table_bytes(log2));
    uint64_t huge = bench_memory_huge_bytes(table, table_bytes(log2));
    bench_emit("gups_huge", "%", 100.0 * (double)huge / (double)table_bytes(log2), p, NULL, NULL);
    int status = 0;
    int repeats = log2 >= 29 && opt.repeats > 2 ? 2 : opt.repeats; /* 4+ GiB: time budget */
    for (int r = 0; r < repeats && !bench_stop; r++) {
        for (unsigned threads = 1; fig5 && threads <= 2 && !bench_stop; threads++)
            status |= !run_once(table, m, log2, threads, false);
        if (bounds && !bench_stop) {
            if (!fig5)
                status |= !run_once(table, m, log2, 1, false);
            status |= !run_once(table, m, log2, 1, true);
        }
    }
    return bench_stop ? 1 : status;
}

/* Worker side: measure() in a child (bench_in_child: cleaned up after if killed). Returns
 * its exit status (3: memory could not be had). */
static int measure_in_child(enum bench_memory m, unsigned log2, bool fig5, bool bounds)
{
    struct job job = { m, log2, fig5, bounds };
    char what[64];
    snprintf(what, sizeof what, "%s 2^%u", bench_memory_names[m], log2);
    return bench_in_child(measure, &job, what);
}

/* Why table size 2^log2 is left out (memory, time budget), or NULL to measure it. */
static const char *leave_out(unsigned log2, uint64_t elapsed_ns)
{
    static char why[160];
    uint64_t need = table_bytes(log2), have = bench_mem_available();
    if (have && need + need / 10 > have) {
        snprintf(why, sizeof why, "needs %.1f GiB, MemAvailable is %.1f GiB",
                 need / 1073741824.0, have / 1073741824.0);
        return why;
    }
    if (!opt.quick && elapsed_ns > (uint64_t)opt.budget_s * 1000000000u) {
        snprintf(why, sizeof why, "over the time budget of %ld s (%.0f s used)", opt.budget_s,
                 elapsed_ns / 1e9);
        return why;
    }
    return NULL;
}

/* Table sizes in the order they are measured: the smallest and the biggest, then the middle
 * of each gap (coarse to fine), so that a time budget ending the run early leaves holes
 * between sizes rather than losing the biggest. Returns how many. */
static int size_order(unsigned lo, unsigned hi, unsigned *out)
{
    unsigned gaps[64][2];
    int n = 0, head = 0, tail = 0;
    out[n++] = lo;
    if (hi > lo)
        out[n++] = hi;
    gaps[tail][0] = lo, gaps[tail++][1] = hi;
    while (head < tail) {
        unsigned a = gaps[head][0], b = gaps[head++][1];
        if (b - a < 2)
            continue;
        unsigned mid = (a + b) / 2;
        out[n++] = mid;
        gaps[tail][0] = a, gaps[tail++][1] = mid;
        gaps[tail][0] = mid, gaps[tail++][1] = b;
    }
    return n;
}

static int worker(void)
{
    int failed = 0;
    uint64_t start = bench_now_ns();
    unsigned order[64];
    int sizes = size_order(opt.log2_min, opt.log2_max, order);
    for (int i = 0; i < sizes && !bench_stop; i++) {
        unsigned log2 = order[i];
        const char *why = leave_out(log2, bench_now_ns() - start);
        if (why) {
            char p[96];
            snprintf(p, sizeof p, "\"table_bytes\":%llu", (unsigned long long)table_bytes(log2));
            bench_emit_skip(p, why);
            continue;
        }
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0] && !bench_stop; k++) {
            enum bench_memory m = kinds[k];
            bool bounds = bounds_size(log2) && (m == BENCH_MEM_SEG4K || m == BENCH_MEM_SEG2M);
            failed |= measure_in_child(m, log2, true, bounds) == 1;
        }
    }
    /* Bounds-check sizes outside the figure's range (the cache-resident table). */
    for (size_t i = 0; i < sizeof bounds_sizes / sizeof bounds_sizes[0] && !bench_stop; i++) {
        unsigned log2 = bounds_sizes[i];
        if (log2 >= opt.log2_min && log2 <= opt.log2_max)
            continue;
        if ((opt.quick && log2 > opt.log2_max) || leave_out(log2, bench_now_ns() - start))
            continue;
        failed |= measure_in_child(BENCH_MEM_SEG4K, log2, false, true) == 1;
        failed |= measure_in_child(BENCH_MEM_SEG2M, log2, false, true) == 1;
    }
    return failed || bench_stop;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_gups [--quick] [--repeats R] [--min-log2 N] [--max-log2 N] "
               "[--budget SECONDS]\n"
               "HPCC RandomAccess, tables of 2^N 64-bit words (default 2^23..2^30: 64 MiB..8 GiB)\n"
               "in anon, seg4k, thp, seg2m and seg1g memory, 1 and 2 threads; no new size\n"
               "once the time budget (default 600 s) is spent; sizes go coarse to fine.\n");
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "repeats", required_argument, NULL, 'r' },
        { "min-log2", required_argument, NULL, 'a' },
        { "max-log2", required_argument, NULL, 'b' },
        { "budget", required_argument, NULL, 't' },
        BENCH_COMMON_LONGOPTS,
    };
    if (bench_has_flag(argc, argv, "--quick"))
        opt.log2_min = 20, opt.log2_max = 23, opt.repeats = 1, opt.quick = true,
        min_updates = UINT64_C(1) << 22;
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'r': opt.repeats = (int)bench_positive(optarg); break;
        case 'a': opt.log2_min = (unsigned)bench_positive(optarg); break;
        case 'b': opt.log2_max = (unsigned)bench_positive(optarg); break;
        case 't': opt.budget_s = bench_positive(optarg); break;
        case 'q': break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc || opt.log2_min < 10 || opt.log2_max > 33 || opt.log2_min > opt.log2_max) {
        usage(stderr);
        return 2;
    }
    /* The parent forwards SIGTERM to the worker; worker and children bench_stop between steps. */
    bench_stop_on_signals();
    return bench_run_in_private_registry(worker);
}
