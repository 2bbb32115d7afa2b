/* VASes in the registry: create, find, clone, delete, list, and the segments they list. */
#include "internal.h"
#include "os/os.h"
#include "seg/registry.h"
#include "seg/segment.h"
#include "seg/vas_record.h"
#include "vas/vas_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Make a VAS record named `name` listing `segs`; under the exclusive registry lock. */
static int create_locked(const char *name, mode_t mode, const struct exo_vas_rec *from,
                         vasid_t *vid)
{
    uint64_t existing;
    if (exo_name_lookup(EXO_KIND_VAS, name, &existing) == 0)
        return exo_fail(EXO_EEXIST, "a VAS named '%s' exists already", name);
    exo_clear_error(); /* the lookup's "no VAS named" is the expected answer */
    struct exo_vas_rec *rec = calloc(1, sizeof *rec);
    if (!rec)
        return exo_fail(EXO_ENOMEM, "creating VAS '%s'", name);
    if (from)
        *rec = *from;
    memcpy(rec->magic, EXO_VAS_MAGIC, 8);
    rec->version = EXO_VAS_VERSION;
    rec->created = (int64_t)time(NULL);
    memset(rec->name, 0, sizeof rec->name);
    snprintf(rec->name, sizeof rec->name, "%s", name);
    int rc = exo_reg_next_id(&rec->id);
    if (!rc)
        rc = exo_vas_rec_create(rec, mode);
    bool recorded = rc == 0, linked = false;
    if (!rc)
        linked = (rc = exo_name_link(EXO_KIND_VAS, name, rec->id)) == 0;
    if (!rc)
        rc = exo_reg_commit_id(rec->id);
    if (rc && linked)
        exo_name_unlink(EXO_KIND_VAS, name);
    if (rc && recorded) {
        char path[EXO_PATH_MAX];
        if (exo_vas_rec_path(rec->id, path, sizeof path) == 0)
            exo_os_unlink(path);
    }
    if (!rc)
        *vid = rec->id;
    free(rec);
    return rc;
}

static int create_vas(const char *name, mode_t mode, const struct exo_vas_rec *from,
                      vasid_t *vid)
{
    int rc = exo_check_name(name);
    if (rc)
        return rc;
    if (!vid)
        return exo_fail(EXO_EINVAL, "VAS '%s': vid is NULL", name);
    if (mode & ~(mode_t)07777)
        return exo_fail(EXO_EINVAL, "VAS '%s': mode %#o has bits beyond 07777", name,
                        (unsigned)mode);
    if ((rc = exo_reg_open(true)) != 0)
        return rc;
    int lock;
    if ((rc = exo_reg_lock(true, &lock)) != 0)
        return rc;
    rc = create_locked(name, mode, from, vid);
    exo_reg_unlock(lock);
    return rc;
}

EXO_API int vas_create(const char *name, mode_t mode, vasid_t *vid)
{
    exo_clear_error();
    return create_vas(name, mode, NULL, vid);
}

EXO_API int vas_find(const char *name, vasid_t *vid)
{
    exo_clear_error();
    if (!vid)
        return exo_fail(EXO_EINVAL, "vid is NULL");
    int rc = exo_name_lookup(EXO_KIND_VAS, name, vid);
    /* A VAS record the caller may not read is checked by the owner's calls, not here. */
    struct exo_vas_rec *rec = rc ? NULL : malloc(sizeof *rec);
    if (rec && exo_vas_rec_load(*vid, rec) == 0 && strcmp(rec->name, name) != 0)
        rc = exo_fail(EXO_ECORRUPT, "name '%s' leads to VAS %llu, which is named '%s'", name,
                      (unsigned long long)*vid, rec->name);
    free(rec);
    if (!rc)
        exo_clear_error();
    return rc;
}

int exo_vas_stat(vasid_t vid, struct stat *st)
{
    char path[EXO_PATH_MAX];
    int rc = exo_vas_rec_path(vid, path, sizeof path);
    if (rc)
        return rc;
    if ((rc = exo_os_stat(path, st)) != 0)
        return exo_fail(-rc,
                        "VAS %llu: %s", (unsigned long long)vid, strerror(errno));
    return 0;
}

