/* Huge page file systems: finding tmpfs mounts that allow transparent huge pages and
 * hugetlbfs mounts, exomem's private mounts under a registry, filling and reserving huge
 * page files, and measuring how much of a file is resident and in huge pages.
 *
 * exomem's private mounts carry the source name "exomem-2M", "exomem-1G" or "exomem-thp"
 * (visible in /proc/mounts), so that a search for a shared mount never picks another
 * registry's private one. */
#include "os/os.h"
#include "internal.h"

#include <mntent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define HUGE_2M (UINT64_C(1) << 21)
#define PRIVATE_SOURCE_PREFIX "exomem-"
/* exo_os_file_residency() asks mincore() about this much at a time. */
#define RESIDENCY_WINDOW (UINT64_C(64) << 20)

/* One /proc/self/mounts entry, copied out of getmntent's buffer. */
struct mount_entry {
    char source[256], dir[4096], type[64], opts[1024];
};

/* Call visit(entry, arg) for each mount, in order; stops when visit returns true. */
static bool each_mount(bool (*visit)(const struct mount_entry *, void *), void *arg)
{
    FILE *f = setmntent("/proc/self/mounts", "re");
    if (!f)
        return false;
    struct mntent ent;
    char buf[8192];
    static __thread struct mount_entry e;
    bool stopped = false;
    while (!stopped && getmntent_r(f, &ent, buf, sizeof buf)) {
        snprintf(e.source, sizeof e.source, "%s", ent.mnt_fsname);
        snprintf(e.dir, sizeof e.dir, "%s", ent.mnt_dir);
        snprintf(e.type, sizeof e.type, "%s", ent.mnt_type);
        snprintf(e.opts, sizeof e.opts, "%s", ent.mnt_opts);
        stopped = visit(&e, arg);
    }
    endmntent(f);
    return stopped;
}

/* The value of option `name` in a comma-separated option list ("" if absent). */
static void mount_option(const char *opts, const char *name, char *val, size_t len)
{
    size_t n = strlen(name);
    val[0] = '\0';
    for (const char *p = opts; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
        if (!strncmp(p, name, n) && p[n] == '=') {
            size_t m = strcspn(p + n + 1, ",");
            snprintf(val, len, "%.*s", (int)(m < len ? m : len - 1), p + n + 1);
            return;
        }
    }
}

