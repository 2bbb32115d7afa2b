/* Segments: creation, lookup, cloning, metadata, deletion and listing. */
#include "seg/segment.h"
#include "internal.h"
#include "os/os.h"
#include "seg/claims.h"
#include "seg/paged.h"
#include "seg/placement.h"
#include "seg/registry.h"
#include "seg/vas_record.h"

#include <dirent.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int data_path(const struct exo_seg_rec *rec, char *buf, size_t len)
{
    if (rec->data_path[0]) {
        snprintf(buf, len, "%s", rec->data_path);
        return 0;
    }
    return exo_reg_path(buf, len, "segs/%llu.data", (unsigned long long)rec->id);
}

static int record_path(segid_t sid, char *buf, size_t len)
{
    return exo_reg_path(buf, len, "segs/%llu", (unsigned long long)sid);
}

/* Format 1 records (before pool_pages) are the current layout without that field: the same
 * bytes up to it, then the checksum. Read them as such, so registries made by older builds
 * keep working; they were never given huge pages for the pool (pool_pages = 0). */
static int load_format1(const char *path, struct exo_seg_rec *rec)
{
    const size_t head = offsetof(struct exo_seg_rec, pool_pages);
    int rc = exo_record_read(path, rec, head + sizeof rec->checksum, EXO_SEG_MAGIC, 1);
    if (rc)
        return rc;
    memcpy(&rec->checksum, (char *)rec + head, sizeof rec->checksum);
    rec->pool_pages = 0;
    return 0;
}

/* SEG_NORESERVE/SEG_THP (the API) to and from the record's bits (the format). */
static uint32_t rec_flags_of(unsigned opt_flags)
{
    return ((opt_flags & SEG_NORESERVE) ? EXO_SEG_REC_NORESERVE : 0) |
           ((opt_flags & SEG_THP) ? EXO_SEG_REC_THP : 0) |
           ((opt_flags & SEG_PAGED) ? EXO_SEG_REC_PAGED : 0);
}

static unsigned opt_flags_of(uint32_t rec_flags)
{
    return ((rec_flags & EXO_SEG_REC_NORESERVE) ? SEG_NORESERVE : 0u) |
           ((rec_flags & EXO_SEG_REC_THP) ? SEG_THP : 0u) |
           ((rec_flags & EXO_SEG_REC_PAGED) ? SEG_PAGED : 0u);
}

/* A record that passed its checksum can still have been written by anyone who may write
 * the registry: nothing in it is used before it makes sense. In particular a data path
 * (hugetlb and THP segments) must name a file exomem made for this segment, so a record
 * cannot point another user's process, root's included, at an arbitrary file. */
static bool record_sane(const struct exo_seg_rec *rec)
{
    uint64_t page = rec->page_size;
    if (page != SEG_PAGE_4K && page != SEG_PAGE_2M && page != SEG_PAGE_1G)
        return false;
    if (rec->size == 0 || rec->size % page || rec->base % page || rec->base == 0 ||
        rec->base + rec->size < rec->base || rec->base + rec->size > EXO_USER_ADDR_END)
        return false;
    if (rec->flags & ~(EXO_SEG_REC_NORESERVE | EXO_SEG_REC_THP | EXO_SEG_REC_PAGED) ||
        rec->name[0] == '\0')
        return false;
    if ((rec->flags & EXO_SEG_REC_PAGED) &&
        (page != SEG_PAGE_4K || (rec->flags & EXO_SEG_REC_THP) || !rec->data_path[0]))
        return false;
    if (rec->data_path[0] == '\0')
        return page == SEG_PAGE_4K && !(rec->flags & EXO_SEG_REC_THP);
    const char *slash = strrchr(rec->data_path, '/');
    char want[64];
    snprintf(want, sizeof want, "-%llu", (unsigned long long)rec->id);
    size_t base_len = slash ? strlen(slash + 1) : 0, want_len = strlen(want);
    return rec->data_path[0] == '/' && !strstr(rec->data_path, "/../") &&
           !strstr(rec->data_path, "/./") && base_len == 7 + 16 + want_len &&
           !strncmp(slash + 1, "exomem-", 7) &&
           strspn(slash + 8, "0123456789abcdef") == 16 && !strcmp(slash + 24, want);
}

