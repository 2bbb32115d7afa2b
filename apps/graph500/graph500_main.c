/* graph500: Graph500 BFS (generate, build, 64 validated searches) with the graph in memory
 * of a chosen kind, to compare paging set-ups: anonymous memory, an exomem segment with 4K
 * pages, a SEG_THP segment (transparent huge pages), or segments of 2M or 1G pages.
 * Prints {"name":"graph500_teps","unit":"TEPS","value":<harmonic mean of the valid
 * searches>,"params":{...}} (invalid searches are left out, counted in its note);
 * exits 1 if any search fails validation, 0 with a "skip" line when the library refuses
 * huge pages. Pool pages the library adds for the segment go back when it is deleted. */
#include "bench_child.h"
#include "bench_memory.h"
#include "bench_util.h"
#include "graph500.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define SEG_BASE UINT64_C(0x500000000000) /* 1 GiB aligned, clear of the tests' bases */
#define SEED UINT64_C(0x6772617068353030)
#define ALIGN 4096
#define ARENA_STACK 64


static struct {
    int scale;
    int keys;
    enum bench_memory memory;
} opt = { 0, 64, BENCH_MEM_ANON };

/* A bump allocator over one region; releasing the newest allocation gives its space back,
 * which is all the graph500 library's alloc/release pairs need. */
static struct {
    char *base;
    size_t size, top;
    size_t starts[ARENA_STACK];
    int depth;
} arena;

static void *arena_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    size_t need = (bytes + ALIGN - 1) / ALIGN * ALIGN;
    if (arena.depth == ARENA_STACK || need > arena.size - arena.top)
        return NULL;
    arena.starts[arena.depth++] = arena.top;
    void *p = arena.base + arena.top;
    arena.top += need;
    return p;
}

static void arena_release(void *ctx, void *p)
{
    (void)ctx;
    if (p && arena.depth > 0 && (char *)p == arena.base + arena.starts[arena.depth - 1])
        arena.top = arena.starts[--arena.depth];
}

static const struct g500_allocator arena_allocator = { arena_alloc, arena_release, NULL };

/* What the library allocates at its peak, each array rounded up to ALIGN, in whole pages
 * of the chosen memory. */
static size_t arena_bytes(int scale)
{
    size_t n = (size_t)1 << scale, m = n * G500_EDGEFACTOR;
    size_t arrays[] = { m * sizeof(struct g500_edge), n * 8 /* permutation */,
                        (n + 1) * 8 /* offsets */, 2 * m * 8 /* neighbours */,
                        n * 8 /* parents */, n * 8 /* queue, or the tree's levels */,
                        n * 8 /* reference BFS levels */, n * 8 /* their queue */,
                        n /* marks */ };
    size_t total = 0;
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        total += (arrays[i] + ALIGN - 1) / ALIGN * ALIGN;
    return bench_memory_round(opt.memory, total);
}

static void params(char *buf, size_t cap)
{
    snprintf(buf, cap, "\"scale\":%d,\"memory\":\"%s\"", opt.scale, bench_memory_names[opt.memory]);
}

static void emit_skip(const char *reason)
{
    char p[128];
    params(p, sizeof p);
    printf("{\"name\":\"skip\",\"params\":{%s},\"reason\":\"%s\"}\n", p, reason);
    fflush(stdout);
}

/* Map the arena as asked; false (after a skip line) when huge pages cannot be had. */
static bool map_arena(size_t bytes)
{
    const char *why = NULL;
    arena.base = bench_memory_map(opt.memory, "graph500", SEG_BASE, bytes, &why);
    if (!arena.base) {
        emit_skip(why);
        return false;
    }
    arena.size = bytes;
    return true;
}

static void check(int rc, const char *what)
{
    if (rc < 0)
        bench_die(what, rc);
}

static int measure(void *unused)
{
    (void)unused;
    size_t bytes = arena_bytes(opt.scale);
    if (!map_arena(bytes))
        return 0;
    const struct g500_allocator *a = &arena_allocator;
    struct g500_edgelist el;
    struct g500_csr g;
    uint64_t t0 = bench_now_ns();
    check(g500_generate(opt.scale, G500_EDGEFACTOR, SEED, a, &el), "g500_generate");
    uint64_t t1 = bench_now_ns();
    check(g500_csr_build(&el, a, &g), "g500_csr_build");
    uint64_t t2 = bench_now_ns();
    fprintf(stderr, "graph500: scale %d, %s: generation %.3f s, construction %.3f s\n",
            opt.scale, bench_memory_names[opt.memory], (t1 - t0) / 1e9, (t2 - t1) / 1e9);

    int64_t *parent = arena_alloc(NULL, (size_t)g.nvertices * sizeof *parent);
    int64_t *keys = malloc((size_t)opt.keys * sizeof *keys);
    double *teps = malloc((size_t)opt.keys * sizeof *teps);
    if (!parent || !keys || !teps) {
        fprintf(stderr, "graph500: out of memory\n");
        return 1;
    }
    int nkeys = g500_choose_keys(&g, opt.keys, SEED, keys);
    check(nkeys, "g500_choose_keys");
    int invalid = 0, nvalid = 0;
    for (int k = 0; k < nkeys; k++) {
        uint64_t s0 = bench_now_ns();
        check(g500_bfs(&g, keys[k], parent, a), "g500_bfs");
        uint64_t s1 = bench_now_ns();
        int64_t edges = 0;
        int failed = g500_validate(&el, &g, keys[k], parent, a, &edges);
        check(failed, "g500_validate");
        if (failed) {
            fprintf(stderr, "graph500: search %d from %lld fails validation (checks %#x)\n", k,
                    (long long)keys[k], (unsigned)failed);
            invalid++;
            continue;   /* an invalid tree's speed is no measurement */
        }
        teps[nvalid++] = (double)edges / ((double)(s1 - s0 ? s1 - s0 : 1) / 1e9);
    }
    char p[128], note[96];
    params(p, sizeof p);
    snprintf(note, sizeof note, "%d of %d searches failed validation and are left out", invalid,
             nkeys);
    if (nvalid)
        bench_emit("graph500_teps", "TEPS", g500_harmonic_mean(teps, nvalid), p, NULL,
                   invalid ? note : NULL);
    else
        fprintf(stderr, "graph500: no search was valid: no TEPS reported\n");
    free(keys);
    free(teps);
    return invalid ? 1 : 0;
}

/* The worker: measure() in a child, so that the segment (and the huge pages the library
 * added to the pool for it) is deleted even if the child is killed. */
static int measure_in_child(void)
{
    return bench_in_child(measure, NULL, "graph500");
}

static void usage(FILE *f)
{
    fprintf(f, "usage: graph500 --scale S [--keys N] [--memory anon|seg4k|thp|seg2m|seg1g] "
               "[--quick]\n");
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "scale", required_argument, NULL, 's' },
        { "keys", required_argument, NULL, 'k' },
        { "memory", required_argument, NULL, 'm' },
        BENCH_COMMON_LONGOPTS,
    };
    if (bench_has_flag(argc, argv, "--quick"))
        opt.scale = 16, opt.keys = 16;
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 's':
            opt.scale = (int)bench_positive(optarg);
            break;
        case 'k':
            opt.keys = (int)bench_positive(optarg);
            break;
        case 'm': opt.memory = bench_memory_arg(optarg); break;
        case 'q':
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc || opt.scale < 1 || opt.scale > 32) {
        usage(stderr);
        return 2;
    }
    return bench_run_in_private_registry(measure_in_child);
}
