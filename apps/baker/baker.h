/* Baker's copying collector made concurrent with virtual-memory primitives, as Appel and Li
 * describe it (after Appel, Ellis and Li 1988), on the object heap of apps/lispheap.
 *
 * The heap is a MAP2: the mutator uses view a, the collector copies and scans through view b.
 * At a flip the mutator stops briefly: the roots are copied into to-space and the to-space
 * pages that receive copied (unscanned) objects are made no-access in view a (PROTN, signal
 * engine), so the mutator can never see a from-space pointer. When the mutator touches an
 * unscanned page, the TRAP handler scans that page (forwarding what it points to, through
 * view b) and unprotects it (UNPROT); a collector thread scans the remaining pages
 * concurrently and unprotects them as it goes. New objects are allocated black, from the top
 * of to-space downwards; copied objects grow from the bottom. The mutator's pauses are the
 * flips and the faults.
 *
 * BAKER_STW is the baseline on the same heap: at each flip the whole collection runs before
 * the mutator continues (a stop-the-world Cheney copy; no protection, no thread).
 */
#ifndef EXOMEM_BAKER_H
#define EXOMEM_BAKER_H

#include "lispheap.h"

#include <stddef.h>
#include <stdint.h>

enum baker_mode {
    BAKER_STW = 0,        /* stop-the-world copy at each flip */
    BAKER_CONCURRENT = 1, /* Appel-Ellis-Li: protected to-space, fault-driven + thread scans */
};

struct baker_config {
    size_t semispace_bytes;  /* each of the two semispaces (rounded up to pages) */
    enum baker_mode mode;
    int no_thread;           /* concurrent mode without the collector thread: only faults
                                (and the next flip) scan (tests: forces faults) */
    int verify_each_gc;      /* verify the heap at each flip, before flipping (tests) */
    int test_skip_page;      /* test hook: the first scan of each collection leaves its
                                page unscanned (a broken collector the verifier must catch) */
    size_t max_pauses;       /* pause durations kept (0: a default) */
    unsigned headroom_pct;   /* concurrent: % of a semispace left free after a collection,
                                for the mutator to allocate in during the next (0: 25) */
};

struct baker_stats {
    uint64_t flips;
    uint64_t faults;          /* TRAPs taken on unscanned to-space pages */
    uint64_t fault_scans;     /* ... of which scanned the page (else the thread had) */
    uint64_t thread_scans;    /* pages scanned by the collector thread */
    uint64_t sync_scans;      /* pages scanned by the mutator finishing a collection */
    uint64_t assist_scans;    /* pages scanned by the mutator while allocating (pacing) */
    uint64_t bytes_copied;
    uint64_t verify_errors;   /* found by verify_each_gc */
    uint64_t pause_total_ns;
    uint64_t max_flip_ns;     /* longest pause of each kind: flips (finishing the previous */
    uint64_t max_fault_ns;    /* collection if needed), faults, allocation assists, and */
    uint64_t max_assist_ns;   /* waits for a collection to finish when out of room */
    uint64_t max_wait_ns;
};

typedef struct baker_heap baker_heap;

/* Make a heap (and in concurrent mode its trap region and collector thread). 0 or a negative
 * exomem error code (e.g. EXO_ENOTSUP when the signal engine is missing). */
int baker_create(const struct baker_config *cfg, baker_heap **out);

/* Stop the collector thread and release everything. */
void baker_destroy(baker_heap *h);

/* A new object (fields nil) for the mutator; flips when to-space is full. LH_NIL when even
 * a collection leaves no room. Only the mutator thread allocates. Size the semispaces for
 * the live data plus the headroom: a collection whose copies cannot fit aborts the process
 * (it cannot be undone half way). */
lh_val baker_alloc(baker_heap *h, unsigned type, unsigned nfields);

/* The heap's root stack. */
struct lh_roots *baker_roots(baker_heap *h);

/* The mutator interface (alloc + plain stores: this collector needs no write barrier). */
void baker_heap_if(baker_heap *h, struct lh_heap_if *out);

/* Flip now (finishing the current collection first). */
void baker_collect(baker_heap *h);

/* Finish the current collection in the calling (mutator) thread, if one is running. */
void baker_finish(baker_heap *h);

/* Is a collection running (not all copies scanned yet)? */
int baker_collecting(const baker_heap *h);

/* Check the heap (no collection may be running: call baker_finish first): every object
 * reachable from the roots is a well-formed object in to-space's used part and no pointer
 * leads anywhere else. Returns the number of bad pointers found (0 when healthy). */
long baker_verify(baker_heap *h);

/* Counters so far. */
void baker_get_stats(const baker_heap *h, struct baker_stats *out);

/* The pause durations recorded so far (ns; flips and faults, in order), and their number. */
size_t baker_pauses(const baker_heap *h, const uint64_t **ns);

/* A copy of the pause durations sorted shortest first (for medians and percentiles), their
 * number in *n; the caller frees it. NULL when out of memory. */
uint64_t *baker_pauses_sorted(const baker_heap *h, size_t *n);

/* Forget the recorded pauses and counters (e.g. after a warm-up). */
void baker_reset_stats(baker_heap *h);

#endif
