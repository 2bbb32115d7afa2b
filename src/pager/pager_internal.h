/* A pager region's state, shared by the files of src/pager.
 *
 * Units and frames. The region is nunits units of `unit` bytes. At most nframes of them are
 * resident; each resident unit occupies a frame (struct frame), which carries its policy
 * state. The page table (table.h, the structure the application chose) maps a unit to its
 * entry: whether the store holds a copy, whether it is resident and in which frame.
 *
 * Locking. One mutex per region guards the table, the frames and the policy; it is held
 * while a fault is served, store I/O included. Stores may be called with it held, never the
 * reverse. The handler threads and the SIGBUS handler take it; the public calls too. */
#ifndef EXOMEM_PAGER_INTERNAL_H
#define EXOMEM_PAGER_INTERNAL_H

#include <exomem/pager.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "pager/store.h"
#include "pager/table.h"

/* Page-table entry bits. 0: never written, not resident, nothing stored. */
#define ENTRY_STORED UINT64_C(1)    /* the store holds the unit's latest written-back data */
#define ENTRY_RESIDENT UINT64_C(2)  /* in memory, in frame ENTRY_FRAME(e) */
#define ENTRY_POISONED UINT64_C(4)  /* a fill failed: accesses get SIGBUS until advised */
#define ENTRY_FRAME(e) ((uint32_t)((e) >> 32))
#define ENTRY_WITH_FRAME(e, f) (((e) & UINT64_C(0xffffffff)) | ((uint64_t)(f) << 32))

#define NO_FRAME UINT32_MAX

struct frame {
    uint64_t unit;
    uint32_t prev, next;   /* the policy's list (NO_FRAME at the ends) */
    bool used;             /* holds a unit */
    bool dirty;            /* written since filled or written back */
    bool wp;               /* write-protected: its next write faults */
    bool ref;              /* CLOCK's reference bit */
    bool pinned;           /* EXO_PAGER_PIN */
    bool busy;             /* being served now: never the victim */
};

struct exo_pager {
    /* What the application chose. */
    uint64_t base, size, unit, nunits;
    bool base_borrowed;         /* the range is the caller's (exo_pager_create_at): not unmapped */
    uint32_t nframes;
    exo_pager_policy policy;
    exo_pager_delivery delivery;
    exo_pager_callbacks callbacks;
    exo_pager_store *store;
    unsigned readahead;

    pthread_mutex_t lock;
    struct pager_table *table;
    struct frame *frames;
    uint32_t free_head;         /* frames not in use, linked through next */
    uint32_t head, tail;        /* the policy's list, oldest first */
    uint32_t hand;              /* CLOCK's hand (a frame in the list, or NO_FRAME) */
    uint32_t resident, dirty, pinned;
    void *buf;                  /* one unit, for fills from the store (under the lock) */
    void *zeros;                /* one unit of zeros */

    /* Sequential hints: [lo, hi) units read ahead `ahead` more. */
    uint64_t seq_lo, seq_hi, seq_ahead;

    /* Delivery. */
    int uffd, stop_fd;
    unsigned nthreads;
    pthread_t threads[64];
    int slot;                   /* index in the SIGBUS table, or -1 */

    /* Counters: under the lock, except the latency buckets (atomic adds). They live in the
     * published record (publish.h) when there is one, else in own_stats. */
    exo_pager_stats *stats;
    exo_pager_stats own_stats;
    struct exo_pager_pub *pub;
    char failure[256];
};

/* ---- fault.c: serving faults and moving units (the region's lock held) ---- */

/* Serve a fault at addr: fill the unit (write: it is being written) or, when it is resident
 * and clean, note the first write and unprotect it. 0, or a negative code when the unit
 * could not be filled (the failure is recorded in p->failure). */
int exo_pager_serve(struct exo_pager *p, uint64_t addr, bool write);

/* Fill unit u if it is not resident (for read-ahead, WILLNEED, PIN): 0 or a code. */
int exo_pager_fill(struct exo_pager *p, uint64_t u, bool count_as_readahead);

/* Evict the resident unit in frame f (dirty data is written to the store first). */
int exo_pager_evict(struct exo_pager *p, uint32_t f);

/* Write frame f's unit to the store if it is dirty; it stays resident and becomes clean. */
int exo_pager_write_back(struct exo_pager *p, uint32_t f);

/* Make unit u's poisoned state (a failed fill) go away so that it is tried again. */
void exo_pager_unpoison(struct exo_pager *p, uint64_t u);

/* Record why a fault failed (exo_pager_last_failure), printf-style. */
void exo_pager_set_failure(struct exo_pager *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- policy.c: the list of resident frames and the choice of a victim ---- */

void exo_pager_policy_filled(struct exo_pager *p, uint32_t f, bool write);
void exo_pager_policy_referenced(struct exo_pager *p, uint32_t f, bool write);
void exo_pager_policy_removed(struct exo_pager *p, uint32_t f);
/* The frame to evict: never pinned or busy. NO_FRAME when every frame is. */
uint32_t exo_pager_policy_victim(struct exo_pager *p);

/* ---- delivery.c: handler threads and the SIGBUS handler ---- */

int exo_pager_delivery_start(struct exo_pager *p);
void exo_pager_delivery_stop(struct exo_pager *p);

/* Add one fault's service time to the latency histogram. */
void exo_pager_count_latency(struct exo_pager *p, uint64_t ns);

/* Bring the published resident, dirty and table byte counts up to date (after they
 * change; all O(1)). */
static inline void exo_pager_note_occupancy(struct exo_pager *p)
{
    p->stats->resident_bytes = (uint64_t)p->resident * p->unit;
    p->stats->dirty_bytes = (uint64_t)p->dirty * p->unit;
    p->stats->table_bytes = p->table->ops->bytes(p->table);
}

#endif
