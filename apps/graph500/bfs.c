/* Kernel 2: level-synchronous breadth-first search, plus the choice of search keys and the
 * TEPS statistic. The frontier of one level is a slice of a single queue array: the next
 * level is appended behind it, so each vertex enters the queue once. */
#include "graph500.h"
#include <exomem/error.h>


int g500_bfs(const struct g500_csr *g, int64_t key, int64_t *parent,
             const struct g500_allocator *a)
{
    if (!g || !parent || !a || key < 0 || key >= g->nvertices)
        return exomem_set_error(EXO_EINVAL, "graph500: bad BFS arguments (key %lld)", (long long)key);
    int64_t n = g->nvertices;
    int64_t *queue = a->alloc(a->ctx, (size_t)n * sizeof *queue);
    if (!queue)
        return exomem_set_error(EXO_ENOMEM, "graph500: no memory for the BFS queue");
    for (int64_t v = 0; v < n; v++)
        parent[v] = -1;
    parent[key] = key;
    queue[0] = key;
    int64_t level_begin = 0, level_end = 1, tail = 1;
    while (level_begin < level_end) {
        for (int64_t i = level_begin; i < level_end; i++) {
            int64_t u = queue[i];
            for (int64_t j = g->offsets[u]; j < g->offsets[u + 1]; j++) {
                int64_t w = g->adj[j];
                if (parent[w] < 0) {
                    parent[w] = u;
                    queue[tail++] = w;
                }
            }
        }
        level_begin = level_end;
        level_end = tail;
    }
    if (a->release)
        a->release(a->ctx, queue);
    return 0;
}

int g500_choose_keys(const struct g500_csr *g, int nkeys, uint64_t seed, int64_t *keys)
{
    if (!g || !keys || nkeys < 0)
        return exomem_set_error(EXO_EINVAL, "graph500: bad key arguments");
    int64_t candidates = 0;
    for (int64_t v = 0; v < g->nvertices; v++)
        candidates += g500_degree(g, v) > 0;
    if (candidates < nkeys)
        nkeys = (int)candidates;
    uint64_t state = seed ^ UINT64_C(0x6B65797365656473);
    int found = 0;
    /* Rejection sampling: nkeys is small next to the vertex count, so a random vertex is
     * mostly new, and the degree test is what the specification asks for. */
    while (found < nkeys) {
        int64_t v = (int64_t)(g500_random(&state) % (uint64_t)g->nvertices);
        if (g500_degree(g, v) == 0)
            continue;
        int dup = 0;
        for (int k = 0; k < found && !dup; k++)
            dup = keys[k] == v;
        if (!dup)
            keys[found++] = v;
    }
    return found;
}

double g500_harmonic_mean(const double *values, int n)
{
    if (n <= 0)
        return 0;
    double inverse_sum = 0;
    for (int i = 0; i < n; i++)
        inverse_sum += 1.0 / values[i];
    return n / inverse_sum;
}
