/* The address ranges this process has reserved for attached segments.
 *
 * Segments of different VASes may share addresses (SpaceJMP lets every VAS lay out its own
 * space), so creating a segment over a range that exomem itself holds is no overlap; over
 * anything else it is. The VAS layer records its reservations here. Thread-safe. */
#ifndef EXOMEM_CLAIMS_H
#define EXOMEM_CLAIMS_H

#include <stdbool.h>
#include <stdint.h>

/* Record that [lo, hi) is held for a segment (a range may be recorded more than once). */
int exo_claims_add(uint64_t lo, uint64_t hi);
/* Forget one record of exactly [lo, hi). */
void exo_claims_remove(uint64_t lo, uint64_t hi);
/* Is every byte of [lo, hi) inside some recorded range? */
bool exo_claims_cover(uint64_t lo, uint64_t hi);

#endif
