/* gups: HPCC RandomAccess on a table in anonymous memory or in an exomem segment with 4K,
 * transparent huge (THP), 2M or 1G pages, optionally with a software base+bounds check per
 * access. Prints one JSON line per repeat ("gups", GUP/s) and one per verification
 * ("gups_verify", errors); exits 1 when a verification fails. The library sets up huge
 * pages itself (as root: mounts, pool growth, given back when the segment is deleted);
 * when it refuses them (EXO_ENOHUGE) this prints a "skip" line with its reason, exit 0.
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
#include <sys/mman.h>
#include <unistd.h>

#define TABLE_BASE UINT64_C(0x310000000000) /* 1 GiB aligned, clear of mmap and ASan */


static struct {
    unsigned log2, threads;
    enum bench_memory memory;
    bool check_bounds;
    int repeats;
} opt = { .log2 = 26, .threads = 1, .memory = BENCH_MEM_ANON, .repeats = 1 };

static char params[256];
static double huge_percent; /* of the table, from /proc/self/smaps */

static uint64_t table_bytes(void)
{
    return bench_memory_round(opt.memory, sizeof(uint64_t) << opt.log2);
}

static void emit_skip(const char *reason)
{
    printf("{\"name\":\"skip\",\"params\":{%s,\"reason\":\"%s\"},\"reason\":\"%s\"}\n",
           params, reason, reason);
    fflush(stdout);
}

/* The table's memory, or NULL after printing a skip line. */
static uint64_t *make_table(void)
{
    const char *why = NULL;
    uint64_t *table = bench_memory_map(opt.memory, "gups-table", TABLE_BASE, table_bytes(), &why);
    if (!table)
        emit_skip(why);
    return table;
}

/* The GUP/s line; anything but unchecked anon memory names that run as its baseline. */
static void emit_rate(double gups)
{
    printf("{\"name\":\"gups\",\"unit\":\"GUP/s\",\"value\":%.4f,\"params\":{%s}", gups,
           params);
    if (opt.memory != BENCH_MEM_ANON || opt.check_bounds)
        printf(",\"baseline\":\"gups\",\"baseline_params\":{\"log2\":%u,\"threads\":%u,"
               "\"memory\":\"anon\",\"bounds\":0}", opt.log2, opt.threads);
    if (opt.memory != BENCH_MEM_ANON && opt.memory != BENCH_MEM_SEG4K)
        printf(",\"note\":\"%.0f%% of the table in huge pages (smaps)\"", huge_percent);
    printf("}\n");
    fflush(stdout);
}

static int run(void *unused)
{
    (void)unused;
    uint64_t *table = make_table();
    if (!table)
        return 0;
    huge_percent = 100.0 * (double)bench_memory_huge_bytes(table, table_bytes()) /
                   (double)table_bytes();
    uint64_t size = UINT64_C(1) << opt.log2;
    struct gups_bounds bounds = { .base = 0, .len = size };
    int status = 0;
    for (int r = 0; r < opt.repeats; r++) {
        gups_init(table, opt.log2);
        bool oob = false;
        uint64_t t0 = bench_now_ns();
        if (gups_run(table, opt.log2, opt.threads, opt.check_bounds ? &bounds : NULL, &oob)) {
            fprintf(stderr, "gups: starting threads: %s\n", strerror(errno));
            return 1;
        }
        uint64_t ns = bench_now_ns() - t0;
        if (oob) {
            fprintf(stderr, "gups: bounds check failed for an index within the table\n");
            status = 1;
        }
        emit_rate((double)gups_updates(opt.log2) / (double)ns);
        uint64_t errors = gups_verify(table, opt.log2);
        bool pass = gups_passes(errors, opt.log2);
        bench_emit("gups_verify", "errors", (double)errors, params, NULL,
                   pass ? "passed" : "FAILED: more than 1% of the table wrong");
        if (!pass)
            status = 1;
    }
    return status;
}

/* The worker: run() in a child, so that the segment (and the huge pages the library added
 * to the pool for it) is deleted even if the child is killed. */
static int run_in_child(void)
{
    return bench_in_child(run, NULL, "gups");
}

static void usage(FILE *f)
{
    fprintf(f, "usage: gups --log2 N [--threads T] [--memory anon|seg4k|thp|seg2m|seg1g]\n"
               "            [--check-bounds] [--repeats R] [--quick]\n"
               "HPCC RandomAccess on a table of 2^N 64-bit words (N in 10..34).\n");
}

int main(int argc, char **argv)
{
    if (bench_has_flag(argc, argv, "--quick"))
        opt.log2 = 20;
    static const struct option longopts[] = {
        { "log2", required_argument, NULL, 'n' },
        { "threads", required_argument, NULL, 't' },
        { "memory", required_argument, NULL, 'm' },
        { "check-bounds", no_argument, NULL, 'b' },
        { "repeats", required_argument, NULL, 'r' },
        BENCH_COMMON_LONGOPTS,
    };
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'n': opt.log2 = (unsigned)bench_positive(optarg); break;
        case 't': opt.threads = (unsigned)bench_positive(optarg); break;
        case 'b': opt.check_bounds = true; break;
        case 'r': opt.repeats = (int)bench_positive(optarg); break;
        case 'q': break;
        case 'm': opt.memory = bench_memory_arg(optarg); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc || opt.log2 < 10 || opt.log2 > 34 || opt.threads > 1024) {
        usage(stderr);
        return 2;
    }
    snprintf(params, sizeof params,
             "\"log2\":%u,\"threads\":%u,\"memory\":\"%s\",\"bounds\":%d", opt.log2,
             opt.threads, bench_memory_names[opt.memory], opt.check_bounds ? 1 : 0);
    return bench_run_in_private_registry(run_in_child);
}
