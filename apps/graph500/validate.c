/* The specification's validation of a BFS tree. The tree's levels come from the tree itself
 * (depth below the key); true BFS levels come from a reference search written here, apart
 * from bfs.c, so that check 2 (a tree edge joins adjacent BFS levels) can fail: against the
 * tree's own depths it never could. The input edge list, not the CSR graph the searches
 * used, is the reference for the checks that involve edges, so that a CSR bug cannot hide
 * itself. */
#include "graph500.h"

#include <exomem/error.h>
#include <string.h>

/* level[] markers while tree_levels() walks parent chains. */
#define ON_PATH (-2)
#define BROKEN (-3)

int g500_tree_levels(int64_t nvertices, int64_t key, const int64_t *parent, int64_t *level)
{
    int64_t n = nvertices;
    int result = 0;
    for (int64_t v = 0; v < n; v++) {
        level[v] = -1;
        if (parent[v] < -1 || parent[v] >= n)
            result = G500_CHECK_TREE;
    }
    if (parent[key] == key)
        level[key] = 0;
    else
        result = G500_CHECK_TREE;
    for (int64_t v = 0; v < n; v++) {
        if (parent[v] < 0 || level[v] != -1)
            continue;
        /* Walk up to a vertex of known level, marking the path; reaching the path again is
         * a cycle, and an unreached or out-of-range parent (or the key, when it is not
         * its own parent) breaks the chain. */
        int64_t u = v, steps = 0;
        int broken = 0;
        while (level[u] == -1) {
            level[u] = ON_PATH;
            steps++;
            int64_t p = parent[u];
            if (u == key || p < 0 || p >= n) {
                broken = 1;
                break;
            }
            u = p;
        }
        if (!broken && level[u] < 0)
            broken = 1; /* ON_PATH: a cycle; BROKEN: joins a broken chain */
        if (broken) {
            result = G500_CHECK_TREE;
            for (u = v; u >= 0 && u < n && level[u] == ON_PATH; u = parent[u])
                level[u] = BROKEN;
        } else {
            int64_t depth = level[u] + steps;
            for (u = v; level[u] == ON_PATH; u = parent[u])
                level[u] = depth--;
        }
    }
    for (int64_t v = 0; v < n; v++)
        if (level[v] == BROKEN)
            level[v] = -1;
    return result;
}

/* True BFS levels from key (-1 where unreached): a plain FIFO queue over g. */
static void reference_levels(const struct g500_csr *g, int64_t key, int64_t *dist,
                             int64_t *queue)
{
    for (int64_t v = 0; v < g->nvertices; v++)
        dist[v] = -1;
    int64_t head = 0, tail = 0;
    dist[key] = 0;
    queue[tail++] = key;
    while (head < tail) {
        int64_t u = queue[head++];
        for (int64_t i = g->offsets[u]; i < g->offsets[u + 1]; i++) {
            int64_t w = g->adj[i];
            if (dist[w] < 0) {
                dist[w] = dist[u] + 1;
                queue[tail++] = w;
            }
        }
    }
}

static void release_all(const struct g500_allocator *a, void **p, int n)
{
    if (a->release)
        while (n-- > 0) /* newest first, as a stack allocator needs */
            a->release(a->ctx, p[n]);
}

int g500_validate(const struct g500_edgelist *el, const struct g500_csr *g, int64_t key,
                  const int64_t *parent, const struct g500_allocator *a,
                  int64_t *component_edges)
{
    if (!el || !g || !parent || !a || key < 0 || key >= el->nvertices ||
        g->nvertices != el->nvertices)
        return exomem_set_error(EXO_EINVAL, "graph500: bad validation arguments");
    int64_t n = el->nvertices;
    void *mem[4];
    int64_t *level = mem[0] = a->alloc(a->ctx, (size_t)n * sizeof *level);
    int64_t *dist = mem[1] = a->alloc(a->ctx, (size_t)n * sizeof *dist);
    int64_t *queue = mem[2] = a->alloc(a->ctx, (size_t)n * sizeof *queue);
    unsigned char *parent_edge_seen = mem[3] = a->alloc(a->ctx, (size_t)n);
    if (!level || !dist || !queue || !parent_edge_seen) {
        release_all(a, mem, 4);
        return exomem_set_error(EXO_ENOMEM, "graph500: no memory for validation");
    }
    memset(parent_edge_seen, 0, (size_t)n);
    int failed = g500_tree_levels(n, key, parent, level);

    /* Check 2: each tree edge goes from a vertex to one a BFS level nearer the key. */
    reference_levels(g, key, dist, queue);
    for (int64_t v = 0; v < n; v++) {
        int64_t p = parent[v];
        if (v != key && p >= 0 && p < n && (dist[v] < 0 || dist[p] < 0 || dist[v] != dist[p] + 1))
            failed |= G500_CHECK_TREE_LEVELS;
    }

    int64_t edges_in = 0;
    int rc = 0;
    for (int64_t i = 0; i < el->nedges; i++) {
        int64_t u = el->edges[i].u, v = el->edges[i].v;
        if (u < 0 || u >= n || v < 0 || v >= n) {
            rc = exomem_set_error(EXO_EINVAL, "graph500: edge %lld out of range", (long long)i);
            break;
        }
        int reached_u = parent[u] >= 0, reached_v = parent[v] >= 0;
        edges_in += reached_u || reached_v;
        if (reached_u != reached_v)
            failed |= G500_CHECK_SPAN;
        else if (reached_u && level[u] >= 0 && level[v] >= 0 &&
                 (level[u] - level[v] > 1 || level[v] - level[u] > 1))
            failed |= G500_CHECK_EDGE_LEVELS;
        if (parent[u] == v)
            parent_edge_seen[u] = 1;
        if (parent[v] == u)
            parent_edge_seen[v] = 1;
    }
    for (int64_t v = 0; v < n; v++)
        if (v != key && parent[v] >= 0 && !parent_edge_seen[v])
            failed |= G500_CHECK_PARENT_EDGE;

    release_all(a, mem, 4);
    if (rc)
        return rc;
    if (component_edges)
        *component_edges = edges_in;
    return failed;
}
