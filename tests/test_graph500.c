/* Graph500 BFS (apps/graph500): the generator is deterministic and of the specified size,
 * hand-built graphs give exact parents and levels, searches on generated graphs validate,
 * and each kind of broken tree is caught by the check that is meant to catch it. */
#include "harness.h"

#include "graph500.h"

#include <errno.h>
#include <string.h>

static const struct g500_allocator *const A = &g500_malloc_allocator;

static struct g500_edgelist edgelist(int64_t n, const int64_t (*pairs)[2], int64_t m)
{
    struct g500_edgelist el = { malloc((size_t)m * sizeof(struct g500_edge)), m, n };
    CHECK(el.edges);
    for (int64_t i = 0; i < m; i++)
        el.edges[i] = (struct g500_edge){ pairs[i][0], pairs[i][1] };
    return el;
}

static void check_search(const struct g500_edgelist *el, int64_t key, const int64_t *parents,
                         const int64_t *levels)
{
    struct g500_csr g;
    CHECK_OK(g500_csr_build(el, A, &g));
    int64_t n = el->nvertices;
    int64_t *parent = malloc((size_t)n * sizeof *parent), *level = malloc((size_t)n * 8);
    CHECK(parent && level);
    CHECK_OK(g500_bfs(&g, key, parent, A));
    CHECK_OK(g500_tree_levels(n, key, parent, level));
    for (int64_t v = 0; v < n; v++) {
        CHECK_EQ(parent[v], parents[v]);
        CHECK_EQ(level[v], levels[v]);
    }
    CHECK_EQ(g500_validate(el, &g, key, parent, A, NULL), 0);
    free(parent);
    free(level);
    g500_csr_free(&g, A);
}

/* A path 0-1-2-3 (with a duplicate and a self-loop, which the CSR graph must drop) and an
 * isolated vertex 4; a star around 0 searched from a leaf. */
static void test_tiny_graphs(void)
{
    static const int64_t path[][2] = { { 0, 1 }, { 2, 1 }, { 3, 2 }, { 1, 0 }, { 2, 2 } };
    struct g500_edgelist el = edgelist(5, path, 5);
    struct g500_csr g;
    CHECK_OK(g500_csr_build(&el, A, &g));
    static const int64_t offsets[] = { 0, 1, 3, 5, 6, 6 }, adj[] = { 1, 0, 2, 1, 3, 2 };
    for (int i = 0; i < 6; i++)
        CHECK_EQ(g.offsets[i], offsets[i]);
    for (int i = 0; i < 6; i++)
        CHECK_EQ(g.adj[i], adj[i]);
    check_search(&el, 0, (const int64_t[]){ 0, 0, 1, 2, -1 }, (const int64_t[]){ 0, 1, 2, 3, -1 });
    check_search(&el, 2, (const int64_t[]){ 1, 2, 2, 2, -1 }, (const int64_t[]){ 2, 1, 0, 1, -1 });
    int64_t parent[5] = { 0, 0, 1, 2, -1 }, edges = 0;
    CHECK_EQ(g500_validate(&el, &g, 0, parent, A, &edges), 0);
    CHECK_EQ(edges, 5); /* duplicates and self-loops count */
    g500_csr_free(&g, A);
    free(el.edges);

    static const int64_t star[][2] = { { 0, 1 }, { 2, 0 }, { 0, 3 }, { 4, 0 }, { 0, 5 } };
    el = edgelist(6, star, 5);
    check_search(&el, 3, (const int64_t[]){ 3, 0, 0, 3, 0, 0 },
                 (const int64_t[]){ 1, 2, 2, 0, 2, 2 });

    /* A depth-first "tree" of a 4-cycle: a real tree with existing parent edges, but the
     * edge 0-3 joins tree levels 0 and 3 (check 3), and 3 hangs from 2, which is farther
     * from the key than 3 is (check 2). */
    static const int64_t ring[][2] = { { 0, 1 }, { 1, 2 }, { 2, 3 }, { 3, 0 } };
    free(el.edges);
    el = edgelist(4, ring, 4);
    CHECK_OK(g500_csr_build(&el, A, &g));
    int64_t dfs[4] = { 0, 0, 1, 2 };
    CHECK_EQ(g500_validate(&el, &g, 0, dfs, A, NULL),
             G500_CHECK_EDGE_LEVELS | G500_CHECK_TREE_LEVELS);

    /* Check 2 on its own terms: a "tree" where 3 hangs from 1, both one BFS level from the
     * key (joined by a chord added for it), is a tree, spans, and uses real edges (checks 1,
     * 4, 5 pass), but its edge 1-3 joins two vertices of the same BFS level. Check 3 fires as
     * well, as it must: in a spanning tree of real edges a vertex placed too deep always
     * leaves some input edge across two tree levels (here 0-3). Before the reference search,
     * check 2 compared the tree with its own depths and could not fire at all. */
    static const int64_t ring_chord[][2] = { { 0, 1 }, { 1, 2 }, { 2, 3 }, { 3, 0 }, { 1, 3 } };
    g500_csr_free(&g, A);
    free(el.edges);
    el = edgelist(4, ring_chord, 5);
    CHECK_OK(g500_csr_build(&el, A, &g));
    int64_t sideways[4] = { 0, 0, 1, 1 };
    CHECK_EQ(g500_validate(&el, &g, 0, sideways, A, NULL),
             G500_CHECK_TREE_LEVELS | G500_CHECK_EDGE_LEVELS);
    int64_t bfs[4] = { 0, 0, 1, 0 };
    CHECK_EQ(g500_validate(&el, &g, 0, bfs, A, NULL), 0);

    /* Several roots: 3 is its own parent besides the key. */
    int64_t two_roots[4] = { 0, 0, 1, 3 };
    CHECK(g500_validate(&el, &g, 0, two_roots, A, NULL) & G500_CHECK_TREE);
    int64_t level[4];
    CHECK_EQ(g500_tree_levels(4, 0, two_roots, level), G500_CHECK_TREE);
    CHECK_EQ(level[3], -1);
    g500_csr_free(&g, A);
    free(el.edges);
}

