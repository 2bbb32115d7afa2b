/* Paged segments (SEG_PAGED): store placement and the settings record (paged.c). */
#ifndef EXOMEM_SEG_PAGED_H
#define EXOMEM_SEG_PAGED_H

#include <exomem/seg.h>

#include "seg/registry.h"
#include "seg/segment.h"

/* Check opts' paged settings for rec (its base, size, name, id set) and fill in *out, and
 * rec->data_path with a new store file name in the paged directory. Creates nothing. */
int exo_paged_place(struct exo_seg_rec *rec, const struct seg_opts *opts,
                    struct exo_paged_rec *out);

/* Write segment sid's settings record (sealed), never replacing one. */
int exo_paged_save(uint64_t sid, struct exo_paged_rec *rec);

/* Remove segment sid's settings record (best effort). */
void exo_paged_remove(uint64_t sid);

#endif
