/* The specification's Kronecker generator: each edge picks one quadrant of the adjacency
 * matrix per bit of the vertex number, with probabilities A, B, C, D; vertex labels are then
 * permuted and the edge list shuffled, so that neither locality nor order gives anything
 * away. Every random number comes from seeded splitmix64 streams: a seed fixes the graph. */
#include "graph500.h"
#include <exomem/error.h>


#include <stdlib.h>

static void *malloc_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    return malloc(bytes ? bytes : 1);
}

static void malloc_release(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

const struct g500_allocator g500_malloc_allocator = { malloc_alloc, malloc_release, NULL };

uint64_t g500_random(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* A uniform double in [0, 1). */
static double unit(uint64_t *state)
{
    return (double)(g500_random(state) >> 11) * 0x1.0p-53;
}

/* A uniform integer in [0, bound). */
static uint64_t below(uint64_t *state, uint64_t bound)
{
    return (uint64_t)(((unsigned __int128)g500_random(state) * bound) >> 64);
}

/* Edge i gets its own stream, so edges do not depend on each other's draws. */
static struct g500_edge kronecker_edge(int scale, uint64_t seed, int64_t i)
{
    uint64_t state = seed ^ ((uint64_t)i * UINT64_C(0xD1B54A32D192ED03));
    g500_random(&state);
    const double ab = G500_A + G500_B;
    const double a_in_ab = G500_A / ab;
    const double c_in_cd = G500_C / (G500_C + G500_D);
    struct g500_edge e = { 0, 0 };
    for (int bit = 0; bit < scale; bit++) {
        int row = unit(&state) > ab;                          /* lower half: C or D */
        int col = unit(&state) > (row ? c_in_cd : a_in_ab);   /* right half: B or D */
        e.u |= (int64_t)row << bit;
        e.v |= (int64_t)col << bit;
    }
    return e;
}

int g500_generate(int scale, int edgefactor, uint64_t seed, const struct g500_allocator *a,
                  struct g500_edgelist *out)
{
    if (scale < 1 || scale > G500_SCALE_MAX || edgefactor < 1 || !a || !out)
        return exomem_set_error(EXO_EINVAL, "graph500: scale %d, edgefactor %d", scale, edgefactor);
    int64_t n = INT64_C(1) << scale;
    int64_t m = n * edgefactor;
    struct g500_edge *edges = a->alloc(a->ctx, (size_t)m * sizeof *edges);
    int64_t *perm = a->alloc(a->ctx, (size_t)n * sizeof *perm);
    if (!edges || !perm) {
        if (a->release) {
            a->release(a->ctx, perm);
            a->release(a->ctx, edges);
        }
        return exomem_set_error(EXO_ENOMEM, "graph500: no memory for %lld edges", (long long)m);
    }
    for (int64_t i = 0; i < m; i++)
        edges[i] = kronecker_edge(scale, seed, i);

    uint64_t state = seed ^ UINT64_C(0x5EED5EED5EED5EED);
    for (int64_t i = 0; i < n; i++)
        perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)below(&state, (uint64_t)i + 1);
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int64_t i = 0; i < m; i++) {
        edges[i].u = perm[edges[i].u];
        edges[i].v = perm[edges[i].v];
    }
    for (int64_t i = m - 1; i > 0; i--) {
        int64_t j = (int64_t)below(&state, (uint64_t)i + 1);
        struct g500_edge t = edges[i];
        edges[i] = edges[j];
        edges[j] = t;
    }
    if (a->release)
        a->release(a->ctx, perm);
    out->edges = edges;
    out->nedges = m;
    out->nvertices = n;
    return 0;
}

void g500_edgelist_free(struct g500_edgelist *el, const struct g500_allocator *a)
{
    if (el && a && a->release)
        a->release(a->ctx, el->edges);
    if (el)
        el->edges = NULL;
}
