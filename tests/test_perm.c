/* Permissions are the files' owner, group and mode: root makes segments and VASes, and a
 * child that has become nobody (uid/gid 65534) is refused what their modes refuse it, with
 * nothing changed, and allowed what they allow. Needs root; skipped otherwise. */
#include "harness.h"

#include <grp.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MIB (UINT64_C(1) << 20)
#define NOBODY 65534

static segid_t s_private, s_public, s_loose;
static vasid_t v_private, v_public_rw, v_public_ro;

/* What the registry lists, reduced to what a refused call must not change. */
struct summary {
    size_t nsegs, nvases;
    mode_t seg_mode[3];
    mode_t vas_mode[3];
    unsigned vas_nsegs[3];
};

static void summarise(struct summary *s)
{
    memset(s, 0, sizeof *s);
    CHECK_OK(seg_list(NULL, 0, &s->nsegs, NULL));
    CHECK_OK(vas_list(NULL, 0, &s->nvases, NULL));
    segid_t sids[3] = {s_private, s_public, s_loose};
    vasid_t vids[3] = {v_private, v_public_rw, v_public_ro};
    for (int i = 0; i < 3; i++) {
        struct seg_info si;
        CHECK_OK(seg_ctl(sids[i], SEG_CTL_INFO, &si));
        s->seg_mode[i] = si.mode & 07777;
        static struct vas_info vi;
        CHECK_OK(vas_ctl(VAS_CTL_INFO, vids[i], &vi));
        s->vas_mode[i] = vi.mode & 07777;
        s->vas_nsegs[i] = vi.nsegs;
    }
}

static void check_same(const struct summary *a, const struct summary *b)
{
    CHECK(!memcmp(a, b, sizeof *a));
    CHECK_EQ(vas_current(), VAS_HOME);
}

/* Nothing of ours is left mapped at addr (a refused attach undid its reservations). */
static void check_unmapped(uint64_t addr)
{
    void *p = mmap((void *)addr, MIB, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS |
                   MAP_FIXED_NOREPLACE, -1, 0);
    CHECK(p == (void *)addr);
    munmap(p, MIB);
}

static void become_nobody(void)
{
    CHECK_OK(setgroups(0, NULL));
    CHECK_OK(setgid(NOBODY));
    CHECK_OK(setuid(NOBODY));
    CHECK_EQ(geteuid(), NOBODY);
    CHECK_EQ(getegid(), NOBODY);
}

static void as_nobody(void *arg)
{
    (void)arg;
    become_nobody();

    /* Root's 0600 VAS is not nobody's to read: left out of the list, not called corrupt. */
    size_t nvases, corrupt;
    CHECK_OK(vas_list(NULL, 0, &nvases, &corrupt));
    CHECK_EQ(nvases, 3);
    CHECK_EQ(corrupt, 0);

    struct summary before, after;
    summarise(&before);   /* nobody can read the registry's metadata */
    vhandle_t vh = -1;

    /* A 0600 segment of root's: no attach, no reservation left behind. */
    CHECK_ERR(vas_attach(v_private, &vh), EXO_EACCES);
    check_unmapped(test_base(0));
    summarise(&after);
    check_same(&before, &after);

    /* A 0644 segment: read-write refused, read-only allowed. */
    CHECK_ERR(vas_attach(v_public_rw, &vh), EXO_EACCES);
    check_unmapped(test_base(1));
    summarise(&after);
    check_same(&before, &after);
    CHECK_OK(vas_attach(v_public_ro, &vh));
    CHECK_OK(vas_switch(vh));
    CHECK_EQ(*(volatile uint64_t *)test_base(1), 0xfeed);
    CHECK(test_faults((const void *)test_base(1), 1));
    CHECK_OK(vas_switch(VAS_HOME));
    CHECK_OK(vas_detach(vh));
    /* A process-local RW attachment is refused the same way. */
    CHECK_OK(vas_attach(v_public_ro, &vh));
    CHECK_ERR(seg_attach_local(vh, s_loose, SEG_RDWR), EXO_EACCES);
    CHECK_OK(vas_detach(vh));

    /* Only the owner or root may delete or change modes. */
    CHECK_ERR(seg_delete(s_loose), EXO_EPERM);
    mode_t m = 0666;
    CHECK_ERR(seg_ctl(s_public, SEG_CTL_SET_MODE, &m), EXO_EPERM);
    CHECK_ERR(vas_ctl(VAS_CTL_SET_MODE, v_private, &m), EXO_EPERM);
    CHECK_ERR(vas_delete(v_private), EXO_EPERM);
    /* Nor may nobody change a VAS's list of segments. */
    CHECK_ERR(seg_attach(v_private, s_loose, SEG_RDONLY), EXO_EACCES);
    CHECK_ERR(seg_detach(v_public_ro, s_public), EXO_EACCES);
    summarise(&after);
    check_same(&before, &after);
}