int exo_seg_load(segid_t sid, struct exo_seg_rec *rec)
{
    if (sid == 0)
        return exo_fail(EXO_ENOENT, "segment id 0 is no segment");
    char path[EXO_PATH_MAX];
    int rc = record_path(sid, path, sizeof path);
    if (rc)
        return rc;
    rc = exo_record_read(path, rec, sizeof *rec, EXO_SEG_MAGIC, EXO_SEG_VERSION);
    if (rc == -EXO_ECORRUPT && load_format1(path, rec) == 0)
        rc = 0;
    else if (rc == -EXO_ECORRUPT) /* say what is wrong with it as a current record */
        rc = exo_record_read(path, rec, sizeof *rec, EXO_SEG_MAGIC, EXO_SEG_VERSION);
    if (rc == -EXO_ENOENT)
        return exo_fail(EXO_ENOENT, "no segment with id %llu", (unsigned long long)sid);
    if (rc)
        return rc;
    if (rec->id != sid || rec->name[EXOMEM_NAME_MAX] != '\0' ||
        rec->data_path[sizeof rec->data_path - 1] != '\0' || !record_sane(rec))
        return exo_fail(EXO_ECORRUPT, "segment record %s is inconsistent", path);
    return 0;
}

int exo_seg_open_data(const struct exo_seg_rec *rec, int *fd, bool *writable)
{
    char path[EXO_PATH_MAX];
    int rc = data_path(rec, path, sizeof path);
    if (rc)
        return rc;
    /* Not following links nor waiting for a FIFO's writer: see exo_record_read(). */
    int f = exo_os_open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK, 0);
    *writable = f >= 0;
    if (f == -EXO_EACCES)
        f = exo_os_open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
    if (f == -EXO_EACCES)
        return exo_fail(EXO_EACCES, "segment '%s': permission denied", rec->name);
    if (f == -EXO_ENOENT)
        return exo_fail(EXO_ECORRUPT, "segment '%s': data file %s is missing", rec->name, path);
    if (f < 0)
        return exo_fail(-f, "segment '%s': cannot open %s", rec->name, path);
    struct stat st;
    if (exo_os_fstat(f, &st) != 0 || !S_ISREG(st.st_mode) ||
        (uint64_t)st.st_size != rec->size) {
        exo_os_close(f);
        return exo_fail(EXO_ECORRUPT, "segment '%s': data file %s has the wrong size",
                        rec->name, path);
    }
    *fd = f;
    return 0;
}

/* Check arguments before anything is touched, so bad input changes nothing. */
static int check_layout(const char *name, uint64_t base, uint64_t size, mode_t mode,
                        uint64_t page)
{
    int rc = exo_check_name(name);
    if (rc)
        return rc;
    if (page != SEG_PAGE_4K && page != SEG_PAGE_2M && page != SEG_PAGE_1G)
        return exo_fail(EXO_EPAGESIZE, "segment '%s': page size %#llx is not 4K, 2M or 1G",
                        name, (unsigned long long)page);
    if (size == 0)
        return exo_fail(EXO_ESIZE, "segment '%s': size 0", name);
    if (base < (UINT64_C(1) << 16) || base >= EXO_USER_ADDR_END ||
        size > EXO_USER_ADDR_END - base)
        return exo_fail(EXO_ESIZE, "segment '%s': [%#llx, +%#llx) leaves the user address "
                        "space [0x10000, %#llx)", name, (unsigned long long)base,
                        (unsigned long long)size, (unsigned long long)EXO_USER_ADDR_END);
    if (base % page || size % page)
        return exo_fail(EXO_EALIGN, "segment '%s': base %#llx and size %#llx must be "
                        "multiples of the page size %#llx", name, (unsigned long long)base,
                        (unsigned long long)size, (unsigned long long)page);
    if (mode & ~(mode_t)07777)
        return exo_fail(EXO_EINVAL, "segment '%s': mode %#o has bits beyond 07777", name,
                        (unsigned)mode);
    return 0;
}

