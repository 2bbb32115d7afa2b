/* Sorted-vector page table: (unit, entry) pairs in unit order, found by binary search, as in
 * AVM's prototype ("page-tables are implemented as a linear vector ... looked up using binary
 * search"). Smallest per entry and cache-friendly to search; an insert or remove moves the
 * pairs after it, so it suits regions whose set of units changes slowly. */
#include "pager/table.h"

#include <stdlib.h>
#include <string.h>

struct pair {
    uint64_t unit;
    uint64_t entry;
};

struct vector {
    struct pager_table base;
    struct pair *pairs;
    size_t n, cap;
};

/* The first index whose unit is >= unit. */
static size_t lower_bound(const struct vector *v, uint64_t unit)
{
    size_t lo = 0, hi = v->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v->pairs[mid].unit < unit)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static uint64_t *vector_find(struct pager_table *t, uint64_t unit)
{
    struct vector *v = (struct vector *)t;
    size_t i = lower_bound(v, unit);
    return i < v->n && v->pairs[i].unit == unit && v->pairs[i].entry ? &v->pairs[i].entry : NULL;
}

static uint64_t *vector_insert(struct pager_table *t, uint64_t unit)
{
    struct vector *v = (struct vector *)t;
    size_t i = lower_bound(v, unit);
    if (i < v->n && v->pairs[i].unit == unit)
        return &v->pairs[i].entry;
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        struct pair *p = realloc(v->pairs, cap * sizeof *p);
        if (!p)
            return NULL;
        v->pairs = p;
        v->cap = cap;
    }
    memmove(&v->pairs[i + 1], &v->pairs[i], (v->n - i) * sizeof *v->pairs);
    v->pairs[i] = (struct pair){unit, 0};
    v->n++;
    return &v->pairs[i].entry;
}

static void vector_remove(struct pager_table *t, uint64_t unit)
{
    struct vector *v = (struct vector *)t;
    size_t i = lower_bound(v, unit);
    if (i < v->n && v->pairs[i].unit == unit) {
        memmove(&v->pairs[i], &v->pairs[i + 1], (v->n - i - 1) * sizeof *v->pairs);
        v->n--;
    }
}

static size_t vector_bytes(const struct pager_table *t)
{
    const struct vector *v = (const struct vector *)t;
    return sizeof *v + v->cap * sizeof(struct pair);
}

static int vector_each(struct pager_table *t, int (*fn)(uint64_t, uint64_t *, void *), void *arg)
{
    struct vector *v = (struct vector *)t;
    for (size_t i = 0; i < v->n; i++) {
        int rc = v->pairs[i].entry ? fn(v->pairs[i].unit, &v->pairs[i].entry, arg) : 0;
        if (rc)
            return rc;
    }
    return 0;
}

static void vector_destroy(struct pager_table *t)
{
    struct vector *v = (struct vector *)t;
    free(v->pairs);
    free(v);
}

static const struct pager_table_ops vector_ops = {
    vector_find, vector_insert, vector_remove, vector_bytes, vector_each, vector_destroy,
};

struct pager_table *exo_pager_vector_new(uint64_t nunits)
{
    struct vector *v = calloc(1, sizeof *v);
    if (!v)
        return NULL;
    v->base.ops = &vector_ops;
    v->base.nunits = nunits;
    return &v->base;
}
