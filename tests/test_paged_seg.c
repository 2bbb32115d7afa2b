/* Paged segments (SEG_PAGED): a segment whose data lives in a pager file store on disk,
 * switched in through a VAS with a frame budget far below its size.
 *
 * - data written through a 4 MiB budget into a 64 MiB segment reads back after switching
 *   out and in, and is in the store file after switching out;
 * - another process that switches in after us sees what we wrote, and we see what it wrote,
 *   with both switch engines (park and remap);
 * - a read-only attachment cannot write; the segment's lock keeps a second writer out;
 * - the in-segment heap works on it: a linked list built by one process is walked by another
 *   (256 MiB here; EXOMEM_TEST_PAGED_GIB=8 makes it the 8 GiB list with a 1 GiB budget);
 * - bad options are refused, seg_clone says it cannot, a damaged settings record is caught,
 *   and seg_delete removes the store file and the settings record. */
#include "harness.h"

#include <exomem/alloc.h>
#include <exomem/pager.h>
#include <exomem/seg.h>
#include <exomem/vas.h>
#include <exomem/vm.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define MIB ((uint64_t)1 << 20)
#define SEG_SIZE (64 * MIB)
#define BUDGET (4 * MIB)

static char store_dir[256];
static const char *root;

static uint64_t word_at(uint64_t off, uint64_t round)
{
    return (off * 0x9E3779B97F4A7C15u) ^ round;
}

/* Write one word per 4 KiB page (and the last word of each) of [base, +size). */
static void write_round(volatile uint64_t *base, uint64_t size, uint64_t round)
{
    for (uint64_t off = 0; off < size / 8; off += 512) {
        base[off] = word_at(off, round);
        base[off + 511] = word_at(off + 511, round);
    }
}

static void check_round(const volatile uint64_t *base, uint64_t size, uint64_t round)
{
    for (uint64_t off = 0; off < size / 8; off += 512) {
        if (base[off] != word_at(off, round) || base[off + 511] != word_at(off + 511, round)) {
            fprintf(stderr, "paged data wrong at offset %llu (round %llu)\n",
                    (unsigned long long)(off * 8), (unsigned long long)round);
            exit(1);
        }
    }
}

static segid_t make_paged(const char *name, uint64_t base, uint64_t size, uint64_t budget,
                          uint64_t unit)
{
    struct seg_opts o = {.flags = SEG_PAGED, .paged_dir = store_dir, .paged_budget = budget,
                         .paged_policy = EXO_PAGER_CLOCK, .paged_unit = unit};
    segid_t sid;
    CHECK_OK(seg_alloc_ex(name, base, size, 0600, &o, &sid));
    return sid;
}

static vhandle_t attach_new_vas(const char *vas, segid_t sid, int flags, vasid_t *out)
{
    vasid_t vid;
    CHECK_OK(vas_create(vas, 0600, &vid));
    CHECK_OK(seg_attach(vid, sid, flags));
    vhandle_t vh;
    CHECK_OK(vas_attach(vid, &vh));
    if (out)
        *out = vid;
    return vh;
}

/* The store file of segment sid in store_dir ("exomem-<16 hex>-<sid>"). */
static void store_file_of(segid_t sid, char *buf, size_t len)
{
    char tail[32];
    snprintf(tail, sizeof tail, "-%llu", (unsigned long long)sid);
    DIR *d = opendir(store_dir);
    CHECK(d != NULL);
    struct dirent *e;
    buf[0] = '\0';
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name), t = strlen(tail);
        if (!strncmp(e->d_name, "exomem-", 7) && n > t && !strcmp(e->d_name + n - t, tail))
            snprintf(buf, len, "%s/%s", store_dir, e->d_name);
    }
    closedir(d);
    CHECK(buf[0] != '\0');
}

static void remove_store_dir(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", store_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "test_paged_seg: could not remove %s\n", store_dir);
}

/* ---- the child process's parts (run as fresh processes by test_run_self) ---- */

