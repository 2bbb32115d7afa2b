/* Kernel 1: the undirected CSR graph of an edge list. Each edge is stored in both
 * directions; self-loops are dropped while counting and duplicates by sorting each
 * neighbour list and compacting it in place. */
#include "graph500.h"
#include <exomem/error.h>


#include <stdlib.h>
#include <string.h>

static int cmp_vertex(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

int g500_csr_build(const struct g500_edgelist *el, const struct g500_allocator *a,
                   struct g500_csr *out)
{
    if (!el || !a || !out || el->nvertices < 1 || el->nedges < 0)
        return exomem_set_error(EXO_EINVAL, "graph500: bad edge list");
    int64_t n = el->nvertices;
    for (int64_t i = 0; i < el->nedges; i++) {
        const struct g500_edge *e = &el->edges[i];
        if (e->u < 0 || e->u >= n || e->v < 0 || e->v >= n)
            return exomem_set_error(EXO_EINVAL, "graph500: edge %lld out of range", (long long)i);
    }
    int64_t *offsets = a->alloc(a->ctx, (size_t)(n + 1) * sizeof *offsets);
    if (!offsets)
        return exomem_set_error(EXO_ENOMEM, "graph500: no memory for CSR offsets");
    memset(offsets, 0, (size_t)(n + 1) * sizeof *offsets);
    /* Count into offsets[v + 1], prefix-sum, then fill using offsets[v] as the cursor. */
    for (int64_t i = 0; i < el->nedges; i++) {
        const struct g500_edge *e = &el->edges[i];
        if (e->u != e->v) {
            offsets[e->u + 1]++;
            offsets[e->v + 1]++;
        }
    }
    for (int64_t v = 0; v < n; v++)
        offsets[v + 1] += offsets[v];
    int64_t *adj = a->alloc(a->ctx, (size_t)(offsets[n] ? offsets[n] : 1) * sizeof *adj);
    if (!adj) {
        if (a->release)
            a->release(a->ctx, offsets);
        return exomem_set_error(EXO_ENOMEM, "graph500: no memory for %lld neighbours",
                        (long long)offsets[n]);
    }
    for (int64_t i = 0; i < el->nedges; i++) {
        const struct g500_edge *e = &el->edges[i];
        if (e->u != e->v) {
            adj[offsets[e->u]++] = e->v;
            adj[offsets[e->v]++] = e->u;
        }
    }
    /* The fill moved each offsets[v] to the start of v + 1's list: shift back. */
    for (int64_t v = n; v > 0; v--)
        offsets[v] = offsets[v - 1];
    offsets[0] = 0;
    int64_t kept = 0;
    for (int64_t v = 0; v < n; v++) {
        int64_t begin = offsets[v], end = offsets[v + 1];
        qsort(adj + begin, (size_t)(end - begin), sizeof *adj, cmp_vertex);
        offsets[v] = kept;
        for (int64_t j = begin; j < end; j++)
            if (j == begin || adj[j] != adj[j - 1])
                adj[kept++] = adj[j];
    }
    offsets[n] = kept;
    out->nvertices = n;
    out->offsets = offsets;
    out->adj = adj;
    return 0;
}

void g500_csr_free(struct g500_csr *g, const struct g500_allocator *a)
{
    if (g && a && a->release) {
        a->release(a->ctx, g->adj);
        a->release(a->ctx, g->offsets);
    }
    if (g)
        g->adj = g->offsets = NULL;
}
