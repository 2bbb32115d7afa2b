/* bench_pager: the application-level pager (include/exomem/pager.h) against the kernel's own
 * paging, on data larger than the memory budget (docs/pager.md, issue 10).
 *
 * Workloads, each over data of 2x and 4x the budget (the scan: 1.5x):
 *   uniform   random 8-byte words, one in four written
 *   zipf      the same over pages drawn from Zipf(0.99), hot pages scattered
 *   scan      a cyclic sequential scan (8 words per 4 KiB page)
 *   chase     pointer chasing: 8 dependent hops per lookup through 64-byte nodes
 * Each first writes all of its data (not timed), then runs its operations (timed).
 *
 * Peers, side by side in one run (each in a forked child):
 *   exomem    every policy (fifo, clock, lru, mru) with the file and lz4 stores, and lru with
 *             zstd, the io_uring file store, a redis-server and a 3-node Redis Cluster
 *             (started by this run, on a UNIX socket and loopback TCP); the file store runs in a memory cgroup of budget + 4 MiB, so that the
 *             file's page cache cannot act as extra memory, the memory stores outside it
 *             (like zram's memory); handler-thread delivery, and SIGBUS delivery for lru
 *             with the file and lz4 stores
 *   kernel    the same code on anonymous memory in a memory cgroup of budget + 4 MiB, swap on
 *             zram (lz4) and on a swap file on the same disk as the file store
 * The budget is what the pager may keep resident; the 4 MiB more of the cgroup are for what
 * the process allocates besides the data (page tables, the pager's tables), given to both.
 * (A process's pages from before it entered the cgroup stay charged where they were.)
 *
 * Output (JSON lines): pager_ops (kops/s, with the kernel on zram as baseline),
 * pager_fault_us (median and p99 of exomem's fault service time), and pager_table_* (lookup
 * time and bytes of each page-table structure at 1 million and, full runs, 100 million pages).
 */
#include "bench_child.h"
#include "bench_memory.h"
#include "bench_util.h"
#include "kernel_swap.h"
#include "pager/table.h"
#include "redis_fixture.h"

#include <exomem/pager.h>
#include <exomem/seg.h>
#include <exomem/vas.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB ((uint64_t)1 << 20)
#define PAGE 4096
#define SLACK (4 * MIB)
#define STORE_DIR "/var/tmp"

enum workload { W_UNIFORM, W_ZIPF, W_SCAN, W_CHASE, N_WORKLOADS };
static const char *const workload_names[N_WORKLOADS] = {"uniform", "zipf", "scan", "chase"};

enum store_kind { S_FILE, S_LZ4, S_ZSTD, S_URING, S_REDIS, S_CLUSTER, N_STORES };
static const char *const store_names[N_STORES] = {"file", "memory-lz4", "memory-zstd",
                                                  "file-uring", "redis", "redis-cluster"};

/* The redis-server (UNIX socket) and the 3-node Redis Cluster the redis stores use, started
 * by this run (tests/redis_fixture.c: stopped at exit, also if this process dies). */
static struct redis_server redis_single, redis_nodes[3];
static const char *redis_why = "not started";

static bool quick;
static int repeats = 2;
static uint64_t budget = 16 * MIB;
static uint64_t ops = 40000;

/* ---- the workloads (the same code for both peers) ---- */

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x *= UINT64_C(0xc4ceb9fe1a85ec53);
    return x ^ (x >> 33);
}

/* Half the words random, half zero: about 2:1 for lz4, like much real data. */
static uint64_t pattern(uint64_t word)
{
    return (word & 1) ? 0 : mix(word) | 1;
}

static uint64_t node_next(uint64_t i, uint64_t n)   /* a full-period LCG over n = 2^k nodes */
{
    return (i * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407)) & (n - 1);
}

