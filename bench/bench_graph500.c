/* bench_graph500: Figure 6 of the hybrid segmentation paper redone on Linux -- Graph500 BFS
 * (apps/graph500: the specification's Kronecker generator and parameters, search keys,
 * validation of every BFS tree and harmonic-mean TEPS) with the graph in an exomem segment
 * of 4K, THP, 2M or 1G pages, per scale.
 *
 * Per scale, the worker generates the edge list and builds the CSR graph once, in ordinary
 * memory; then, for each memory kind, a child copies the CSR graph into a segment of that
 * kind, where the parent array and the BFS queue live too, and runs the searches there. The
 * input edge list (used only to generate and to validate) stays in ordinary memory: what is
 * timed -- the BFS -- touches only the segment. Every tree is validated with the
 * specification's checks before its TEPS counts; a failed validation prints a skip line
 * and makes the exit status 1.
 *
 * Lines: "graph500_teps" (harmonic mean over the keys; baseline: the same scale in a 4K
 * segment), "graph500_teps_min"/"_max" (slowest and fastest key), "graph500_huge" (% of the
 * segment the kernel mapped with huge pages, from /proc/self/smaps) and "skip" lines.
 * Time budget: searches plus validation grow with the graph, so the number of keys shrinks
 * at the biggest scales (keys_for()); the report says so.
 */
#include "bench_memory.h"
#include "bench_util.h"
#include "graph500.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#define SEG_BASE UINT64_C(0x540000000000) /* 1 GiB aligned, clear of the tests' bases */
#define SEED UINT64_C(0x6772617068353030)
#define ALIGN 4096
#define MAX_KEYS 64

static struct {
    int scale_min, scale_max;
    long budget_s; /* no new scale once it would likely end after this many seconds */
    bool quick;
} opt = { 16, 24, 1080, false };

static const enum bench_memory kinds[] = { BENCH_MEM_SEG4K, BENCH_MEM_THP, BENCH_MEM_SEG2M,
                                           BENCH_MEM_SEG1G };

static volatile sig_atomic_t stop;

static void on_stop(int sig)
{
    (void)sig;
    stop = 1;
}

/* Search keys per scale: the specification's 64 while the searches and validations of the
 * four memory kinds fit the report's time budget on this 2-core VM, fewer above (0: the
 * scale is left out by default -- scale 23 -- so that the budget reaches scale 24). */
static int keys_for(int scale)
{
    if (opt.quick)
        return 16;
    static const int keys[] = { [16] = 64, [17] = 64, [18] = 64, [19] = 32, [20] = 16,
                                [21] = 8,  [22] = 4,  [23] = 0,  [24] = 4 };
    return scale < 16 ? 64 : scale > 24 ? 4 : keys[scale];
}

/* Bytes a scale needs at its peak: edge list, CSR graph, its copy in a segment, parents,
 * queue and validation arrays (neighbours counted before duplicates are removed). */
static uint64_t scale_bytes(int scale)
{
    uint64_t n = UINT64_C(1) << scale, m = n * G500_EDGEFACTOR;
    return m * sizeof(struct g500_edge) + 2 * (8 * (n + 1) + 16 * m) + 4 * 8 * n + n;
}

/* MemAvailable from /proc/meminfo in bytes (0 if unknown). */
static uint64_t mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "re");
    char line[256];
    unsigned long long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return (uint64_t)kib * 1024;
}

static size_t aligned(size_t bytes)
{
    return (bytes + ALIGN - 1) / ALIGN * ALIGN;
}

/* What a kind's segment holds: offsets, neighbours, parents and the BFS queue. */
static size_t segment_bytes(const struct g500_csr *g, enum bench_memory m)
{
    size_t n = (size_t)g->nvertices, adj = (size_t)g->offsets[g->nvertices];
    return bench_memory_round(m, aligned((n + 1) * 8) + aligned(adj * 8) + 2 * aligned(n * 8));
}

static void params(char *buf, size_t cap, enum bench_memory m, int scale, int keys)
{
    snprintf(buf, cap, "\"mem\":\"%s\",\"scale\":%d,\"keys\":%d", bench_memory_names[m], scale,
             keys);
}

static void emit_skip(const char *p, const char *reason)
{
    printf("{\"name\":\"skip\",\"params\":{%s},\"reason\":\"%s\"}\n", p, reason);
    fflush(stdout);
}

/* Bytes of [p, p+len) that /proc/self/smaps shows mapped by huge pages, transparent or
 * hugetlb. (bench_gups.c has the same reader; a shared home in bench/lib would be better.) */
