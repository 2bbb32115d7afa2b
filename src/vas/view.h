/* What the VAS layer tells the layers above it (the allocator) about the current view. */
#ifndef EXOMEM_VAS_VIEW_H
#define EXOMEM_VAS_VIEW_H

#include <exomem/seg.h>
#include <stdbool.h>
#include <stdint.h>

/* Where segment sid is visible now: its base, size and access. -EXO_ENOTMAPPED if the
 * current address space does not show it. */
int exo_vas_visible(segid_t sid, uint64_t *base, uint64_t *size, bool *writable);

/* The visible segment that contains address p. -EXO_ENOTMAPPED if none. */
int exo_vas_visible_at(const void *p, segid_t *sid, uint64_t *base, uint64_t *size,
                       bool *writable);

/* The heap segment of the current VAS: its VAS_CTL_SET_HEAP choice, else its first
 * SEG_RDWR segment. -EXO_ENOTMAPPED at home, -EXO_ENOHEAP if it has none. */
int exo_vas_current_heap(segid_t *sid);

#endif
