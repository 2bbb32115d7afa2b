/* Huge page pools (/sys/kernel/mm/hugepages/hugepages-<N>kB): read, grow for a need, and
 * give back. Growing needs root; the kernel may grant fewer pages than asked (fragmented
 * memory), which is read back rather than assumed. */
#include "os/os.h"
#include "internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int pool_file(uint64_t page_size, const char *file, char *path, size_t len)
{
    if (page_size != SEG_PAGE_2M && page_size != SEG_PAGE_1G)
        return -EXO_EPAGESIZE;
    snprintf(path, len, "/sys/kernel/mm/hugepages/hugepages-%llukB/%s",
             (unsigned long long)(page_size >> 10), file);
    return 0;
}

static long read_long(const char *path)
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

/* Plain open/write: also safe from a signal handler that restores a pool. */
static int write_long(const char *path, long v)
{
    char buf[24];
    int n = (int)sizeof buf;
    buf[--n] = '\n';
    do {
        buf[--n] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0 && n > 0);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -exo_os_code(errno);
    ssize_t len = (ssize_t)sizeof buf - n;
    int rc = write(fd, buf + n, (size_t)len) == len ? 0 : -exo_os_code(errno);
    close(fd);
    return rc;
}

int exo_os_pool_read(uint64_t page_size, long *total, long *free_pages)
{
    char path[128];
    int rc = pool_file(page_size, "nr_hugepages", path, sizeof path);
    if (rc)
        return rc;
    long t = read_long(path);
    pool_file(page_size, "free_hugepages", path, sizeof path);
    long f = read_long(path);
    if (t < 0 || f < 0)
        return -EXO_ENOHUGE;
    if (total)
        *total = t;
    if (free_pages)
        *free_pages = f;
    return 0;
}

int exo_os_pool_reserve(uint64_t page_size, long need_free, long *saved_total)
{
    long total, free_now;
    int rc = exo_os_pool_read(page_size, &total, &free_now);
    if (rc)
        return rc;
    *saved_total = -1;
    if (free_now >= need_free)
        return 0;
    if (geteuid() != 0)
        return -EXO_EPERM;
    char path[128];
    pool_file(page_size, "nr_hugepages", path, sizeof path);
    if ((rc = write_long(path, total + (need_free - free_now))) != 0)
        return rc;
    *saved_total = total;
    if (exo_os_pool_read(page_size, NULL, &free_now) != 0 || free_now < need_free) {
        exo_os_pool_restore(page_size, total);
        *saved_total = -1;
        return -EXO_ENOHUGE;
    }
    return 0;
}

int exo_os_pool_restore(uint64_t page_size, long saved_total)
{
    if (saved_total < 0)
        return 0;
    char path[128];
    int rc = pool_file(page_size, "nr_hugepages", path, sizeof path);
    return rc ? rc : write_long(path, saved_total);
}
