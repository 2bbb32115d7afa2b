/* Huge-page placement: see placement.h. */
#include "seg/placement.h"
#include "internal.h"
#include "os/os.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Private mounts: $EXOMEM_ROOT/mnt/2M, mnt/1G (hugetlbfs) and mnt/thp (tmpfs). The os layer
 * names THP mounts by page size 0. */
static uint64_t mount_kind(uint64_t page)
{
    return page == SEG_PAGE_4K ? 0 : page;
}

static int private_dir(uint64_t page, char *buf, size_t len)
{
    return exo_reg_path(buf, len, "mnt/%s", page == SEG_PAGE_2M   ? "2M"
                                            : page == SEG_PAGE_1G ? "1G"
                                                                  : "thp");
}

/* Find the file system for the data: the configured one, the registry's private mount,
 * a shared mount, or (root) a private mount still to be made. */
static int locate_mount(const char *name, uint64_t page, struct placement *pl)
{
    const struct exo_config *cfg = exo_config();
    bool thp = page == SEG_PAGE_4K;
    unsigned long long kib = (unsigned long long)(page >> 10);
    const char *configured = thp                    ? cfg->tmpfs_huge
                             : page == SEG_PAGE_2M ? cfg->hugetlbfs_2m
                                                   : cfg->hugetlbfs_1g;
    if (configured[0]) {
        if (thp && exo_os_tmpfs_huge_policy(configured) == EXO_TMPFS_HUGE_NONE)
            return exo_fail(EXO_ENOHUGE, "segment '%s': EXOMEM_TMPFS_HUGE=%s is not a tmpfs "
                            "mounted with huge=advise, within_size or always", name, configured);
        if (!thp && exo_os_hugetlbfs_page_size(configured) != page)
            return exo_fail(EXO_ENOHUGE, "segment '%s': %s is not a hugetlbfs mount with %lluK "
                            "pages", name, configured, kib);
        snprintf(pl->mount, sizeof pl->mount, "%s", configured);
        return 0;
    }
    int rc = private_dir(page, pl->mount, sizeof pl->mount);
    if (rc || exo_os_is_private_mount(pl->mount, mount_kind(page)))
        return rc;
    char shared[EXO_PATH_MAX];
    if ((thp ? exo_os_find_tmpfs_huge(shared, sizeof shared)
             : exo_os_find_shared_hugetlbfs(page, shared, sizeof shared)) == 0) {
        snprintf(pl->mount, sizeof pl->mount, "%s", shared);
        return 0;
    }
    if (exo_os_euid() == 0) {
        pl->mount_needed = true;
        return 0;
    }
    if (thp)
        return exo_fail(EXO_ENOHUGE, "segment '%s': no tmpfs here allows transparent huge pages "
                        "(huge=advise, within_size or always); as root: mount -t tmpfs -o "
                        "huge=within_size,mode=1777 none DIR and set EXOMEM_TMPFS_HUGE=DIR, or "
                        "run as root and exomem mounts one under the registry", name);
    return exo_fail(EXO_ENOHUGE, "segment '%s': no writable hugetlbfs mount with %lluK pages; as "
                    "root: mount -t hugetlbfs -o pagesize=%lluK,mode=1777 none DIR and set "
                    "EXOMEM_HUGETLBFS_%s=DIR, or run as root and exomem mounts one under the "
                    "registry", name, kib, kib, page == SEG_PAGE_2M ? "2M" : "1G");
}

/* Make sure the pool has a free, unreserved page for every page of the segment, growing it
 * (root, all or nothing) when it has not. */
static int pool_for(const char *name, uint64_t page, uint64_t size, struct placement *pl)
{
    long need = (long)(size / page), total, avail;
    unsigned long long mib = (unsigned long long)(page >> 20);
    const char *sys = page == SEG_PAGE_2M ? "/sys/kernel/mm/hugepages/hugepages-2048kB"
                                          : "/sys/kernel/mm/hugepages/hugepages-1048576kB";
    if (exo_os_pool_available(page, &total, &avail) != 0)
        return exo_fail(EXO_ENOHUGE, "segment '%s': this kernel has no pool of %llu MiB huge "
                        "pages (%s)", name, mib, sys);
    if (avail >= need)
        return 0;
    long missing = need - avail;
    if (exo_os_euid() != 0)
        return exo_fail(EXO_ENOHUGE, "segment '%s': needs %ld free %llu MiB huge pages, the pool "
                        "has %ld free of %ld; run as root (the pool then grows on demand) or "
                        "add the pages: echo %ld > %s/nr_hugepages", name, need, mib, avail,
                        total, total + missing, sys);
    uint64_t mem;
    if (exo_os_mem_available(&mem) == 0 && (uint64_t)missing > mem / page)
        return exo_fail(EXO_ENOHUGE, "segment '%s': needs %ld free %llu MiB huge pages, the pool "
                        "has %ld free; %ld more would take %llu MiB but only %llu MiB of memory "
                        "is available", name, need, mib, avail, missing,
                        (unsigned long long)missing * mib, (unsigned long long)(mem >> 20));
    long saved;
    int rc = exo_os_pool_reserve(page, need, &saved);
    if (rc == -EXO_ENOHUGE)
        return exo_fail(EXO_ENOHUGE, "segment '%s': needs %ld free %llu MiB huge pages, the pool "
                        "has %ld free and the kernel could not add %ld more (memory too "
                        "fragmented?); %s/nr_hugepages is unchanged", name, need, mib, avail,
                        missing, sys);
    if (rc)
        return exo_fail(-rc, "segment '%s': cannot grow the %llu MiB huge page pool (%s)", name,
                        mib, sys);
    long after;
    pl->pool_page = page;
    pl->pool_added = saved >= 0 && exo_os_pool_read(page, &after, NULL) == 0 ? after - saved : 0;
    return 0;
}