static uint64_t huge_bytes(const void *p, uint64_t len)
{
    static const char *const fields[] = { "AnonHugePages:", "ShmemPmdMapped:", "FilePmdMapped:",
                                          "Shared_Hugetlb:", "Private_Hugetlb:" };
    FILE *f = fopen("/proc/self/smaps", "re");
    if (!f)
        return 0;
    uintptr_t lo = (uintptr_t)p, hi = lo + len;
    char line[512];
    bool inside = false;
    uint64_t kib = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long start, end;
        if (line[0] != ' ' && sscanf(line, "%lx-%lx ", &start, &end) == 2 &&
            strchr(line, '-') < strchr(line, ' ')) {
            inside = start < hi && end > lo;
            continue;
        }
        for (size_t i = 0; inside && i < sizeof fields / sizeof fields[0]; i++)
            if (!strncmp(line, fields[i], strlen(fields[i])))
                kib += strtoull(line + strlen(fields[i]), NULL, 10);
    }
    fclose(f);
    return kib * 1024 > len ? len : kib * 1024;
}

/* The BFS queue: one region reserved in the segment, handed out for every search. */
static struct {
    void *base;
    size_t size;
} queue_slot;

static void *queue_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    return bytes <= queue_slot.size ? queue_slot.base : NULL;
}

static const struct g500_allocator queue_allocator = { queue_alloc, NULL, NULL };

/* Child: the graph copied into memory of kind m, the searches, their validation. Exit
 * status 1 when a tree fails validation or the run was stopped, 3 when the memory could
 * not be had. */
static int measure(enum bench_memory m, int scale, const struct g500_edgelist *el,
                   const struct g500_csr *g, const int64_t *keys, int nkeys)
{
    char p[160], name[64];
    params(p, sizeof p, m, scale, nkeys);
    snprintf(name, sizeof name, "g500-%s-%d", bench_memory_names[m], scale);
    size_t bytes = segment_bytes(g, m), n = (size_t)g->nvertices;
    size_t adj = (size_t)g->offsets[g->nvertices];
    const char *why = NULL;
    char *seg = bench_memory_map(m, name, SEG_BASE, bytes, &why);
    if (!seg) {
        emit_skip(p, why);
        return 3;
    }
    struct g500_csr mine = { .nvertices = g->nvertices, .offsets = (int64_t *)seg };
    mine.adj = (int64_t *)(seg + aligned((n + 1) * 8));
    int64_t *parent = (int64_t *)((char *)mine.adj + aligned(adj * 8));
    queue_slot.base = (char *)parent + aligned(n * 8);
    queue_slot.size = n * 8;
    memcpy(mine.offsets, g->offsets, (n + 1) * 8);
    memcpy(mine.adj, g->adj, adj * 8);
    memset(parent, 0xff, n * 8);
    memset(queue_slot.base, 0, n * 8);

    char hp[96];
    snprintf(hp, sizeof hp, "\"mem\":\"%s\",\"scale\":%d", bench_memory_names[m], scale);
    bench_emit("graph500_huge", "%", 100.0 * (double)huge_bytes(seg, bytes) / (double)bytes, hp,
               NULL, NULL);

    double teps[MAX_KEYS], lo = 0, hi = 0;
    int done = 0, invalid = 0;
    uint64_t searching = 0, validating = 0;
    for (int k = 0; k < nkeys && !stop; k++) {
        uint64_t t0 = bench_now_ns();
        int rc = g500_bfs(&mine, keys[k], parent, &queue_allocator);
        uint64_t t1 = bench_now_ns();
        if (rc < 0)
            bench_die("g500_bfs", rc);
        int64_t edges = 0;
        int failed = g500_validate(el, keys[k], parent, &g500_malloc_allocator, &edges);
        validating += bench_now_ns() - t1;
        searching += t1 - t0;
        if (failed < 0)
            bench_die("g500_validate", failed);
        if (failed) {
            char why_failed[128];
            snprintf(why_failed, sizeof why_failed,
                     "graph500_failed: the tree from key %lld fails validation checks %#x",
                     (long long)keys[k], (unsigned)failed);
            emit_skip(p, why_failed);
            invalid = 1;
            continue;
        }
        teps[done] = (double)edges / ((double)(t1 - t0 ? t1 - t0 : 1) / 1e9);
        lo = done == 0 || teps[done] < lo ? teps[done] : lo;
        hi = done == 0 || teps[done] > hi ? teps[done] : hi;
        done++;
    }
    fprintf(stderr, "bench_graph500: scale %d, %s: %d searches %.2f s, validation %.2f s\n",
            scale, bench_memory_names[m], done, searching / 1e9, validating / 1e9);
    if (stop || invalid || done < nkeys)
        return 1;
    printf("{\"name\":\"graph500_teps\",\"unit\":\"TEPS\",\"value\":%.0f,\"params\":{%s}",
           g500_harmonic_mean(teps, done), p);
    if (m != BENCH_MEM_SEG4K) {
        params(p, sizeof p, BENCH_MEM_SEG4K, scale, nkeys);
        printf(",\"baseline\":\"graph500_teps\",\"baseline_params\":{%s}", p);
        params(p, sizeof p, m, scale, nkeys);
    }
    printf(",\"note\":\"%d searches, all validated\"}\n", done);
    bench_emit("graph500_teps_min", "TEPS", lo, p, NULL, NULL);
    bench_emit("graph500_teps_max", "TEPS", hi, p, NULL, NULL);
    return 0;
}

