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
 * Conformance: by default every scale (16..24) searches the specification's 64 keys, with
 * no time budget (a scale is left out only when the memory is missing). --budget SECONDS
 * trades conformance for time: fewer keys at the biggest scales, scale 23 left out and no
 * new scale once the budget would be overrun (keys_for()). The "keys" param of every line
 * says how many keys a scale used; the report flags fewer than 64.
 *
 * Children run through bench_child: the library grows the huge page pool and mounts what a
 * 2M, 1G or THP segment needs (as root) and gives it back when the segment is deleted --
 * by the child at exit or, if it was killed, by the worker.
 */
#include "bench_child.h"
#include "bench_memory.h"
#include "bench_util.h"
#include "graph500.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEG_BASE UINT64_C(0x540000000000) /* 1 GiB aligned, clear of the tests' bases */
#define SEED UINT64_C(0x6772617068353030)
#define ALIGN 4096
#define MAX_KEYS 64

static struct {
    int scale_min, scale_max;
    long budget_s; /* 0: conformant (64 keys everywhere, no budget); else reduced keys and no
                    * new scale once it would likely end after this many seconds */
    bool quick;
} opt = { 16, 24, 0, false };

static const enum bench_memory kinds[] = { BENCH_MEM_SEG4K, BENCH_MEM_THP, BENCH_MEM_SEG2M,
                                           BENCH_MEM_SEG1G };

/* Search keys per scale: the specification's 64, unless --quick (16) or a time budget is
 * set. With a budget, 64 while the searches and validations of the four memory kinds fit
 * about 18 minutes on this 2-core VM, fewer above (0: the scale is left out -- scale 23 --
 * so that the budget reaches scale 24). */
static int keys_for(int scale)
{
    if (opt.quick)
        return 16;
    if (!opt.budget_s)
        return MAX_KEYS;
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

/* What one child measures: the graph of one scale in one memory kind, searched from keys. */
struct job {
    enum bench_memory m;
    int scale;
    const struct g500_edgelist *el;
    const struct g500_csr *g;
    const int64_t *keys;
    int nkeys;
};

/* Child: the graph copied into memory of the job's kind, the searches, their validation.
 * Exit status 1 when a tree fails validation or the run was stopped, 3 when the memory
 * could not be had. */
static int measure(void *arg)
{
    const struct job *job = arg;
    enum bench_memory m = job->m;
    int scale = job->scale, nkeys = job->nkeys;
    const struct g500_edgelist *el = job->el;
    const struct g500_csr *g = job->g;
    const int64_t *keys = job->keys;
    char p[160], name[64];
    params(p, sizeof p, m, scale, nkeys);
    snprintf(name, sizeof name, "g500-%s-%d", bench_memory_names[m], scale);
    size_t bytes = segment_bytes(g, m), n = (size_t)g->nvertices;
    size_t adj = (size_t)g->offsets[g->nvertices];
    const char *why = NULL;
    char *seg = bench_memory_map(m, name, SEG_BASE, bytes, &why);
    if (!seg) {
        bench_emit_skip(p, why);
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
    bench_emit("graph500_huge", "%", 100.0 * (double)bench_memory_huge_bytes(seg, bytes) / (double)bytes, hp,
               NULL, NULL);

    double teps[MAX_KEYS], lo = 0, hi = 0;
    int done = 0, invalid = 0;
    uint64_t searching = 0, validating = 0;
    for (int k = 0; k < nkeys && !bench_stop; k++) {
        uint64_t t0 = bench_now_ns();
        int rc = g500_bfs(&mine, keys[k], parent, &queue_allocator);
        uint64_t t1 = bench_now_ns();
        if (rc < 0)
            bench_die("g500_bfs", rc);
        int64_t edges = 0;
        int failed = g500_validate(el, g, keys[k], parent, &g500_malloc_allocator, &edges);
        validating += bench_now_ns() - t1;
        searching += t1 - t0;
        if (failed < 0)
            bench_die("g500_validate", failed);
        if (failed) {
            char why_failed[128];
            snprintf(why_failed, sizeof why_failed,
                     "graph500_failed: the tree from key %lld fails validation checks %#x",
                     (long long)keys[k], (unsigned)failed);
            bench_emit_skip(p, why_failed);
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
    if (bench_stop || invalid || done < nkeys)
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

/* Worker side, one kind at one scale: measure() in a child (bench_in_child: cleaned up
 * after if killed). The child's exit status (3: memory could not be had). */
static int measure_in_child(enum bench_memory m, int scale, const struct g500_edgelist *el,
                            const struct g500_csr *g, const int64_t *keys, int nkeys)
{
    struct job job = { m, scale, el, g, keys, nkeys };
    char what[64];
    snprintf(what, sizeof what, "%s scale %d", bench_memory_names[m], scale);
    return bench_in_child(measure, &job, what);
}

static int worker(void)
{
    int failed = 0;
    const struct g500_allocator *a = &g500_malloc_allocator;
    uint64_t start = bench_now_ns(), last_scale_ns = 0;
    int last_scale = 0;
    for (int scale = opt.scale_min; scale <= opt.scale_max && !bench_stop; scale++) {
        char p[160];
        snprintf(p, sizeof p, "\"scale\":%d", scale);
        if (keys_for(scale) == 0) {
            bench_emit_skip(p, "left out under --budget (to reach scale 24 in time)");
            continue;
        }
        /* Headroom: other programs' memory use may grow while a scale runs. */
        uint64_t need = scale_bytes(scale), have = bench_mem_available();
        uint64_t headroom = need / 4 > (UINT64_C(2) << 30) ? need / 4 : UINT64_C(2) << 30;
        if (have && need + headroom > have) {
            char why[160];
            snprintf(why, sizeof why, "needs about %.1f GiB (+%.1f GiB headroom), MemAvailable "
                     "is %.1f GiB", need / 1073741824.0, headroom / 1073741824.0,
                     have / 1073741824.0);
            bench_emit_skip(p, why);
            continue;
        }
        /* A scale takes up to twice the one before (the graph doubles, the keys halve):
         * skip one that would end past the budget. */
        uint64_t elapsed = bench_now_ns() - start;
        uint64_t estimate = last_scale_ns << (scale - last_scale);
        if (!opt.quick && opt.budget_s && last_scale_ns &&
            elapsed + estimate > (uint64_t)opt.budget_s * 1000000000u) {
            char why[160];
            snprintf(why, sizeof why, "over the time budget of %ld s (%.0f s used, about %.0f s "
                     "needed)", opt.budget_s, elapsed / 1e9, estimate / 1e9);
            bench_emit_skip(p, why);
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
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0] && !bench_stop; k++)
            failed |= measure_in_child(kinds[k], scale, &el, &g, keys, nkeys) == 1;
        g500_csr_free(&g, a);
        g500_edgelist_free(&el, a);
        last_scale_ns = bench_now_ns() - scale_start;
        last_scale = scale;
    }
    return failed || bench_stop;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_graph500 [--quick] [--min-scale S] [--max-scale S] [--budget SECONDS]\n"
               "Graph500 BFS per scale (default 16..24, 64 keys each: conformant, hours) in\n"
               "seg4k, thp, seg2m and seg1g memory. --budget SECONDS: fewer keys at scales\n"
               "19..24, scale 23 left out, no new scale past the budget (not conformant).\n"
               "--quick: scales 15..18, 16 keys.\n");
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
    bench_stop_on_signals();
    return bench_run_in_private_registry(worker);
}
