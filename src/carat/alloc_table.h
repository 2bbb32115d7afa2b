/* The allocation table: every tracked allocation, ordered by address, and for each the set
 * of memory slots known to hold a pointer into it (the paper's Allocation-to-Escape map).
 * Not thread-safe: the runtime's lock (carat_internal.h) guards it. */
#ifndef EXOMEM_CARAT_ALLOC_TABLE_H
#define EXOMEM_CARAT_ALLOC_TABLE_H

#include "exomem/carat.h"
#include <stdbool.h>
#include <stdint.h>

/* A slot known to hold a pointer into the allocation, and the pointer it was last told to
 * hold (by an escape hook, a copy, or a move). */
struct escape_slot {
    uintptr_t slot, value;
    /* The slot lay in a tracked allocation then: once none holds it, it is freed memory
     * (reused by malloc's own links, or unmapped and mapped again for the runtime's tables)
     * and no longer a slot of the program's. */
    bool in_alloc;
};

/* A set of slots (open addressing on the slot address, slot 0 = empty). */
struct escape_set {
    struct escape_slot *slots;
    uint32_t cap;        /* power of two, or 0 */
    uint32_t count;
};

struct alloc {
    uintptr_t base, size;
    int kind;                /* EXO_CARAT_HEAP / GLOBAL / STACK */
    uint32_t align;          /* alignment a move keeps: that of the first address, 16-4096 */
    const char *site;
    struct escape_set escapes;
    struct alloc *left, *right;
    uint32_t prio;           /* treap heap order: keeps the tree balanced on average */
};

struct alloc_table {
    struct alloc *root;
    uint64_t count;
    uintptr_t lo, hi;        /* every allocation lies in [lo, hi): a cheap first filter */
    uint64_t bytes;          /* memory of nodes and escape sets */
    uint64_t peak_bytes;     /* the most `bytes` has been */
    /* The heap allocation with the most escapes, kept as escapes are added, so that a mover
     * asking 10,000 times a second does not walk the table each time. Recomputed by a walk
     * only after it is freed (worst_stale); its count going down is not followed, so it is
     * "a" worst case, as of when it was last overtaken. */
    struct alloc *worst;
    bool worst_stale;
    /* Allocations freed so far by their escape count then (EXO_CARAT_ESCAPE_BUCKETS). */
    uint64_t escape_hist[EXO_CARAT_ESCAPE_BUCKETS];
};

/* An escape was added to a's set: a may be the new worst case. */
void exo_carat_alloc_table_consider(struct alloc_table *t, struct alloc *a);
/* The heap allocation with the most escapes (see `worst`), or NULL if none is tracked. */
struct alloc *exo_carat_alloc_table_worst(struct alloc_table *t);

/* The histogram bucket of an allocation with n escapes: 0 for none, else 1 + log2(n). */
unsigned exo_carat_escape_bucket(uint64_t n);

/* Add [base, base+size). An allocation already at base (a free we never saw, e.g. by an
 * uninstrumented library) is replaced. -EXO_ENOMEM. */
int exo_carat_alloc_table_insert(struct alloc_table *t, uintptr_t base, uintptr_t size, int kind,
                       const char *site);
/* Remove the allocation starting at base; false if none does. */
bool exo_carat_alloc_table_remove(struct alloc_table *t, uintptr_t base);
/* The allocation containing addr, or NULL. */
struct alloc *exo_carat_alloc_table_find(const struct alloc_table *t, uintptr_t addr);
/* Change the base of a (after a move); keeps the order (the caller made sure the new range
 * overlaps no other allocation). */
void exo_carat_alloc_table_rebase(struct alloc_table *t, struct alloc *a, uintptr_t new_base);
/* Call fn for every allocation in address order until it returns true. */
void exo_carat_alloc_table_each(struct alloc_table *t, bool (*fn)(struct alloc *, void *), void *arg);
/* Free everything. */
void exo_carat_alloc_table_clear(struct alloc_table *t);

/* Escape sets. */
/* Add slot, or give it its new value if it is there. in_alloc: slot lies in a tracked
 * allocation (struct escape_slot). */
int exo_carat_escape_set_add(struct alloc_table *t, struct escape_set *s, uintptr_t slot,
                             uintptr_t value, bool in_alloc);
void exo_carat_escape_set_remove(struct escape_set *s, uintptr_t slot);
/* Is slot in the set, last told to hold exactly value? */
bool exo_carat_escape_set_holds(const struct escape_set *s, uintptr_t slot, uintptr_t value);
void exo_carat_escape_set_free(struct alloc_table *t, struct escape_set *s);

#endif