static void fill(uint64_t *mem, uint64_t bytes, enum workload w)
{
    uint64_t words = bytes / 8;
    if (w == W_CHASE) {
        uint64_t n = bytes / 64;
        for (uint64_t i = 0; i < n; i++) {
            mem[i * 8] = node_next(i, n);
            for (int k = 1; k < 8; k++)
                mem[i * 8 + k] = pattern(i * 8 + k);
        }
        return;
    }
    for (uint64_t i = 0; i < words; i++)
        mem[i] = pattern(i);
}

/* Zipf(0.99) over n pages: the cumulative weights, for drawing by binary search. */
static double *zipf_cdf(uint64_t n)
{
    double *cdf = malloc(n * sizeof *cdf);
    if (!cdf)
        bench_die("zipf table", -EXO_ENOMEM);
    double sum = 0;
    for (uint64_t i = 0; i < n; i++)
        cdf[i] = (sum += 1.0 / pow((double)(i + 1), 0.99));
    for (uint64_t i = 0; i < n; i++)
        cdf[i] /= sum;
    return cdf;
}

static uint64_t zipf_page(const double *cdf, uint64_t n, uint64_t r)
{
    double u = (double)(r >> 11) / 9007199254740992.0;
    uint64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        uint64_t mid = (lo + hi) / 2;
        if (cdf[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (lo * UINT64_C(0x9E3779B97F4A7C15)) & (n - 1);   /* hot ranks scattered */
}

/* Run the timed operations; returns seconds, or -1 when a pointer hop found wrong data. */
static double run_ops(uint64_t *mem, uint64_t bytes, enum workload w, const double *cdf)
{
    uint64_t words = bytes / 8, pages = bytes / PAGE, sum = 0, rng = 12345;
    uint64_t t0 = bench_now_ns();
    for (uint64_t i = 0; i < ops; i++) {
        rng = mix(rng + i);
        switch (w) {
        case W_UNIFORM:
        case W_ZIPF: {
            uint64_t word = w == W_UNIFORM ? rng % words
                                           : zipf_page(cdf, pages, rng) * (PAGE / 8) + (rng & 511);
            if ((i & 3) == 0)
                mem[word] += 1;
            else
                sum += mem[word];
            break;
        }
        case W_SCAN: {
            uint64_t *p = mem + (i % pages) * (PAGE / 8);
            for (int k = 0; k < 8; k++)
                sum += p[k * 64];
            break;
        }
        case W_CHASE: {
            uint64_t n = bytes / 64, at = rng & (n - 1);
            for (int hop = 0; hop < 8; hop++) {
                uint64_t next = mem[at * 8];
                if (next != node_next(at, n))
                    return -1;
                at = next;
            }
            sum += at;
            break;
        }
        default:
            break;
        }
    }
    double s = (double)(bench_now_ns() - t0) / 1e9;
    __asm__ volatile("" : : "r"(sum));
    return s;
}

static uint64_t data_bytes(enum workload w, int x2)   /* x2: the size as twice the factor */
{
    uint64_t b = budget * (uint64_t)x2 / 2;
    uint64_t p2 = PAGE;   /* a power of two of pages: the chase and Zipf mask by it */
    while (p2 * 2 <= b)
        p2 *= 2;
    return w == W_SCAN ? b / PAGE * PAGE : p2;
}

/* ---- one run (in a forked child) ---- */

struct run {
    enum workload w;
    int x2;                 /* data = budget * x2 / 2 */
    bool kernel;
    enum kswap_device dev;  /* kernel runs */
    exo_pager_policy policy;
    enum store_kind store;
    exo_pager_delivery delivery;
    char store_path[128];   /* the file store's file (chosen and removed by the parent) */
    /* results, passed back through a shared page */
    double seconds;
    double fault_p50_us, fault_p99_us;
    char why[160];
};

static double quantile_us(const exo_pager_stats *s, double q)
{
    int b = exo_pager_latency_bucket(s, q);
    return b < 0 ? 0 : (double)(UINT64_C(3) << b) / 2e3;   /* the bucket's middle */
}

static int run_kernel(struct run *r, uint64_t bytes, const double *cdf)
{
    uint64_t *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        snprintf(r->why, sizeof r->why, "mmap failed");
        return 1;
    }
    madvise(mem, bytes, MADV_NOHUGEPAGE);   /* 4 KiB pages, as the pager's units */
    fill(mem, bytes, r->w);
    r->seconds = run_ops(mem, bytes, r->w, cdf);
    return r->seconds < 0;
}

static int run_exomem(struct run *r, uint64_t bytes, const double *cdf)
{
    exo_pager_store *s;
    const char *path = r->store_path;
    char prefix[64];
    snprintf(prefix, sizeof prefix, "bench-%d", (int)getpid());
    const char *seeds[3] = {redis_nodes[0].addr, redis_nodes[1].addr, redis_nodes[2].addr};
    switch (r->store) {
    case S_FILE:
    case S_URING:
        unlink(path);
        if (r->store == S_FILE)
            TRY(exo_pager_store_file(path, &s));
        else
            TRY(exo_pager_store_file_uring(path, 0, &s));
        break;
    case S_REDIS:
        TRY(exo_pager_store_redis(redis_single.addr, prefix, &s));
        break;
    case S_CLUSTER:
        TRY(exo_pager_store_redis_cluster(seeds, 3, prefix, &s));
        break;
    default:
        TRY(exo_pager_store_memory(r->store == S_LZ4 ? EXO_PAGER_LZ4 : EXO_PAGER_ZSTD, &s));
    }
    exo_pager_options o = {.size = bytes, .budget = budget, .policy = r->policy,
                           .delivery = r->delivery, .threads = 1, .store = s};
    exo_pager *p;
    int rc = exo_pager_create(&o, &p);
    if (rc) {
        snprintf(r->why, sizeof r->why, "exo_pager_create: %s", exomem_strerror(rc));
        unlink(path);
        return 1;
    }
    uint64_t *mem = exo_pager_base(p);
    fill(mem, bytes, r->w);
    exo_pager_stats before, after;
    TRY(exo_pager_get_stats(p, &before));
    r->seconds = run_ops(mem, bytes, r->w, cdf);
    TRY(exo_pager_get_stats(p, &after));
    for (int i = 0; i < EXO_PAGER_LATENCY_BUCKETS; i++)
        after.latency[i] -= before.latency[i];   /* the timed part's faults only */
    r->fault_p50_us = quantile_us(&after, 0.5);
    r->fault_p99_us = quantile_us(&after, 0.99);
    TRY(exo_pager_destroy(p));
    TRY(exo_pager_store_close(s));
    unlink(path);
    return r->seconds < 0;
}

static int child_main(void *arg)
{
    struct run *r = arg;
    uint64_t bytes = data_bytes(r->w, r->x2);
    bool in_cgroup = r->kernel || r->store == S_FILE || r->store == S_URING;
    if (in_cgroup && kswap_cgroup_enter(getpid()) != 0) {
        snprintf(r->why, sizeof r->why, "cannot enter the memory cgroup");
        return 1;
    }
    double *cdf = r->w == W_ZIPF ? zipf_cdf(bytes / PAGE) : NULL;
    int rc = r->kernel ? run_kernel(r, bytes, cdf) : run_exomem(r, bytes, cdf);
    if (rc && !r->why[0])
        snprintf(r->why, sizeof r->why, "a pointer hop read wrong data");
    free(cdf);
    return rc;
}

static const char *peer_name(const struct run *r)
{
    static char name[64];
    if (r->kernel)
        return r->dev == KSWAP_ZRAM ? "kernel-zram" : "kernel-swapfile";
    snprintf(name, sizeof name, "exomem-%s", exo_pager_policy_name(r->policy));
    return name;
}

static void params_of(const struct run *r, char *buf, size_t len, bool kernel_zram)
{
    snprintf(buf, len, "\"workload\":\"%s\",\"data_x\":%.1f,\"budget_mib\":%llu,\"peer\":\"%s\","
             "\"store\":\"%s\",\"delivery\":\"%s\"",
             workload_names[r->w], r->x2 / 2.0, (unsigned long long)(budget / MIB),
             kernel_zram ? "kernel-zram" : peer_name(r),
             kernel_zram ? "zram" : r->kernel ? (r->dev == KSWAP_ZRAM ? "zram" : "swapfile")
                                              : store_names[r->store],
             kernel_zram || r->kernel ? "kernel" :
             r->delivery == EXO_PAGER_SIGBUS ? "sigbus" : "threads");
}

static void report_run(const struct run *r, int rc)
{
    char params[512], base[512];
    params_of(r, params, sizeof params, false);
    if (rc) {
        bench_emit_skip(params, r->why[0] ? r->why : "the run failed");
        return;
    }
    double kops = (double)ops / r->seconds / 1e3;
    printf("{\"name\":\"pager_ops\",\"unit\":\"kops/s\",\"value\":%.3f,\"params\":{%s}", kops,
           params);
    if (!(r->kernel && r->dev == KSWAP_ZRAM)) {
        params_of(r, base, sizeof base, true);
        printf(",\"baseline\":\"pager_ops\",\"baseline_params\":{%s}", base);
    }
    printf("}\n");
    if (!r->kernel) {
        bench_emit("pager_fault_us", "us", r->fault_p50_us, params, NULL, "median");
        char p99[560];
        snprintf(p99, sizeof p99, "%s,\"quantile\":\"p99\"", params);
        bench_emit("pager_fault_us_p99", "us", r->fault_p99_us, p99, NULL, NULL);
    }
    fflush(stdout);
}

/* Empty the redis servers after a run: its keys stay otherwise. */
static void redis_forget_all(void)
{
    struct redis_server *all[4] = {&redis_single, &redis_nodes[0], &redis_nodes[1],
                                   &redis_nodes[2]};
    for (int i = 0; i < 4; i++) {
        if (!all[i]->pid)
            continue;
        redisContext *c = redis_admin(all[i]);
        freeReplyObject(redis_cmd(c, 1, "FLUSHALL"));
        redisFree(c);
    }
}

static char redis_dir[] = "/tmp/exomem-bench-redis-XXXXXX";
static pid_t redis_owner;

static void remove_redis_dir(void)
{
    if (getpid() == redis_owner) /* not a forked child leaving */
        bench_remove_tree(redis_dir);
}

/* Start the redis-server and the cluster, unless redis-server is missing. */
static void redis_setup(void)
{
    if ((redis_why = redis_fixture_missing()) != NULL)
        return;
    char *dir = redis_dir;
    redis_owner = getpid();
    if (!mkdtemp(dir)) {
        redis_why = "cannot make a directory for redis-server";
        return;
    }
    atexit(remove_redis_dir);
    redis_start_unix(&redis_single, dir, "single");
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof name, "node%d", i);
        redis_start_cluster_node(&redis_nodes[i], dir, name);
    }
    redis_cluster_create(redis_nodes, 3);
}

