/* The file store: unit u at offset u * size of one sparse file, read and written with
 * pread/pwrite (async-signal-safe, so it serves SIGBUS delivery too). What the file holds
 * past its end, or in a hole, reads as -EXO_ENOENT or zeros: units never written cost no
 * disk. */
#include "pager/store.h"
#include "internal.h"
#include "os/os.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct file_store {
    exo_pager_store base;
    int fd;
    atomic_uint_fast64_t end;   /* the file's size, as far as we made it */
    atomic_uint_fast64_t units; /* units written through this store */
};

static int file_read(exo_pager_store *s, uint64_t unit, size_t size, void *buf)
{
    struct file_store *f = (struct file_store *)s;
    uint64_t off = unit * size;
    if (off >= atomic_load(&f->end))
        return -EXO_ENOENT;
    long n = exo_os_pread_some(f->fd, buf, size, (off_t)off);
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
    int rc = exo_os_pwrite_all(f->fd, buf, size, (off_t)off);
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
    exo_os_close(f->fd);
    free(f);
}

static const struct store_ops file_ops = {file_read, file_write, file_discard, file_usage,
                                          file_close};

/* A file store over an open descriptor of a regular file, which it then owns (closed on
 * failure too). For paged segments (src/vas/paged.c), whose data file is open already. */
int exo_pager_store_file_fd(int fd, exo_pager_store **out)
{
    struct stat st;
    int rc = exo_os_fstat(fd, &st);
    if (rc == 0 && !S_ISREG(st.st_mode))
        rc = -EXO_EINVAL;
    struct file_store *f = rc ? NULL : calloc(1, sizeof *f);
    if (!f) {
        exo_os_close(fd);
        return rc ? rc : -EXO_ENOMEM;
    }
    f->base.ops = &file_ops;
    f->base.kind = "file";
    f->fd = fd;
    atomic_store(&f->end, (uint64_t)st.st_size);
    *out = &f->base;
    return 0;
}

EXO_API int exo_pager_store_file(const char *path, exo_pager_store **out)
{
    exo_clear_error();
    if (!path || !out)
        return exo_fail(EXO_EINVAL, "exo_pager_store_file: path or out is NULL");
    int fd = exo_os_open(path, O_RDWR | O_CREAT | O_NOFOLLOW, 0600);
    if (fd < 0)
        return exo_fail(-fd, "file store %s: cannot open it: %s", path, strerror(errno));
    int rc = exo_pager_store_file_fd(fd, out);
    if (rc == -EXO_ENOMEM)
        return exo_fail(EXO_ENOMEM, "file store %s: out of memory", path);
    if (rc)
        return exo_fail(-rc, "file store %s: not a regular file", path);
    return 0;
}
