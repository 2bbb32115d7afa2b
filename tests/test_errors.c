/* Every refused segment/VAS call fails with its exact code, sets errno to match, and leaves
 * the registry as it was: same objects, same metadata. Also: a corrupt registry record is
 * reported (EXO_ECORRUPT), skipped by the listings, and does not stop other segments. */
#include "harness.h"

#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIB (UINT64_C(1) << 20)
#define SNAP_SEGS 64
#define SNAP_VASES 16

/* The registry's contents as the listings show them. */
struct snapshot {
    size_t nsegs, seg_corrupt, nvases, vas_corrupt;
    struct seg_info segs[SNAP_SEGS];
    struct vas_info vases[SNAP_VASES];
};

static struct snapshot snap_before, snap_after;

static void take_snapshot(struct snapshot *s)
{
    memset(s, 0, sizeof *s);
    CHECK_OK(seg_list(s->segs, SNAP_SEGS, &s->nsegs, &s->seg_corrupt));
    CHECK_OK(vas_list(s->vases, SNAP_VASES, &s->nvases, &s->vas_corrupt));
    CHECK(s->nsegs <= SNAP_SEGS && s->nvases <= SNAP_VASES);
}

static int seg_info_equal(const struct seg_info *a, const struct seg_info *b)
{
    return a->id == b->id && !strcmp(a->name, b->name) && a->base == b->base &&
           a->size == b->size && a->page_size == b->page_size && a->mode == b->mode &&
           a->uid == b->uid && a->gid == b->gid && a->flags == b->flags &&
           a->created == b->created;
}

static int vas_info_equal(const struct vas_info *a, const struct vas_info *b)
{
    if (a->id != b->id || strcmp(a->name, b->name) || a->mode != b->mode || a->uid != b->uid ||
        a->gid != b->gid || a->heap != b->heap || a->created != b->created ||
        a->nsegs != b->nsegs)
        return 0;
    for (unsigned i = 0; i < a->nsegs && i < VAS_SEGS_MAX; i++)
        if (a->segs[i].sid != b->segs[i].sid || a->segs[i].flags != b->segs[i].flags ||
            strcmp(a->segs[i].name, b->segs[i].name))
            return 0;
    return 1;
}

/* The registry must be exactly as snap_before recorded it. */
#define CHECK_UNCHANGED() do { take_snapshot(&snap_after); \
    CHECK_EQ(snap_after.nsegs, snap_before.nsegs); \
    CHECK_EQ(snap_after.seg_corrupt, snap_before.seg_corrupt); \
    CHECK_EQ(snap_after.nvases, snap_before.nvases); \
    CHECK_EQ(snap_after.vas_corrupt, snap_before.vas_corrupt); \
    for (size_t _i = 0; _i < snap_before.nsegs; _i++) \
        CHECK(seg_info_equal(&snap_before.segs[_i], &snap_after.segs[_i])); \
    for (size_t _i = 0; _i < snap_before.nvases; _i++) \
        CHECK(vas_info_equal(&snap_before.vases[_i], &snap_after.vases[_i])); \
    CHECK_EQ(vas_current(), VAS_HOME); } while (0)