/* A VAS's record and its file's owner and mode. */
static int load_with_owner(vasid_t vid, struct exo_vas_rec *rec, struct stat *st)
{
    int rc = exo_vas_rec_load(vid, rec);
    return rc ? rc : exo_vas_stat(vid, st);
}

EXO_API int vas_clone(vasid_t vid, const char *new_name, vasid_t *new_vid)
{
    exo_clear_error();
    struct exo_vas_rec rec;
    struct stat st;
    int rc = load_with_owner(vid, &rec, &st);
    if (rc)
        return rc;
    return create_vas(new_name, st.st_mode & 07777, &rec, new_vid);
}

EXO_API int vas_delete(vasid_t vid)
{
    exo_clear_error();
    struct exo_vas_rec rec;
    struct stat st;
    int rc = load_with_owner(vid, &rec, &st);
    if (rc)
        return rc;
    if (!exo_reg_may_administer(st.st_uid))
        return exo_fail(EXO_EPERM, "VAS '%s': only its owner (uid %u) or root may delete it",
                        rec.name, (unsigned)st.st_uid);
    int lock;
    if ((rc = exo_reg_lock(true, &lock)) != 0)
        return rc;
    rc = exo_name_unlink(EXO_KIND_VAS, rec.name);
    if (!rc) {
        char path[EXO_PATH_MAX];
        if (exo_vas_rec_path(vid, path, sizeof path) == 0)
            exo_os_unlink(path);
    }
    exo_reg_unlock(lock);
    return rc;
}

int exo_vas_fill_info(vasid_t vid, struct vas_info *info)
{
    struct exo_vas_rec rec;
    struct stat st;
    int rc = load_with_owner(vid, &rec, &st);
    if (rc)
        return rc;
    memset(info, 0, sizeof *info);
    info->id = rec.id;
    snprintf(info->name, sizeof info->name, "%s", rec.name);
    info->mode = st.st_mode & 07777;
    info->uid = st.st_uid;
    info->gid = st.st_gid;
    info->heap = rec.heap;
    info->created = rec.created;
    info->nsegs = rec.nsegs;
    for (uint32_t i = 0; i < rec.nsegs; i++) {
        struct exo_seg_rec seg;
        info->segs[i].sid = rec.segs[i].sid;
        info->segs[i].flags = exo_vas_rec_access(&rec.segs[i]);
        if (exo_seg_load(rec.segs[i].sid, &seg) == 0)
            snprintf(info->segs[i].name, sizeof info->segs[i].name, "%s", seg.name);
        else
            snprintf(info->segs[i].name, sizeof info->segs[i].name, "?");
    }
    exo_clear_error();
    return 0;
}

static int load_info(uint64_t id, void *item)
{
    return exo_vas_fill_info(id, item);
}

EXO_API int vas_list(struct vas_info *out, size_t cap, size_t *count, size_t *corrupt)
{
    exo_clear_error();
    struct vas_info *item = malloc(sizeof *item); /* several KiB: not on the stack */
    if (!item)
        return exo_fail(EXO_ENOMEM, "vas_list");
    int rc = exo_reg_list(EXO_KIND_VAS, load_info, item, sizeof *item, out, cap, count, corrupt);
    free(item);
    return rc;
}

/* Load a VAS record for a change: caller must hold the exclusive registry lock. */
static int change_begin(vasid_t vid, struct exo_vas_rec *rec, int *lock)
{
    int rc = exo_reg_lock(true, lock);
    if (rc)
        return rc;
    if ((rc = exo_vas_rec_load(vid, rec)) != 0)
        exo_reg_unlock(*lock);
    return rc;
}

static bool ranges_overlap(const struct exo_seg_rec *a, const struct exo_seg_rec *b)
{
    return a->base < b->base + b->size && b->base < a->base + a->size;
}