/* After a child was killed (e.g. by the OOM killer): its segment and VAS, which it could not
 * delete, so that their memory is not held while the next kinds run. */
static void delete_leftovers(enum bench_memory m, int scale)
{
    char name[64];
    snprintf(name, sizeof name, "g500-%s-%d", bench_memory_names[m], scale);
    vasid_t vid;
    segid_t sid;
    if (vas_find(name, &vid) == 0 && vas_delete(vid) != 0)
        fprintf(stderr, "bench_graph500: vas_delete %s: %s\n", name, exomem_last_error());
    if (seg_find(name, &sid) == 0 && seg_delete(sid) != 0)
        fprintf(stderr, "bench_graph500: seg_delete %s: %s\n", name, exomem_last_error());
}

/* Worker side, one kind at one scale: grow the pool, run measure() in a child, give the
 * pool back. The child's exit status (3: memory could not be had). */
static int measure_in_child(enum bench_memory m, int scale, const struct g500_edgelist *el,
                            const struct g500_csr *g, const int64_t *keys, int nkeys)
{
    char p[160];
    params(p, sizeof p, m, scale, nkeys);
    const char *why = bench_memory_reserve(m, segment_bytes(g, m));
    if (why) {
        emit_skip(p, why);
        bench_memory_release();
        return 3;
    }
    fflush(NULL);
    pid_t child = fork();
    if (child == 0)
        exit(measure(m, scale, el, g, keys, nkeys));
    int status = 1 << 8;
    if (child < 0)
        fprintf(stderr, "bench_graph500: fork: %s\n", strerror(errno));
    else
        while (waitpid(child, &status, 0) < 0 && errno == EINTR)
            ;
    if (WIFSIGNALED(status)) {
        fprintf(stderr, "bench_graph500: %s scale %d: killed by signal %d\n",
                bench_memory_names[m], scale, WTERMSIG(status));
        delete_leftovers(m, scale);
    }
    bench_memory_release();
    if (WIFSIGNALED(status))
        return 1;
    return WEXITSTATUS(status);
}

