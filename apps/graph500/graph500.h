/* Graph500 breadth-first search, written from the Graph500 specification: the Kronecker
 * edge generator, CSR construction (kernel 1), a level-synchronous BFS (kernel 2), the
 * specification's five validation checks of a BFS tree, search key selection and TEPS.
 *
 * Every large array comes from a caller-supplied allocator, so that a driver can place the
 * graph in memory of its choosing (e.g. an exomem segment with a given page size).
 * Functions return 0 or a negative exomem code (errno set), never abort.
 */
#ifndef EXOMEM_GRAPH500_H
#define EXOMEM_GRAPH500_H

#include <stddef.h>
#include <stdint.h>

/* Where large arrays come from; release may be NULL (memory then lives as long as ctx). */
struct g500_allocator {
    void *(*alloc)(void *ctx, size_t bytes);
    void (*release)(void *ctx, void *p);
    void *ctx;
};

/* An allocator backed by malloc/free. */
extern const struct g500_allocator g500_malloc_allocator;

/* The specification's Kronecker initiator probabilities and edge factor. */
#define G500_A 0.57
#define G500_B 0.19
#define G500_C 0.19
#define G500_D 0.05
#define G500_EDGEFACTOR 16
#define G500_SCALE_MAX 40

/* One undirected input edge. */
struct g500_edge {
    int64_t u, v;
};

/* The input edge list: nedges edges over vertices 0..nvertices-1. */
struct g500_edgelist {
    struct g500_edge *edges;
    int64_t nedges;
    int64_t nvertices;
};

/* A graph in compressed sparse row form: the neighbours of v are
 * adj[offsets[v] .. offsets[v+1]), sorted, without self-loops or duplicates. */
struct g500_csr {
    int64_t nvertices;
    int64_t *offsets;
    int64_t *adj;
};

/* Bits of g500_validate()'s result, one per check of the specification. */
enum g500_check {
    G500_CHECK_TREE = 1 << 0,        /* parents form a tree rooted at the key (no cycles) */
    G500_CHECK_TREE_LEVELS = 1 << 1, /* each tree edge joins levels differing by exactly 1 */
    G500_CHECK_EDGE_LEVELS = 1 << 2, /* each input edge joins levels differing by at most 1 */
    G500_CHECK_SPAN = 1 << 3,        /* the tree spans exactly the key's component */
    G500_CHECK_PARENT_EDGE = 1 << 4, /* each vertex and its parent are joined by an input edge */
};

/* Generate the Kronecker graph of 2^scale vertices and edgefactor*2^scale edges, with
 * vertex labels randomly permuted and the edges shuffled; the same seed gives the same
 * list. Release with g500_edgelist_free(). */
int g500_generate(int scale, int edgefactor, uint64_t seed, const struct g500_allocator *a,
                  struct g500_edgelist *out);

/* Release an edge list's array. */
void g500_edgelist_free(struct g500_edgelist *el, const struct g500_allocator *a);

/* Build the undirected CSR graph of an edge list (kernel 1), leaving out self-loops and
 * duplicate edges. Release with g500_csr_free(). */
int g500_csr_build(const struct g500_edgelist *el, const struct g500_allocator *a,
                   struct g500_csr *out);

/* Release a CSR graph's arrays. */
void g500_csr_free(struct g500_csr *g, const struct g500_allocator *a);

/* Degree of v in the CSR graph (self-loops and duplicates excluded). */
static inline int64_t g500_degree(const struct g500_csr *g, int64_t v)
{
    return g->offsets[v + 1] - g->offsets[v];
}

/* Breadth-first search from `key` (kernel 2), level by level: parent[v] gets v's parent in
 * the BFS tree, parent[key] = key, and -1 for vertices not reached. parent has nvertices
 * entries; the frontier queue comes from `a`. */
int g500_bfs(const struct g500_csr *g, int64_t key, int64_t *parent,
             const struct g500_allocator *a);

/* Compute each vertex's depth in the tree given by parent[] (-1 where unreached). Returns
 * 0, or G500_CHECK_TREE if parent[] is not a tree rooted at key (a parent out of range or
 * unreached, a cycle, or parent[key] != key); the level of vertices on a broken chain is
 * -1 then. */
int g500_tree_levels(int64_t nvertices, int64_t key, const int64_t *parent, int64_t *level);

/* Validate a BFS tree against the input edge list with the specification's five checks.
 * Check 2 compares the tree with true BFS levels, found by a reference search of its own
 * (a plain queue over g, written apart from g500_bfs()); the tree's own depths could never
 * fail it. Checks 3-5 use the edge list, not g, so that a bug in g cannot hide itself.
 * Returns 0 when all pass, a positive mask of failed enum g500_check bits otherwise, or a
 * negative exomem code. *component_edges (may be NULL) gets the number of input edges with
 * a reached endpoint, self-loops and duplicates included: the edge count for TEPS. Needs
 * 3 arrays of nvertices int64 and one of bytes from `a`. */
int g500_validate(const struct g500_edgelist *el, const struct g500_csr *g, int64_t key,
                  const int64_t *parent, const struct g500_allocator *a,
                  int64_t *component_edges);

/* Choose up to nkeys distinct random search keys among vertices of degree >= 1 (ignoring
 * self-loops), deterministically from seed; stores them in keys and returns how many. */
int g500_choose_keys(const struct g500_csr *g, int nkeys, uint64_t seed, int64_t *keys);

/* Harmonic mean of n positive values (the specification's TEPS statistic); 0 for n == 0. */
double g500_harmonic_mean(const double *values, int n);

/* A splitmix64 step: the generator's deterministic pseudo-random source. */
uint64_t g500_random(uint64_t *state);

#endif