/* After root made the segment 0666, nobody may write it. */
static void as_nobody_rw(void *arg)
{
    (void)arg;
    become_nobody();
    vhandle_t vh;
    CHECK_OK(vas_attach(v_public_rw, &vh));
    CHECK_OK(vas_switch(vh));
    CHECK_EQ(*(volatile uint64_t *)test_base(1), 0xfeed);
    *(volatile uint64_t *)test_base(1) = 0xbeef;
    CHECK_OK(vas_switch(VAS_HOME));
    CHECK_OK(vas_detach(vh));
}

int main(void)
{
    if (geteuid() != 0)
        SKIP("needs root to create objects as one user and use them as another");
    test_root_setup();
    CHECK_OK(seg_alloc("private", test_base(0), MIB, 0600, &s_private));
    CHECK_OK(seg_alloc("public", test_base(1), MIB, 0644, &s_public));
    CHECK_OK(seg_alloc("loose", test_base(2), MIB, 0644, &s_loose));
    CHECK_OK(vas_create("vprivate", 0644, &v_private));
    CHECK_OK(seg_attach(v_private, s_private, SEG_RDWR));
    CHECK_OK(vas_create("vpublic-rw", 0644, &v_public_rw));
    CHECK_OK(seg_attach(v_public_rw, s_public, SEG_RDWR));
    CHECK_OK(vas_create("vpublic-ro", 0644, &v_public_ro));
    CHECK_OK(seg_attach(v_public_ro, s_public, SEG_RDONLY));
    vasid_t v_hidden;
    CHECK_OK(vas_create("vhidden", 0600, &v_hidden));

    vhandle_t vh;
    CHECK_OK(vas_attach(v_public_rw, &vh));
    CHECK_OK(vas_switch(vh));
    *(volatile uint64_t *)test_base(1) = 0xfeed;
    CHECK_OK(vas_switch(VAS_HOME));
    CHECK_OK(vas_detach(vh));

    /* Nobody is done in a child, forked while this process has nothing attached. */
    CHECK_EQ(test_in_child(as_nobody, NULL), 0);

    /* Root may still do everything, and the refused calls changed nothing. */
    struct seg_info si;
    CHECK_OK(seg_ctl(s_public, SEG_CTL_INFO, &si));
    CHECK_EQ(si.mode & 07777, 0644);
    CHECK_EQ(si.uid, 0);
    mode_t m = 0666;
    CHECK_OK(seg_ctl(s_public, SEG_CTL_SET_MODE, &m));
    CHECK_OK(seg_ctl(s_public, SEG_CTL_INFO, &si));
    CHECK_EQ(si.mode & 07777, 0666);

    /* With 0666, nobody may attach read-write now. */
    CHECK_EQ(test_in_child(as_nobody_rw, NULL), 0);
    CHECK_OK(vas_attach(v_public_ro, &vh));
    CHECK_OK(vas_switch(vh));
    CHECK_EQ(*(volatile uint64_t *)test_base(1), 0xbeef);
    CHECK_OK(vas_switch(VAS_HOME));
    CHECK_OK(vas_detach(vh));

    CHECK_OK(seg_detach(v_private, s_private));
    CHECK_OK(seg_detach(v_public_rw, s_public));
    CHECK_OK(seg_detach(v_public_ro, s_public));
    CHECK_OK(vas_delete(v_private));
    CHECK_OK(vas_delete(v_public_rw));
    CHECK_OK(vas_delete(v_public_ro));
    CHECK_OK(seg_delete(s_private));
    CHECK_OK(seg_delete(s_public));
    CHECK_OK(seg_delete(s_loose));
    printf("test_perm: ok\n");
    return 0;
}