/* Map 1 MiB of our own at addr (never replacing anything) and fill it with a pattern. */
static unsigned char *map_foreign(uint64_t addr)
{
    void *p = mmap((void *)addr, MIB, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    CHECK(p == (void *)addr);
    for (size_t i = 0; i < MIB; i++)
        ((unsigned char *)p)[i] = (unsigned char)(i * 7 + 3);
    return p;
}

static void check_foreign_intact(const unsigned char *p)
{
    for (size_t i = 0; i < MIB; i++)
        if (p[i] != (unsigned char)(i * 7 + 3)) {
            fprintf(stderr, "foreign mapping at %p changed at offset %zu\n", (void *)p, i);
            exit(1);
        }
}

/* Nothing (no leftover exomem reservation) is mapped at addr. */
static void check_unmapped(uint64_t addr)
{
    void *p = mmap((void *)addr, MIB, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS |
                   MAP_FIXED_NOREPLACE, -1, 0);
    if (p != (void *)addr) {
        fprintf(stderr, "address %#" PRIx64 " is still mapped after a failed call\n", addr);
        exit(1);
    }
    munmap(p, MIB);
}

static void check_names(void)
{
    char long_name[EXOMEM_NAME_MAX + 2];
    memset(long_name, 'n', sizeof long_name);
    long_name[EXOMEM_NAME_MAX + 1] = '\0'; /* 64 characters */
    segid_t sid = 0;
    vasid_t vid = 0;
    CHECK_ERR(seg_alloc(long_name, test_base(0), MIB, 0600, &sid), EXO_ENAMETOOLONG);
    CHECK_ERR(vas_create(long_name, 0600, &vid), EXO_ENAMETOOLONG);
    CHECK_UNCHANGED();

    const char *bad[] = {"a/b", "", ".hidden", "sp ace", "/", "x\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_ERR(seg_alloc(bad[i], test_base(0), MIB, 0600, &sid), EXO_EBADNAME);
        CHECK_ERR(vas_create(bad[i], 0600, &vid), EXO_EBADNAME);
        CHECK_ERR(seg_find(bad[i], &sid), EXO_EBADNAME);
    }
    CHECK_UNCHANGED();

    /* The longest legal name, and every legal character, work. */
    long_name[EXOMEM_NAME_MAX] = '\0';
    CHECK_OK(seg_alloc(long_name, test_base(0), MIB, 0600, &sid));
    CHECK_OK(seg_delete(sid));
    CHECK_OK(vas_create("Az09._-", 0600, &vid));
    CHECK_OK(vas_delete(vid));
    CHECK_UNCHANGED();
}

static void check_geometry(void)
{
    segid_t sid = 0;
    CHECK_ERR(seg_alloc("g", test_base(0) + 100, MIB, 0600, &sid), EXO_EALIGN);
    CHECK_ERR(seg_alloc("g", test_base(0) + 2048, MIB, 0600, &sid), EXO_EALIGN);
    CHECK_ERR(seg_alloc("g", test_base(0), 0, 0600, &sid), EXO_ESIZE);
    CHECK_ERR(seg_alloc("g", (UINT64_C(1) << 47) - 4096, 8192, 0600, &sid), EXO_ESIZE);
    CHECK_ERR(seg_alloc("g", test_base(0), UINT64_C(1) << 47, 0600, &sid), EXO_ESIZE);
    CHECK_ERR(seg_alloc("g", test_base(0), UINT64_MAX - 4095, 0600, &sid), EXO_ESIZE);
    CHECK_ERR(seg_alloc("g", test_base(0), MIB + 1, 0600, &sid), EXO_EALIGN);
    CHECK_ERR(seg_alloc("g", test_base(0), 4097, 0600, &sid), EXO_EALIGN);
    struct seg_opts opts = {.page_size = 3 * MIB, .flags = 0};
    CHECK_ERR(seg_alloc_ex("g", test_base(0), 6 * MIB, 0600, &opts, &sid), EXO_EPAGESIZE);
    opts.page_size = 8192;
    CHECK_ERR(seg_alloc_ex("g", test_base(0), 8192, 0600, &opts, &sid), EXO_EPAGESIZE);
    /* 2M pages need a 2M-aligned base and size (checked before any hugetlbfs lookup). */
    opts.page_size = SEG_PAGE_2M;
    CHECK_ERR(seg_alloc_ex("g", test_base(0) + 4096, 2 * MIB, 0600, &opts, &sid), EXO_EALIGN);
    CHECK_ERR(seg_alloc_ex("g", test_base(0), 3 * MIB, 0600, &opts, &sid), EXO_EALIGN);
    CHECK_ERR(seg_find("g", &sid), EXO_ENOENT);
    CHECK_UNCHANGED();
}

/* A segment base over a mapping of ours is refused and the mapping is untouched; so is a
 * vas_attach when a foreign mapping sits inside one of the VAS's segments. */
static void check_overlap_mappings(void)
{
    segid_t sid = 0;
    unsigned char *foreign = map_foreign(test_base(5));
    CHECK_ERR(seg_alloc("ov", test_base(5), 4 * MIB, 0600, &sid), EXO_EOVERLAP);
    CHECK_ERR(seg_alloc("ov", test_base(5) - 2 * MIB, 4 * MIB, 0600, &sid), EXO_EOVERLAP);
    check_foreign_intact(foreign);
    CHECK_UNCHANGED();
    CHECK_OK(munmap(foreign, MIB));

    segid_t s6, s8;
    vasid_t v;
    CHECK_OK(seg_alloc("at6", test_base(6), 4 * MIB, 0600, &s6));
    CHECK_OK(seg_alloc("at8", test_base(8), 4 * MIB, 0600, &s8));
    CHECK_OK(vas_create("atv", 0600, &v));
    CHECK_OK(seg_attach(v, s6, SEG_RDWR));
    CHECK_OK(seg_attach(v, s8, SEG_RDWR));
    take_snapshot(&snap_before);
    vhandle_t vh = -1;
    /* A mapping right at the second segment's base, then one inside its range. */
    for (uint64_t at = test_base(8); at <= test_base(8) + MIB; at += MIB) {
        foreign = map_foreign(at);
        CHECK_ERR(vas_attach(v, &vh), EXO_EOVERLAP);
        check_foreign_intact(foreign);
        check_unmapped(test_base(6));   /* the first segment's reservation was undone */
        check_unmapped(at == test_base(8) ? test_base(8) + MIB : test_base(8));
        CHECK_UNCHANGED();
        CHECK_OK(munmap(foreign, MIB));
    }

    /* Without the foreign mapping the same attach works, and the handle from the failure
     * was never valid. */
    CHECK_OK(vas_attach(v, &vh));
    CHECK_OK(vas_detach(vh));
    CHECK_OK(seg_detach(v, s6));
    CHECK_OK(seg_detach(v, s8));
    CHECK_OK(vas_delete(v));
    CHECK_OK(seg_delete(s6));
    CHECK_OK(seg_delete(s8));
}

static void check_registry_conflicts(void)
{
    segid_t a, b, c, sid;
    vasid_t v, vid;
    /* Segments may overlap each other in the registry, but not inside one VAS. */
    CHECK_OK(seg_alloc("ova", test_base(7), 4 * MIB, 0600, &a));
    CHECK_OK(seg_alloc("ovb", test_base(7) + 2 * MIB, 4 * MIB, 0600, &b));
    CHECK_OK(seg_alloc("ovc", test_base(7), 4 * MIB, 0600, &c));
    CHECK_OK(vas_create("ovv", 0600, &v));
    CHECK_OK(seg_attach(v, a, SEG_RDWR));
    take_snapshot(&snap_before);
    CHECK_ERR(seg_attach(v, b, SEG_RDWR), EXO_EOVERLAP);
    CHECK_ERR(seg_attach(v, c, SEG_RDONLY), EXO_EOVERLAP);
    CHECK_UNCHANGED();

    /* Duplicate names, missing names and ids. */
    CHECK_ERR(seg_alloc("ova", test_base(9), MIB, 0600, &sid), EXO_EEXIST);
    CHECK_ERR(vas_create("ovv", 0600, &vid), EXO_EEXIST);
    CHECK_ERR(seg_clone(a, "ovb", &sid), EXO_EEXIST);
    CHECK_ERR(vas_clone(v, "ovv", &vid), EXO_EEXIST);
    CHECK_ERR(seg_find("missing", &sid), EXO_ENOENT);
    CHECK_ERR(vas_find("missing", &vid), EXO_ENOENT);
    struct seg_info si;
    struct vas_info vi;
    CHECK_ERR(seg_ctl(999999, SEG_CTL_INFO, &si), EXO_ENOENT);
    CHECK_ERR(vas_ctl(VAS_CTL_INFO, 999999, &vi), EXO_ENOENT);
    CHECK_ERR(seg_delete(999999), EXO_ENOENT);
    CHECK_ERR(vas_delete(999999), EXO_ENOENT);
    vhandle_t vh;
    CHECK_ERR(vas_attach(999999, &vh), EXO_ENOENT);
    CHECK_ERR(seg_attach(v, 999999, SEG_RDWR), EXO_ENOENT);
    CHECK_ERR(seg_attach(999999, b, SEG_RDWR), EXO_ENOENT);
    CHECK_UNCHANGED();

    /* A segment listed in a VAS cannot be deleted. */
    CHECK_ERR(seg_delete(a), EXO_EINUSE);
    CHECK_UNCHANGED();

    /* Switching to a handle that is not (or no longer) attached. */
    CHECK_ERR(vas_switch(12345), EXO_EDETACHED);
    CHECK_ERR(vas_try_switch(12345), EXO_EDETACHED);
    CHECK_ERR(vas_switch(-1), EXO_EDETACHED);
    CHECK_OK(vas_attach(v, &vh));
    CHECK(vh != VAS_HOME);
    CHECK_OK(vas_detach(vh));
    CHECK_ERR(vas_switch(vh), EXO_EDETACHED);
    CHECK_ERR(vas_detach(vh), EXO_EDETACHED);
    CHECK_UNCHANGED();

    CHECK_OK(seg_detach(v, a));
    CHECK_OK(vas_delete(v));
    CHECK_OK(seg_delete(a));
    CHECK_OK(seg_delete(b));
    CHECK_OK(seg_delete(c));
}

static void record_path(char *out, size_t len, const char *dir, uint64_t id)
{
    snprintf(out, len, "%s/%s/%" PRIu64, exomem_root(), dir, id);
}

/* A segment record cut to half and a VAS record with one garbled byte are ECORRUPT, are
 * skipped and counted by the listings, and other segments keep working. */
static void check_corruption(void)
{
    segid_t bad_seg, good_seg, vseg;
    vasid_t bad_vas, good_vas;
    CHECK_OK(seg_alloc("cut", test_base(10), MIB, 0600, &bad_seg));
    CHECK_OK(seg_alloc("vseg", test_base(11), MIB, 0600, &vseg));
    CHECK_OK(seg_alloc("good", test_base(12), MIB, 0600, &good_seg));
    CHECK_OK(vas_create("garbled", 0600, &bad_vas));
    CHECK_OK(seg_attach(bad_vas, vseg, SEG_RDWR));
    CHECK_OK(vas_create("goodv", 0600, &good_vas));
    CHECK_OK(seg_attach(good_vas, good_seg, SEG_RDWR));
    take_snapshot(&snap_before);
    CHECK_EQ(snap_before.seg_corrupt, 0);
    CHECK_EQ(snap_before.vas_corrupt, 0);

    char path[4400];
    struct stat st;
    record_path(path, sizeof path, "segs", bad_seg);
    CHECK_OK(stat(path, &st));
    CHECK(st.st_size >= 2);
    CHECK_OK(truncate(path, st.st_size / 2));

    record_path(path, sizeof path, "vases", bad_vas);
    int fd = open(path, O_RDWR);
    CHECK(fd >= 0);
    CHECK_OK(fstat(fd, &st));
    CHECK(st.st_size >= 2);
    unsigned char byte;
    off_t mid = st.st_size / 2;
    CHECK_EQ(pread(fd, &byte, 1, mid), 1);
    byte ^= 0x5a;
    CHECK_EQ(pwrite(fd, &byte, 1, mid), 1);
    close(fd);

    struct seg_info si;
    struct vas_info vi;
    vhandle_t vh;
    CHECK_ERR(seg_ctl(bad_seg, SEG_CTL_INFO, &si), EXO_ECORRUPT);
    CHECK_ERR(vas_ctl(VAS_CTL_INFO, bad_vas, &vi), EXO_ECORRUPT);
    CHECK_ERR(vas_attach(bad_vas, &vh), EXO_ECORRUPT);
    CHECK_EQ(vas_current(), VAS_HOME);
    check_unmapped(test_base(11));

    size_t count = 0, corrupt = 0;
    struct seg_info segs[SNAP_SEGS];
    CHECK_OK(seg_list(segs, SNAP_SEGS, &count, &corrupt));
    CHECK_EQ(count, snap_before.nsegs - 1);
    CHECK_EQ(corrupt, 1);
    for (size_t i = 0; i < count; i++)
        CHECK(segs[i].id != bad_seg);
    CHECK_OK(seg_list(NULL, 0, &count, NULL));   /* corrupt may be NULL, cap may be 0 */
    CHECK_EQ(count, snap_before.nsegs - 1);
    static struct vas_info vases[SNAP_VASES];
    CHECK_OK(vas_list(vases, SNAP_VASES, &count, &corrupt));
    CHECK_EQ(count, snap_before.nvases - 1);
    CHECK_EQ(corrupt, 1);
    for (size_t i = 0; i < count; i++)
        CHECK(vases[i].id != bad_vas);

    /* The intact segment is unaffected. */
    CHECK_OK(seg_ctl(good_seg, SEG_CTL_INFO, &si));
    CHECK_EQ(si.base, test_base(12));
    CHECK_OK(vas_attach(good_vas, &vh));
    CHECK_OK(vas_switch(vh));
    volatile uint64_t *p = (volatile uint64_t *)test_base(12);
    p[0] = 0x600d;
    p[MIB / 8 - 1] = 0x600e;
    CHECK_OK(vas_switch(VAS_HOME));
    CHECK(test_faults((const void *)p, 0));
    CHECK_OK(vas_switch(vh));
    CHECK_EQ(p[0], 0x600d);
    CHECK_EQ(p[MIB / 8 - 1], 0x600e);
    CHECK_OK(vas_detach(vh));
    CHECK_EQ(vas_current(), VAS_HOME);
}

static void check_strerror(void)
{
    static const int codes[] = {
        EXO_EPERM, EXO_ENOENT, EXO_EINTR, EXO_EIO, EXO_ENOMEM, EXO_EACCES, EXO_EBUSY,
        EXO_EEXIST, EXO_EINVAL, EXO_ENOSPC, EXO_ENAMETOOLONG, EXO_ENOTSUP, EXO_EBADNAME,
        EXO_EALIGN, EXO_ESIZE, EXO_EOVERLAP, EXO_ECORRUPT, EXO_EVERSION, EXO_EDETACHED,
        EXO_EPAGESIZE, EXO_ENOHUGE, EXO_EINUSE, EXO_ENOTMAPPED, EXO_ETOOMANY, EXO_ENOHEAP};
    CHECK_EQ(sizeof codes / sizeof codes[0], 12 + (EXO_ELAST - EXO_EBASE));
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        for (int sign = -1; sign <= 1; sign += 2) {
            const char *s = exomem_strerror(sign * codes[i]);
            CHECK(s != NULL && s[0] != '\0');
            CHECK(strcmp(s, "unknown exomem error") != 0);
            CHECK(exomem_errno(sign * codes[i]) > 0);
        }
        /* Codes that are errno values are those values. */
        if (codes[i] < EXO_EBASE)
            CHECK_EQ(exomem_errno(codes[i]), codes[i]);
        /* Messages differ from one code to the next. */
        for (size_t j = 0; j < i; j++)
            CHECK(strcmp(exomem_strerror(codes[i]), exomem_strerror(codes[j])) != 0);
    }
    CHECK(exomem_strerror(EXO_ELAST) != NULL);
    CHECK(exomem_strerror(0) != NULL);
}

