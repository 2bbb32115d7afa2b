/* What the pager tests share (test_pager.c, test_pager_redis.c): stamped data written over
 * a region and checked, and several threads faulting at once. */
#ifndef EXOMEM_TEST_PAGER_FIXTURE_H
#define EXOMEM_TEST_PAGER_FIXTURE_H

#include <exomem/pager.h>
#include <stddef.h>
#include <stdint.h>

/* The word stamped at offset `off` of a region in round `round`: depends on both, so a
 * unit read back from an old round or another place is caught. */
uint64_t pager_stamp(uint64_t off, uint64_t round);

/* Stamp four words, a quarter of a unit apart, in every unit of [base, base+size). */
void pager_write_all(uint64_t *base, size_t size, size_t unit, uint64_t round);

/* Check what pager_write_all wrote; prints the first wrong word and exits 1. */
void pager_check_all(const uint64_t *base, size_t size, size_t unit, uint64_t round);

/* Four threads, each owning 24 units of a 96-unit region with a budget of 12, keep counters
 * in their units (4,000 increments each) while the others' faults evict them: checks that
 * no increment is lost and that units were evicted and written back. The region is made
 * over store s and destroyed; s stays the caller's. */
void pager_many_threads(exo_pager_store *s, exo_pager_delivery delivery,
                        exo_pager_policy policy);

#endif
