/* The on-disk VAS record (vases/<id>): which segments a VAS lists, with what access.
 * Kept in the registry layer so that segment deletion can see which VASes use a segment. */
#ifndef EXOMEM_VAS_RECORD_H
#define EXOMEM_VAS_RECORD_H

#include <exomem/vas.h>
#include <stddef.h>

#define EXO_VAS_MAGIC "EXOVAS\0\1"
#define EXO_VAS_VERSION 1

struct exo_vas_rec_seg {
    uint64_t sid;
    uint32_t flags;             /* SEG_RDONLY or SEG_RDWR */
    uint32_t reserved;
};

struct exo_vas_rec {
    char magic[8];
    uint32_t version;
    uint32_t nsegs;
    uint64_t id;
    uint64_t heap;              /* VAS_CTL_SET_HEAP choice, 0 for the first SEG_RDWR */
    int64_t created;
    char name[EXOMEM_NAME_MAX + 1];
    struct exo_vas_rec_seg segs[VAS_SEGS_MAX];
    uint64_t checksum;
};

int exo_vas_rec_path(vasid_t vid, char *buf, size_t len);
/* Read and verify VAS vid's record. */
int exo_vas_rec_load(vasid_t vid, struct exo_vas_rec *rec);
/* Seal and write a new record (mode = the VAS's permission) or rewrite an existing one. */
int exo_vas_rec_create(struct exo_vas_rec *rec, mode_t mode);
int exo_vas_rec_store(struct exo_vas_rec *rec);
/* 1 if some VAS record lists sid (its name copied to vas_name), 0 if none, or an error.
 * The caller holds the registry lock. */
int exo_vas_records_mention(segid_t sid, char *vas_name, size_t len);

#endif