EXO_API int seg_attach(vasid_t vid, segid_t sid, int flags)
{
    exo_clear_error();
    if (flags != SEG_RDWR && flags != SEG_RDONLY)
        return exo_fail(EXO_EINVAL, "seg_attach: flags %#x are neither SEG_RDONLY nor SEG_RDWR",
                        (unsigned)flags);
    struct exo_seg_rec seg, other;
    int rc = exo_seg_load(sid, &seg);
    if (rc)
        return rc;
    struct exo_vas_rec rec;
    int lock;
    if ((rc = change_begin(vid, &rec, &lock)) != 0)
        return rc;
    for (uint32_t i = 0; !rc && i < rec.nsegs; i++) {
        if (rec.segs[i].sid == sid)
            rc = exo_fail(EXO_EEXIST, "VAS '%s' lists segment '%s' already", rec.name,
                          seg.name);
        else if (exo_seg_load(rec.segs[i].sid, &other) == 0 && ranges_overlap(&seg, &other))
            rc = exo_fail(EXO_EOVERLAP, "segment '%s' overlaps segment '%s' of VAS '%s'",
                          seg.name, other.name, rec.name);
    }
    if (!rc && rec.nsegs >= VAS_SEGS_MAX)
        rc = exo_fail(EXO_ETOOMANY, "VAS '%s' lists %d segments already", rec.name,
                      VAS_SEGS_MAX);
    if (!rc) {
        rec.segs[rec.nsegs++] = (struct exo_vas_rec_seg){sid, exo_vas_rec_flags(flags), 0};
        rc = exo_vas_rec_store(&rec);
    }
    exo_reg_unlock(lock);
    return rc;
}

EXO_API int seg_detach(vasid_t vid, segid_t sid)
{
    exo_clear_error();
    struct exo_vas_rec rec;
    int lock;
    int rc = change_begin(vid, &rec, &lock);
    if (rc)
        return rc;
    uint32_t i = 0;
    while (i < rec.nsegs && rec.segs[i].sid != sid)
        i++;
    if (i == rec.nsegs) {
        rc = exo_fail(EXO_ENOENT, "VAS '%s' does not list segment %llu", rec.name,
                      (unsigned long long)sid);
    } else {
        memmove(&rec.segs[i], &rec.segs[i + 1], (rec.nsegs - i - 1) * sizeof rec.segs[0]);
        rec.nsegs--;
        memset(&rec.segs[rec.nsegs], 0, sizeof rec.segs[0]);
        if (rec.heap == sid)
            rec.heap = 0;
        rc = exo_vas_rec_store(&rec);
    }
    exo_reg_unlock(lock);
    return rc;
}

int exo_vas_set_mode(vasid_t vid, mode_t mode)
{
    struct stat st;
    int rc = exo_vas_stat(vid, &st);
    if (rc)
        return rc;
    if (mode & ~(mode_t)07777)
        return exo_fail(EXO_EINVAL, "mode %#o has bits beyond 07777", (unsigned)mode);
    if (!exo_reg_may_administer(st.st_uid))
        return exo_fail(EXO_EPERM, "VAS %llu: only its owner (uid %u) or root may change its "
                        "mode", (unsigned long long)vid, (unsigned)st.st_uid);
    char path[EXO_PATH_MAX];
    if ((rc = exo_vas_rec_path(vid, path, sizeof path)) != 0)
        return rc;
    if ((rc = exo_os_chmod(path, mode)) != 0)
        return exo_fail(-rc, "chmod %s: %s", path, strerror(errno));
    return 0;
}

int exo_vas_set_heap(vasid_t vid, segid_t sid)
{
    struct exo_vas_rec rec;
    int lock;
    int rc = change_begin(vid, &rec, &lock);
    if (rc)
        return rc;
    rc = -EXO_ENOENT;
    for (uint32_t i = 0; i < rec.nsegs; i++)
        if (rec.segs[i].sid == sid)
            rc = exo_vas_rec_access(&rec.segs[i]) == SEG_RDWR ? 0 : -EXO_EACCES;
    if (rc == -EXO_ENOENT)
        rc = exo_fail(EXO_ENOENT, "VAS '%s' does not list segment %llu", rec.name,
                      (unsigned long long)sid);
    else if (rc)
        rc = exo_fail(EXO_EACCES, "VAS '%s': a heap segment must be attached SEG_RDWR",
                      rec.name);
    if (!rc) {
        rec.heap = sid;
        rc = exo_vas_rec_store(&rec);
    }
    exo_reg_unlock(lock);
    return rc;
}