/* The system-wide shmem_enabled setting: "force" makes every tmpfs huge, "deny" none. */
static enum exo_tmpfs_huge shmem_override(bool *overrides)
{
    char buf[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/shmem_enabled", "re");
    if (f) {
        if (!fgets(buf, sizeof buf, f))
            buf[0] = '\0';
        fclose(f);
    }
    *overrides = true;
    if (strstr(buf, "[force]"))
        return EXO_TMPFS_HUGE_ALWAYS;
    if (strstr(buf, "[deny]") || !f)
        return EXO_TMPFS_HUGE_NONE;
    *overrides = false;
    return EXO_TMPFS_HUGE_NONE;
}

static enum exo_tmpfs_huge entry_policy(const struct mount_entry *e)
{
    if (strcmp(e->type, "tmpfs") != 0)
        return EXO_TMPFS_HUGE_NONE;
    bool overrides;
    enum exo_tmpfs_huge forced = shmem_override(&overrides);
    if (overrides)
        return forced;
    char huge[32];
    mount_option(e->opts, "huge", huge, sizeof huge);
    if (!strcmp(huge, "advise"))
        return EXO_TMPFS_HUGE_ADVISE;
    if (!strcmp(huge, "always") || !strcmp(huge, "within_size"))
        return EXO_TMPFS_HUGE_ALWAYS;
    return EXO_TMPFS_HUGE_NONE;
}

/* The mount that holds `dir` (the longest mount point that is `dir` or one of its parents,
 * the topmost one if several are stacked there), compared after resolving symlinks. */
struct find_dir {
    char want[4096];
    struct mount_entry found;
    size_t found_len;
    bool have;
};

static bool match_dir(const struct mount_entry *e, void *arg)
{
    struct find_dir *fd = arg;
    size_t n = strlen(e->dir);
    bool holds = !strcmp(e->dir, "/") ||
                 (!strncmp(fd->want, e->dir, n) && (fd->want[n] == '/' || fd->want[n] == '\0'));
    if (holds && (!fd->have || n >= fd->found_len)) {
        fd->found = *e;
        fd->found_len = n;
        fd->have = true;
    }
    return false;
}

static bool mount_holding(const char *dir, struct mount_entry *out)
{
    static __thread struct find_dir fd;
    if (!realpath(dir, fd.want))
        return false;
    fd.have = false;
    each_mount(match_dir, &fd);
    if (fd.have)
        *out = fd.found;
    return fd.have;
}

enum exo_tmpfs_huge exo_os_tmpfs_huge_policy(const char *dir)
{
    static __thread struct mount_entry e;
    return mount_holding(dir, &e) ? entry_policy(&e) : EXO_TMPFS_HUGE_NONE;
}

struct find_shared {
    uint64_t page_size;     /* 0: a tmpfs with huge pages */
    char *path;
    size_t len;
};

static bool match_shared(const struct mount_entry *e, void *arg)
{
    struct find_shared *fs = arg;
    if (!strncmp(e->source, PRIVATE_SOURCE_PREFIX, strlen(PRIVATE_SOURCE_PREFIX)))
        return false;
    bool fits = fs->page_size ? exo_os_hugetlbfs_page_size(e->dir) == fs->page_size
                              : entry_policy(e) != EXO_TMPFS_HUGE_NONE;
    if (!fits || access(e->dir, W_OK) != 0)
        return false;
    snprintf(fs->path, fs->len, "%s", e->dir);
    return true;
}

int exo_os_find_tmpfs_huge(char *path, size_t path_len)
{
    struct find_shared fs = {0, path, path_len};
    return each_mount(match_shared, &fs) ? 0 : -EXO_ENOHUGE;
}

int exo_os_find_shared_hugetlbfs(uint64_t page_size, char *path, size_t path_len)
{
    struct find_shared fs = {page_size, path, path_len};
    return each_mount(match_shared, &fs) ? 0 : -EXO_ENOHUGE;
}

static const char *private_source(uint64_t page_size)
{
    return page_size == 0 ? "exomem-thp" : page_size == HUGE_2M ? "exomem-2M" : "exomem-1G";
}

bool exo_os_is_private_mount(const char *dir, uint64_t page_size)
{
    static __thread struct mount_entry e;
    char real[4096];
    if (!mount_holding(dir, &e) || !realpath(dir, real) || strcmp(e.dir, real) != 0 ||
        strcmp(e.source, private_source(page_size)) != 0)
        return false;
    return page_size ? exo_os_hugetlbfs_page_size(dir) == page_size
                     : entry_policy(&e) != EXO_TMPFS_HUGE_NONE;
}

int exo_os_mount_private(const char *dir, uint64_t page_size)
{
    if (exo_os_fault(EXO_FAULT_MOUNT))
        return -exo_os_code(errno);
    char opts[64];
    if (page_size)
        snprintf(opts, sizeof opts, "pagesize=%lluK,mode=1777",
                 (unsigned long long)(page_size >> 10));
    else
        /* within_size: huge pages on any fault or fallocate inside the file's size, with
         * or without MADV_HUGEPAGE, so every process that maps a segment gets them. */
        snprintf(opts, sizeof opts, "huge=within_size,mode=1777");
    if (mount(private_source(page_size), dir, page_size ? "hugetlbfs" : "tmpfs",
              MS_NOSUID | MS_NODEV, opts) != 0)
        return -exo_os_code(errno);
    return 0;
}

int exo_os_unmount(const char *dir)
{
    if (umount2(dir, MNT_DETACH) != 0)
        return -exo_os_code(errno);
    return 0;
}

int exo_os_hugetlb_reserve_file(int fd, uint64_t len)
{
    if (exo_os_fault(EXO_FAULT_SIZE))
        return -exo_os_code(errno);
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return -EXO_ENOHUGE;
    munmap(p, len);
    return 0;
}

/* Map fd at a 2 MiB-aligned address (so that huge pages can be mapped whole). */
static int map_aligned(int fd, uint64_t len, int prot, void **out)
{
    uint64_t addr;
    int rc = exo_os_reserve_congruent(len, 0, HUGE_2M, &addr);
    if (rc)
        return rc;
    void *p = mmap((void *)addr, len, prot, MAP_SHARED | MAP_FIXED, fd, 0);
    if (p == MAP_FAILED) {
        rc = -exo_os_code(errno);
        munmap((void *)addr, len);
        return rc;
    }
    *out = p;
    return 0;
}

int exo_os_thp_fill_file(int fd, uint64_t len)
{
    if (exo_os_fault(EXO_FAULT_SIZE))
        return -exo_os_code(errno);
    void *p = NULL;
    int rc = map_aligned(fd, len, PROT_READ | PROT_WRITE, &p);
    if (rc)
        return rc;
    if (madvise(p, len, MADV_HUGEPAGE) != 0)
        rc = -exo_os_code(errno);
    else if (madvise(p, len, MADV_POPULATE_WRITE) != 0)
        /* EFAULT: a fault would have raised SIGBUS, which on tmpfs means it is full. */
        rc = errno == EFAULT || errno == ENOMEM ? -EXO_ENOSPC : -exo_os_code(errno);
    munmap(p, len);
    return rc;
}

/* PMD-mapped bytes of the mapping that starts at addr, from /proc/self/smaps. */
static int smaps_pmd_mapped(uint64_t addr, uint64_t *pmd_mapped)
{
    FILE *f = fopen("/proc/self/smaps", "re");
    if (!f)
        return -exo_os_code(errno);
    char line[512];
    bool in = false, seen = false;
    *pmd_mapped = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3) {
            in = lo == addr;
            seen |= in;
            continue;
        }
        unsigned long long kb;
        if (!in)
            continue;
        if (sscanf(line, "ShmemPmdMapped: %llu kB", &kb) == 1 ||
                 sscanf(line, "FilePmdMapped: %llu kB", &kb) == 1)
            *pmd_mapped += (uint64_t)kb << 10;
    }
    fclose(f);
    return seen ? 0 : -EXO_EIO;
}

