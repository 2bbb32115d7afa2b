/* What the pager tests share (test_pager.c, test_pager_failures.c, test_pager_redis.c,
 * test_pager_uring.c): stamped data written into a region and checked back, one region
 * configuration paged through a store, several threads incrementing counters while they
 * evict each other's units, and a store that fails. A failed check prints why and exits 1,
 * as harness.h's checks do. */
#ifndef EXOMEM_TEST_PAGER_FIXTURE_H
#define EXOMEM_TEST_PAGER_FIXTURE_H

#include <exomem/pager.h>
#include <stddef.h>
#include <stdint.h>

/* The word stamped at offset `off` of a region in round `round`: depends on both, so a unit
 * read back from an old round or another place is caught. */
uint64_t pager_stamp(uint64_t off, uint64_t round);

/* Stamp four words per unit into every unit of [base, base+size), then check them all. */
void pager_write_all(uint64_t *base, size_t size, size_t unit, uint64_t round);
void pager_check_all(const uint64_t *base, size_t size, size_t unit, uint64_t round);

/* One configuration over store s (named store_name in messages): a region of `units` units
 * and `frames` frames, written twice (the second round over evicted units) and read back;
 * fails unless paging really happened (evictions, write-backs, store reads) within the
 * budget. EXO_PAGER_CUSTOM gets a victim callback that lets FIFO choose. The region is
 * destroyed (its counters returned); the store stays open. */
exo_pager_stats pager_one_config(exo_pager_store *s, const char *store_name,
                                 exo_pager_policy policy, exo_pager_table table, size_t unit,
                                 exo_pager_delivery delivery, size_t units, size_t frames);

/* Four threads, each keeping counters in its own 24 units of a region over s with a budget
 * of 12 units, increment them 4,000 times at random: no increment may be lost while the
 * others' faults evict its units. The region is destroyed; the store stays open. */
void pager_many_threads(exo_pager_store *s, exo_pager_delivery delivery,
                        exo_pager_policy policy);

/* ---- a store that fails ---- */

/* Install the test's SIGBUS handler, before any pager region (so that the pager's handler
 * chains to it for the faults it cannot serve): it counts the signal and escapes from the
 * access that raised it. */
void pager_failures_install(void);

/* SIGBUS signals seen so far. */
int pager_bus_errors(void);

/* Read one byte at p into *out; 1 if the read raised SIGBUS. */
int pager_read_faults(volatile const char *p, char *out);

/* Walk store s (empty) through exo_pager_store_fail() with a region of 16 units and a budget
 * of 4, under alarm(): a fill it cannot serve gives SIGBUS, the reason and the unit back
 * after WILLNEED; write-backs that fail keep the dirty units resident, give the fault that
 * needed a frame SIGBUS, and lose nothing. The region is destroyed; the store stays open. */
void pager_failures_scenario(exo_pager_store *s, exo_pager_delivery delivery);

#endif