static bool range_is_ours(uint64_t lo, uint64_t hi)
{
    return exo_claims_cover(lo, hi);
}

/* Make the data file: exact mode, full size, memory reserved unless SEG_NORESERVE. hugetlbfs
 * files reserve their pages (a trial mapping), which tells at once if the pool is short;
 * with SEG_NORESERVE they do not, because a private mapping of the file (exomem run) makes
 * its own reservation and the pages would be held twice. SEG_THP files are filled through
 * a MADV_HUGEPAGE mapping. */
static int create_data(const struct exo_seg_rec *rec, mode_t mode, const char *path)
{
    int fd = exo_os_open(path, O_RDWR | O_CREAT | O_EXCL, mode);
    if (fd < 0)
        return exo_fail(-fd, "segment '%s': cannot create %s: %s", rec->name, path,
                        strerror(errno));
    int rc = exo_os_fchmod(fd, mode);
    bool hugetlb = rec->page_size != SEG_PAGE_4K, thp = rec->flags & EXO_SEG_REC_THP;
    /* A paged segment's store file is sparse: larger than memory is its point. */
    bool reserve = !(rec->flags & (EXO_SEG_REC_NORESERVE | EXO_SEG_REC_PAGED));
    if (!rc)
        rc = exo_os_size_file(fd, rec->size, !hugetlb && !thp && reserve);
    if (rc)
        rc = exo_fail(-rc, "segment '%s': cannot size %s to %llu bytes", rec->name, path,
                      (unsigned long long)rec->size);
    else if (hugetlb && reserve && exo_os_hugetlb_reserve_file(fd, rec->size) != 0)
        rc = exo_fail(EXO_ENOHUGE, "segment '%s': the %lluK huge page pool cannot hold %llu "
                      "bytes (its free pages were taken meanwhile)", rec->name,
                      (unsigned long long)(rec->page_size >> 10), (unsigned long long)rec->size);
    else if (thp && reserve && (rc = exo_os_thp_fill_file(fd, rec->size)) != 0)
        rc = exo_fail(-rc, "segment '%s': cannot fill %s with %llu bytes", rec->name, path,
                      (unsigned long long)rec->size);
    exo_os_close(fd);
    if (rc)
        exo_os_unlink(path);
    return rc;
}

