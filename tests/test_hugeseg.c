/* Segments with large pages, end to end: THP segments get huge pages (and keep them across
 * both switch engines), 2M segments grow the pool on demand and give the pages back on
 * delete (also when another process deletes), a pool that cannot be had gives EXO_ENOHUGE
 * and leaves nothing behind, 1G when the kernel has the pages, and seg_backing() reports
 * without allocating holes.
 *
 * Parts that need root or pages the machine cannot give are skipped with a reason; the
 * program exits 77 only if every part was skipped. Pools are put back to their starting
 * sizes and private mounts are unmounted at exit, also after a failed check or a crash. */
#include "harness.h"
#include "hugepool_fixture.h"
#include "os/os.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <mntent.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)

static const char *root;
static int parts_run, parts_skipped;

static void skip_part(const char *part, const char *why)
{
    fprintf(stderr, "SKIP part %s: %s\n", part, why);
    parts_skipped++;
}

/* Bytes of the mapping that starts at addr that are PMD-mapped huge pages (smaps). */
static uint64_t pmd_mapped_at(uint64_t addr)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    CHECK(f != NULL);
    char line[512];
    int in = 0;
    uint64_t total = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perms[8];
        unsigned long long kb;
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3)
            in = lo == addr;
        else if (in && (sscanf(line, "ShmemPmdMapped: %llu kB", &kb) == 1 ||
                        sscanf(line, "FilePmdMapped: %llu kB", &kb) == 1))
            total += (uint64_t)kb << 10;
    }
    fclose(f);
    return total;
}

static bool dir_is_empty(const char *fmt, const char *arg)
{
    char path[4096];
    snprintf(path, sizeof path, fmt, root, arg);
    DIR *d = opendir(path);
    if (!d)
        return true;
    struct dirent *e;
    bool empty = true;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            empty = false;
    closedir(d);
    return empty;
}

/* Nothing of a failed creation may remain: no name, no record, no private mount. */
static void check_registry_empty(void)
{
    CHECK(dir_is_empty("%s/names%s", ""));
    CHECK(dir_is_empty("%s/segs%s", ""));
    for (int i = 0; i < 3; i++) {
        struct stat st;
        CHECK(!exo_os_is_private_mount(hp_mount_dirs[i], i == 0 ? SEG_PAGE_2M
                                                       : i == 1 ? SEG_PAGE_1G : 0) ||
              stat(hp_mount_dirs[i], &st) != 0);
    }
}

static void fill(uint64_t base, uint64_t size, unsigned seed)
{
    for (uint64_t off = 0; off < size; off += 4096)
        *(volatile uint64_t *)(base + off) = off * 31 + seed;
}

static void verify(uint64_t base, uint64_t size, unsigned seed)
{
    for (uint64_t off = 0; off < size; off += 4096)
        CHECK_EQ(*(volatile uint64_t *)(base + off), off * 31 + seed);
}

/* One VAS listing one segment; switched in on return. */
static vhandle_t enter(const char *vas, segid_t sid, vasid_t *vid)
{
    vhandle_t vh;
    CHECK_OK(vas_create(vas, 0600, vid));
    CHECK_OK(seg_attach(*vid, sid, SEG_RDWR));
    CHECK_OK(vas_attach(*vid, &vh));
    CHECK_OK(vas_switch(vh));
    return vh;
}

static void leave(vhandle_t vh, vasid_t vid)
{
    CHECK_OK(vas_switch(VAS_HOME));
    CHECK_OK(vas_detach(vh));
    CHECK_OK(vas_delete(vid));
}

/* --- 4K: backing of a reserved segment, and a sparse one that the report leaves sparse --- */

