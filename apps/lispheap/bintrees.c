/* The binary-trees mutator shared by both collectors (see lispheap.h). A tree node is an
 * object of type LH_T_NODE with fields (left, right, item); the children of item i are items
 * 2i and 2i+1. A tree's checksum mixes each node's item with its children's checksums in
 * order, so a lost, moved or swapped subtree changes it; lh_tree_expect computes the same
 * number without building anything. */
#include "lispheap.h"

#include <stdlib.h>
#include <string.h>

#define ITEM_MASK ((UINT64_C(1) << 40) - 1)
#define LEAF_SALT UINT64_C(0x5bd1e995)

static uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= UINT64_C(0xbf58476d1ce4e5b9);
    x ^= x >> 27;
    x *= UINT64_C(0x94d049bb133111eb);
    return x ^ (x >> 31);
}

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static uint64_t combine(uint64_t item, uint64_t left, uint64_t right)
{
    return mix(item ^ (3 * left) ^ (5 * right));
}

uint64_t lh_tree_expect(uint64_t item, int depth)
{
    if (depth <= 0)
        return mix(item ^ LEAF_SALT);
    return combine(item, lh_tree_expect((2 * item) & ITEM_MASK, depth - 1),
                   lh_tree_expect((2 * item + 1) & ITEM_MASK, depth - 1));
}

uint64_t lh_tree_check(lh_val t, uint64_t *nodes, int *bad)
{
    if (!lh_is_ptr(t) || lh_obj(t)[0] != lh_header(LH_T_NODE, 3)) {
        *bad = 1;
        return 0;
    }
    (*nodes)++;
    lh_val l = lh_field(t, 0), r = lh_field(t, 1), item = lh_field(t, 2);
    if (!(item & 1)) {
        *bad = 1;
        return 0;
    }
    if (l == LH_NIL && r == LH_NIL)
        return mix((uint64_t)lh_fixval(item) ^ LEAF_SALT);
    uint64_t cl = lh_tree_check(l, nodes, bad);
    uint64_t cr = lh_tree_check(r, nodes, bad);
    return combine((uint64_t)lh_fixval(item), cl, cr);
}

/* Build the tree of (item, depth) bottom-up; children wait in root slots while the parent is
 * allocated, since any allocation may move them. */
static lh_val make_tree(const struct lh_heap_if *h, uint64_t item, int depth, uint64_t *nodes)
{
    struct lh_roots *roots = h->roots;
    size_t base = roots->n;
    lh_val left = LH_NIL, right = LH_NIL;
    if (depth > 0) {
        left = make_tree(h, (2 * item) & ITEM_MASK, depth - 1, nodes);
        if (left == LH_NIL)
            return LH_NIL;
        lh_root_push(roots, left);
        right = make_tree(h, (2 * item + 1) & ITEM_MASK, depth - 1, nodes);
        if (right == LH_NIL) {
            lh_root_pop(roots, roots->n - base);
            return LH_NIL;
        }
        lh_root_push(roots, right);
    }
    lh_val node = h->alloc(h->heap, LH_T_NODE, 3);
    if (node != LH_NIL) {
        (*nodes)++;
        if (depth > 0) {
            h->store(h->heap, node, 0, roots->slot[base]);
            h->store(h->heap, node, 1, roots->slot[base + 1]);
        }
        h->store(h->heap, node, 2, lh_fix((int64_t)item));
    }
    lh_root_pop(roots, roots->n - base);
    return node;
}

/* Check tree t against (item, depth): 0 if right. */
static int tree_ok(lh_val t, uint64_t item, int depth, uint64_t *sum)
{
    uint64_t nodes = 0;
    int bad = 0;
    uint64_t c = lh_tree_check(t, &nodes, &bad);
    *sum = c;
    return !bad && c == lh_tree_expect(item, depth) &&
           nodes == (UINT64_C(2) << depth) - 1;
}