EXO_API int seg_alloc_ex(const char *name, uint64_t base, uint64_t size, mode_t mode,
                         const struct seg_opts *opts, segid_t *sid)
{
    exo_clear_error();
    uint64_t page = opts && opts->page_size ? opts->page_size : SEG_PAGE_4K;
    unsigned flags = opts ? opts->flags : 0;
    int rc = check_layout(name, base, size, mode, page);
    if (rc)
        return rc;
    if (!sid)
        return exo_fail(EXO_EINVAL, "segment '%s': sid is NULL", name);
    if (flags & ~(unsigned)(SEG_NORESERVE | SEG_THP | SEG_PAGED))
        return exo_fail(EXO_EINVAL, "segment '%s': unknown flags %#x", name, flags);
    if ((flags & SEG_PAGED) && (page != SEG_PAGE_4K || (flags & SEG_THP)))
        return exo_fail(EXO_EINVAL, "segment '%s': SEG_PAGED goes with 4K pages and without "
                        "SEG_THP (a paged segment's unit is set by paged_unit)", name);
    if ((flags & SEG_THP) && page != SEG_PAGE_4K)
        return exo_fail(EXO_EINVAL, "segment '%s': SEG_THP goes with 4K pages, not %lluK "
                        "(hugetlb pages are huge already)", name, (unsigned long long)(page >> 10));
    char desc[256];
    if (exo_os_range_mapped_except(base, size, range_is_ours, desc, sizeof desc))
        return exo_fail(EXO_EOVERLAP, "segment '%s': [%#llx, %#llx) overlaps mapping %s", name,
                        (unsigned long long)base, (unsigned long long)(base + size), desc);
    if ((rc = exo_reg_open(true)) != 0)
        return rc;
    int lock;
    if ((rc = exo_reg_lock(true, &lock)) != 0)
        return rc;
    uint64_t existing;
    if (exo_name_lookup(EXO_KIND_SEG, name, &existing) == 0) {
        exo_reg_unlock(lock);
        return exo_fail(EXO_EEXIST, "a segment named '%s' exists already", name);
    }
    exo_clear_error(); /* the lookup's "no segment named" is the expected answer */
    struct exo_seg_rec rec;
    memset(&rec, 0, sizeof rec);
    memcpy(rec.magic, EXO_SEG_MAGIC, 8);
    rec.version = EXO_SEG_VERSION;
    rec.flags = rec_flags_of(flags);
    rec.base = base;
    rec.size = size;
    rec.page_size = page;
    rec.created = (int64_t)time(NULL);
    snprintf(rec.name, sizeof rec.name, "%s", name);
    char dpath[EXO_PATH_MAX], rpath[EXO_PATH_MAX];
    struct placement pl = {.pool_added = 0};
    bool placed = false;
    struct exo_paged_rec paged;
    rc = exo_reg_next_id(&rec.id);
    if (!rc && (page != SEG_PAGE_4K || (flags & SEG_THP)))
        placed = (rc = exo_seg_place_data(&rec, &pl)) == 0;
    if (!rc && (flags & SEG_PAGED))
        rc = exo_paged_place(&rec, opts, &paged);
    if (!rc)
        rc = data_path(&rec, dpath, sizeof dpath);
    if (!rc)
        rc = record_path(rec.id, rpath, sizeof rpath);
    if (!rc)
        rc = create_data(&rec, mode, dpath);
    bool paged_saved = false;
    if (!rc && (flags & SEG_PAGED)) {
        paged_saved = (rc = exo_paged_save(rec.id, &paged)) == 0;
        if (rc)
            exo_os_unlink(dpath);
    }
    if (!rc) {
        exo_record_seal(&rec, sizeof rec);
        rc = exo_record_create(rpath, &rec, sizeof rec, 0644);
        bool recorded = rc == 0, linked = false;
        if (!rc)
            linked = (rc = exo_name_link(EXO_KIND_SEG, name, rec.id)) == 0;
        if (!rc)
            rc = exo_reg_commit_id(rec.id);
        if (rc && linked)
            exo_name_unlink(EXO_KIND_SEG, name);
        if (rc && recorded)
            exo_os_unlink(rpath);
        if (rc)
            exo_os_unlink(dpath);
    }
    if (rc && paged_saved)
        exo_paged_remove(rec.id);
    if (rc && placed)
        exo_seg_unplace(&pl);
    exo_reg_unlock(lock);
    if (!rc)
        *sid = rec.id;
    return rc;
}

EXO_API int seg_alloc(const char *name, uint64_t base, uint64_t size, mode_t mode, segid_t *sid)
{
    return seg_alloc_ex(name, base, size, mode, NULL, sid);
}

EXO_API int seg_find(const char *name, segid_t *sid)
{
    exo_clear_error();
    if (!sid)
        return exo_fail(EXO_EINVAL, "sid is NULL");
    int rc = exo_name_lookup(EXO_KIND_SEG, name, sid);
    struct exo_seg_rec rec;
    if (!rc && exo_seg_load(*sid, &rec) == 0 && strcmp(rec.name, name) != 0)
        rc = exo_fail(EXO_ECORRUPT, "name '%s' leads to segment %llu, which is named '%s'",
                      name, (unsigned long long)*sid, rec.name);
    if (!rc)
        exo_clear_error();
    return rc;
}

static void fill_info(const struct exo_seg_rec *rec, const struct stat *st, struct seg_info *out)
{
    memset(out, 0, sizeof *out);
    out->id = rec->id;
    snprintf(out->name, sizeof out->name, "%s", rec->name);
    out->base = rec->base;
    out->size = rec->size;
    out->page_size = rec->page_size;
    out->flags = opt_flags_of(rec->flags);
    out->created = rec->created;
    out->mode = st->st_mode & 07777;
    out->uid = st->st_uid;
    out->gid = st->st_gid;
}