static void test_generator(void)
{
    struct g500_edgelist a, b, c;
    CHECK_OK(g500_generate(10, G500_EDGEFACTOR, 1, A, &a));
    CHECK_OK(g500_generate(10, G500_EDGEFACTOR, 1, A, &b));
    CHECK_OK(g500_generate(10, G500_EDGEFACTOR, 2, A, &c));
    CHECK_EQ(a.nedges, 16 << 10);
    CHECK_EQ(a.nvertices, 1 << 10);
    CHECK(!memcmp(a.edges, b.edges, (size_t)a.nedges * sizeof *a.edges));
    CHECK(memcmp(a.edges, c.edges, (size_t)a.nedges * sizeof *a.edges) != 0);
    int64_t *degree = calloc((size_t)a.nvertices, sizeof *degree), max = 0, low_half = 0;
    CHECK(degree);
    for (int64_t i = 0; i < a.nedges; i++) {
        CHECK(a.edges[i].u >= 0 && a.edges[i].u < a.nvertices);
        CHECK(a.edges[i].v >= 0 && a.edges[i].v < a.nvertices);
        degree[a.edges[i].u]++;
        degree[a.edges[i].v]++;
        low_half += a.edges[i].u < a.nvertices / 2;
    }
    for (int64_t v = 0; v < a.nvertices; v++)
        max = degree[v] > max ? degree[v] : max;
    /* Kronecker graphs are skewed (average degree 32 here) ... */
    CHECK(max > 8 * 32);
    /* ... but the label permutation spreads the heavy vertices: unpermuted, vertex numbers
     * below n/2 would take A+B = 76% of the sources. */
    CHECK(low_half > a.nedges * 35 / 100 && low_half < a.nedges * 65 / 100);
    free(degree);
    g500_edgelist_free(&a, A);
    g500_edgelist_free(&b, A);
    g500_edgelist_free(&c, A);
    CHECK_ERR(g500_generate(0, G500_EDGEFACTOR, 1, A, &a), EXO_EINVAL);
}

