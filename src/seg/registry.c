/* The registry directory: layout, lock, ids, names and checksummed records. */
#include "seg/registry.h"
#include "internal.h"
#include "os/os.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const kind_prefix[] = {"seg:", "vas:"};

int exo_reg_path(char *buf, size_t len, const char *fmt, ...)
{
    int n = snprintf(buf, len, "%s/", exomem_root());
    if (n < 0 || (size_t)n >= len)
        return exo_fail(EXO_ENAMETOOLONG, "registry path %s is too long", exomem_root());
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, len - (size_t)n, fmt, ap);
    va_end(ap);
    if (m < 0 || (size_t)m >= len - (size_t)n)
        return exo_fail(EXO_ENAMETOOLONG, "registry path under %s is too long", exomem_root());
    return 0;
}

/* The registry's subdirectories get the root's permission, so a registry is as private or
 * as shared as the directory it lives in: 0700 for one user, 2770 for a group. Where others
 * may write, the sticky bit lets only owners remove their objects, as in /tmp. */
static mode_t subdir_mode(mode_t root_mode)
{
    mode_t mode = root_mode & 07777;
    return (mode & 0022) ? (mode | 01000) : mode;
}

static int make_dir(const char *path, mode_t mode)
{
    int rc = exo_os_mkdir(path, mode);
    if (rc == 0 || rc == -EXO_EEXIST)
        return 0;
    return exo_fail(-rc, "cannot create registry directory %s: %s", path, strerror(errno));
}

/* The per-user default registry (no EXOMEM_ROOT) must be the caller's own: a directory, not
 * a link, owned by the caller and writable by no one else. Anyone may create names in
 * /dev/shm, so another user could have made it first to read or redirect the caller's
 * objects; then the call fails and says so, and nothing is written there. A registry named
 * by EXOMEM_ROOT is the caller's choice and may be shared (docs/spacejmp.md). */
static int check_own_root(const char *path, const struct stat *st)
{
    if (S_ISLNK(st->st_mode))
        return exo_fail(EXO_EACCES, "registry %s is a symbolic link, not your own directory: "
                        "remove it, or set EXOMEM_ROOT", path);
    if (!S_ISDIR(st->st_mode))
        return exo_fail(EXO_ECORRUPT, "registry %s is not a directory", path);
    if (st->st_uid != exo_os_euid())
        return exo_fail(EXO_EACCES, "registry %s belongs to uid %u, not to you (uid %u): "
                        "another user made it; remove it, or set EXOMEM_ROOT", path,
                        (unsigned)st->st_uid, (unsigned)exo_os_euid());
    if (st->st_mode & 0022)
        return exo_fail(EXO_EACCES, "registry %s is writable by other users (mode %04o); a "
                        "per-user registry must not be: chmod go-w it, or set EXOMEM_ROOT",
                        path, (unsigned)(st->st_mode & 07777));
    return 0;
}

/* Reach the registry's root directory (making it, mode 0700, when `create`), checked as
 * above when it is the default one; *mode receives its permission bits. */
static int open_root(bool create, mode_t *mode)
{
    const char *path = exomem_root();
    bool own = exo_config()->root_is_default;
    struct stat st;
    int rc = own ? exo_os_lstat(path, &st) : exo_os_stat(path, &st);
    if (rc == -EXO_ENOENT && create) {
        if ((rc = make_dir(path, 0700)) != 0)
            return rc;
        rc = own ? exo_os_lstat(path, &st) : exo_os_stat(path, &st);
    }
    if (rc == -EXO_ENOENT)
        return exo_fail(EXO_ENOENT, "no registry at %s", path);
    if (rc)
        return exo_fail(-rc, "cannot reach registry directory %s: %s", path, strerror(errno));
    if (own && (rc = check_own_root(path, &st)) != 0)
        return rc;
    if (!S_ISDIR(st.st_mode))
        return exo_fail(EXO_ECORRUPT, "registry entry %s is not a directory", path);
    *mode = st.st_mode & 07777;
    return 0;
}