/* Switch into VAS "v" (the 64 MiB segment), check round 1, write round 2, switch out. */
static int child_round2(void)
{
    vasid_t vid;
    CHECK_OK(vas_find("v", &vid));
    vhandle_t vh;
    CHECK_OK(vas_attach(vid, &vh));
    CHECK_OK(vas_switch(vh));
    volatile uint64_t *base = (volatile uint64_t *)(uintptr_t)test_base(0);
    check_round(base, SEG_SIZE, 1);
    write_round(base, SEG_SIZE, 2);
    CHECK_OK(vas_switch(VAS_HOME));
    CHECK_OK(vas_detach(vh));
    return 0;
}

struct node {
    uint64_t index;
    struct node *next;
    char payload[4096 - 16];
};

static uint64_t list_bytes(void)
{
    const char *gib = getenv("EXOMEM_TEST_PAGED_GIB");
    return gib && atoi(gib) > 0 ? (uint64_t)atoi(gib) << 30 : 256 * MIB;
}

/* Walk the list in VAS "lv" from the heap's root: every node in order, none missing. */
static int child_walk(void)
{
    vasid_t vid;
    CHECK_OK(vas_find("lv", &vid));
    vhandle_t vh;
    CHECK_OK(vas_attach(vid, &vh));
    CHECK_OK(vas_switch(vh));
    segid_t sid;
    CHECK_OK(seg_find("list", &sid));
    void *root_node = NULL;
    CHECK_OK(seg_get_root(sid, &root_node));
    uint64_t n = 0;
    for (const struct node *x = root_node; x; x = x->next, n++) {
        if (x->index != n || x->payload[0] != (char)n || x->payload[sizeof x->payload - 1] !=
            (char)~n) {
            fprintf(stderr, "list node %llu is wrong\n", (unsigned long long)n);
            return 1;
        }
    }
    uint64_t want = atoll(getenv("EXOMEM_TEST_LIST_NODES"));
    if (n != want) {
        fprintf(stderr, "walked %llu nodes, expected %llu\n", (unsigned long long)n,
                (unsigned long long)want);
        return 1;
    }
    printf("test_paged_seg: second process walked %llu nodes\n", (unsigned long long)n);
    CHECK_OK(vas_switch(VAS_HOME));
    CHECK_OK(vas_detach(vh));
    return 0;
}

/* ---- the parent's parts ---- */

static void round_trip_and_other_process(const char *engine)
{
    segid_t sid = make_paged("big", test_base(0), SEG_SIZE, BUDGET, 0);
    vasid_t vid;
    vhandle_t vh = attach_new_vas("v", sid, SEG_RDWR, &vid);
    CHECK_OK(vas_switch(vh));
    volatile uint64_t *base = (volatile uint64_t *)(uintptr_t)test_base(0);
    write_round(base, SEG_SIZE, 1);
    check_round(base, SEG_SIZE, 1); /* read back through a budget of 1/16 */
    CHECK_OK(vas_switch(VAS_HOME));
    CHECK(test_faults((const void *)base, 0)); /* out: inaccessible */

    /* Switched out: the store file holds round 1. */
    char store[600];
    store_file_of(sid, store, sizeof store);
    int fd = open(store, O_RDONLY);
    CHECK(fd >= 0);
    uint64_t w;
    CHECK(pread(fd, &w, 8, 512 * 8 * 100) == 8 && w == word_at(512 * 100, 1));
    close(fd);

    /* Another process switches in, sees round 1, writes round 2. */
    test_run_self("child-round2", "EXOMEM_SWITCH", engine);
    CHECK_OK(vas_switch(vh));
    check_round(base, SEG_SIZE, 2);

    /* A second writer is kept out while we hold it in. */
    test_run_self("child-busy", "EXOMEM_SWITCH", engine);
    CHECK_OK(vas_switch(VAS_HOME));
    CHECK_OK(vas_detach(vh));
    CHECK_OK(vas_delete(vid));
    CHECK_OK(seg_delete(sid));
    CHECK(access(store, F_OK) != 0); /* the store file went with the segment */
}

