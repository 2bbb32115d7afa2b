/* What docs/hugepages.md and docs/spacejmp.md promise for hugetlb segments in VASes:
 *  - a SEG_NORESERVE 2M (and 1G) segment never raises SIGBUS when the pool has been
 *    emptied: the switch that maps it fails with EXO_ENOMEM, and works once pages are back;
 *  - hugetlb segments are never moved with mremap (park statistics: no moves, one map per
 *    switch-in), and switching them leaves no hole: another thread that maps in a loop, at
 *    the segment bases too, never gets their addresses;
 *  - a 1G segment is really switched, with both engines: its data is there after switching
 *    away and back, and it is not accessible while switched out.
 * Parts that need pages this machine cannot give are skipped with a reason; pools and
 * mounts are put back at exit (hugepool_fixture). */
#include "harness.h"
#include "hugepool_fixture.h"
#include "os/os.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)

static int parts_run, parts_skipped;

static void skip_part(const char *part, const char *why)
{
    fprintf(stderr, "SKIP part %s: %s\n", part, why);
    parts_skipped++;
}

static vhandle_t enter_new(const char *name, segid_t sid, vasid_t *vid)
{
    vhandle_t vh;
    CHECK_OK(vas_create(name, 0600, vid));
    CHECK_OK(seg_attach(*vid, sid, SEG_RDWR));
    CHECK_OK(vas_attach(*vid, &vh));
    return vh;
}

static void drop(vhandle_t vh, vasid_t vid, segid_t sid)
{
    CHECK_OK(vas_detach(vh));
    CHECK_OK(seg_detach(vid, sid));
    CHECK_OK(vas_delete(vid));
    CHECK_OK(seg_delete(sid));
}

/* --- SEG_NORESERVE against an emptied pool --- */

static void noreserve(int k)
{
    const char *part = k == 0 ? "noreserve-2m" : "noreserve-1g";
    uint64_t page = k == 0 ? SEG_PAGE_2M : SEG_PAGE_1G, size = k == 0 ? 4 * page : page;
    struct seg_opts so = {.page_size = page, .flags = SEG_NORESERVE};
    segid_t sid;
    int rc = seg_alloc_ex(k == 0 ? "nr2m" : "nr1g", test_base(k == 0 ? 2 : 4), size, 0600, &so,
                          &sid);
    if (rc == -EXO_ENOHUGE) {
        skip_part(part, exomem_last_error());
        return;
    }
    CHECK_OK(rc);
    parts_run++;
    /* Take every free page of the pool with a reservation of our own. */
    long total, free_pages;
    CHECK_OK(exo_os_pool_available(page, &total, &free_pages));
    void *hog = MAP_FAILED;
    if (free_pages > 0) {
        hog = mmap(NULL, (size_t)free_pages * page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | (k ? (30 << MAP_HUGE_SHIFT) : 0),
                   -1, 0);
        CHECK(hog != MAP_FAILED);
    }
    vasid_t vid;
    vhandle_t vh = enter_new(k == 0 ? "nr2m" : "nr1g", sid, &vid);
    CHECK_ERR(vas_switch(vh), EXO_ENOMEM);   /* refused now, not SIGBUS later */
    CHECK_EQ(vas_current(), VAS_HOME);
    if (hog != MAP_FAILED)
        CHECK_OK(munmap(hog, (size_t)free_pages * page));
    CHECK_OK(vas_switch(vh));
    for (uint64_t off = 0; off < size; off += page) /* every page can be had now */
        ((volatile char *)(uintptr_t)test_base(k == 0 ? 2 : 4))[off] = 1;
    CHECK_OK(vas_switch(VAS_HOME));
    drop(vh, vid, sid);
}

/* --- no hole, and no mremap, for 2M segments --- */

static uint64_t bases[2];
static atomic_int stop;
static atomic_long violations, probes;

/* At each base: MAP_FIXED_NOREPLACE must be refused and a hint must be ignored, whether
 * the segment is switched in or out at that moment. */
static void *prober(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        for (int i = 0; i < 2; i++) {
            void *p = mmap((void *)(uintptr_t)bases[i], SEG_PAGE_2M, PROT_READ,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
            if (p != MAP_FAILED) {
                atomic_fetch_add(&violations, 1);
                munmap(p, SEG_PAGE_2M);
            }
            p = mmap((void *)(uintptr_t)bases[i], SEG_PAGE_2M, PROT_READ,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p != MAP_FAILED) {
                if ((uint64_t)(uintptr_t)p < bases[i] + 4 * SEG_PAGE_2M &&
                    (uint64_t)(uintptr_t)p + SEG_PAGE_2M > bases[i])
                    atomic_fetch_add(&violations, 1);
                munmap(p, SEG_PAGE_2M);
            }
            atomic_fetch_add(&probes, 1);
        }
    }
    return NULL;
}

