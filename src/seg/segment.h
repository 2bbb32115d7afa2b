/* Segment records and data files, for the layers above (the VAS layer). */
#ifndef EXOMEM_SEGMENT_H
#define EXOMEM_SEGMENT_H

#include <exomem/seg.h>
#include <stdbool.h>

#define EXO_SEG_MAGIC "EXOSEG\0\1"
#define EXO_SEG_VERSION 2

/* The record's own flag bits, fixed by the format: the API's SEG_NORESERVE and SEG_THP
 * (seg.h) are translated at the API boundary, so their values may change without touching
 * a record on disk. */
#define EXO_SEG_REC_NORESERVE 0x1u
#define EXO_SEG_REC_THP 0x2u
#define EXO_SEG_REC_PAGED 0x4u   /* data in a pager file store (data_path); see segs/<id>.paged */

/* The on-disk segment record (segs/<id>). Fixed size; sealed with a checksum. */
struct exo_seg_rec {
    char magic[8];
    uint32_t version;
    uint32_t flags;             /* EXO_SEG_REC_NORESERVE, EXO_SEG_REC_THP */
    uint64_t id;
    uint64_t base;
    uint64_t size;
    uint64_t page_size;
    int64_t created;
    char name[EXOMEM_NAME_MAX + 1];
    char data_path[1024];       /* hugetlbfs or huge tmpfs file; empty: segs/<id>.data */
    uint64_t pool_pages;        /* huge pages seg_alloc_ex() added to the pool for this
                                 * segment; seg_delete() gives them back */
    uint64_t checksum;
};

/* A paged segment's pager settings (segs/<id>.paged), sealed like the records. */
#define EXO_PAGED_MAGIC "EXOPGD\0\1"
#define EXO_PAGED_VERSION 1
struct exo_paged_rec {
    char magic[8];
    uint32_t version;
    uint32_t policy;            /* exo_pager_policy */
    uint64_t budget;            /* bytes resident per process */
    uint64_t unit;              /* 4 KiB or 2 MiB */
    uint64_t checksum;
};

/* Read and check paged segment sid's settings against its record. */
int exo_paged_load(const struct exo_seg_rec *rec, struct exo_paged_rec *out);

/* Read and verify segment sid's record. */
int exo_seg_load(segid_t sid, struct exo_seg_rec *rec);

/* Open a segment's data file, read-write when the caller may, else read-only (*writable
 * says which). -EXO_EACCES when it may not even read it. */
int exo_seg_open_data(const struct exo_seg_rec *rec, int *fd, bool *writable);

#endif
