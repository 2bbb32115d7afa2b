/* The on-disk VAS record (vases/<id>): which segments a VAS lists, with what access.
 * Kept in the registry layer so that segment deletion can see which VASes use a segment. */
#ifndef EXOMEM_VAS_RECORD_H
#define EXOMEM_VAS_RECORD_H

#include <exomem/vas.h>
#include <stddef.h>

#define EXO_VAS_MAGIC "EXOVAS\0\1"
#define EXO_VAS_VERSION 1

/* An attachment's access as the format stores it (fixed since format 1): 0 read-write,
 * 1 read-only. The API's SEG_RDWR/SEG_RDONLY (access.h values) are translated by
 * exo_vas_rec_access() and exo_vas_rec_flags(), so the format never follows the API. */
#define EXO_VAS_REC_RDWR 0u
#define EXO_VAS_REC_RDONLY 1u

struct exo_vas_rec_seg {
    uint64_t sid;
    uint32_t flags;             /* EXO_VAS_REC_RDWR or EXO_VAS_REC_RDONLY */
    uint32_t reserved;
};

/* The SEG_RDONLY or SEG_RDWR of a stored attachment. */
static inline int exo_vas_rec_access(const struct exo_vas_rec_seg *seg)
{
    return seg->flags == EXO_VAS_REC_RDONLY ? SEG_RDONLY : SEG_RDWR;
}

/* The stored form of SEG_RDONLY or SEG_RDWR. */
static inline uint32_t exo_vas_rec_flags(int access)
{
    return access == SEG_RDONLY ? EXO_VAS_REC_RDONLY : EXO_VAS_REC_RDWR;
}

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