/* Reach registry subdirectory `name`, making it (with the mode subdirectories get under a
 * root of root_mode) when `create`. */
static int reach_subdir(const char *name, bool create, mode_t root_mode)
{
    char path[EXO_PATH_MAX];
    int rc = exo_reg_path(path, sizeof path, "%s", name);
    if (rc)
        return rc;
    struct stat st;
    if ((rc = exo_os_stat(path, &st)) == 0) {
        if (!S_ISDIR(st.st_mode))
            return exo_fail(EXO_ECORRUPT, "registry entry %s is not a directory", path);
        return 0;
    }
    if (rc != -EXO_ENOENT)
        return exo_fail(-rc, "cannot reach registry directory %s: %s", path, strerror(errno));
    if (!create)
        return exo_fail(EXO_ENOENT, "no registry directory %s", path);
    return make_dir(path, subdir_mode(root_mode));
}

int exo_reg_open(bool create)
{
    static const char *const subdirs[] = {"segs", "vases", "names"};
    mode_t root_mode = 0700;
    int rc = open_root(create, &root_mode);
    if (rc)
        return rc;
    for (size_t i = 0; i < sizeof subdirs / sizeof subdirs[0]; i++) {
        if ((rc = reach_subdir(subdirs[i], create, root_mode)) != 0) {
            if (rc == -EXO_ENOENT)
                return exo_fail(EXO_ENOENT, "no registry at %s", exomem_root());
            return rc;
        }
    }
    return 0;
}

int exo_reg_open_extra(const char *name, bool create)
{
    mode_t root_mode = 0700;
    int rc = open_root(create, &root_mode);
    return rc ? rc : reach_subdir(name, create, root_mode);
}

/* Open the registry file `path` (lock, ids) read-write, creating it with the registry's own
 * permission when missing: 0600 in a private registry, 0660 in a group's, 0666 in one open
 * to all (the root's read and write bits). */
static int open_reg_file(const char *path)
{
    const int flags = O_RDWR | O_NOFOLLOW | O_NONBLOCK;
    int fd = exo_os_open(path, flags, 0);
    if (fd != -EXO_ENOENT)
        return fd;
    struct stat st;
    mode_t mode = exo_os_stat(exomem_root(), &st) == 0 ? (st.st_mode & 0666) : 0600;
    fd = exo_os_open(path, flags | O_CREAT | O_EXCL, mode);
    if (fd == -EXO_EEXIST) /* made meanwhile by another process */
        return exo_os_open(path, flags, 0);
    if (fd >= 0)
        exo_os_fchmod(fd, mode); /* the exact mode, whatever the umask */
    return fd;
}

int exo_reg_lock(bool exclusive, int *fd)
{
    char path[EXO_PATH_MAX];
    int rc = exo_reg_path(path, sizeof path, "lock");
    if (rc)
        return rc;
    int f = open_reg_file(path);
    if (f == -EXO_EACCES)
        f = exo_os_open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
    if (f < 0)
        return exo_fail(-f, "cannot open registry lock %s", path);
    long timeout_ms = exo_config()->lock_timeout_ms;
    if ((rc = exo_os_flock(f, exclusive, timeout_ms)) != 0) {
        int holder = rc == -EXO_EBUSY ? exo_os_flock_holder(f) : 0;
        exo_os_close(f);
        if (rc == -EXO_EBUSY)
            return exo_fail(EXO_EBUSY, "registry lock %s is held by %s%.0d for more than "
                            "%ld ms (EXOMEM_LOCK_TIMEOUT)", path, holder ? "process " :
                            "another process", holder, timeout_ms);
        return exo_fail(-rc, "cannot lock registry %s", path);
    }
    *fd = f;
    return 0;
}

void exo_reg_unlock(int fd)
{
    exo_os_funlock(fd);
    exo_os_close(fd);
}

/* The counter's text: decimal digits and a newline, nothing else (no sign, no spaces: a
 * "-5" must not become 2^64-5), and below 2^62 so that it can never wrap. */
