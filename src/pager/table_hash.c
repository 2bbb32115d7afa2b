/* Hash page table: open addressing with linear probing over (unit, entry) pairs, grown at
 * 1/2 load. Memory follows the units that have an entry, not the region's size: AVM's
 * proposal for sparse 64-bit spaces. Removal uses backward-shift deletion, so there are no
 * tombstones and probes stay short. */
#include "pager/table.h"

#include <stdlib.h>

#define EMPTY UINT64_MAX

struct slot {
    uint64_t unit;   /* EMPTY when free */
    uint64_t entry;
};

struct hash {
    struct pager_table base;
    struct slot *slots;
    size_t cap;      /* a power of two */
    size_t used;
};

static size_t home(const struct hash *h, uint64_t unit)
{
    uint64_t x = unit * UINT64_C(0x9E3779B97F4A7C15);
    return (size_t)(x ^ (x >> 29)) & (h->cap - 1);
}

static struct slot *lookup(struct hash *h, uint64_t unit)
{
    for (size_t i = home(h, unit);; i = (i + 1) & (h->cap - 1)) {
        if (h->slots[i].unit == unit)
            return &h->slots[i];
        if (h->slots[i].unit == EMPTY)
            return NULL;
    }
}

static struct slot *alloc_slots(size_t cap)
{
    struct slot *s = malloc(cap * sizeof *s);
    if (s)
        for (size_t i = 0; i < cap; i++)
            s[i].unit = EMPTY;
    return s;
}

static int grow(struct hash *h)
{
    size_t cap = h->cap * 2;
    struct slot *s = alloc_slots(cap), *old = h->slots;
    if (!s)
        return -1;
    size_t old_cap = h->cap;
    h->slots = s;
    h->cap = cap;
    for (size_t i = 0; i < old_cap; i++) {
        if (old[i].unit == EMPTY)
            continue;
        size_t j = home(h, old[i].unit);
        while (s[j].unit != EMPTY)
            j = (j + 1) & (cap - 1);
        s[j] = old[i];
    }
    free(old);
    return 0;
}

static uint64_t *hash_find(struct pager_table *t, uint64_t unit)
{
    struct slot *s = lookup((struct hash *)t, unit);
    return s && s->entry ? &s->entry : NULL;
}

static uint64_t *hash_insert(struct pager_table *t, uint64_t unit)
{
    struct hash *h = (struct hash *)t;
    struct slot *s = lookup(h, unit);
    if (s)
        return &s->entry;
    if ((h->used + 1) * 2 > h->cap && grow(h) != 0)
        return NULL;
    size_t i = home(h, unit);
    while (h->slots[i].unit != EMPTY)
        i = (i + 1) & (h->cap - 1);
    h->slots[i] = (struct slot){unit, 0};
    h->used++;
    return &h->slots[i].entry;
}

static void hash_remove(struct pager_table *t, uint64_t unit)
{
    struct hash *h = (struct hash *)t;
    struct slot *s = lookup(h, unit);
    if (!s)
        return;
    size_t i = (size_t)(s - h->slots), mask = h->cap - 1;
    /* Backward shift: move later members of the probe run into the hole when their home
     * lies at or before it. */
    for (size_t j = (i + 1) & mask; h->slots[j].unit != EMPTY; j = (j + 1) & mask) {
        size_t k = home(h, h->slots[j].unit);
        if (((j - k) & mask) >= ((j - i) & mask)) {
            h->slots[i] = h->slots[j];
            i = j;
        }
    }
    h->slots[i].unit = EMPTY;
    h->used--;
}

static size_t hash_bytes(const struct pager_table *t)
{
    const struct hash *h = (const struct hash *)t;
    return sizeof *h + h->cap * sizeof(struct slot);
}

static int hash_each(struct pager_table *t, int (*fn)(uint64_t, uint64_t *, void *), void *arg)
{
    struct hash *h = (struct hash *)t;
    for (size_t i = 0; i < h->cap; i++) {
        int rc = h->slots[i].unit != EMPTY && h->slots[i].entry
                     ? fn(h->slots[i].unit, &h->slots[i].entry, arg) : 0;
        if (rc)
            return rc;
    }
    return 0;
}

static void hash_destroy(struct pager_table *t)
{
    struct hash *h = (struct hash *)t;
    free(h->slots);
    free(h);
}

static const struct pager_table_ops hash_ops = {
    hash_find, hash_insert, hash_remove, hash_bytes, hash_each, hash_destroy,
};

struct pager_table *exo_pager_hash_new(uint64_t nunits)
{
    struct hash *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->base.ops = &hash_ops;
    h->base.nunits = nunits;
    h->cap = 64;
    if (!(h->slots = alloc_slots(h->cap))) {
        free(h);
        return NULL;
    }
    return &h->base;
}