/* One encoding of access rights (access.h): the segment and VM constants are its values, and
 * an option where an access belongs (or the reverse) is refused, not read as something else. */
_Static_assert(SEG_RDONLY == EXO_ACCESS_READ && SEG_RDWR == EXO_ACCESS_RW, "seg access values");
_Static_assert(EXO_VM_NOACCESS == EXO_ACCESS_NONE && EXO_VM_READONLY == EXO_ACCESS_READ &&
                   EXO_VM_READWRITE == EXO_ACCESS_RW, "vm access values");
_Static_assert(((SEG_NORESERVE | SEG_THP) & (SEG_RDONLY | SEG_RDWR)) == 0,
               "segment options and access values must not share bits");

static void check_access_encoding(vasid_t vas, segid_t seg)
{
    segid_t sid = 0;
    struct seg_opts opts = {.page_size = SEG_PAGE_4K, .flags = SEG_RDONLY};
    CHECK_ERR(seg_alloc_ex("g", test_base(0), MIB, 0600, &opts, &sid), EXO_EINVAL);
    opts.flags = SEG_RDWR;
    CHECK_ERR(seg_alloc_ex("g", test_base(0), MIB, 0600, &opts, &sid), EXO_EINVAL);
    CHECK_ERR(seg_attach(vas, seg, SEG_NORESERVE), EXO_EINVAL);
    CHECK_ERR(seg_attach(vas, seg, SEG_THP), EXO_EINVAL);
    CHECK_ERR(seg_attach(vas, seg, EXO_ACCESS_NONE), EXO_EINVAL);
    CHECK_ERR(seg_attach(vas, seg, EXO_ACCESS_WRITE), EXO_EINVAL);
    CHECK_UNCHANGED();
    /* The stored access reads back as the constant it was given. */
    struct vas_info vi;
    CHECK_OK(vas_ctl(VAS_CTL_INFO, vas, &vi));
    CHECK_EQ(vi.nsegs, 1);
    CHECK_EQ(vi.segs[0].flags, SEG_RDONLY);
}

int main(void)
{
    test_root_setup();
    check_strerror();
    take_snapshot(&snap_before);
    CHECK_EQ(snap_before.nsegs, 0);
    CHECK_EQ(snap_before.nvases, 0);
    CHECK_EQ(snap_before.seg_corrupt, 0);

    /* A registry with a few objects, so "unchanged" compares real entries. */
    segid_t keep_seg;
    vasid_t keep_vas;
    CHECK_OK(seg_alloc("keep", test_base(1), 2 * MIB, 0640, &keep_seg));
    CHECK_OK(vas_create("keepv", 0640, &keep_vas));
    CHECK_OK(seg_attach(keep_vas, keep_seg, SEG_RDONLY));
    take_snapshot(&snap_before);
    CHECK_EQ(snap_before.nsegs, 1);
    CHECK_EQ(snap_before.nvases, 1);

    check_names();
    check_access_encoding(keep_vas, keep_seg);
    check_geometry();
    check_overlap_mappings();
    take_snapshot(&snap_before);
    check_registry_conflicts();
    check_corruption();
    printf("test_errors: ok\n");
    return 0;
}