static int worker(void)
{
    int failed = 0;
    const struct g500_allocator *a = &g500_malloc_allocator;
    uint64_t start = bench_now_ns(), last_scale_ns = 0;
    int last_scale = 0;
    for (int scale = opt.scale_min; scale <= opt.scale_max && !stop; scale++) {
        char p[160];
        snprintf(p, sizeof p, "\"scale\":%d", scale);
        if (keys_for(scale) == 0)
            continue;
        /* Headroom: other programs' memory use may grow while a scale runs. */
        uint64_t need = scale_bytes(scale), have = mem_available();
        uint64_t headroom = need / 4 > (UINT64_C(2) << 30) ? need / 4 : UINT64_C(2) << 30;
        if (have && need + headroom > have) {
            char why[160];
            snprintf(why, sizeof why, "needs about %.1f GiB (+%.1f GiB headroom), MemAvailable "
                     "is %.1f GiB", need / 1073741824.0, headroom / 1073741824.0,
                     have / 1073741824.0);
            emit_skip(p, why);
            continue;
        }
        /* A scale takes up to twice the one before (the graph doubles, the keys halve):
         * skip one that would end past the budget. */
        uint64_t elapsed = bench_now_ns() - start;
        uint64_t estimate = last_scale_ns << (scale - last_scale);
        if (!opt.quick && last_scale_ns &&
            elapsed + estimate > (uint64_t)opt.budget_s * 1000000000u) {
            char why[160];
            snprintf(why, sizeof why, "over the time budget of %ld s (%.0f s used, about %.0f s "
                     "needed)", opt.budget_s, elapsed / 1e9, estimate / 1e9);
            emit_skip(p, why);
            continue;
        }
        uint64_t scale_start = bench_now_ns();
        struct g500_edgelist el;
        struct g500_csr g;
        uint64_t t0 = bench_now_ns();
        int rc = g500_generate(scale, G500_EDGEFACTOR, SEED, a, &el);
        if (rc < 0)
            bench_die("g500_generate", rc);
        uint64_t t1 = bench_now_ns();
        if ((rc = g500_csr_build(&el, a, &g)) < 0)
            bench_die("g500_csr_build", rc);
        fprintf(stderr, "bench_graph500: scale %d: generation %.2f s, construction %.2f s\n",
                scale, (t1 - t0) / 1e9, (bench_now_ns() - t1) / 1e9);
        int64_t keys[MAX_KEYS];
        int nkeys = g500_choose_keys(&g, keys_for(scale), SEED, keys);
        if (nkeys < 0)
            bench_die("g500_choose_keys", nkeys);
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0] && !stop; k++)
            failed |= measure_in_child(kinds[k], scale, &el, &g, keys, nkeys) == 1;
        g500_csr_free(&g, a);
        g500_edgelist_free(&el, a);
        last_scale_ns = bench_now_ns() - scale_start;
        last_scale = scale;
    }
    return failed || stop;
}

/* Until bench_memory_reserve() knows that the library can mount hugetlbfs itself (it wants
 * a mount up front): for root, a private hugetlbfs per huge page size in /tmp, named in
 * EXOMEM_HUGETLBFS_2M/_1G before the worker starts and detached at the end.
 * (The same code is in bench_gups.c: both belong in bench/lib.) */
static char private_mounts[2][64];

static void mount_private_hugetlbfs(void)
{
    static const char *const env[2] = { "EXOMEM_HUGETLBFS_2M", "EXOMEM_HUGETLBFS_1G" };
    static const char *const opts[2] = { "pagesize=2M", "pagesize=1G" };
    for (int i = 0; i < 2 && geteuid() == 0; i++) {
        const char *set = getenv(env[i]);
        if (set && *set)
            continue;
        snprintf(private_mounts[i], sizeof private_mounts[i], "/tmp/exomem-%s-XXXXXX",
                 i ? "1G" : "2M");
        if (!mkdtemp(private_mounts[i])) {
            private_mounts[i][0] = '\0';
            continue;
        }
        if (mount("none", private_mounts[i], "hugetlbfs", 0, opts[i]) != 0) {
            rmdir(private_mounts[i]);
            private_mounts[i][0] = '\0';
            continue;
        }
        setenv(env[i], private_mounts[i], 1);
    }
}

static void unmount_private_hugetlbfs(void)
{
    for (int i = 0; i < 2; i++) {
        if (!private_mounts[i][0])
            continue;
        if (umount2(private_mounts[i], MNT_DETACH) != 0 || rmdir(private_mounts[i]) != 0)
            fprintf(stderr, "%s: cannot remove %s: %s\n", program_invocation_short_name,
                    private_mounts[i], strerror(errno));
        private_mounts[i][0] = '\0';
    }
}

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_graph500 [--quick] [--min-scale S] [--max-scale S] [--budget SECONDS]\n"
               "Graph500 BFS per scale (default 16..22 and 24, budget 1080 s) in seg4k, thp,\n"
               "seg2m and seg1g memory.\n");
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "min-scale", required_argument, NULL, 'a' },
        { "max-scale", required_argument, NULL, 'b' },
        { "budget", required_argument, NULL, 't' },
        BENCH_COMMON_LONGOPTS,
    };
    if (bench_has_flag(argc, argv, "--quick"))
        opt.scale_min = 15, opt.scale_max = 18, opt.quick = true;
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'a': opt.scale_min = (int)bench_positive(optarg); break;
        case 'b': opt.scale_max = (int)bench_positive(optarg); break;
        case 't': opt.budget_s = bench_positive(optarg); break;
        case 'q': break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc || opt.scale_min < 1 || opt.scale_max > 28 ||
        opt.scale_min > opt.scale_max) {
        usage(stderr);
        return 2;
    }
    struct sigaction sa = { .sa_handler = on_stop };
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    mount_private_hugetlbfs();
    int status = bench_run_in_private_registry(worker);
    unmount_private_hugetlbfs();
    return status;
}