static int parse_counter(const char *buf, long n, uint64_t *out)
{
    uint64_t v = 0;
    long i = 0;
    for (; i < n && buf[i] >= '0' && buf[i] <= '9'; i++) {
        v = v * 10 + (uint64_t)(buf[i] - '0');
        if (v >= (UINT64_C(1) << 62))
            return -EXO_ECORRUPT;
    }
    if (i == 0 || v == 0 || (i < n && !(buf[i] == '\n' && i + 1 == n)))
        return -EXO_ECORRUPT;
    *out = v;
    return 0;
}

/* Is id taken by a segment or a VAS (their records, or a segment's data file)? */
static bool id_taken(uint64_t id)
{
    static const char *const forms[] = {"segs/%llu", "segs/%llu.data", "vases/%llu"};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        char path[EXO_PATH_MAX];
        struct stat st;
        if (exo_reg_path(path, sizeof path, forms[i], (unsigned long long)id) == 0 &&
            exo_os_lstat(path, &st) != -EXO_ENOENT)
            return true;
    }
    return false;
}

static int note_id(const char *entry, void *arg)
{
    uint64_t *highest = arg, v = 0;
    for (const char *p = entry; *p >= '0' && *p <= '9' && v < (UINT64_C(1) << 58); p++)
        v = v * 10 + (uint64_t)(*p - '0');
    if (v > *highest)
        *highest = v;
    return 0;
}

/* The highest id a segment or VAS has (its files are named after it). */
static uint64_t highest_id_in_use(void)
{
    uint64_t highest = 0;
    char dir[EXO_PATH_MAX];
    if (exo_reg_path(dir, sizeof dir, "segs") == 0)
        exo_os_dir_each(dir, note_id, &highest);
    if (exo_reg_path(dir, sizeof dir, "vases") == 0)
        exo_os_dir_each(dir, note_id, &highest);
    return highest;
}

int exo_reg_next_id(uint64_t *id)
{
    char path[EXO_PATH_MAX];
    int rc = exo_reg_path(path, sizeof path, "ids");
    if (rc)
        return rc;
    uint64_t next = 1;
    int fd = exo_os_open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
    if (fd >= 0) {
        char buf[32] = {0};
        long n = exo_os_pread_some(fd, buf, sizeof buf - 1, 0);
        exo_os_close(fd);
        if (n < 0)
            return exo_fail((int)-n, "cannot read id counter %s", path);
        /* A damaged counter (anyone who may write the registry could write "-5" into it)
         * costs nothing: the next id is found from the ids in use instead. */
        if (n > 0 && parse_counter(buf, n, &next) != 0)
            next = highest_id_in_use() + 1;
    } else if (fd != -EXO_ENOENT) {
        return exo_fail(-fd, "cannot open id counter %s", path);
    }
    /* A counter set back (by hand, or by another user of a shared registry) must never hand
     * out an id in use: segments and VASes share one space of ids. */
    for (unsigned tries = 0; id_taken(next); tries++) {
        if (tries > 1000000)
            return exo_fail(EXO_ECORRUPT, "id counter %s: no free id after %llu", path,
                            (unsigned long long)next);
        next++;
    }
    *id = next;
    return 0;
}

int exo_reg_commit_id(uint64_t id)
{
    char path[EXO_PATH_MAX];
    int rc = exo_reg_path(path, sizeof path, "ids");
    if (rc)
        return rc;
    int fd = open_reg_file(path);
    if (fd < 0)
        return exo_fail(-fd, "cannot open id counter %s", path);
    char buf[32];
    int len = snprintf(buf, sizeof buf, "%020llu\n", (unsigned long long)(id + 1));
    rc = exo_os_pwrite_all(fd, buf, (size_t)len, 0);
    exo_os_close(fd);
    if (rc)
        return exo_fail(-rc, "cannot write id counter %s", path);
    return 0;
}

