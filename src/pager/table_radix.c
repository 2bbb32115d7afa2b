/* Radix page table: a tree of 512-entry nodes, 9 bits of the unit index per level, as the
 * x86-64 hardware tables are. Depth is fixed by the region's size (1 level up to 512 units,
 * 4 levels up to 2^36 units), so a lookup is depth loads; interior nodes are made on first
 * insert, so a sparse region costs only the paths it uses. */
#include "pager/table.h"

#include <stdlib.h>
#include <string.h>

#define FANOUT 512u
#define BITS 9u

struct radix {
    struct pager_table base;
    unsigned depth;  /* levels, 1..4 */
    void *root;      /* depth 1: uint64_t[512]; else void *[512] */
    size_t nodes;
};

static uint64_t *walk(struct radix *r, uint64_t unit, int make)
{
    void **slot = &r->root;
    for (unsigned level = r->depth; level > 0; level--) {
        if (!*slot) {
            if (!make)
                return NULL;
            *slot = calloc(FANOUT, level == 1 ? sizeof(uint64_t) : sizeof(void *));
            if (!*slot)
                return NULL;
            r->nodes++;
        }
        unsigned idx = (unsigned)(unit >> ((level - 1) * BITS)) & (FANOUT - 1);
        if (level == 1)
            return &((uint64_t *)*slot)[idx];
        slot = &((void **)*slot)[idx];
    }
    return NULL;
}

static uint64_t *radix_find(struct pager_table *t, uint64_t unit)
{
    uint64_t *e = walk((struct radix *)t, unit, 0);
    return e && *e ? e : NULL;
}

static uint64_t *radix_insert(struct pager_table *t, uint64_t unit)
{
    return walk((struct radix *)t, unit, 1);
}

/* Leaves stay allocated once made: a unit that had an entry is likely to get one again,
 * and freeing would make remove cost a walk of the whole leaf. */
static void radix_remove(struct pager_table *t, uint64_t unit)
{
    uint64_t *e = walk((struct radix *)t, unit, 0);
    if (e)
        *e = 0;
}

static size_t radix_bytes(const struct pager_table *t)
{
    const struct radix *r = (const struct radix *)t;
    return sizeof *r + r->nodes * FANOUT * sizeof(uint64_t);
}

static int each_in(void *node, unsigned level, uint64_t prefix,
                   int (*fn)(uint64_t, uint64_t *, void *), void *arg)
{
    if (!node)
        return 0;
    for (unsigned i = 0; i < FANOUT; i++) {
        uint64_t unit = (prefix << BITS) | i;
        int rc = level == 1 ? (((uint64_t *)node)[i] ? fn(unit, &((uint64_t *)node)[i], arg) : 0)
                            : each_in(((void **)node)[i], level - 1, unit, fn, arg);
        if (rc)
            return rc;
    }
    return 0;
}

static int radix_each(struct pager_table *t, int (*fn)(uint64_t, uint64_t *, void *), void *arg)
{
    struct radix *r = (struct radix *)t;
    return each_in(r->root, r->depth, 0, fn, arg);
}

static void free_node(void *node, unsigned level)
{
    if (!node)
        return;
    if (level > 1)
        for (unsigned i = 0; i < FANOUT; i++)
            free_node(((void **)node)[i], level - 1);
    free(node);
}

static void radix_destroy(struct pager_table *t)
{
    struct radix *r = (struct radix *)t;
    free_node(r->root, r->depth);
    free(r);
}

static const struct pager_table_ops radix_ops = {
    radix_find, radix_insert, radix_remove, radix_bytes, radix_each, radix_destroy,
};

struct pager_table *exo_pager_radix_new(uint64_t nunits)
{
    struct radix *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->base.ops = &radix_ops;
    r->base.nunits = nunits;
    r->depth = 1;
    while (r->depth < 4 && (nunits - 1) >> (r->depth * BITS))
        r->depth++;
    return &r->base;
}