/* Replace a random subtree of depth 1..3 deep in the long-lived tree by a fresh equal one. */
static int mutate_long(const struct lh_heap_if *h, size_t long_slot, int long_depth,
                       uint64_t *rng, uint64_t *nodes)
{
    struct lh_roots *roots = h->roots;
    int sub = 1 + (int)(rng_next(rng) % 3);
    if (long_depth < sub + 1)
        return 0;
    uint64_t path = rng_next(rng);
    lh_val parent = roots->slot[long_slot];
    for (int lvl = 0; lvl < long_depth - sub - 1; lvl++)
        parent = lh_field(parent, (unsigned)((path >> (lvl % 64)) & 1));
    unsigned side = (unsigned)((path >> 63) & 1);
    uint64_t item = (uint64_t)lh_fixval(lh_field(lh_field(parent, side), 2));
    size_t ps = lh_root_push(roots, parent);
    lh_val fresh = make_tree(h, item, sub, nodes);
    if (fresh != LH_NIL)
        h->store(h->heap, roots->slot[ps], side, fresh);
    lh_root_pop(roots, 1);
    return fresh == LH_NIL ? -1 : 0;
}

int lh_bintrees_run(const struct lh_heap_if *h, const struct lh_bintrees_params *p,
                    struct lh_bintrees_result *out)
{
    struct lh_roots *roots = h->roots;
    memset(out, 0, sizeof *out);
    uint64_t rng = p->seed | 1, sum;
    int nvec = (p->ring_slots + LH_RING_VEC - 1) / LH_RING_VEC;
    uint64_t *ring_item = calloc((size_t)p->ring_slots + 1, sizeof *ring_item);
    int *ring_depth = calloc((size_t)p->ring_slots + 1, sizeof *ring_depth);
    if (!ring_item || !ring_depth || nvec > (int)LH_MAX_FIELDS) {
        free(ring_item);
        free(ring_depth);
        return -1;
    }
    size_t base = roots->n;
    int rc = -1;
    lh_val t = make_tree(h, 1, p->long_depth, &out->nodes);
    if (t == LH_NIL)
        goto done;
    size_t long_slot = lh_root_push(roots, t);
    t = h->alloc(h->heap, LH_T_VEC, (unsigned)nvec);
    if (t == LH_NIL)
        goto done;
    size_t ring_slot = lh_root_push(roots, t);
    for (int k = 0; k < nvec; k++) {
        t = h->alloc(h->heap, LH_T_VEC, LH_RING_VEC);
        if (t == LH_NIL)
            goto done;
        h->store(h->heap, roots->slot[ring_slot], (unsigned)k, t);
    }

    for (int d = p->min_depth; d <= p->max_depth; d += 2) {
        long iters = ((1L << (p->max_depth - d + p->min_depth)) * p->scale) / 16;
        for (long i = 0; i < (iters > 0 ? iters : 1); i++) {
            uint64_t item = (out->trees * 7 + (uint64_t)d + 1) & ITEM_MASK;
            t = make_tree(h, item, d, &out->nodes);
            if (t == LH_NIL)
                goto done;
            if (!tree_ok(t, item, d, &sum))
                out->bad_checks++;
            out->digest = mix(out->digest ^ sum);
            out->trees++;
            if (p->ring_slots > 0 && (p->ring_max_depth <= 0 || d <= p->ring_max_depth)) {
                int s = (int)(rng_next(&rng) % (uint64_t)p->ring_slots);
                lh_val vec = lh_field(roots->slot[ring_slot], (unsigned)(s / LH_RING_VEC));
                h->store(h->heap, vec, (unsigned)(s % LH_RING_VEC), t);
                ring_item[s] = item;
                ring_depth[s] = d;
            }
            if (p->mutate_every > 0 && out->trees % (uint64_t)p->mutate_every == 0 &&
                mutate_long(h, long_slot, p->long_depth, &rng, &out->nodes) != 0)
                goto done;
        }
    }

    if (!tree_ok(roots->slot[long_slot], 1, p->long_depth, &sum))
        out->bad_checks++;
    out->digest = mix(out->digest ^ sum);
    for (int s = 0; s < p->ring_slots; s++) {
        lh_val vec = lh_field(roots->slot[ring_slot], (unsigned)(s / LH_RING_VEC));
        lh_val tree = lh_field(vec, (unsigned)(s % LH_RING_VEC));
        if (ring_item[s] == 0) {
            if (tree != LH_NIL)
                out->bad_checks++;
            continue;
        }
        if (!tree_ok(tree, ring_item[s], ring_depth[s], &sum))
            out->bad_checks++;
        out->digest = mix(out->digest ^ sum);
    }
    rc = 0;
done:
    lh_root_pop(roots, roots->n - base);
    free(ring_item);
    free(ring_depth);
    return rc;
}