static int child_busy(void)
{
    vasid_t vid;
    CHECK_OK(vas_find("v", &vid));
    vhandle_t vh;
    CHECK_OK(vas_attach(vid, &vh));
    CHECK_ERR(vas_try_switch(vh), EXO_EBUSY);
    CHECK_OK(vas_detach(vh));
    return 0;
}

static void read_only(void)
{
    segid_t sid = make_paged("ro", test_base(1), 8 * MIB, MIB, 0);
    vasid_t w_vid, r_vid;
    vhandle_t w = attach_new_vas("w", sid, SEG_RDWR, &w_vid);
    CHECK_OK(vas_switch(w));
    volatile uint64_t *base = (volatile uint64_t *)(uintptr_t)test_base(1);
    write_round(base, 8 * MIB, 7);
    CHECK_OK(vas_switch(VAS_HOME));
    vhandle_t r = attach_new_vas("r", sid, SEG_RDONLY, &r_vid);
    CHECK_OK(vas_switch(r));
    check_round(base, 8 * MIB, 7);
    CHECK(test_faults((const void *)base, 1));  /* no writes */
    CHECK(!test_faults((const void *)base, 0)); /* reads fine */
    CHECK_OK(vas_switch(VAS_HOME));
    CHECK_OK(vas_detach(w));
    CHECK_OK(vas_detach(r));
    CHECK_OK(vas_delete(w_vid));
    CHECK_OK(vas_delete(r_vid));
    CHECK_OK(seg_delete(sid));
}

static void heap_list(const char *engine)
{
    uint64_t bytes = list_bytes();
    uint64_t budget = bytes >= (UINT64_C(4) << 30) ? UINT64_C(1) << 30 : bytes / 16;
    struct statvfs fs;
    CHECK(statvfs(store_dir, &fs) == 0);
    if ((uint64_t)fs.f_bavail * fs.f_frsize < bytes + bytes / 4) {
        printf("test_paged_seg: SKIP the %llu MiB list: %s has too little free space\n",
               (unsigned long long)(bytes >> 20), store_dir);
        return;
    }
    segid_t sid = make_paged("list", test_base(2), bytes, budget, 2 * MIB);
    vasid_t vid;
    vhandle_t vh = attach_new_vas("lv", sid, SEG_RDWR, &vid);
    CHECK_OK(vas_switch(vh));
    uint64_t n = 0;
    struct node *head = NULL, *tail = NULL;
    for (;;) {
        struct node *x = seg_malloc(sid, sizeof *x);
        if (!x)
            break; /* the segment is full: that is the list */
        x->index = n;
        x->next = NULL;
        x->payload[0] = (char)n;
        x->payload[sizeof x->payload - 1] = (char)~n;
        if (tail)
            tail->next = x;
        else
            head = x;
        tail = x;
        n++;
    }
    CHECK(n > bytes / sizeof(struct node) * 9 / 10);
    CHECK_OK(seg_set_root(sid, head));
    CHECK_OK(vas_switch(VAS_HOME));
    printf("test_paged_seg: %llu MiB list of %llu nodes built through a %llu MiB budget\n",
           (unsigned long long)(bytes >> 20), (unsigned long long)n,
           (unsigned long long)(budget >> 20));
    char nodes[32];
    snprintf(nodes, sizeof nodes, "%llu", (unsigned long long)n);
    setenv("EXOMEM_TEST_LIST_NODES", nodes, 1);
    test_run_self("child-walk", "EXOMEM_SWITCH", engine);
    CHECK_OK(vas_detach(vh));
    CHECK_OK(vas_delete(vid));
    CHECK_OK(seg_delete(sid));
}