static int stat_data(const struct exo_seg_rec *rec, struct stat *st)
{
    char path[EXO_PATH_MAX];
    int rc = data_path(rec, path, sizeof path);
    if (rc)
        return rc;
    if ((rc = exo_os_stat(path, st)) != 0)
        return exo_fail(rc == -EXO_ENOENT ? EXO_ECORRUPT : -rc,
                        "segment '%s': data file %s: %s", rec->name, path, strerror(errno));
    return 0;
}

/* A segment's record and its data file's owner and mode. */
static int load_with_owner(segid_t sid, struct exo_seg_rec *rec, struct stat *st)
{
    int rc = exo_seg_load(sid, rec);
    return rc ? rc : stat_data(rec, st);
}

static int info_of(segid_t sid, struct seg_info *out)
{
    struct exo_seg_rec rec;
    struct stat st;
    int rc = load_with_owner(sid, &rec, &st);
    if (!rc)
        fill_info(&rec, &st, out);
    return rc;
}

static int set_mode(segid_t sid, mode_t mode)
{
    struct exo_seg_rec rec;
    struct stat st;
    int rc = load_with_owner(sid, &rec, &st);
    if (rc)
        return rc;
    if (mode & ~(mode_t)07777)
        return exo_fail(EXO_EINVAL, "mode %#o has bits beyond 07777", (unsigned)mode);
    if (!exo_reg_may_administer(st.st_uid))
        return exo_fail(EXO_EPERM, "segment '%s': only its owner (uid %u) or root may change "
                        "its mode", rec.name, (unsigned)st.st_uid);
    char path[EXO_PATH_MAX];
    if ((rc = data_path(&rec, path, sizeof path)) != 0)
        return rc;
    if ((rc = exo_os_chmod(path, mode)) != 0)
        return exo_fail(-rc, "segment '%s': chmod %s: %s", rec.name, path, strerror(errno));
    return 0;
}

EXO_API int seg_ctl(segid_t sid, int cmd, void *arg)
{
    exo_clear_error();
    if (!arg)
        return exo_fail(EXO_EINVAL, "seg_ctl: arg is NULL");
    switch (cmd) {
    case SEG_CTL_INFO:
        return info_of(sid, arg);
    case SEG_CTL_SET_MODE:
        return set_mode(sid, *(const mode_t *)arg);
    default:
        return exo_fail(EXO_EINVAL, "seg_ctl: unknown command %d", cmd);
    }
}

EXO_API int seg_clone(segid_t sid, const char *new_name, segid_t *new_sid)
{
    exo_clear_error();
    struct seg_info info;
    struct exo_seg_rec rec;
    int rc = info_of(sid, &info);
    if (!rc)
        rc = exo_seg_load(sid, &rec);
    if (rc)
        return rc;
    if (rec.flags & EXO_SEG_REC_PAGED)
        return exo_fail(EXO_ENOTSUP, "segment '%s' is paged: cloning a paged segment is not "
                        "supported", rec.name);
    int src;
    bool writable;
    if ((rc = exo_seg_open_data(&rec, &src, &writable)) != 0)
        return rc;
    /* A shared lock keeps writers out while the copy is taken. */
    if ((rc = exo_os_lock(src, EXO_LOCK_SHARED, true)) != 0) {
        exo_os_close(src);
        return exo_fail(-rc, "segment '%s': cannot lock for cloning", rec.name);
    }
    struct seg_opts opts = {.page_size = rec.page_size, .flags = opt_flags_of(rec.flags)};
    segid_t made = 0;
    rc = seg_alloc_ex(new_name, rec.base, rec.size, info.mode | 0200, &opts, &made);
    if (!rc) {
        struct exo_seg_rec copy;
        int dst = -1;
        bool w;
        rc = exo_seg_load(made, &copy);
        if (!rc)
            rc = exo_seg_open_data(&copy, &dst, &w);
        if (!rc)
            rc = exo_os_copy_file(src, dst, rec.size);
        if (dst >= 0) {
            if (!rc)
                rc = exo_os_fchmod(dst, info.mode);
            exo_os_close(dst);
        }
        if (rc) {
            int saved = rc;
            if (seg_delete(made) == 0)
                exo_reg_forget_id(made);
            rc = exo_fail(-saved, "segment '%s': cannot copy into clone '%s'", rec.name,
                          new_name);
        }
    }
    exo_os_unlock(src);
    exo_os_close(src);
    if (!rc)
        *new_sid = made;
    return rc;
}

