/* gups: HPCC RandomAccess on a table in anonymous memory or in an exomem segment with 4K,
 * transparent huge (THP), 2M or 1G pages, optionally with a software base+bounds check per
 * access. Prints one JSON line per repeat ("gups", GUP/s) and one per verification
 * ("gups_verify", errors); exits 1 when a verification fails. Huge page pools are grown
 * only when needed (root) and restored afterwards; without a pool or hugetlbfs mount it
 * prints a "skip" line and exits 0.
 */
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

/* Why THP may not apply: segment data is shared memory, governed by shmem_enabled. */
static const char *thp_note(void)
{
    if (opt.memory != BENCH_MEM_THP)
        return NULL;
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/shmem_enabled", "re");
    char line[128] = "";
    if (f) {
        if (!fgets(line, sizeof line, f))
            line[0] = '\0';
        fclose(f);
    }
    if (strstr(line, "[never]") || strstr(line, "[deny]"))
        return "shmem THP disabled (transparent_hugepage/shmem_enabled): 4K pages";
    return NULL;
}

/* The GUP/s line; anything but unchecked anon memory names that run as its baseline. */
static void emit_rate(double gups)
{
    printf("{\"name\":\"gups\",\"unit\":\"GUP/s\",\"value\":%.4f,\"params\":{%s}", gups,
           params);
    if (opt.memory != BENCH_MEM_ANON || opt.check_bounds)
        printf(",\"baseline\":\"gups\",\"baseline_params\":{\"log2\":%u,\"threads\":%u,"
               "\"memory\":\"anon\",\"bounds\":0}", opt.log2, opt.threads);
    const char *note = thp_note();
    if (note)
        printf(",\"note\":\"%s\"", note);
    printf("}\n");
    fflush(stdout);
}

static int run(void)
{
    uint64_t *table = make_table();
    if (!table)
        return 0;
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
        case 'm': {
            int kind = bench_memory_parse(optarg);
            if (kind < 0) {
                usage(stderr);
                return 2;
            }
            opt.memory = (enum bench_memory)kind;
            break;
        }
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
    const char *why = bench_memory_reserve(opt.memory, table_bytes());
    if (why) {
        emit_skip(why);
        return 0;
    }
    int status = bench_run_in_private_registry(run);
    bench_memory_release();
    return status;
}
