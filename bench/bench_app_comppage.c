/* bench_app_comppage: data-compression paging (apps/comppage) against the kernel's own
 * compressed swap, zram, with the same memory budget, in one run (each in a forked child).
 *
 * Workload: a table of 256-byte text records four times the budget, written once, then
 * updated at random (read, check, rewrite). Peers: comppage with lz4 and with zstd; the same
 * program on anonymous memory in a memory cgroup of the budget (+4 MiB for what else the
 * process allocates) with swap on zram (lz4) and on a swap file. Output: updates per second
 * (the kernel on zram is the baseline), and the memory the compressed pages take
 * (comppage's store against zram's mem_used_total). Needs root for the kernel's runs.
 */
#include "bench_child.h"
#include "bench_memory.h"
#include "bench_util.h"
#include "kernel_swap.h"

#include "comppage.h"
#include "records.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MIB ((uint64_t)1 << 20)

static uint64_t budget = 32 * MIB, updates = 200000;
static int repeats = 3;

enum peer { P_LZ4, P_ZSTD, P_ZRAM, P_SWAPFILE, N_PEERS };
static const char *const peer_names[N_PEERS] = {"comppage-lz4", "comppage-zstd", "kernel-zram",
                                                "kernel-swapfile"};

struct result {
    double updates_per_s;
    double compressed_mib;
    int bad;
};

static void run_updates(char *table, uint64_t records, struct result *r)
{
    uint64_t *version = calloc(records, sizeof *version);
    if (!version)
        bench_die("calloc", -EXO_ENOMEM);
    for (uint64_t i = 0; i < records; i++)
        comppage_record(i, 0, table + i * COMPPAGE_RECORD);
    uint64_t rng = 88172645463325252u, t0 = bench_now_ns();
    for (uint64_t k = 0; k < updates; k++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        uint64_t i = rng % records;
        char *rec = table + i * COMPPAGE_RECORD;
        r->bad += !comppage_record_ok(rec, i, version[i]);
        comppage_record(i, ++version[i], rec);
    }
    r->updates_per_s = (double)updates / ((double)(bench_now_ns() - t0) / 1e9);
    free(version);
}

/* zram's memory for what it holds (mm_stat's third field), in MiB; 0 if unknown. */
static double zram_used_mib(void)
{
    FILE *f = fopen("/sys/block/zram0/mm_stat", "re");
    unsigned long long orig = 0, compr = 0, used = 0;
    if (f) {
        if (fscanf(f, "%llu %llu %llu", &orig, &compr, &used) != 3)
            used = 0;
        fclose(f);
    }
    return (double)used / (double)MIB;
}

struct job {
    enum peer peer;
    struct result r;
};

static int child(void *arg)
{
    struct job *j = arg;
    uint64_t bytes = 4 * budget, records = bytes / COMPPAGE_RECORD;
    if (j->peer == P_ZRAM || j->peer == P_SWAPFILE) {
        if (kswap_cgroup_enter(getpid()) != 0)
            return 1;
        char *t = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (t == MAP_FAILED)
            return 1;
        madvise(t, bytes, MADV_NOHUGEPAGE);
        run_updates(t, records, &j->r);
        if (j->peer == P_ZRAM)
            j->r.compressed_mib = zram_used_mib();
        return j->r.bad != 0;
    }
    struct comppage_opts o = {.size = bytes, .budget = budget,
                              .codec = j->peer == P_LZ4 ? COMPPAGE_LZ4 : COMPPAGE_ZSTD};
    comppage *a;
    TRY(comppage_open(&o, &a));
    run_updates(comppage_base(a), records, &j->r);
    struct comppage_stats st;
    TRY(comppage_stats(a, &st));
    j->r.compressed_mib = (double)st.compressed_bytes / (double)MIB;
    TRY(comppage_close(a));
    return j->r.bad != 0;
}

int main(int argc, char **argv)
{
    bool quick = bench_parse_args(argc, argv, &repeats, 1, NULL);
    if (quick) {
        budget = 16 * MIB;
        updates = 40000;
    }
    bench_stop_on_signals();
    const char *cg = kswap_cgroup_make(budget + 4 * MIB);
    if (!cg && kswap_foreign_swap())
        cg = "another swap device is on; the kernel's runs would use it";
    char params[160], base[160];
    snprintf(base, sizeof base, "\"peer\":\"kernel-zram\",\"budget_mib\":%llu,\"table_x\":4",
             (unsigned long long)(budget / MIB));
    for (int rep = 0; rep < repeats && !bench_stop; rep++) {
        for (int p = 0; p < N_PEERS && !bench_stop; p++) {
            snprintf(params, sizeof params, "\"peer\":\"%s\",\"budget_mib\":%llu,\"table_x\":4",
                     peer_names[p], (unsigned long long)(budget / MIB));
            const char *why = NULL;
            if (p == P_ZRAM || p == P_SWAPFILE)
                why = cg ? cg : kswap_use(p == P_ZRAM ? KSWAP_ZRAM : KSWAP_FILE,
                                          8 * budget + 64 * MIB, "/var/tmp");
            else
                kswap_use(KSWAP_NONE, 0, NULL);
            if (why) {
                bench_emit_skip(params, why);
                continue;
            }
            struct job *j = mmap(NULL, sizeof *j, PROT_READ | PROT_WRITE,
                                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
            if (j == MAP_FAILED)
                bench_die("mmap", -EXO_ENOMEM);
            *j = (struct job){.peer = (enum peer)p};
            int rc = bench_in_child(child, j, peer_names[p]);
            if (rc) {
                bench_emit_skip(params, j->r.bad ? "a record read back wrong" : "the run failed");
            } else {
                printf("{\"name\":\"comppage_updates\",\"unit\":\"updates/s\",\"value\":%.1f,"
                       "\"params\":{%s}", j->r.updates_per_s, params);
                if (p != P_ZRAM)
                    printf(",\"baseline\":\"comppage_updates\",\"baseline_params\":{%s}", base);
                printf("}\n");
                if (p != P_SWAPFILE)
                    bench_emit("comppage_compressed_mib", "MiB", j->r.compressed_mib, params,
                               NULL, "memory holding the pages that left the budget");
                fflush(stdout);
            }
            munmap(j, sizeof *j);
        }
    }
    kswap_cleanup();
    return bench_stop ? 1 : 0;
}
