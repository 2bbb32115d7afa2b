/* The file store: unit u at offset u * size of one sparse file (store_file.h), read and
 * written with pread/pwrite (async-signal-safe, so it serves SIGBUS delivery too). The
 * layout itself (the end, holes, usage, discard) is here too, for every kind of file store:
 * store_file_uring.c moves the same bytes through io_uring. */
#include "pager/store_file.h"
#include "internal.h"
#include "os/os.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int file_read(exo_pager_store *s, uint64_t unit, size_t size, void *buf)
{
    struct file_store *f = (struct file_store *)s;
    uint64_t off = unit * size;
    if (off >= atomic_load(&f->end))
        return -EXO_ENOENT;
    long n = f->io->read_some(f, buf, size, (off_t)off);
    if (n < 0)
        return (int)n;
    if ((size_t)n < size) /* the last unit, cut short by a truncated file: the rest is 0 */
        memset((char *)buf + n, 0, size - (size_t)n);
    return 0;
}

static int file_write(exo_pager_store *s, uint64_t unit, size_t size, const void *buf)
{
    struct file_store *f = (struct file_store *)s;
    uint64_t off = unit * size;
    int rc = f->io->write_all(f, buf, size, (off_t)off);
    if (rc)
        return rc;
    uint64_t end = atomic_load(&f->end);
    while (off + size > end && !atomic_compare_exchange_weak(&f->end, &end, off + size))
        ;
    atomic_fetch_add(&f->units, 1);
    return 0;
}

static int file_discard(exo_pager_store *s, uint64_t unit, size_t size)
{
    struct file_store *f = (struct file_store *)s;
    uint64_t off = unit * size;
    if (off >= atomic_load(&f->end))
        return 0;
    return exo_os_punch_hole(f->fd, off, size);
}

static void file_usage(exo_pager_store *s, uint64_t *bytes, uint64_t *units)
{
    struct file_store *f = (struct file_store *)s;
    struct stat st;
    *bytes = exo_os_fstat(f->fd, &st) == 0 ? (uint64_t)st.st_blocks * 512 : 0;
    *units = atomic_load(&f->units);
}

static void file_close(exo_pager_store *s)
{
    struct file_store *f = (struct file_store *)s;
    if (f->io->fini)
        f->io->fini(f);
    exo_os_close(f->fd);
    free(f);
}

static const struct store_ops file_ops = {file_read, file_write, file_discard, file_usage,
                                          file_close};

int exo_pager_file_store_adopt(struct file_store *f, int fd, const char *kind,
                               const struct file_io *io)
{
    struct stat st;
    int rc = exo_os_fstat(fd, &st);
    if (rc == 0 && !S_ISREG(st.st_mode))
        rc = -EXO_EINVAL;
    if (rc)
        return rc;
    f->base.ops = &file_ops;
    f->base.kind = kind;
    f->fd = fd;
    f->io = io;
    atomic_store(&f->end, (uint64_t)st.st_size);
    return 0;
}

int exo_pager_file_store_open(struct file_store *f, const char *path, const char *kind,
                              const struct file_io *io)
{
    int fd = exo_os_open(path, O_RDWR | O_CREAT | O_NOFOLLOW, 0600);
    if (fd < 0 && errno == EISDIR)
        return exo_fail(EXO_EINVAL, "%s store %s: not a regular file (a directory)", kind, path);
    if (fd < 0)
        return exo_fail(-fd, "%s store %s: cannot open it: %s", kind, path, strerror(errno));
    int rc = exo_pager_file_store_adopt(f, fd, kind, io);
    if (rc) {
        exo_os_close(fd);
        return exo_fail(-rc, "%s store %s: not a regular file", kind, path);
    }
    return 0;
}

/* ---- the plain file store: pread and pwrite ---- */

static long plain_read_some(struct file_store *f, void *buf, size_t len, off_t off)
{
    return exo_os_pread_some(f->fd, buf, len, off);
}

static int plain_write_all(struct file_store *f, const void *buf, size_t len, off_t off)
{
    return exo_os_pwrite_all(f->fd, buf, len, off);
}

static const struct file_io plain_io = {plain_read_some, plain_write_all, NULL};

/* A file store over an open descriptor of a regular file, which it then owns (closed on
 * failure too). For paged segments (src/vas/paged.c), whose data file is open already. */
int exo_pager_store_file_fd(int fd, exo_pager_store **out)
{
    struct file_store *f = calloc(1, sizeof *f);
    int rc = f ? exo_pager_file_store_adopt(f, fd, "file", &plain_io) : -EXO_ENOMEM;
    if (rc) {
        exo_os_close(fd);
        free(f);
        return rc;
    }
    *out = &f->base;
    return 0;
}

EXO_API int exo_pager_store_file(const char *path, exo_pager_store **out)
{
    exo_clear_error();
    if (!path || !out)
        return exo_fail(EXO_EINVAL, "exo_pager_store_file: path or out is NULL");
    struct file_store *f = calloc(1, sizeof *f);
    if (!f)
        return exo_fail(EXO_ENOMEM, "file store %s: out of memory", path);
    int rc = exo_pager_file_store_open(f, path, "file", &plain_io);
    if (rc) {
        free(f);
        return rc;
    }
    *out = &f->base;
    return 0;
}