static int mount_private(const char *name, uint64_t page, struct placement *pl)
{
    char parent[EXO_PATH_MAX];
    int rc = exo_reg_path(parent, sizeof parent, "mnt");
    if (rc)
        return rc;
    if (((rc = exo_os_mkdir(parent, 0755)) != 0 && rc != -EXO_EEXIST) ||
        ((rc = exo_os_mkdir(pl->mount, 0755)) != 0 && rc != -EXO_EEXIST)) {
        int err = errno;
        exo_os_rmdir(parent); /* fails harmlessly while another private mount remains */
        errno = err;
        return exo_fail(-rc, "segment '%s': cannot create %s: %s", name, pl->mount,
                        strerror(errno));
    }
    if ((rc = exo_os_mount_private(pl->mount, mount_kind(page))) != 0) {
        int err = errno;
        exo_os_rmdir(pl->mount);
        exo_os_rmdir(parent); /* fails harmlessly while another private mount remains */
        errno = err;
        return exo_fail(rc == -EXO_EPERM ? EXO_ENOHUGE : -rc, "segment '%s': cannot mount a "
                        "private %s at %s: %s", name, page == SEG_PAGE_4K ? "tmpfs" : "hugetlbfs",
                        pl->mount, strerror(errno));
    }
    pl->mounted_now = true;
    return 0;
}

/* Unmount a private mount of this registry once no segment data is left in it (root only;
 * otherwise it simply stays). Mappings still using it stay valid (lazy detach). */
void exo_seg_release_private_if_empty(const char *mount)
{
    char parent[EXO_PATH_MAX];
    if (exo_os_euid() != 0 || exo_reg_path(parent, sizeof parent, "mnt/") != 0 ||
        strncmp(mount, parent, strlen(parent)) != 0)
        return;
    if (exo_os_dir_is_empty(mount) == 1 && exo_os_unmount(mount) == 0) {
        exo_os_rmdir(mount);
        parent[strlen(parent) - 1] = '\0';
        exo_os_rmdir(parent); /* fails harmlessly while another private mount remains */
    }
}

/* Undo what exo_seg_place_data() did (after a failure). */
void exo_seg_unplace(struct placement *pl)
{
    if (pl->pool_added > 0)
        exo_os_pool_release(pl->pool_page, pl->pool_added);
    if (pl->mounted_now)
        exo_seg_release_private_if_empty(pl->mount);
}

/* Choose the data file of a hugetlb or SEG_THP segment: find or mount its file system and,
 * for hugetlb, make the pool big enough. Nothing is left changed on failure. */
int exo_seg_place_data(struct exo_seg_rec *rec, struct placement *pl)
{
    int rc = locate_mount(rec->name, rec->page_size, pl);
    if (!rc && rec->page_size != SEG_PAGE_4K)
        rc = pool_for(rec->name, rec->page_size, rec->size, pl);
    if (!rc && pl->mount_needed)
        rc = mount_private(rec->name, rec->page_size, pl);
    if (rc) {
        exo_seg_unplace(pl);
        return rc;
    }
    rec->pool_pages = pl->pool_added > 0 ? (uint64_t)pl->pool_added : 0;
    /* Name the file after the registry too, so two registries never share a file. */
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (const char *p = exomem_root(); *p; p++)
        h = (h ^ (unsigned char)*p) * UINT64_C(0x100000001b3);
    if (snprintf(rec->data_path, sizeof rec->data_path, "%s/exomem-%016llx-%llu", pl->mount,
                 (unsigned long long)h, (unsigned long long)rec->id) >=
        (int)sizeof rec->data_path) {
        exo_seg_unplace(pl);
        return exo_fail(EXO_ENAMETOOLONG, "data path under %s is too long", pl->mount);
    }
    return 0;
}

