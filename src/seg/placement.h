/* Placement of a huge-page or SEG_THP segment's data: which file system holds it (the
 * configured mount, the registry's private mount, a shared one, or a private mount made
 * now as root) and, for hugetlb, growing the pool so the segment's pages are there. */
#ifndef EXOMEM_PLACEMENT_H
#define EXOMEM_PLACEMENT_H

#include <stdbool.h>
#include <stdint.h>

#include "seg/registry.h"
#include "seg/segment.h"

/* Where a huge-page or SEG_THP segment's data goes, and what seg_alloc_ex() did to put it
 * there, so that a failure can undo exactly that. */
struct placement {
    char mount[EXO_PATH_MAX];
    bool mount_needed;      /* root, nothing found: mount the registry's private one */
    bool mounted_now;       /* this call mounted it */
    uint64_t pool_page;     /* hugetlb page size of the pool below, 0 for THP */
    long pool_added;        /* pages this call added to that pool */
};

/* Choose the data file of a hugetlb or SEG_THP segment (fills rec->data_path and
 * rec->pool_pages): find or mount its file system and, for hugetlb, make the pool big
 * enough. Nothing is left changed on failure. */
int exo_seg_place_data(struct exo_seg_rec *rec, struct placement *pl);

/* Undo what exo_seg_place_data() did (after a later step failed). */
void exo_seg_unplace(struct placement *pl);

/* Unmount a private mount of this registry once no segment data is left in it (root
 * only; otherwise it simply stays). Mappings still using it stay valid (lazy detach). */
void exo_seg_release_private_if_empty(const char *mount);

#endif