void exo_reg_forget_id(uint64_t id)
{
    char path[EXO_PATH_MAX];
    int lock;
    if (exo_reg_path(path, sizeof path, "ids") != 0 || exo_reg_lock(true, &lock) != 0)
        return;
    uint64_t next;
    /* Only when nothing was made since: the counter then stands just past id. */
    if (exo_reg_next_id(&next) == 0 && next == id + 1) {
        if (id == 1)
            exo_os_unlink(path);
        else
            exo_reg_commit_id(id - 1);
    }
    exo_reg_unlock(lock);
}

bool exo_reg_may_administer(uid_t owner)
{
    uid_t me = exo_os_euid();
    return me == 0 || me == owner;
}

int exo_check_name(const char *name)
{
    if (!name || !*name)
        return exo_fail(EXO_EBADNAME, "empty name");
    size_t len = strlen(name);
    if (len > EXOMEM_NAME_MAX)
        return exo_fail(EXO_ENAMETOOLONG, "name of %zu characters (at most %d)", len,
                        EXOMEM_NAME_MAX);
    if (name[0] == '.')
        return exo_fail(EXO_EBADNAME, "name '%s' starts with '.'", name);
    for (const char *p = name; *p; p++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-';
        if (!ok)
            return exo_fail(EXO_EBADNAME, "name '%s' has the character '%c' (allowed: "
                            "A-Z a-z 0-9 . _ -)", name, c);
    }
    return 0;
}

static int name_path(char *buf, size_t len, enum exo_kind kind, const char *name)
{
    return exo_reg_path(buf, len, "names/%s%s", kind_prefix[kind], name);
}

static int parse_id(const char *s, uint64_t *id)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || v == 0)
        return -EXO_ECORRUPT;
    *id = v;
    return 0;
}

int exo_name_lookup(enum exo_kind kind, const char *name, uint64_t *id)
{
    int rc = exo_check_name(name);
    if (rc)
        return rc;
    char path[EXO_PATH_MAX], target[64];
    if ((rc = name_path(path, sizeof path, kind, name)) != 0)
        return rc;
    int n = exo_os_readlink(path, target, sizeof target);
    if (n < 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return exo_fail(EXO_ENOENT, "no %s named '%s' in %s",
                            kind == EXO_KIND_SEG ? "segment" : "VAS", name, exomem_root());
        return exo_fail(-n, "cannot read %s: %s", path, strerror(errno));
    }
    if (parse_id(target, id) != 0)
        return exo_fail(EXO_ECORRUPT, "name link %s is corrupt", path);
    /* A name is its object's owner's: a link made by someone else (in a registry whose
     * names/ others may write) must not redirect the name to another object. */
    char record[EXO_PATH_MAX];
    struct stat link_st, rec_st;
    if ((rc = exo_reg_path(record, sizeof record, "%s/%llu",
                           kind == EXO_KIND_SEG ? "segs" : "vases",
                           (unsigned long long)*id)) != 0)
        return rc;
    if (exo_os_lstat(path, &link_st) == 0 && exo_os_lstat(record, &rec_st) == 0 &&
        link_st.st_uid != rec_st.st_uid && link_st.st_uid != 0)
        return exo_fail(EXO_ECORRUPT, "name link %s belongs to uid %u but points to an object "
                        "of uid %u: not followed", path, (unsigned)link_st.st_uid,
                        (unsigned)rec_st.st_uid);
    return 0;
}

int exo_name_link(enum exo_kind kind, const char *name, uint64_t id)
{
    char path[EXO_PATH_MAX], target[32];
    int rc = name_path(path, sizeof path, kind, name);
    if (rc)
        return rc;
    snprintf(target, sizeof target, "%llu", (unsigned long long)id);
    if ((rc = exo_os_symlink(target, path)) != 0) {
        if (rc == -EXO_EEXIST)
            return exo_fail(EXO_EEXIST, "a %s named '%s' exists already",
                            kind == EXO_KIND_SEG ? "segment" : "VAS", name);
        return exo_fail(-rc, "cannot create %s: %s", path, strerror(errno));
    }
    return 0;
}

