/* Pager regions that paged segments (SEG_PAGED, src/vas/switch.c) put at a segment's base:
 * made over the caller's address-space reservation, and let go of again after the caller
 * has put its reservation back, so that the base is never a hole. */
#ifndef EXOMEM_PAGER_SEGMENT_REGION_H
#define EXOMEM_PAGER_SEGMENT_REGION_H

#include <exomem/pager.h>
#include <stdint.h>

/* exo_pager_create() with the region at `base`, replacing what the caller mapped there
 * (its reservation). Errors as exo_pager_create(). */
int exo_pager_create_at(const exo_pager_options *opt, uint64_t base, exo_pager **out);

/* Write every dirty unit back and hold the region's lock, so that no fault is served (a
 * thread that touches the region waits) until exo_pager_resume() or exo_pager_release().
 * The lock is held on return whatever the result; on failure (-EXO_EIO...) the units that
 * could not be written stay dirty. */
int exo_pager_quiesce(exo_pager *pager);

/* Undo exo_pager_quiesce(): the region serves faults again. */
void exo_pager_resume(exo_pager *pager);

/* After exo_pager_quiesce() and after the caller has mapped its reservation over the
 * region: stop delivery and free the region, touching neither its range nor its store. */
void exo_pager_release(exo_pager *pager);

#endif