static void one(struct run r)
{
    struct run *shared = mmap(NULL, sizeof r, PROT_READ | PROT_WRITE,
                              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED)
        bench_die("mmap", -EXO_ENOMEM);
    *shared = r;
    static unsigned serial;
    snprintf(shared->store_path, sizeof shared->store_path,
             STORE_DIR "/exomem-bench-pager-%d-%u", (int)getpid(), serial++);
    int rc = bench_in_child(child_main, shared, workload_names[r.w]);
    unlink(shared->store_path); /* also when the child was killed */
    if (r.store == S_REDIS || r.store == S_CLUSTER)
        redis_forget_all();
    report_run(shared, rc);
    munmap(shared, sizeof r);
}

/* ---- page-table structures ---- */

static void tables(void)
{
    static const exo_pager_table kinds[] = {EXO_PAGER_TABLE_RADIX, EXO_PAGER_TABLE_HASH,
                                            EXO_PAGER_TABLE_VECTOR};
    static const uint64_t sizes[] = {1000000, 100000000};
    const uint64_t lookups = quick ? 200000 : 2000000;
    for (size_t si = 0; si < (quick ? 1u : 2u) && !bench_stop; si++) {
        uint64_t n = sizes[si];
        if (n * 40 > bench_mem_available()) {
            char p[128];
            snprintf(p, sizeof p, "\"pages\":%llu", (unsigned long long)n);
            bench_emit_skip(p, "not enough free memory for the largest structure");
            continue;
        }
        for (size_t k = 0; k < 3 && !bench_stop; k++) {
            struct pager_table *t;
            TRY(exo_pager_table_new(kinds[k], n, &t));
            /* Units in order, as a region filled front to back (the sorted vector appends). */
            for (uint64_t u = 0; u < n; u++) {
                uint64_t *e = t->ops->insert(t, u);
                if (!e)
                    bench_die("table insert", -EXO_ENOMEM);
                *e = (u << 32) | 3;
            }
            uint64_t rng = 99, sum = 0, t0 = bench_now_ns();
            for (uint64_t i = 0; i < lookups; i++) {
                rng = mix(rng + i);
                uint64_t *e = t->ops->find(t, rng % n);
                sum += e ? *e : 0;
            }
            double ns = (double)(bench_now_ns() - t0) / (double)lookups;
            __asm__ volatile("" : : "r"(sum));
            char p[128];
            snprintf(p, sizeof p, "\"table\":\"%s\",\"pages\":%llu", exo_pager_table_name(kinds[k]),
                     (unsigned long long)n);
            bench_emit("pager_table_lookup_ns", "ns", ns, p, NULL, "random lookups");
            bench_emit("pager_table_bytes_per_page", "B", (double)t->ops->bytes(t) / (double)n,
                       p, NULL, NULL);
            t->ops->destroy(t);
        }
    }
}