int exo_name_unlink(enum exo_kind kind, const char *name)
{
    char path[EXO_PATH_MAX];
    int rc = name_path(path, sizeof path, kind, name);
    if (rc)
        return rc;
    if ((rc = exo_os_unlink(path)) != 0 && rc != -EXO_ENOENT)
        return exo_fail(-rc, "cannot remove %s: %s", path, strerror(errno));
    return 0;
}

static int compare_ids(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

struct name_walk {
    const char *dir, *prefix;
    uint64_t *ids;
    size_t n, cap;
};

static int collect_name(const char *entry, void *arg)
{
    struct name_walk *w = arg;
    if (strncmp(entry, w->prefix, strlen(w->prefix)) != 0)
        return 0;
    char path[EXO_PATH_MAX], target[64];
    if (snprintf(path, sizeof path, "%s/%s", w->dir, entry) >= (int)sizeof path)
        return 0;
    uint64_t id = UINT64_MAX; /* an unreadable link still counts, as corrupt */
    if (exo_os_readlink(path, target, sizeof target) > 0 && parse_id(target, &id) != 0)
        id = UINT64_MAX;
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 16;
        uint64_t *grown = realloc(w->ids, cap * sizeof *grown);
        if (!grown)
            return -EXO_ENOMEM;
        w->ids = grown;
        w->cap = cap;
    }
    w->ids[w->n++] = id;
    return 0;
}

int exo_name_list(enum exo_kind kind, uint64_t **ids, size_t *count)
{
    char dir[EXO_PATH_MAX];
    int rc = exo_reg_path(dir, sizeof dir, "names");
    if (rc)
        return rc;
    *ids = NULL;
    *count = 0;
    struct name_walk w = {.dir = dir, .prefix = kind_prefix[kind]};
    rc = exo_os_dir_each(dir, collect_name, &w);
    if (rc) {
        free(w.ids);
        if (rc == -EXO_ENOENT)
            return 0;
        return exo_fail(-rc, "cannot read %s: %s", dir,
                        rc == -EXO_ENOMEM ? "out of memory" : strerror(errno));
    }
    if (w.n)
        qsort(w.ids, w.n, sizeof *w.ids, compare_ids);
    *ids = w.ids;
    *count = w.n;
    return 0;
}

int exo_reg_list(enum exo_kind kind, int (*load)(uint64_t id, void *item), void *item_buf,
                 size_t item_size, void *out, size_t cap, size_t *count, size_t *corrupt)
{
    if (!count || (cap && !out))
        return exo_fail(EXO_EINVAL, "listing: NULL output");
    *count = 0;
    if (corrupt)
        *corrupt = 0;
    int rc = exo_reg_open(false);
    if (rc == -EXO_ENOENT) {
        exo_clear_error();
        return 0; /* no registry yet: nothing in it */
    }
    if (rc)
        return rc;
    /* A directory the caller cannot read is an error, not an empty list: the records'
     * own modes (EACCES on one record) are what leave an object out. */
    char dir[EXO_PATH_MAX];
    if ((rc = exo_reg_path(dir, sizeof dir, kind == EXO_KIND_SEG ? "segs" : "vases")) != 0)
        return rc;
    if ((rc = exo_os_dir_is_empty(dir)) < 0)
        return exo_fail(-rc, "cannot read registry directory %s: %s", dir, strerror(errno));
    int lock;
    if ((rc = exo_reg_lock(false, &lock)) != 0)
        return rc;
    uint64_t *ids;
    size_t n;
    rc = exo_name_list(kind, &ids, &n);
    for (size_t i = 0; !rc && i < n; i++) {
        int lrc = load(ids[i], item_buf);
        if (lrc == -EXO_EACCES)
            continue; /* not the caller's to read: not listed, and not corrupt either */
        if (lrc != 0) {
            if (corrupt)
                (*corrupt)++;
            continue;
        }
        if (*count < cap)
            memcpy((char *)out + *count * item_size, item_buf, item_size);
        (*count)++;
    }
    if (!rc)
        free(ids);
    exo_reg_unlock(lock);
    if (!rc)
        exo_clear_error();
    return rc;
}