/* Generated graphs: searches from chosen keys validate. */
static void test_searches(int scale)
{
    struct g500_edgelist el;
    struct g500_csr g;
    CHECK_OK(g500_generate(scale, G500_EDGEFACTOR, (uint64_t)scale, A, &el));
    CHECK_OK(g500_csr_build(&el, A, &g));
    int64_t keys[8], *parent = malloc((size_t)el.nvertices * sizeof *parent);
    CHECK(parent);
    CHECK_EQ(g500_choose_keys(&g, 8, 7, keys), 8);
    for (int k = 0; k < 8; k++) {
        CHECK(g500_degree(&g, keys[k]) > 0);
        for (int j = 0; j < k; j++)
            CHECK(keys[j] != keys[k]);
        CHECK_OK(g500_bfs(&g, keys[k], parent, A));
        int64_t edges = 0;
        CHECK_EQ(g500_validate(&el, &g, keys[k], parent, A, &edges), 0);
        CHECK(edges > 0 && edges <= el.nedges);
    }
    CHECK_ERR(g500_bfs(&g, el.nvertices, parent, A), EXO_EINVAL);
    free(parent);
    g500_csr_free(&g, A);
    g500_edgelist_free(&el, A);
}

/* Break a valid tree in each of the ways the checks are for. */
static void test_broken_trees(void)
{
    struct g500_edgelist el;
    struct g500_csr g;
    CHECK_OK(g500_generate(10, G500_EDGEFACTOR, 3, A, &el));
    CHECK_OK(g500_csr_build(&el, A, &g));
    int64_t n = el.nvertices, key;
    CHECK_EQ(g500_choose_keys(&g, 1, 5, &key), 1);
    int64_t *good = malloc((size_t)n * 8), *bad = malloc((size_t)n * 8);
    int64_t *level = malloc((size_t)n * 8);
    char *is_parent = calloc((size_t)n, 1);
    CHECK(good && bad && level && is_parent);
    CHECK_OK(g500_bfs(&g, key, good, A));
    CHECK_OK(g500_tree_levels(n, key, good, level));
    int64_t deep = -1, leaf = -1, other = -1;
    for (int64_t v = 0; v < n; v++)
        if (good[v] >= 0 && v != key)
            is_parent[good[v]] = 1;
    for (int64_t v = 0; v < n; v++) {
        if (level[v] >= 2 && deep < 0)
            deep = v;
        if (level[v] >= 1 && !is_parent[v] && leaf < 0)
            leaf = v;
        if (level[v] >= 1 && other < 0)
            other = v;
    }
    CHECK(deep >= 0 && leaf >= 0 && other >= 0);
    size_t bytes = (size_t)n * sizeof *good;

    /* A parent that is not a neighbour (deep is at level >= 2, so not next to the key). */
    memcpy(bad, good, bytes);
    bad[deep] = key;
    int failed = g500_validate(&el, &g, key, bad, A, NULL);
    CHECK(failed & G500_CHECK_PARENT_EDGE);
    CHECK(!(failed & G500_CHECK_TREE));

    /* A cycle: deep's parent becomes deep's child. */
    memcpy(bad, good, bytes);
    bad[good[deep]] = deep;
    failed = g500_validate(&el, &g, key, bad, A, NULL);
    CHECK(failed & G500_CHECK_TREE);
    CHECK(g500_tree_levels(n, key, bad, level) == G500_CHECK_TREE);
    CHECK_EQ(level[deep], -1);
    CHECK_EQ(level[key], 0);

    /* A reached vertex left out. */
    memcpy(bad, good, bytes);
    bad[leaf] = -1;
    CHECK_EQ(g500_validate(&el, &g, key, bad, A, NULL), G500_CHECK_SPAN);

    /* The wrong root: validated against another key of the same component. */
    CHECK(g500_validate(&el, &g, other, good, A, NULL) & G500_CHECK_TREE);

    /* A parent out of range. */
    memcpy(bad, good, bytes);
    bad[leaf] = n;
    CHECK(g500_validate(&el, &g, key, bad, A, NULL) & G500_CHECK_TREE);

    CHECK_EQ(g500_validate(&el, &g, key, good, A, NULL), 0);
    free(good);
    free(bad);
    free(level);
    free(is_parent);
    g500_csr_free(&g, A);
    g500_edgelist_free(&el, A);
}

int main(void)
{
    test_tiny_graphs();
    test_generator();
    for (int scale = 10; scale <= 12; scale++)
        test_searches(scale);
    test_broken_trees();
    double teps[] = { 1, 2, 4 };
    CHECK(g500_harmonic_mean(teps, 3) > 12.0 / 7 - 1e-12 && g500_harmonic_mean(teps, 3) < 12.0 / 7 + 1e-12);
    CHECK(g500_harmonic_mean(teps, 0) == 0);
    printf("test_graph500: ok\n");
    return 0;
}