static void part_backing_4k(void)
{
    parts_run++;
    segid_t full, sparse;
    CHECK_OK(seg_alloc("full4k", test_base(0), 4 * MIB, 0600, &full));
    struct seg_backing b;
    CHECK_OK(seg_backing(full, &b));
    CHECK_EQ(b.page_size, SEG_PAGE_4K);
    CHECK_EQ(b.size, 4 * MIB);
    CHECK_EQ(b.resident, 4 * MIB);
    if (exo_os_tmpfs_huge_policy(root) == EXO_TMPFS_HUGE_NONE)
        CHECK_EQ(b.huge, 0);

    struct seg_opts so = {.page_size = SEG_PAGE_4K, .flags = SEG_NORESERVE};
    CHECK_OK(seg_alloc_ex("sparse4k", test_base(1), 64 * MIB, 0600, &so, &sparse));
    char path[4096];
    snprintf(path, sizeof path, "%s/segs/%llu.data", root, (unsigned long long)sparse);
    int fd = open(path, O_RDWR);
    CHECK(fd >= 0);
    char byte = 7;
    CHECK_EQ(pwrite(fd, &byte, 1, 5 * MIB + 10), 1); /* one resident page */
    struct stat before, after;
    CHECK(fstat(fd, &before) == 0);
    for (int round = 0; round < 2; round++) {
        CHECK_OK(seg_backing(sparse, &b));
        CHECK_EQ(b.resident, 4096);
        CHECK_EQ(b.flags, SEG_NORESERVE);
    }
    CHECK(fstat(fd, &after) == 0);
    CHECK_EQ(after.st_blocks, before.st_blocks); /* the report allocated nothing */
    close(fd);
    CHECK_ERR(seg_backing(0, &b), EXO_ENOENT);
    CHECK_ERR(seg_backing(full, NULL), EXO_EINVAL);
    CHECK_OK(seg_delete(full));
    CHECK_OK(seg_delete(sparse));
}

/* --- THP --- */

static void part_thp(void)
{
    const uint64_t size = 8 * MIB, base = test_base(2);
    struct seg_opts so = {.page_size = SEG_PAGE_4K, .flags = SEG_THP};
    segid_t sid;
    errno = 0;
    int rc = seg_alloc_ex("thp", base, size, 0600, &so, &sid);
    if (rc == -EXO_ENOHUGE && geteuid() != 0) {
        CHECK_EQ(errno, exomem_errno(EXO_ENOHUGE));
        CHECK(strstr(exomem_last_error(), "huge=") != NULL); /* says what to mount */
        check_registry_empty();
        skip_part("thp", "no tmpfs with huge pages and not root to mount one");
        return;
    }
    CHECK_OK(rc);
    parts_run++;
    struct seg_info info;
    CHECK_OK(seg_ctl(sid, SEG_CTL_INFO, &info));
    CHECK_EQ(info.page_size, SEG_PAGE_4K);
    CHECK(info.flags & SEG_THP);
    struct seg_backing b;
    CHECK_OK(seg_backing(sid, &b));
    CHECK_EQ(b.resident, size);
    CHECK_EQ(b.huge, size); /* 23 GiB free here: the kernel has 2 MiB pages to give */

    /* SEG_THP is for 4K-granular segments only. */
    struct seg_opts bad = {.page_size = SEG_PAGE_2M, .flags = SEG_THP};
    segid_t none;
    CHECK_ERR(seg_alloc_ex("thp-bad", test_base(3), 4 * MIB, 0600, &bad, &none), EXO_EINVAL);

    /* Both engines map the huge pages whole, and parking (mremap of 1 GiB-congruent
     * ranges) keeps them whole: a switch splits nothing. */
    segid_t other;
    CHECK_OK(seg_alloc("thp-other", test_base(4), 4 * MIB, 0600, &other));
    for (int engine = VAS_ENGINE_PARK; engine <= VAS_ENGINE_REMAP; engine++) {
        CHECK_OK(vas_ctl(VAS_CTL_SET_ENGINE, 0, &engine));
        vasid_t vid, vid2;
        vhandle_t vh = enter("thp-v", sid, &vid);
        CHECK_EQ(pmd_mapped_at(base), size);
        fill(base, size, (unsigned)engine);
        struct vas_park_stats st0, st1;
        CHECK_OK(vas_ctl(VAS_CTL_PARK_STATS, 0, &st0));
        vhandle_t vh2 = enter("thp-v2", other, &vid2);  /* parks or hides "thp" */
        CHECK_OK(vas_switch(vh));
        CHECK_OK(vas_ctl(VAS_CTL_PARK_STATS, 0, &st1));
        if (engine == VAS_ENGINE_PARK)
            CHECK(st1.moves >= st0.moves + 2); /* out to its parking slot and back */
        else
            CHECK_EQ(st1.moves, st0.moves);
        CHECK_EQ(pmd_mapped_at(base), size);
        verify(base, size, (unsigned)engine);
        CHECK_OK(vas_switch(VAS_HOME));
        CHECK_OK(vas_detach(vh2));
        CHECK_OK(vas_delete(vid2));
        CHECK_OK(vas_detach(vh));
        CHECK_OK(vas_delete(vid));
        CHECK_OK(seg_backing(sid, &b));
        CHECK_EQ(b.huge, size);
    }

    /* A sparse THP segment: the report allocates nothing. */
    struct seg_opts sparse_opts = {.page_size = SEG_PAGE_4K, .flags = SEG_THP | SEG_NORESERVE};
    segid_t sparse;
    CHECK_OK(seg_alloc_ex("thp-sparse", test_base(5), 16 * MIB, 0600, &sparse_opts, &sparse));
    for (int round = 0; round < 2; round++) {
        CHECK_OK(seg_backing(sparse, &b));
        CHECK_EQ(b.resident, 0);
        CHECK_EQ(b.huge, 0);
    }
    CHECK_OK(seg_delete(sparse));
    CHECK_OK(seg_delete(other));
    CHECK_OK(seg_delete(sid));
    CHECK(!exo_os_is_private_mount(hp_mount_dirs[2], 0)); /* unmounted once empty */
}