static void refused(void)
{
    segid_t sid;
    struct seg_opts o = {.flags = SEG_PAGED, .page_size = SEG_PAGE_2M, .paged_dir = store_dir};
    CHECK_ERR(seg_alloc_ex("x", test_base(3), 2 * MIB, 0600, &o, &sid), EXO_EINVAL);
    o = (struct seg_opts){.flags = SEG_PAGED | SEG_THP, .paged_dir = store_dir};
    CHECK_ERR(seg_alloc_ex("x", test_base(3), 2 * MIB, 0600, &o, &sid), EXO_EINVAL);
    o = (struct seg_opts){.flags = SEG_PAGED, .paged_dir = "relative/dir"};
    CHECK_ERR(seg_alloc_ex("x", test_base(3), 2 * MIB, 0600, &o, &sid), EXO_EINVAL);
    CHECK(strstr(exomem_last_error(), "not an absolute path") != NULL);
    o = (struct seg_opts){.flags = SEG_PAGED, .paged_dir = store_dir,
                          .paged_policy = EXO_PAGER_CUSTOM};
    CHECK_ERR(seg_alloc_ex("x", test_base(3), 2 * MIB, 0600, &o, &sid), EXO_EINVAL);
    o = (struct seg_opts){.flags = SEG_PAGED, .paged_dir = store_dir, .paged_budget = 1000};
    CHECK_ERR(seg_alloc_ex("x", test_base(3), 2 * MIB, 0600, &o, &sid), EXO_EINVAL);
    o = (struct seg_opts){.flags = SEG_PAGED, .paged_dir = store_dir, .paged_unit = 2 * MIB};
    CHECK_ERR(seg_alloc_ex("x", test_base(3) + 4096, 2 * MIB, 0600, &o, &sid), EXO_EALIGN);
    CHECK_ERR(seg_find("x", &sid), EXO_ENOENT); /* nothing was made */

    /* No clone; a damaged settings record is caught at attach, not used. */
    sid = make_paged("y", test_base(3), 4 * MIB, MIB, 0);
    segid_t copy;
    CHECK_ERR(seg_clone(sid, "y2", &copy), EXO_ENOTSUP);
    char path[512];
    snprintf(path, sizeof path, "%s/segs/%llu.paged", root, (unsigned long long)sid);
    int fd = open(path, O_WRONLY);
    CHECK(fd >= 0);
    CHECK(pwrite(fd, "\xff\xff\xff\xff", 4, 12) == 4); /* the policy field */
    close(fd);
    vasid_t vid;
    CHECK_OK(vas_create("yv", 0600, &vid));
    CHECK_OK(seg_attach(vid, sid, SEG_RDWR));
    vhandle_t vh;
    CHECK_ERR(vas_attach(vid, &vh), EXO_ECORRUPT);
    CHECK_OK(vas_delete(vid));
    CHECK_OK(seg_delete(sid));
    CHECK(access(path, F_OK) != 0); /* the settings record went too */
}

int main(int argc, char **argv)
{
    if (argc > 1) { /* a child role, run by test_run_self with the parent's registry */
        if (!strcmp(argv[1], "child-round2"))
            return child_round2();
        if (!strcmp(argv[1], "child-busy"))
            return child_busy();
        if (!strcmp(argv[1], "child-walk"))
            return child_walk();
        return 2;
    }
    root = test_root_setup();
    const char *why = NULL;
    if (exo_vm_engine_supported(EXO_VM_ENGINE_UFFD, 0, &why) != 0)
        SKIP("userfaultfd is not usable here: %s\n", why ? why : "?");
    snprintf(store_dir, sizeof store_dir, "/var/tmp/exomem-test-paged-XXXXXX");
    if (!mkdtemp(store_dir))
        SKIP("cannot make a store directory under /var/tmp\n");
    atexit(remove_store_dir);
    refused();
    read_only();
    round_trip_and_other_process("park");
    round_trip_and_other_process("remap");
    heap_list("remap");
    printf("test_paged_seg: ok\n");
    return 0;
}
