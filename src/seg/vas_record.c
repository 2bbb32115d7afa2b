/* VAS records: load, store, and the search for VASes that list a segment. */
#include "seg/vas_record.h"
#include "internal.h"
#include "seg/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int exo_vas_rec_path(vasid_t vid, char *buf, size_t len)
{
    return exo_reg_path(buf, len, "vases/%llu", (unsigned long long)vid);
}

int exo_vas_rec_load(vasid_t vid, struct exo_vas_rec *rec)
{
    if (vid == 0)
        return exo_fail(EXO_ENOENT, "VAS id 0 is no VAS");
    char path[EXO_PATH_MAX];
    int rc = exo_vas_rec_path(vid, path, sizeof path);
    if (rc)
        return rc;
    rc = exo_record_read(path, rec, sizeof *rec, EXO_VAS_MAGIC, EXO_VAS_VERSION);
    if (rc == -EXO_ENOENT)
        return exo_fail(EXO_ENOENT, "no VAS with id %llu", (unsigned long long)vid);
    if (rc == -EXO_EACCES)
        return exo_fail(EXO_EACCES, "VAS %llu: permission denied", (unsigned long long)vid);
    if (rc)
        return rc;
    if (rec->id != vid || rec->nsegs > VAS_SEGS_MAX || rec->name[EXOMEM_NAME_MAX] != '\0')
        return exo_fail(EXO_ECORRUPT, "VAS record %s is inconsistent", path);
    for (uint32_t i = 0; i < rec->nsegs; i++)
        if (rec->segs[i].flags != EXO_VAS_REC_RDWR && rec->segs[i].flags != EXO_VAS_REC_RDONLY)
            return exo_fail(EXO_ECORRUPT, "VAS record %s: segment %u has access bits %#x", path,
                            i, rec->segs[i].flags);
    return 0;
}

int exo_vas_rec_create(struct exo_vas_rec *rec, mode_t mode)
{
    char path[EXO_PATH_MAX];
    int rc = exo_vas_rec_path(rec->id, path, sizeof path);
    if (rc)
        return rc;
    exo_record_seal(rec, sizeof *rec);
    return exo_record_create(path, rec, sizeof *rec, mode);
}

int exo_vas_rec_store(struct exo_vas_rec *rec)
{
    char path[EXO_PATH_MAX];
    int rc = exo_vas_rec_path(rec->id, path, sizeof path);
    if (rc)
        return rc;
    exo_record_seal(rec, sizeof *rec);
    rc = exo_record_rewrite(path, rec, sizeof *rec);
    if (rc == -EXO_EACCES)
        return exo_fail(EXO_EACCES, "VAS '%s': no write permission", rec->name);
    return rc;
}

int exo_vas_records_mention(segid_t sid, char *vas_name, size_t len)
{
    uint64_t *ids;
    size_t n;
    int rc = exo_name_list(EXO_KIND_VAS, &ids, &n);
    if (rc)
        return rc;
    int found = 0;
    /* Heap-allocated: the record is several KiB. */
    struct exo_vas_rec *rec = malloc(sizeof *rec);
    if (!rec) {
        free(ids);
        return exo_fail(EXO_ENOMEM, "searching VAS records");
    }
    for (size_t i = 0; i < n && !found; i++) {
        if (exo_vas_rec_load(ids[i], rec) != 0)
            continue; /* a corrupt VAS cannot pin a segment */
        for (uint32_t j = 0; j < rec->nsegs; j++) {
            if (rec->segs[j].sid == sid) {
                snprintf(vas_name, len, "%s", rec->name);
                found = 1;
                break;
            }
        }
    }
    free(rec);
    free(ids);
    exo_clear_error();
    return found;
}
