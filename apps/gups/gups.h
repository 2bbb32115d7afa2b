/* HPCC RandomAccess (GUPS): random read-modify-write updates of a table of 2^log2 64-bit
 * words, driven by the HPCC pseudo-random stream (a 64-bit LFSR: shift left, XOR in POLY
 * when the top bit falls out). A run applies the 4 * table-size updates of stream positions
 * 1..N as 128 interleaved sub-streams (independent loads, as HPCC's reference code does);
 * verification re-applies the same updates serially, which XOR undoes, and counts the
 * entries that are not their own index. Races between threads may lose updates: HPCC
 * allows 1% wrong entries.
 */
#ifndef EXOMEM_GUPS_H
#define EXOMEM_GUPS_H

#include <stdbool.h>
#include <stdint.h>

#define GUPS_POLY UINT64_C(0x7)
#define GUPS_PERIOD INT64_C(1317624576693539401)
#define GUPS_STREAMS 128 /* sub-streams interleaved by a run */

/* The software segment register of the bounds-checked variant: a table index i is allowed
 * when base <= i < base + len (one unsigned compare, as segmentation hardware would do). */
struct gups_bounds {
    uint64_t base;
    uint64_t len;
};

/* One step of the update stream. */
static inline uint64_t gups_step(uint64_t x)
{
    return (x << 1) ^ ((x >> 63) ? GUPS_POLY : 0);
}

/* The stream value n steps after 1 (n may be negative or exceed the period): lets any
 * thread or sub-stream start anywhere without stepping there. */
uint64_t gups_starts(int64_t n);

/* Number of updates of a run on a table of 2^log2 words (HPCC: four per entry). */
uint64_t gups_updates(unsigned log2);

/* Set table[i] = i for the 2^log2 entries. */
void gups_init(uint64_t *table, unsigned log2);

/* Set part[i] = lo + i for i < len: entries lo .. lo+len-1 of a table that is kept in
 * pieces (e.g. one window per process or per address space, apps/gupswin). */
void gups_init_part(uint64_t *part, uint64_t lo, uint64_t len);

/* Apply the updates of stream positions first+1 .. first+count to the table, as 128
 * interleaved sub-streams. With `bounds`, every index is checked first; an index out of
 * bounds is not accessed and sets *out_of_bounds (which must then be non-NULL). */
void gups_update_range(uint64_t *table, unsigned log2, uint64_t first, uint64_t count,
                       const struct gups_bounds *bounds, bool *out_of_bounds);

/* A full run (gups_updates(log2) updates) split into `threads` disjoint contiguous parts
 * of the stream, one per thread (threads == 1 runs in the caller). Returns 0, or -1 with
 * errno set when a thread cannot be started (updates may then be partly applied). */
int gups_run(uint64_t *table, unsigned log2, unsigned threads, const struct gups_bounds *bounds,
             bool *out_of_bounds);

/* gups_run() with `updates` updates (stream positions 1..updates) instead of HPCC's four
 * per entry: for tables too big to update fully within a benchmark's time. */
int gups_run_count(uint64_t *table, unsigned log2, uint64_t updates, unsigned threads,
                   const struct gups_bounds *bounds, bool *out_of_bounds);

/* HPCC's verification: re-apply all updates serially and return how many entries differ
 * from their index. Leaves the table as initialised when the run was exact. */
uint64_t gups_verify(uint64_t *table, unsigned log2);

/* gups_verify() of a run of `updates` updates (gups_run_count()). */
uint64_t gups_verify_count(uint64_t *table, unsigned log2, uint64_t updates);

/* gups_verify_count() of one piece of the table: part holds entries lo .. lo+len-1 of a
 * table of 2^log2 words. Re-applies, serially, the updates of the run that fall in the
 * piece and returns how many of its entries differ from their index. Verifying every piece
 * this way is HPCC's verification of the whole table. */
uint64_t gups_verify_part(uint64_t *part, unsigned log2, uint64_t updates, uint64_t lo,
                          uint64_t len);

/* Does an error count pass HPCC's bound (at most 1% of the table)? */
bool gups_passes(uint64_t errors, unsigned log2);
/* The same bound for a run of `updates` updates (gups_run_count()): HPCC's 1% of the table
 * with its 4 x table updates is 0.25% of the updates, and a capped run must not keep the
 * table-sized allowance (at 8 GiB with 2^25 updates that would accept a third of them
 * lost). */
bool gups_passes_count(uint64_t errors, uint64_t updates);

#endif
