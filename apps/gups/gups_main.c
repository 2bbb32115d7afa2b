/* gups: HPCC RandomAccess on a table in anonymous memory or in an exomem segment with 4K,
 * transparent huge (THP), 2M or 1G pages, optionally with a software base+bounds check per
 * access. Prints one JSON line per repeat ("gups", GUP/s) and one per verification
 * ("gups_verify", errors); exits 1 when a verification fails. Huge page pools are grown
 * only when needed (root) and restored afterwards; without a pool or hugetlbfs mount it
 * prints a "skip" line and exits 0.
 */
#include "bench_util.h"
#include "gups.h"
#include "os/os.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define TABLE_BASE UINT64_C(0x310000000000) /* 1 GiB aligned, clear of mmap and ASan */

enum memory { MEM_ANON, MEM_SEG4K, MEM_THP, MEM_SEG2M, MEM_SEG1G };
static const char *const memory_names[] = { "anon", "seg4k", "thp", "seg2m", "seg1g" };

static struct {
    unsigned log2, threads;
    enum memory memory;
    bool check_bounds;
    int repeats;
} opt = { .log2 = 26, .threads = 1, .memory = MEM_ANON, .repeats = 1 };

static char params[256];

static uint64_t page_size(void)
{
    return opt.memory == MEM_SEG2M ? SEG_PAGE_2M : opt.memory == MEM_SEG1G ? SEG_PAGE_1G
                                                                           : SEG_PAGE_4K;
}

static uint64_t table_bytes(void)
{
    uint64_t page = page_size(), bytes = sizeof(uint64_t) << opt.log2;
    return (bytes + page - 1) / page * page;
}

static void emit_skip(const char *reason)
{
    printf("{\"name\":\"skip\",\"params\":{%s,\"reason\":\"%s\"},\"reason\":\"%s\"}\n",
           params, reason, reason);
    fflush(stdout);
}

/* ---- huge page pool: grown in the parent, restored there however the worker ends ---- */

static long pool_saved = -1;

/* Make sure the pool has enough free pages for the table; NULL on success, else why not. */
static const char *reserve_pool(void)
{
    uint64_t page = page_size();
    const char *env = getenv(page == SEG_PAGE_2M ? "EXOMEM_HUGETLBFS_2M" : "EXOMEM_HUGETLBFS_1G");
    char mount[256];
    if ((!env || !*env) && exo_os_find_hugetlbfs(page, mount, sizeof mount) != 0)
        return "no hugetlbfs mount of this page size";
    switch (exo_os_pool_reserve(page, (long)(table_bytes() / page), &pool_saved)) {
    case 0: return NULL;
    case -EXO_EPERM: return "huge page pool too small (and not root)";
    case -EXO_ENOHUGE: return "huge page pool cannot be grown enough";
    default: return "no huge page pool of this size";
    }
}

static void restore_pool(void)
{
    if (exo_os_pool_restore(page_size(), pool_saved) != 0)
        fprintf(stderr, "gups: cannot restore the huge page pool to %ld pages\n", pool_saved);
    pool_saved = -1;
}

/* ---- the table ---- */

static segid_t huge_seg; /* a 2M/1G segment (bench_make_seg makes 4K ones only) */

/* Runs before bench_teardown (atexit order): that removes the VAS, then the segment can go,
 * also on error exits, since its data lives in hugetlbfs, not in the private registry. */
static void teardown(void)
{
    bench_teardown();
    if (huge_seg && seg_delete(huge_seg) != 0)
        fprintf(stderr, "gups: cleanup: seg_delete: %s\n", exomem_last_error());
    huge_seg = 0;
}

/* The table's memory, or NULL after printing a skip line. */
static uint64_t *make_table(void)
{
    uint64_t bytes = table_bytes();
    if (opt.memory == MEM_ANON) {
        void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            fprintf(stderr, "gups: mmap %llu bytes: %s\n", (unsigned long long)bytes,
                    strerror(errno));
            exit(1);
        }
        return p;
    }
    atexit(teardown);
    segid_t sid;
    if (opt.memory == MEM_SEG2M || opt.memory == MEM_SEG1G) {
        struct seg_opts so = { .page_size = page_size() };
        int rc = seg_alloc_ex("gups-table", TABLE_BASE, bytes, 0600, &so, &sid);
        if (rc == -EXO_ENOHUGE) {
            fprintf(stderr, "gups: %s\n", exomem_last_error());
            emit_skip("no huge pages for the segment");
            return NULL;
        }
        if (rc != 0)
            bench_die("seg_alloc_ex", rc);
        huge_seg = sid;
    } else {
        sid = bench_make_seg("gups-table", TABLE_BASE, bytes);
    }
    vasid_t vid = bench_make_vas("gups");
    TRY(seg_attach(vid, sid, SEG_RDWR));
    TRY(vas_switch(bench_attach(vid)));
    if (opt.memory == MEM_THP && madvise((void *)TABLE_BASE, bytes, MADV_HUGEPAGE) != 0) {
        fprintf(stderr, "gups: madvise(MADV_HUGEPAGE): %s\n", strerror(errno));
        exit(1);
    }
    return (uint64_t *)TABLE_BASE;
}

/* Why THP may not apply: segment data is shared memory, governed by shmem_enabled. */
static const char *thp_note(void)
{
    if (opt.memory != MEM_THP)
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
    if (opt.memory != MEM_ANON || opt.check_bounds)
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
            size_t i = 0;
            while (i < sizeof memory_names / sizeof memory_names[0] &&
                   strcmp(optarg, memory_names[i]))
                i++;
            if (i == sizeof memory_names / sizeof memory_names[0]) {
                usage(stderr);
                return 2;
            }
            opt.memory = (enum memory)i;
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
             opt.threads, memory_names[opt.memory], opt.check_bounds ? 1 : 0);
    if (opt.memory == MEM_SEG2M || opt.memory == MEM_SEG1G) {
        const char *why = reserve_pool();
        if (why) {
            restore_pool();
            emit_skip(why);
            return 0;
        }
    }
    int status = bench_run_in_private_registry(run);
    restore_pool();
    return status;
}