EXO_API int seg_delete(segid_t sid)
{
    exo_clear_error();
    struct exo_seg_rec rec;
    struct stat st;
    int rc = load_with_owner(sid, &rec, &st);
    if (rc)
        return rc;
    if (!exo_reg_may_administer(st.st_uid))
        return exo_fail(EXO_EPERM, "segment '%s': only its owner (uid %u) or root may delete "
                        "it", rec.name, (unsigned)st.st_uid);
    int lock;
    if ((rc = exo_reg_lock(true, &lock)) != 0)
        return rc;
    char vas[EXOMEM_NAME_MAX + 1] = "";
    rc = exo_vas_records_mention(sid, vas, sizeof vas);
    if (rc > 0)
        rc = exo_fail(EXO_EINUSE, "segment '%s' is listed in VAS '%s'; detach it first",
                      rec.name, vas);
    int fd = -1;
    bool writable;
    if (!rc)
        rc = exo_seg_open_data(&rec, &fd, &writable);
    if (!rc && exo_os_lock(fd, EXO_LOCK_EXCLUSIVE, false) != 0)
        rc = exo_fail(EXO_EBUSY, "segment '%s' is switched in by a process", rec.name);
    if (!rc)
        rc = exo_name_unlink(EXO_KIND_SEG, rec.name);
    char path[EXO_PATH_MAX] = "";
    if (!rc) {
        if (record_path(sid, path, sizeof path) == 0)
            exo_os_unlink(path);
        if (rec.flags & EXO_SEG_REC_PAGED)
            exo_paged_remove(sid);
        if (data_path(&rec, path, sizeof path) == 0)
            exo_os_unlink(path);
    }
    if (fd >= 0)
        exo_os_close(fd);
    if (!rc) {
        /* The file is gone and closed here: its huge pages are back in the pool (or, if
         * another process still maps it, become surplus pages freed when it lets go). */
        if (rec.pool_pages)
            exo_os_pool_release(rec.page_size, (long)rec.pool_pages);
        char *slash = strrchr(path, '/');
        if (rec.data_path[0] && slash) {
            *slash = '\0';
            exo_seg_release_private_if_empty(path);
        }
    }
    exo_reg_unlock(lock);
    return rc;
}

EXO_API int seg_backing(segid_t sid, struct seg_backing *out)
{
    exo_clear_error();
    if (!out)
        return exo_fail(EXO_EINVAL, "seg_backing: out is NULL");
    struct exo_seg_rec rec;
    int rc = exo_seg_load(sid, &rec);
    int fd;
    bool writable;
    if (!rc)
        rc = exo_seg_open_data(&rec, &fd, &writable);
    if (rc)
        return rc;
    memset(out, 0, sizeof *out);
    out->page_size = rec.page_size;
    out->flags = opt_flags_of(rec.flags);
    out->size = rec.size;
    if (rec.page_size != SEG_PAGE_4K) {
        /* hugetlbfs counts the huge pages a file has in its blocks; all of them are huge. */
        struct stat st;
        if ((rc = exo_os_fstat(fd, &st)) == 0)
            out->resident = out->huge = (uint64_t)st.st_blocks * 512 < rec.size
                                            ? (uint64_t)st.st_blocks * 512 : rec.size;
    } else {
        rc = exo_os_file_residency(fd, rec.size, &out->resident, &out->huge);
    }
    exo_os_close(fd);
    if (rc)
        return exo_fail(-rc, "segment '%s': cannot measure what backs it", rec.name);
    return 0;
}

static int load_info(uint64_t id, void *item)
{
    return info_of(id, item);
}

EXO_API int seg_list(struct seg_info *out, size_t cap, size_t *count, size_t *corrupt)
{
    exo_clear_error();
    struct seg_info item;
    return exo_reg_list(EXO_KIND_SEG, load_info, &item, sizeof item, out, cap, count, corrupt);
}