static uint64_t checksum(const void *data, size_t len)
{
    /* FNV-1a: enough to catch truncation and stray bytes; not a defence against forgery
     * (the files' modes are). */
    const unsigned char *p = data;
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

void exo_record_seal(void *rec, size_t len)
{
    uint64_t sum = checksum(rec, len - sizeof sum);
    memcpy((char *)rec + len - sizeof sum, &sum, sizeof sum);
}

int exo_record_create(const char *path, const void *rec, size_t len, mode_t mode)
{
    char tmp[EXO_PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, exo_os_pid()) >= (int)sizeof tmp)
        return exo_fail(EXO_ENAMETOOLONG, "path %s is too long", path);
    exo_os_unlink(tmp);
    int fd = exo_os_open(tmp, O_RDWR | O_CREAT | O_EXCL, mode);
    if (fd < 0)
        return exo_fail(-fd, "cannot create %s: %s", tmp, strerror(errno));
    int rc = exo_os_fchmod(fd, mode);
    if (!rc)
        rc = exo_os_pwrite_all(fd, rec, len, 0);
    exo_os_close(fd);
    /* link() never replaces an existing file: the record appears complete or not at all. */
    if (!rc)
        rc = exo_os_link(tmp, path);
    exo_os_unlink(tmp);
    if (rc)
        return exo_fail(-rc, "cannot write record %s", path);
    return 0;
}

int exo_record_rewrite(const char *path, const void *rec, size_t len)
{
    int fd = exo_os_open(path, O_WRONLY | O_NOFOLLOW | O_NONBLOCK, 0);
    if (fd < 0)
        return exo_fail(-fd, "cannot open %s for writing", path);
    /* One pwrite of a few KiB to tmpfs is not torn by a signal; the checksum catches the
     * rest. */
    int rc = exo_os_pwrite_all(fd, rec, len, 0);
    exo_os_close(fd);
    if (rc)
        return exo_fail(-rc, "cannot write record %s", path);
    return 0;
}

int exo_record_read(const char *path, void *rec, size_t len, const char magic[8],
                    uint32_t version)
{
    /* Anyone who may write the registry's directories could put a FIFO, a device or a link
     * where a record belongs: open without following links or waiting for a writer, and
     * read nothing but a regular file. */
    int fd = exo_os_open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
    if (fd == -EXO_ENOENT)
        return exo_fail(EXO_ENOENT, "record %s does not exist", path);
    if (fd < 0 && errno == ELOOP)
        return exo_fail(EXO_ECORRUPT, "record %s is a symbolic link, not a record", path);
    if (fd < 0)
        return exo_fail(-fd, "cannot open record %s", path);
    struct stat st;
    int rc = exo_os_fstat(fd, &st);
    if (!rc && !S_ISREG(st.st_mode)) {
        exo_os_close(fd);
        return exo_fail(EXO_ECORRUPT, "record %s is not a regular file", path);
    }
    if (!rc && (uint64_t)st.st_size != len)
        rc = -EXO_ECORRUPT;
    if (!rc)
        rc = exo_os_pread_all(fd, rec, len, 0);
    exo_os_close(fd);
    if (rc == -EXO_ECORRUPT)
        return exo_fail(EXO_ECORRUPT, "record %s is truncated or has the wrong size", path);
    if (rc)
        return exo_fail(-rc, "cannot read record %s", path);
    if (memcmp(rec, magic, 8) != 0)
        return exo_fail(EXO_ECORRUPT, "record %s has a bad magic number", path);
    uint32_t v;
    memcpy(&v, (char *)rec + 8, sizeof v);
    uint64_t stored;
    memcpy(&stored, (char *)rec + len - sizeof stored, sizeof stored);
    if (stored != checksum(rec, len - sizeof stored))
        return exo_fail(EXO_ECORRUPT, "record %s fails its checksum", path);
    if (v != version)
        return exo_fail(EXO_EVERSION, "record %s has format version %u (this library reads %u)",
                        path, v, version);
    return 0;
}
