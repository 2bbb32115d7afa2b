/* GUPS over windows: SpaceJMP's Figures 8 and 9 (ASPLOS'16, section 5.2) on Linux.
 *
 * One logical table of 2^(window_log2 + log2 windows) 64-bit words is split into `windows`
 * equal windows, of which one is addressable at a time. Updates come from HPCC's stream
 * (apps/gups), in stream order: update v goes to entry v & (table - 1), in window
 * entry >> window_log2. A driver keeps one pending batch per window; when a window's batch
 * holds `batch` updates, that window becomes current (a window change when it was not) and
 * the batch is applied. So every iteration applies a batch of 16 or 64 updates to a random
 * window, as in the paper, and the updates applied are exactly stream positions 1..N, which
 * HPCC's verification checks window by window (gups_verify_part()).
 *
 * Three ways to reach a window (the paper's designs):
 *   MAP  one process; the table is one memfd; a change maps the window's piece of it at the
 *        window address with mmap(MAP_FIXED), populated at once (the paper's "page tables
 *        built on the critical path") or faulted in lazily (both measured);
 *   VAS  one segment per window, each in its own VAS at the same base, plus one heap segment
 *        attached to every VAS that holds the pending batches; a change is vas_switch();
 *   MP   one MPI process per window (gupswin_mpi.c); rank 0 makes the batches and sends
 *        each to the window's owner, waiting for its answer (rank 0 owns window 0).
 * Single-threaded, as the paper's experiment: a VAS switch changes what the whole process
 * sees, so one thread drives the updates in every design.
 */
#ifndef EXOMEM_GUPSWIN_H
#define EXOMEM_GUPSWIN_H

#include "gups.h"

#include <exomem/exomem.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define GUPSWIN_MAX_WINDOWS 64
#define GUPSWIN_MAX_BATCH 1024

struct gupswin_config {
    unsigned windows;     /* a power of two, 1 .. GUPSWIN_MAX_WINDOWS */
    unsigned window_log2; /* words per window: 2^window_log2 (>= 9: a 4 KiB page) */
    unsigned batch;       /* updates per batch, 1 .. GUPSWIN_MAX_BATCH */
    uint64_t max_updates; /* stop after this many updates (0: no limit) */
    uint64_t max_ns;      /* or once this much time has passed (0: no limit) */
};

struct gupswin_result {
    uint64_t updates;  /* stream positions 1..updates were applied */
    uint64_t batches;  /* batches applied (full ones, plus the partial ones at the end) */
    uint64_t changes;  /* window changes among them */
    uint64_t elapsed_ns;
    uint64_t change_ns; /* time spent changing windows (MP: sending and waiting) */
    uint64_t minor_faults; /* page faults of the driving process during the run */
};

/* How a design applies one batch to a window (making it current first when it is not).
 * Returns 0, or a negative -EXO_ code that ends the run. */
struct gupswin_design {
    int (*apply)(void *ctx, unsigned window, const uint64_t *values, unsigned count,
                 struct gupswin_result *res);
    void *ctx;
};

/* The monotonic clock in nanoseconds (what every design times its changes with). */
uint64_t gupswin_now_ns(void);

/* log2 of the whole table's words; cfg must be valid (gupswin_check()). */
unsigned gupswin_table_log2(const struct gupswin_config *cfg);

/* 0 when cfg is usable, else -EXO_EINVAL with exomem_last_error() saying why. */
int gupswin_check(const struct gupswin_config *cfg);

/* Apply count stream values to the window `part` (2^window_log2 words). */
static inline void gupswin_apply(uint64_t *part, unsigned window_log2, const uint64_t *values,
                                 unsigned count)
{
    uint64_t mask = (UINT64_C(1) << window_log2) - 1;
    for (unsigned i = 0; i < count; i++)
        part[values[i] & mask] ^= values[i];
}

/* Run the stream through the per-window batches until cfg's limit (at least one full batch
 * or, with a limit below one, that many updates), then apply the partial batches that are
 * left. pending must hold windows * batch words and fill `windows` counters (the VAS design
 * keeps both in its shared heap segment). Returns 0 or the first failure of design->apply
 * (then res->updates is not meaningful). Not thread-safe for one design. */
