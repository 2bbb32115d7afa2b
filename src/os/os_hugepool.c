/* Huge page pools (/sys/kernel/mm/hugepages/hugepages-<N>kB): read, grow for a need, and
 * give back. Growing needs root; the kernel may grant fewer pages than asked (fragmented
 * memory), which is read back rather than assumed. */
#include "os/os.h"
#include "internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Constant paths: building them with snprintf would make the restore path unsafe in a
 * signal handler. */
enum pool_count { POOL_TOTAL, POOL_FREE, POOL_RESERVED };

static const char *pool_file(uint64_t page_size, enum pool_count which)
{
    static const char *const two_mb[] = {
        "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",
        "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages",
        "/sys/kernel/mm/hugepages/hugepages-2048kB/resv_hugepages"};
    static const char *const one_gb[] = {
        "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages",
        "/sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages",
        "/sys/kernel/mm/hugepages/hugepages-1048576kB/resv_hugepages"};
    if (page_size == SEG_PAGE_2M)
        return two_mb[which];
    if (page_size == SEG_PAGE_1G)
        return one_gb[which];
    return NULL;
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
    if (!pool_file(page_size, POOL_TOTAL))
        return -EXO_EPAGESIZE;
    long t = exo_os_read_long(pool_file(page_size, POOL_TOTAL));
    long f = exo_os_read_long(pool_file(page_size, POOL_FREE));
    if (t < 0 || f < 0)
        return -EXO_ENOHUGE;
    if (total)
        *total = t;
    if (free_pages)
        *free_pages = f;
    return 0;
}

int exo_os_pool_available(uint64_t page_size, long *total, long *available)
{
    long t, f;
    int rc = exo_os_pool_read(page_size, &t, &f);
    if (rc)
        return rc;
    long r = exo_os_read_long(pool_file(page_size, POOL_RESERVED));
    if (r < 0)
        return -EXO_ENOHUGE;
    if (total)
        *total = t;
    if (available)
        *available = f > r ? f - r : 0;
    return 0;
}

/* Counts pages that are free and not reserved by a mapping: a reserved free page is
 * promised to someone else and no new mapping can have it. */
int exo_os_pool_grow(uint64_t page_size, long need_free, long *saved_total, long *free_after)
{
    long total, free_now;
    *saved_total = -1;
    int rc = exo_os_pool_available(page_size, &total, &free_now);
    if (rc)
        return rc;
    *free_after = free_now;
    if (free_now >= need_free)
        return 0;
    if (geteuid() != 0)
        return -EXO_EPERM;
    if ((rc = write_long(pool_file(page_size, POOL_TOTAL), total + (need_free - free_now))) != 0)
        return rc;
    *saved_total = total;
    if (exo_os_pool_available(page_size, NULL, free_after) != 0)
        *free_after = 0;
    return 0;
}

int exo_os_pool_reserve(uint64_t page_size, long need_free, long *saved_total)
{
    if (exo_os_fault(EXO_FAULT_POOL))
        return -exo_os_code(errno);
    long free_after;
    int rc = exo_os_pool_grow(page_size, need_free, saved_total, &free_after);
    if (rc == 0 && free_after < need_free) {
        exo_os_pool_restore(page_size, *saved_total);
        *saved_total = -1;
        rc = -EXO_ENOHUGE;
    }
    return rc;
}

int exo_os_pool_restore(uint64_t page_size, long saved_total)
{
    if (saved_total < 0)
        return 0;
    const char *path = pool_file(page_size, POOL_TOTAL);
    return path ? write_long(path, saved_total) : -EXO_EPAGESIZE;
}

int exo_os_pool_release(uint64_t page_size, long pages)
{
    long total;
    int rc = exo_os_pool_read(page_size, &total, NULL);
    if (rc || pages <= 0)
        return rc;
    return write_long(pool_file(page_size, POOL_TOTAL), total > pages ? total - pages : 0);
}

int exo_os_mem_available(uint64_t *bytes)
{
    FILE *f = fopen("/proc/meminfo", "re");
    if (!f)
        return -exo_os_code(errno);
    char line[256];
    unsigned long long kb = 0;
    bool found = false;
    while (!found && fgets(line, sizeof line, f))
        found = sscanf(line, "MemAvailable: %llu kB", &kb) == 1;
    fclose(f);
    if (!found)
        return -EXO_EIO;
    *bytes = (uint64_t)kb << 10;
    return 0;
}