/* ---- AVM's dirty: a one-page query of the pager's own page table ---- */

/* AVM's Figure 1 "dirty": the time to ask whether one random page is dirty, parsing the
 * application's page table. Here exo_pager_query() on a region of 4096 units, all resident
 * (the budget holds them), every other one written. Shown in the Appel-Li/AVM table. */
static void dirty_query(void)
{
    enum { UNITS = 4096, QUERIES = 200000 };
    exo_pager_store *s;
    TRY(exo_pager_store_memory(EXO_PAGER_PLAIN, &s));
    exo_pager_options o = {.size = UNITS * PAGE, .budget = UNITS * PAGE, .store = s};
    exo_pager *p;
    int rc = exo_pager_create(&o, &p);
    if (rc) {
        bench_emit_skip("\"engine\":\"pager\"", "userfaultfd is not usable here");
        exo_pager_store_close(s);
        return;
    }
    volatile char *base = exo_pager_base(p);
    for (size_t u = 0; u < UNITS; u++)
        if (u & 1)
            base[u * PAGE] = 1;
        else
            (void)base[u * PAGE];
    for (int rep = 0; rep < repeats; rep++) {
        uint64_t rng = 7 + (uint64_t)rep, dirty = 0, t0 = bench_now_ns();
        for (int i = 0; i < QUERIES; i++) {
            rng = mix(rng + (uint64_t)i);
            unsigned st;
            TRY(exo_pager_query(p, (const void *)(base + (rng % UNITS) * PAGE), &st));
            dirty += (st & EXO_PAGER_DIRTY) != 0;
        }
        double us = (double)(bench_now_ns() - t0) / 1e3 / QUERIES;
        if (dirty < QUERIES / 3 || dirty > QUERIES * 2 / 3)
            bench_die("dirty query: the written half is not what the query sees", -EXO_EIO);
        bench_emit("vm_dirty_query", "us", us, "\"engine\":\"pager\"", NULL,
                   "exo_pager_query of one random page");
    }
    TRY(exo_pager_destroy(p));
    TRY(exo_pager_store_close(s));
}

