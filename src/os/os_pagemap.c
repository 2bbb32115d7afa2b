/* /proc views of memory: the map (ranges, counts), pagemap (entries, PAGEMAP_SCAN),
 * clear_refs, the lowest and highest mappable addresses; and the shared-memory files that
 * MAP2 maps twice. */
#include "os/os.h"
#include "os/os_vm.h"
#include "internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

int exo_os_range_info(uint64_t addr, uint64_t len, struct exo_os_range_info *info)
{
    memset(info, 0, sizeof *info);
    info->access = EXO_ACCESS_RW;
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return -exo_os_code(errno);
    char line[512];
    uint64_t cursor = addr, end = addr + len;
    while (cursor < end && fgets(line, sizeof line, f)) {
        unsigned long lo, hi, off, inode;
        char perms[8];
        unsigned dmaj, dmin;
        if (sscanf(line, "%lx-%lx %7s %lx %x:%x %lu", &lo, &hi, perms, &off, &dmaj, &dmin,
                   &inode) != 7)
            continue;
        if (hi <= cursor)
            continue;
        if (lo > cursor)
            break; /* a hole at cursor */
        int access = (perms[0] == 'r' ? EXO_ACCESS_READ : 0) |
                     (perms[1] == 'w' ? EXO_ACCESS_WRITE : 0);
        info->access &= access;
        if (perms[3] == 's')
            info->any_shared = true;
        if (inode != 0)
            info->any_file = true;
        cursor = hi;
    }
    fclose(f);
    if (cursor < end) {
        snprintf(info->gap, sizeof info->gap, "%#lx", (unsigned long)cursor);
        return -EXO_ENOTMAPPED;
    }
    return 0;
}

long exo_os_map_count(void)
{
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -exo_os_code(errno);
    char buf[65536];
    long lines = 0;
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        for (ssize_t i = 0; i < n; i++)
            lines += buf[i] == '\n';
    close(fd);
    return lines;
}

int exo_os_pagemap_open(void)
{
    int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -exo_os_code(errno);
    return fd;
}

long exo_os_pagemap_scan(int fd, struct exo_pm_scan_arg *arg)
{
    for (;;) {
        long n = ioctl(fd, EXO_PAGEMAP_SCAN, arg);
        if (n >= 0)
            return n;
        if (errno == EINTR)
            continue;
        return errno == ENOTTY ? -EXO_ENOTSUP : -exo_os_code(errno);
    }
}

int exo_os_pagemap_read(int fd, uint64_t addr, uint64_t *entries, size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t want = n * sizeof *entries, done = 0;
    off_t off = (off_t)(addr / page * sizeof *entries);
    while (done < want) {
        ssize_t got = pread(fd, (char *)entries + done, want - done, off + (off_t)done);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return got < 0 ? -exo_os_code(errno) : -EXO_EIO;
        done += (size_t)got;
    }
    return 0;
}

int exo_os_clear_soft_dirty(void)
{
    int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -exo_os_code(errno);
    int rc = write(fd, "4", 1) == 1 ? 0 : -exo_os_code(errno);
    close(fd);
    return rc;
}

int exo_os_probe_soft_dirty(bool *works)
{
    *works = false;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void *p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -exo_os_code(errno);
    *(volatile char *)p = 1;
    int rc = 0, fd = exo_os_pagemap_open();
    uint64_t entry = 0;
    if (fd < 0)
        rc = fd;
    else {
        rc = exo_os_pagemap_read(fd, (uint64_t)(uintptr_t)p, &entry, 1);
        close(fd);
    }
    munmap(p, page);
    *works = rc == 0 && (entry & EXO_PM_SOFT_DIRTY);
    return rc;
}

int exo_os_memfd(const char *name, uint64_t len, int *fd)
{
    int f = memfd_create(name, MFD_CLOEXEC);
    if (f < 0)
        return errno == ENOSYS ? -EXO_ENOTSUP : -exo_os_code(errno);
    if (ftruncate(f, (off_t)len) != 0) {
        int e = errno;
        close(f);
        errno = e;
        return -exo_os_code(e);
    }
    *fd = f;
    return 0;
}

int exo_os_map_shared(int fd, off_t off, uint64_t len, int access, void **addr)
{
    void *p = mmap(NULL, len, exo_os_prot(access), MAP_SHARED, fd, off);
    if (p == MAP_FAILED)
        return -exo_os_code(errno);
    *addr = p;
    return 0;
}

int exo_os_lowest_map_addr(uint64_t *addr)
{
    long v = exo_os_read_long("/proc/sys/vm/mmap_min_addr");
    if (v < 0)
        return -EXO_EIO;
    *addr = (uint64_t)v;
    return 0;
}

int exo_os_can_map_at(uint64_t addr, bool *can)
{
    if (exo_os_fault(EXO_FAULT_MAP))   /* an injected fault, ENOMEM too: unknown */
        return -exo_os_code(errno);
    void *p = mmap((void *)addr, 4096, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED) {
        if (errno != ENOMEM && errno != EEXIST)
            return -exo_os_code(errno);
        *can = errno == EEXIST;   /* EEXIST: something is mapped there already */
        return 0;
    }
    /* A kernel older than 4.17 takes the flag for a hint: it honours one it can map. */
    *can = (uint64_t)p == addr;
    munmap(p, 4096);
    return 0;
}
