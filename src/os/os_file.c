/* File calls for the registry and segment data: open, exact reads and writes, sizing,
 * hugetlbfs discovery, and the errno -> exomem code mapping. */
#include "os/os.h"
#include "internal.h"

#include <fcntl.h>
#include <mntent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <unistd.h>

#ifndef HUGETLBFS_MAGIC
#define HUGETLBFS_MAGIC 0x958458f6
#endif

int exo_os_code(int err)
{
    switch (err) {
    case 0: return EXO_EIO; /* a failure that did not say why */
    case EPERM: return EXO_EPERM;
    case ENOENT: return EXO_ENOENT;
    case EINTR: return EXO_EINTR;
    case ENOMEM: return EXO_ENOMEM;
    case EACCES: return EXO_EACCES;
    case EROFS: return EXO_EACCES;
    case EBUSY: return EXO_EBUSY;
    case EEXIST: return EXO_EEXIST;
    case EINVAL: return EXO_EINVAL;
    case ENOSPC: return EXO_ENOSPC;
    case EDQUOT: return EXO_ENOSPC;
    case EFBIG: return EXO_ENOSPC;
    case ENAMETOOLONG: return EXO_ENAMETOOLONG;
    case ENOTSUP: return EXO_ENOTSUP;
    default: return EXO_EIO;
    }
}

int exo_os_open(const char *path, int flags, mode_t mode)
{
    int fd;
    do {
        fd = exo_os_fault(EXO_FAULT_OPEN) ? -1 : open(path, flags | O_CLOEXEC, mode);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return -exo_os_code(errno);
    return fd;
}

int exo_os_reopen(int fd, bool writable)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    return exo_os_open(path, writable ? O_RDWR : O_RDONLY, 0);
}

int exo_os_punch_hole(int fd, uint64_t off, uint64_t len)
{
    if (exo_os_fault(EXO_FAULT_SIZE))
        return -exo_os_code(errno);
    if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) != 0)
        return -exo_os_code(errno);
    return 0;
}

int exo_os_close(int fd)
{
    /* Linux releases the descriptor even when close() reports EINTR: never retry. */
    if (fd >= 0)
        close(fd);
    return 0;
}

int exo_os_pread_all(int fd, void *buf, size_t len, off_t off)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = exo_os_fault(EXO_FAULT_READ) ? -1 : pread(fd, p, len, off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -exo_os_code(errno);
        if (n == 0)
            return -EXO_ECORRUPT;
        p += n;
        len -= (size_t)n;
        off += n;
    }
    return 0;
}

long exo_os_pread_some(int fd, void *buf, size_t len, off_t off)
{
    ssize_t n;
    do {
        n = exo_os_fault(EXO_FAULT_READ) ? -1 : pread(fd, buf, len, off);
    } while (n < 0 && errno == EINTR);
    return n < 0 ? -exo_os_code(errno) : (long)n;
}

int exo_os_pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = exo_os_fault(EXO_FAULT_WRITE) ? -1 : pwrite(fd, p, len, off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -exo_os_code(errno);
        if (n == 0)
            return -EXO_EIO; /* no progress: never loop forever */
        p += n;
        len -= (size_t)n;
        off += n;
    }
    return 0;
}

int exo_os_size_file(int fd, uint64_t len, bool reserve)
{
    if (exo_os_fault(EXO_FAULT_SIZE))
        return -exo_os_code(errno);
    if (reserve) {
        int err;
        do {
            err = posix_fallocate(fd, 0, (off_t)len);
        } while (err == EINTR);
        if (err == 0)
            return 0;
        if (err != EOPNOTSUPP && err != EINVAL) /* hugetlbfs on some kernels */
            return -exo_os_code(err);
    }
    if (ftruncate(fd, (off_t)len) != 0)
        return -exo_os_code(errno);
    return 0;
}

int exo_os_fsync(int fd)
{
    if (fsync(fd) != 0 && errno != EINVAL)
        return -exo_os_code(errno);
    return 0;
}

uint64_t exo_os_hugetlbfs_page_size(const char *path)
{
    struct statfs st;
    if (statfs(path, &st) != 0 || (unsigned long)st.f_type != (unsigned long)HUGETLBFS_MAGIC)
        return 0;
    return (uint64_t)st.f_bsize;
}

int exo_os_find_hugetlbfs(uint64_t page_size, char *path, size_t path_len)
{
    FILE *f = setmntent("/proc/self/mounts", "re");
    if (!f)
        return -EXO_ENOHUGE;
    struct mntent ent;
    char buf[4096];
    int rc = -EXO_ENOHUGE;
    while (getmntent_r(f, &ent, buf, sizeof buf)) {
        if (strcmp(ent.mnt_type, "hugetlbfs") != 0)
            continue;
        if (exo_os_hugetlbfs_page_size(ent.mnt_dir) == page_size &&
            access(ent.mnt_dir, W_OK) == 0) {
            snprintf(path, path_len, "%s", ent.mnt_dir);
            rc = 0;
            break;
        }
    }
    endmntent(f);
    return rc;
}

long exo_os_read_long(const char *path)
{
    char buf[32];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *end;
    long v = strtol(buf, &end, 10);
    return end == buf ? -1 : v;
}