/* ---- paged segments: what a switch costs with N dirty pages ---- */

/* A 256 MiB SEG_PAGED segment (64 MiB budget) in a VAS: switch in, dirty N pages, switch
 * out (writing them back), timed as one round trip, against the same with an ordinary
 * segment of the same size. */
static void paged_switch(void)
{
    static const int dirty[] = {0, 16, 256, 4096};
    const uint64_t size = 256 * MIB, base = UINT64_C(0x520000000000);
    const int rounds = quick ? 5 : 20;
    for (int kind = 0; kind < 2 && !bench_stop; kind++) {
        struct seg_opts so = {.flags = kind ? SEG_PAGED : SEG_NORESERVE, .paged_dir = STORE_DIR,
                              .paged_budget = 64 * MIB};
        segid_t sid;
        vasid_t vid;
        vhandle_t vh;
        char name[32];
        snprintf(name, sizeof name, "switch-%d", kind);
        int rc = seg_alloc_ex(name, base, size, 0600, &so, &sid);
        if (rc) {
            bench_emit_skip(kind ? "\"segment\":\"paged\"" : "\"segment\":\"plain\"",
                            "cannot make the segment");
            continue;
        }
        TRY(vas_create(name, 0600, &vid));
        TRY(seg_attach(vid, sid, SEG_RDWR));
        TRY(vas_attach(vid, &vh));
        TRY(vas_switch(vh)); /* once untimed: the first switch-in maps and populates */
        TRY(vas_switch(VAS_HOME));
        for (size_t d = 0; d < sizeof dirty / sizeof dirty[0] && !bench_stop; d++) {
            for (int r = 0; r < repeats; r++) {
                uint64_t total = 0;
                for (int k = 0; k < rounds; k++) {
                    uint64_t t0 = bench_now_ns();
                    TRY(vas_switch(vh));
                    volatile char *mem = (volatile char *)(uintptr_t)base;
                    for (int i = 0; i < dirty[d]; i++)
                        mem[(uint64_t)i * PAGE * 7 % size] = (char)k;
                    TRY(vas_switch(VAS_HOME));
                    total += bench_now_ns() - t0;
                }
                char params[128];
                snprintf(params, sizeof params, "\"segment\":\"%s\",\"dirty_pages\":%d",
                         kind ? "paged" : "plain", dirty[d]);
                bench_emit("paged_switch_roundtrip_us", "us", (double)total / rounds / 1e3,
                           params, NULL, "switch in, write N pages, switch out");
            }
        }
        TRY(vas_detach(vh));
        TRY(vas_delete(vid));
        TRY(seg_delete(sid));
    }
}