int gupswin_drive(const struct gupswin_config *cfg, const struct gupswin_design *design,
                  uint64_t *pending, unsigned *fill, struct gupswin_result *res);

/* The JSON params of one measurement: "design":..,"windows":..,"batch":..,"window_bytes":..
 * (the inside of a params object). */
void gupswin_params(char *buf, size_t cap, const char *design,
                    const struct gupswin_config *cfg);

/* Print one verified run as JSON lines (bench/run.py's protocol): "gupswin" (MUP/s, against
 * the "map" design with the same windows and batch), "gupswin_changes" (window changes per
 * second: for VAS, Figure 9's switch rate), "gupswin_change_time" (us per change: mmap,
 * vas_switch, or MP's send and wait), "gupswin_update_time" (ns per update outside the
 * changes: where TLB misses after a change show) and "gupswin_faults" (page faults of the
 * driving process per 1000 updates). errors is the verification's count (UINT64_MAX: it
 * could not run); a run that fails HPCC's bound prints a "skip" line saying so instead and
 * returns false. note (may be NULL) is added to the first line's note; it must need no JSON
 * escaping. */
bool gupswin_emit(FILE *out, const char *design, const struct gupswin_config *cfg,
                  const struct gupswin_result *res, uint64_t errors, const char *note);

/* ---- MAP: one address space, window mapped with mmap on each change (map.c) ---- */

struct gupswin_map;

/* Make the table (a memfd of windows << window_log2 words, every entry set to its index) and
 * reserve the window address `addr` (1 GiB-aligned recommended). populate: map each window
 * with MAP_POPULATE (all its page tables built at the change) rather than faulting pages
 * in as updates touch them. -EXO_EINVAL, -EXO_ENOMEM, -EXO_EOVERLAP (addr taken). */
int gupswin_map_open(const struct gupswin_config *cfg, uint64_t addr, bool populate,
                     struct gupswin_map **out);

/* The design to pass to gupswin_drive(). */
struct gupswin_design gupswin_map_design(struct gupswin_map *m);

/* HPCC's verification of the whole table after a run of `updates` updates: each window is
 * mapped in turn and checked; returns the wrong entries (0 for an exact run, which leaves
 * the table as gupswin_map_open() made it; UINT64_MAX when a window cannot be mapped). */
uint64_t gupswin_map_verify(struct gupswin_map *m, uint64_t updates);

/* Unmap and free everything. NULL is a no-op. */
void gupswin_map_close(struct gupswin_map *m);

/* ---- VAS: one VAS per window, vas_switch on each change (vas_design.c) ---- */

struct gupswin_vas;

/* Make, in the current registry, segments "<prefix>-w<i>" (2^window_log2 words each, all at
 * `window_base`, entries set to their index) and "<prefix>-heap" (at heap_base, holding the
 * pending batches), VASes "<prefix>-v<i>" each with its window and the heap, and attach
 * them all. Both bases 1 GiB-aligned. Errors of seg_alloc(), vas_create(), seg_attach(),
 * vas_attach(), vas_switch(), seg_malloc(); on failure what was made is deleted again. */
int gupswin_vas_open(const struct gupswin_config *cfg, const char *prefix, uint64_t window_base,
                     uint64_t heap_base, struct gupswin_vas **out);

/* The design, and the pending batches and counters (in the heap segment) to drive it with. */
struct gupswin_design gupswin_vas_design(struct gupswin_vas *v, uint64_t **pending,
                                         unsigned **fill);

/* As gupswin_map_verify(), switching to each window's VAS in turn (UINT64_MAX when a
 * switch fails); ends in window 0's VAS. */
uint64_t gupswin_vas_verify(struct gupswin_vas *v, uint64_t updates);

/* Switch home, detach, delete the VASes and segments. NULL is a no-op. Returns 0 or the
 * first failure (it goes on past it). */
int gupswin_vas_close(struct gupswin_vas *v);

#endif