/* Count the resident pages of [from, to) of the mapping at p (page-aligned offsets) and
 * touch each of them. */
static int touch_resident(const char *p, uint64_t from, uint64_t to, uint64_t *present)
{
    const uint64_t page = 4096;
    static __thread unsigned char vec[RESIDENCY_WINDOW / 4096];
    for (uint64_t off = from; off < to; off += RESIDENCY_WINDOW) {
        uint64_t n = to - off < RESIDENCY_WINDOW ? to - off : RESIDENCY_WINDOW;
        /* mincore() looks the pages up in the page cache without faulting anything in
         * (a swapped-out page is absent, and so is not swapped in by the touch below). */
        if (mincore((void *)(p + off), n, vec) != 0)
            return -exo_os_code(errno);
        for (uint64_t i = 0; i < (n + page - 1) / page; i++) {
            if (!(vec[i] & 1))
                continue;
            (*present)++;
            /* A read fault on a resident page maps it (a whole huge page by one PMD when
             * it is one); a hole is never touched, so the report allocates nothing. */
            (void)*(volatile const char *)(p + off + i * page);
        }
    }
    return 0;
}

int exo_os_file_residency(int fd, uint64_t len, uint64_t *resident, uint64_t *huge)
{
    const uint64_t page = 4096;
    /* The file's blocks count every page it has, also those posix_fallocate() allocated
     * but nobody wrote yet, which mincore() and SEEK_DATA call absent (they are not
     * "uptodate") and which therefore are not measured as huge. */
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -exo_os_code(errno);
    uint64_t allocated = (uint64_t)st.st_blocks * 512, present = 0, pmd = 0;
    *resident = *huge = 0;
    if (allocated == 0)
        return 0;
    void *p = NULL;
    int rc = map_aligned(fd, len, PROT_READ, &p);
    if (rc)
        return rc;
    /* Only the file's data extents (SEEK_DATA/SEEK_HOLE) are looked at: a large sparse
     * segment is measured in the time its data takes, not its size. */
    for (uint64_t off = 0; !rc && off < len;) {
        off_t data = lseek(fd, (off_t)off, SEEK_DATA);
        if (data < 0)
            break; /* ENXIO: no data past off */
        off_t hole = lseek(fd, data, SEEK_HOLE);
        uint64_t from = (uint64_t)data & ~(page - 1);
        uint64_t to = hole < 0 || (uint64_t)hole > len ? len : (uint64_t)hole;
        to = (to + page - 1) & ~(page - 1);
        if (to > len)
            to = len;
        rc = touch_resident(p, from, to, &present);
        off = to > off ? to : off + page;
    }
    if (!rc)
        rc = smaps_pmd_mapped((uint64_t)p, &pmd);
    munmap(p, len);
    if (rc)
        return rc;
    *resident = allocated > present * page ? allocated : present * page;
    if (*resident > len)
        *resident = len;
    *huge = pmd < *resident ? pmd : *resident;
    return 0;
}