/* ---- the run ---- */

int main(int argc, char **argv)
{
    quick = bench_has_flag(argc, argv, "--quick");
    if (quick) {
        repeats = 1;
        budget = 16 * MIB;
        ops = 20000;
    }
    static const struct option longopts[] = {
        {"repeats", required_argument, NULL, 'r'}, {"budget-mib", required_argument, NULL, 'b'},
        {"ops", required_argument, NULL, 'o'}, BENCH_COMMON_LONGOPTS};
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'r': repeats = (int)bench_positive(optarg); break;
        case 'b': budget = (uint64_t)bench_positive(optarg) * MIB; break;
        case 'o': ops = (uint64_t)bench_positive(optarg); break;
        case 'q': break;
        case 'h':
            printf("usage: bench_pager [--quick] [--repeats N] [--budget-mib N] [--ops N]\n");
            return 0;
        default:
            fprintf(stderr, "usage: bench_pager [--quick] [--repeats N] [--budget-mib N] "
                    "[--ops N]\n");
            return 2;
        }
    }
    bench_stop_on_signals();
    printf("{\"name\":\"pager_setup\",\"unit\":\"MiB\",\"value\":%llu,\"params\":{\"ops\":%llu,"
           "\"repeats\":%d,\"quick\":%d},\"note\":\"frame budget\"}\n",
           (unsigned long long)(budget / MIB), (unsigned long long)ops, repeats, quick);
    tables();
    dirty_query();
    paged_switch();
    redis_setup();

    const char *cg = kswap_cgroup_make(budget + SLACK);
    const char *dev_why[3] = {NULL, NULL, NULL};
    if (kswap_foreign_swap())
        cg = "another swap device is on; the kernel's runs would use it";
    static const int sizes_x2[] = {4, 8};   /* 2x and 4x the budget */
    static const exo_pager_policy policies[] = {EXO_PAGER_FIFO, EXO_PAGER_CLOCK, EXO_PAGER_LRU,
                                                EXO_PAGER_MRU};
    for (int rep = 0; rep < repeats && !bench_stop; rep++) {
        for (int w = 0; w < N_WORKLOADS && !bench_stop; w++) {
            /* --quick: 2x the budget only. */
            for (int si = 0; si < (w == W_SCAN || quick ? 1 : 2) && !bench_stop; si++) {
                struct run base = {.w = (enum workload)w,
                                   .x2 = w == W_SCAN ? 3 : sizes_x2[si]};
                /* The kernel: zram, then the swap file. */
                for (int d = KSWAP_ZRAM; d <= KSWAP_FILE && !bench_stop; d++) {
                    struct run r = base;
                    r.kernel = true;
                    r.dev = (enum kswap_device)d;
                    const char *why = cg;
                    if (!why)
                        why = dev_why[d] ? dev_why[d]
                                         : kswap_use(r.dev, 4 * budget + 64 * MIB, STORE_DIR);
                    if (why) {
                        dev_why[d] = why;
                        snprintf(r.why, sizeof r.why, "%s", why);
                        report_run(&r, 1);
                        continue;
                    }
                    one(r);
                }
                kswap_use(KSWAP_NONE, 0, NULL);
                /* exomem: every policy and store, handler threads; SIGBUS for lru. */
                for (int p = 0; p < 4 && !bench_stop; p++)
                    for (int s = 0; s < N_STORES && !bench_stop; s++) {
                        /* zstd, io_uring and the redis stores only with LRU (their
                         * policy results would repeat the lz4 and file stores');
                         * --quick leaves out CLOCK and zstd. */
                        bool lru_only = s == S_ZSTD || s == S_URING || s == S_REDIS ||
                                        s == S_CLUSTER;
                        if ((lru_only && policies[p] != EXO_PAGER_LRU) ||
                            (quick && (s == S_ZSTD || policies[p] == EXO_PAGER_CLOCK)))
                            continue;
                        if ((s == S_REDIS || s == S_CLUSTER) && redis_why) {
                            struct run skip = base;
                            skip.policy = policies[p];
                            skip.store = (enum store_kind)s;
                            skip.delivery = EXO_PAGER_THREADS;
                            snprintf(skip.why, sizeof skip.why, "no redis: %s", redis_why);
                            report_run(&skip, 1);
                            continue;
                        }
                        struct run r = base;
                        r.policy = policies[p];
                        r.store = (enum store_kind)s;
                        r.delivery = EXO_PAGER_THREADS;
                        if ((s == S_FILE || s == S_URING) && cg) {
                            snprintf(r.why, sizeof r.why, "file store runs in the memory "
                                     "cgroup: %s", cg);
                            report_run(&r, 1);
                            continue;
                        }
                        one(r);
                        if (policies[p] == EXO_PAGER_LRU && (s == S_FILE || s == S_LZ4)) {
                            r.delivery = EXO_PAGER_SIGBUS;
                            one(r);
                        }
                    }
            }
        }
    }
    kswap_cleanup();
    return bench_stop ? 1 : 0;
}