static void no_hole_no_mremap(void)
{
    struct seg_opts so = {.page_size = SEG_PAGE_2M, .flags = 0};
    segid_t s[2];
    bases[0] = test_base(5);
    bases[1] = test_base(6);
    int rc = seg_alloc_ex("h0", bases[0], 4 * SEG_PAGE_2M, 0600, &so, &s[0]);
    if (rc == -EXO_ENOHUGE) {
        skip_part("2m-switch", exomem_last_error());
        return;
    }
    CHECK_OK(rc);
    CHECK_OK(seg_alloc_ex("h1", bases[1], 4 * SEG_PAGE_2M, 0600, &so, &s[1]));
    parts_run++;
    vasid_t v[2];
    vhandle_t h[2] = {enter_new("h0", s[0], &v[0]), enter_new("h1", s[1], &v[1])};
    struct vas_park_stats before, after;
    CHECK_OK(vas_ctl(VAS_CTL_PARK_STATS, 0, &before));
    pthread_t t;
    CHECK_OK(pthread_create(&t, NULL, prober, NULL));
    /* At least 400 switches, and on until the prober has probed between them (on a busy
     * machine it may not have run at all before the first 400 are over). */
    enum { SWITCHES = 400, MAX_SWITCHES = 400000 };
    int i = 0;
    for (; i < MAX_SWITCHES && (i < SWITCHES || atomic_load(&probes) < 20); i++) {
        CHECK_OK(vas_switch(h[i & 1]));
        uint64_t *word = (uint64_t *)(uintptr_t)(bases[i & 1] + SEG_PAGE_2M);
        CHECK_EQ(*word, (uint64_t)(i >= 2 ? i - 2 : 0)); /* this VAS's data survived */
        *word = (uint64_t)i;
    }
    atomic_store(&stop, 1);
    CHECK_OK(pthread_join(t, NULL));
    CHECK_OK(vas_ctl(VAS_CTL_PARK_STATS, 0, &after));
    CHECK_OK(vas_switch(VAS_HOME));
    printf("2M segments: %d switches, %ld probes of their bases, %ld violations; moves %llu, "
           "maps %llu\n", i, (long)atomic_load(&probes), (long)atomic_load(&violations),
           (unsigned long long)(after.moves - before.moves),
           (unsigned long long)(after.maps - before.maps));
    CHECK_EQ(atomic_load(&violations), 0);
    CHECK(atomic_load(&probes) > 0);
    CHECK_EQ(after.moves, before.moves);             /* hugetlb is never mremapped */
    CHECK_EQ(after.maps - before.maps, (uint64_t)i); /* it is mapped at each switch-in */
    drop(h[0], v[0], s[0]);
    drop(h[1], v[1], s[1]);
}

/* --- a 1G segment switched, with both engines --- */

static void one_gig(void)
{
    struct seg_opts so = {.page_size = SEG_PAGE_1G}, small = {.page_size = SEG_PAGE_4K};
    segid_t big, other;
    uint64_t base = test_base(8), other_base = test_base(10);
    int rc = seg_alloc_ex("g1", base, GIB, 0600, &so, &big);
    if (rc == -EXO_ENOHUGE) {
        skip_part("1g-switch", exomem_last_error());
        return;
    }
    CHECK_OK(rc);
    parts_run++;
    CHECK_OK(seg_alloc_ex("g1-other", other_base, 2 * MIB, 0600, &small, &other));
    static const int engines[] = {VAS_ENGINE_PARK, VAS_ENGINE_REMAP};
    for (int e = 0; e < 2; e++) {
        CHECK_OK(vas_ctl(VAS_CTL_SET_ENGINE, 0, (void *)&engines[e]));
        vasid_t vb, vo;
        vhandle_t hb = enter_new("g1", big, &vb), ho = enter_new("g1-other", other, &vo);
        CHECK_OK(vas_switch(hb));
        volatile uint64_t *last = (uint64_t *)(uintptr_t)(base + GIB - 8);
        *last = UINT64_C(0x1600d) + (uint64_t)e;        /* faults in the one 1 GiB page */
        CHECK_OK(vas_switch(ho));
        CHECK(test_faults((const void *)(uintptr_t)base, 0)); /* switched out: inaccessible */
        CHECK_OK(vas_switch(hb));
        CHECK_EQ(*last, UINT64_C(0x1600d) + (uint64_t)e);
        struct seg_backing b;
        CHECK_OK(seg_backing(big, &b));
        CHECK_EQ(b.huge, GIB);
        CHECK_OK(vas_switch(VAS_HOME));
        CHECK_OK(vas_detach(hb));
        CHECK_OK(vas_detach(ho));
        CHECK_OK(seg_detach(vb, big));
        CHECK_OK(seg_detach(vo, other));
        CHECK_OK(vas_delete(vb));
        CHECK_OK(vas_delete(vo));
    }
    CHECK_OK(seg_delete(big));
    CHECK_OK(seg_delete(other));
}

int main(void)
{
    if (geteuid() != 0)
        SKIP("growing and emptying the huge page pools needs root\n");
    hp_fixture();
    if (hp_pool_start[0] < 0)
        SKIP("this kernel has no 2 MiB pool\n");
    noreserve(0);
    no_hole_no_mremap();
    if (hp_pool_start[1] >= 0) {
        noreserve(1);
        one_gig();
    } else {
        skip_part("1g", "this kernel has no 1 GiB pool");
    }
    for (int k = 0; k < 2; k++)
        CHECK_EQ(hp_read_pool(k), hp_pool_start[k]);
    printf("test_hugeseg_switch: %d parts passed, %d skipped\n", parts_run, parts_skipped);
    return parts_run == 0 ? TEST_SKIP_CODE : 0;
}