/* A sparse SEG_THP segment on a huge=advise tmpfs: huge pages only come with MADV_HUGEPAGE
 * given before the first fault, so a switch must advise before it populates. */
static void part_thp_advise(void)
{
    if (geteuid() != 0) {
        skip_part("thp-advise", "not root: cannot mount a huge=advise tmpfs");
        return;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/mnt", root);
    mkdir(dir, 0755);
    CHECK(mkdir(hp_mount_dirs[2], 0755) == 0 || errno == EEXIST);
    if (mount("none", hp_mount_dirs[2], "tmpfs", 0, "huge=advise,mode=1777") != 0) {
        skip_part("thp-advise", "cannot mount a tmpfs with huge=advise");
        return;
    }
    parts_run++;
    const uint64_t size = 8 * MIB, base = test_base(6);
    struct seg_opts so = {.page_size = SEG_PAGE_4K, .flags = SEG_THP | SEG_NORESERVE};
    segid_t sid;
    CHECK_OK(seg_alloc_ex("thp-advise", base, size, 0600, &so, &sid));
    vasid_t vid;
    vhandle_t vh = enter("thp-advise-v", sid, &vid);
    memset((void *)(uintptr_t)base, 0x5a, size);
    CHECK_EQ(pmd_mapped_at(base), size);
    leave(vh, vid);
    struct seg_backing b;
    CHECK_OK(seg_backing(sid, &b));
    CHECK_EQ(b.huge, size);
    CHECK_OK(seg_delete(sid));
    umount2(hp_mount_dirs[2], MNT_DETACH); /* if seg_delete left it */
}

/* --- 2M with a pool grown on demand --- */

struct child_arg {
    segid_t sid;
    uint64_t base, size;
};

static void reattach_and_verify(void *p)
{
    struct child_arg *a = p;
    vasid_t vid;
    vhandle_t vh = enter("huge-v2", a->sid, &vid);
    verify(a->base, a->size, 2);
    leave(vh, vid);
}

static void delete_in_child(void *p)
{
    CHECK_OK(seg_delete(((struct child_arg *)p)->sid));
}

/* As nobody, with the pool already spoken for: EXO_ENOHUGE naming the pool, nothing made. */
static void unprivileged_alloc(void *p)
{
    long avail = *(long *)p; /* ask for one page more than the pool has free */
    CHECK(setgid(65534) == 0 && setuid(65534) == 0);
    struct seg_opts so = {.page_size = SEG_PAGE_2M, .flags = 0};
    segid_t sid;
    CHECK_ERR(seg_alloc_ex("nobody2m", test_base(7), (uint64_t)(avail + 1) * SEG_PAGE_2M, 0600,
                           &so, &sid), EXO_ENOHUGE);
    /* In the registry's private mount (mode 1777) the pool is short; a shared hugetlbfs
     * that another program mounted may not be writable for nobody at all. */
    const char *msg = exomem_last_error();
    CHECK((strstr(msg, "pool") && strstr(msg, "nr_hugepages")) ||
          strstr(msg, "no writable hugetlbfs mount"));
}

static bool registry_has_only(segid_t sid)
{
    size_t count;
    struct seg_info list[4];
    CHECK_OK(seg_list(list, 4, &count, NULL));
    return count == 1 && list[0].id == sid;
}

static void part_2m(void)
{
    if (geteuid() != 0) {
        skip_part("2m-pool", "growing the pool needs root");
        return;
    }
    if (hp_pool_start[0] < 0) {
        skip_part("2m-pool", "this kernel has no 2 MiB pool");
        return;
    }
    parts_run++;
    const uint64_t size = 8 * MIB, base = test_base(6);
    long avail0;
    CHECK_OK(exo_os_pool_available(SEG_PAGE_2M, NULL, &avail0));
    long grow = avail0 >= 4 ? 0 : 4 - avail0;
    struct seg_opts so = {.page_size = SEG_PAGE_2M, .flags = 0};
    segid_t sid;
    CHECK_OK(seg_alloc_ex("huge2m", base, size, 0666, &so, &sid));
    CHECK_EQ(hp_read_pool(0), hp_pool_start[0] + grow);
    struct seg_backing b;
    CHECK_OK(seg_backing(sid, &b));
    CHECK_EQ(b.page_size, SEG_PAGE_2M);
    CHECK_EQ(b.resident, 0); /* reserved, not yet faulted in */

    /* Another unprivileged process finds the pool spoken for. */
    long total_before = hp_read_pool(0), avail;
    CHECK_OK(exo_os_pool_available(SEG_PAGE_2M, NULL, &avail));
    CHECK_EQ(test_in_child(unprivileged_alloc, &avail), 0);
    CHECK_EQ(hp_read_pool(0), total_before);
    CHECK(registry_has_only(sid));

    vasid_t vid;
    vhandle_t vh = enter("huge-v", sid, &vid);
    fill(base, size, 2);
    leave(vh, vid);
    CHECK_OK(seg_backing(sid, &b));
    CHECK_EQ(b.resident, size);
    CHECK_EQ(b.huge, size);
    struct child_arg a = {sid, base, size};
    CHECK_EQ(test_in_child(reattach_and_verify, &a), 0); /* the data persists */

    /* A clone is a segment of its own, with its own pages from the pool. */
    segid_t copy;
    CHECK_OK(seg_clone(sid, "huge2m-copy", &copy));
    CHECK_EQ(hp_read_pool(0), hp_pool_start[0] + (avail0 >= 8 ? 0 : 8 - avail0));
    CHECK_OK(seg_delete(copy));
    CHECK_EQ(hp_read_pool(0), hp_pool_start[0] + grow);

    /* Other programs may keep free pages in the pool; one page more than the pool has
     * free makes it grow for sure (reserved only, never touched, so it costs no time). */
    long total_now, avail_now;
    CHECK_OK(exo_os_pool_available(SEG_PAGE_2M, &total_now, &avail_now));
    segid_t big;
    CHECK_OK(seg_alloc_ex("huge2m-big", test_base(10), (uint64_t)(avail_now + 1) * SEG_PAGE_2M,
                          0600, &so, &big));
    CHECK_EQ(hp_read_pool(0), total_now + 1);
    CHECK_OK(seg_delete(big));
    CHECK_EQ(hp_read_pool(0), total_now);

    /* Another process deletes it and gives back exactly what was added. */
    CHECK_EQ(test_in_child(delete_in_child, &a), 0);
    CHECK_EQ(hp_read_pool(0), hp_pool_start[0]);
    check_registry_empty();
}

/* --- 2M when the pool cannot be had --- */

static void part_2m_impossible(void)
{
    parts_run++;
    /* More huge pages than this machine has memory: refused before anything changes. */
    uint64_t mem;
    CHECK_OK(exo_os_mem_available(&mem));
    uint64_t size = ((mem / GIB) + 8) * GIB;
    struct seg_opts so = {.page_size = SEG_PAGE_2M, .flags = 0};
    segid_t sid = 0;
    long before = hp_read_pool(0);
    CHECK_ERR(seg_alloc_ex("toobig", test_base(8), size, 0600, &so, &sid), EXO_ENOHUGE);
    CHECK_EQ(sid, 0);
    const char *msg = exomem_last_error();
    if (geteuid() == 0)
        CHECK(strstr(msg, "pool") != NULL && strstr(msg, "available") != NULL);
    else
        CHECK(strstr(msg, "hugetlbfs") != NULL || strstr(msg, "pool") != NULL);
    CHECK_EQ(hp_read_pool(0), before);
    check_registry_empty();
    segid_t found;
    CHECK_ERR(seg_find("toobig", &found), EXO_ENOENT);
}

/* --- 1G, when the kernel can find the pages --- */

static void part_1g(void)
{
    if (geteuid() != 0) {
        skip_part("1g", "growing the 1 GiB pool needs root");
        return;
    }
    if (hp_pool_start[1] < 0) {
        skip_part("1g", "this kernel has no 1 GiB pool");
        return;
    }
    const uint64_t base = test_base(9);
    struct seg_opts so = {.page_size = SEG_PAGE_1G, .flags = 0};
    segid_t sid;
    long before = hp_read_pool(1), avail1;
    CHECK_OK(exo_os_pool_available(SEG_PAGE_1G, NULL, &avail1));
    int rc = seg_alloc_ex("huge1g", base, GIB, 0600, &so, &sid);
    if (rc == -EXO_ENOHUGE) {
        CHECK(strstr(exomem_last_error(), "pool") != NULL);
        CHECK_EQ(hp_read_pool(1), before); /* all or nothing */
        check_registry_empty();
        skip_part("1g", "the kernel could not find a free 1 GiB page (memory fragmented)");
        return;
    }
    CHECK_OK(rc);
    parts_run++;
    /* Reserved, not touched: zeroing a 1 GiB page takes seconds in this VM, and the 2M part
     * already checks the data path. */
    struct seg_backing b;
    CHECK_OK(seg_backing(sid, &b));
    CHECK_EQ(b.page_size, SEG_PAGE_1G);
    CHECK_EQ(b.resident, 0);
    CHECK_EQ(hp_read_pool(1), before + (avail1 >= 1 ? 0 : 1));
    CHECK_OK(seg_delete(sid));
    CHECK_EQ(hp_read_pool(1), before);
    check_registry_empty();
}

int main(void)
{
    root = hp_fixture();
    part_backing_4k();
    part_2m_impossible();
    part_thp();
    part_thp_advise();
    part_2m();
    part_1g();
    for (int k = 0; k < 2; k++)
        CHECK_EQ(hp_read_pool(k), hp_pool_start[k]);
    printf("test_hugeseg: %d parts passed, %d skipped\n", parts_run, parts_skipped);
    return parts_run == 0 ? TEST_SKIP_CODE : 0;
}
