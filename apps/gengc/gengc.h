/* A generational copying collector on the object heap of apps/lispheap (Appel and Li's
 * generational-collection application, issue 5), with two ways to find the old-to-young
 * pointers a minor collection must treat as roots:
 *
 *   GENGC_RS_DIRTY  the old generation is a dirty-tracking region (DIRTY): a minor collection
 *                   asks which old pages were written since the last one and scans just
 *                   those for pointers into the nursery. The mutator's stores are plain.
 *   GENGC_RS_CARDS  the classic software write barrier: every pointer store into an old
 *                   object marks its 512-byte card; a minor collection scans the marked cards.
 *
 * Young objects live in a nursery; a minor collection promotes every survivor into the old
 * generation (Cheney-style: the promoted objects are scanned in order). When the old
 * generation might not hold the next promotion, a major collection copies everything live
 * into the old generation's other semispace.
 */
#ifndef EXOMEM_GENGC_H
#define EXOMEM_GENGC_H

#include "lispheap.h"

#include <exomem/vm.h>
#include <stddef.h>
#include <stdint.h>

enum gengc_rs {
    GENGC_RS_DIRTY = 0, /* remembered set from exo_vm_dirty */
    GENGC_RS_CARDS = 1, /* remembered set from a card-marking write barrier */
};

struct gengc_config {
    size_t nursery_bytes;
    size_t old_bytes;      /* each of the old generation's two semispaces */
    enum gengc_rs rs;
    exo_vm_engine engine;  /* GENGC_RS_DIRTY: the dirty-tracking engine (AUTO: best) */
    int verify_each_gc;    /* verify the heap after every collection (tests) */
    int test_drop_dirty;   /* test hook: ignore what DIRTY (or the cards) report, i.e. a
                              broken remembered set the verifier must catch */
};

struct gengc_stats {
    uint64_t minor, major;
    uint64_t minor_ns, major_ns;
    uint64_t rs_ns;            /* of minor_ns: finding and scanning the remembered set */
    uint64_t rs_bytes;         /* old-generation bytes scanned for the remembered set */
    uint64_t promoted_bytes;
    uint64_t verify_errors;    /* found by verify_each_gc */
};

typedef struct gengc_heap gengc_heap;

/* Make a heap. 0 or a negative exomem error code (EXO_ENOTSUP if the engine is missing). */
int gengc_create(const struct gengc_config *cfg, gengc_heap **out);

/* Release everything. */
void gengc_destroy(gengc_heap *h);

/* A new young object (fields nil); collects when the nursery is full. LH_NIL when the heap is
 * exhausted. Size the old generation for the live data: a major collection whose copies do
 * not fit in a semispace aborts the process (the heap would be corrupt otherwise). */
lh_val gengc_alloc(gengc_heap *h, unsigned type, unsigned nfields);

/* obj.field[i] = v, with the card mark when the heap uses cards. */
void gengc_store(gengc_heap *h, lh_val obj, unsigned i, lh_val v);

/* The heap's root stack. */
struct lh_roots *gengc_roots(gengc_heap *h);

/* The mutator interface (its store is gengc_store's variant for this heap). */
void gengc_heap_if(gengc_heap *h, struct lh_heap_if *out);

/* Run a minor (or, if the old generation is too full, a major) collection now. */
void gengc_minor(gengc_heap *h);

/* Run a major collection now. */
void gengc_major(gengc_heap *h);

/* Check the heap right after a collection (the nursery is empty): every object reachable
 * from the roots is a well-formed object in the old generation's used part. Returns the
 * number of bad pointers (0 when healthy). */
long gengc_verify(gengc_heap *h);

/* Counters so far; gengc_reset_stats forgets them. */
void gengc_get_stats(const gengc_heap *h, struct gengc_stats *out);
void gengc_reset_stats(gengc_heap *h);

/* The DIRTY engine in use (GENGC_RS_DIRTY), else EXO_VM_ENGINE_AUTO. */
exo_vm_engine gengc_engine(const gengc_heap *h);

#endif
