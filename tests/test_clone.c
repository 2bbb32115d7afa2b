/* Cloning, metadata and process-local attachments: seg_clone copies data and metadata,
 * vas_clone lists the same (shared) segments, SEG_CTL_INFO/VAS_CTL_INFO report what was
 * made, seg_attach_local touches only the calling process, vas_delete leaves segments, and
 * deleting everything leaves the registry empty. */
#include "harness.h"

#include <dirent.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MIB (UINT64_C(1) << 20)
#define SEG_SIZE (4 * MIB)

static int64_t t_start;

static void fill(uint64_t base, uint64_t size, uint64_t tag)
{
    for (uint64_t off = 0; off < size; off += 4096)
        *(volatile uint64_t *)(base + off) = tag ^ off;
}

static void expect(uint64_t base, uint64_t size, uint64_t tag)
{
    for (uint64_t off = 0; off < size; off += 4096) {
        uint64_t v = *(volatile uint64_t *)(base + off);
        if (v != (tag ^ off)) {
            fprintf(stderr, "at %#" PRIx64 ": %#" PRIx64 ", expected %#" PRIx64 "\n",
                    base + off, v, tag ^ off);
            exit(1);
        }
    }
}

static void check_seg_info(segid_t sid, const char *name, uint64_t base, uint64_t size,
                           mode_t mode)
{
    struct seg_info si;
    memset(&si, 0xa5, sizeof si);
    CHECK_OK(seg_ctl(sid, SEG_CTL_INFO, &si));
    CHECK_EQ(si.id, sid);
    CHECK(!strcmp(si.name, name));
    CHECK_EQ(si.base, base);
    CHECK_EQ(si.size, size);
    CHECK_EQ(si.page_size, SEG_PAGE_4K);
    CHECK_EQ(si.mode & 07777, mode);
    CHECK_EQ(si.uid, geteuid());
    CHECK_EQ(si.gid, getegid());
    CHECK_EQ(si.flags, 0);
    CHECK(si.created >= t_start - 2 && si.created <= (int64_t)time(NULL) + 2);
}

static void check_vas_info(vasid_t vid, const char *name, mode_t mode, unsigned nsegs,
                           const segid_t *sids, const char *const *names, const int *flags)
{
    static struct vas_info vi;
    memset(&vi, 0xa5, sizeof vi);
    CHECK_OK(vas_ctl(VAS_CTL_INFO, vid, &vi));
    CHECK_EQ(vi.id, vid);
    CHECK(!strcmp(vi.name, name));
    CHECK_EQ(vi.mode & 07777, mode);
    CHECK_EQ(vi.uid, geteuid());
    CHECK_EQ(vi.gid, getegid());
    CHECK_EQ(vi.heap, 0);
    CHECK(vi.created >= t_start - 2 && vi.created <= (int64_t)time(NULL) + 2);
    CHECK_EQ(vi.nsegs, nsegs);
    for (unsigned i = 0; i < nsegs; i++) {
        CHECK_EQ(vi.segs[i].sid, sids[i]);
        CHECK(!strcmp(vi.segs[i].name, names[i]));
        CHECK_EQ(vi.segs[i].flags, flags[i]);
    }
}

/* Entries in $EXOMEM_ROOT/<dir>, other than . and .. */
static int dir_entries(const char *dir)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", exomem_root(), dir);
    DIR *d = opendir(path);
    if (!d)
        return 0;   /* a missing directory is empty */
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            fprintf(stderr, "left in registry: %s/%s\n", dir, e->d_name);
            n++;
        }
    closedir(d);
    return n;
}

/* A separate process, forked before the parent attached anything, attaches VAS `vid` once
 * told to (a byte on `go`) and checks that the parent's local segment at `local_base` is
 * not part of it. */
static pid_t spawn_outsider(vasid_t vid, uint64_t local_base, int *go_fd)
{
    int p[2];
    CHECK_OK(pipe(p));
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(p[1]);
        char c;
        if (read(p[0], &c, 1) != 1)
            _exit(2);
        vhandle_t vh;
        CHECK_OK(vas_attach(vid, &vh));
        CHECK_OK(vas_switch(vh));
        CHECK(test_faults((const void *)local_base, 0));
        struct vas_info vi;
        CHECK_OK(vas_ctl(VAS_CTL_INFO, vid, &vi));
        CHECK_EQ(vi.nsegs, 2);
        CHECK_OK(vas_detach(vh));
        _exit(0);
    }
    close(p[0]);
    *go_fd = p[1];
    return pid;
}

int main(void)
{
    test_root_setup();
    t_start = (int64_t)time(NULL);

    segid_t s, t, l;
    vasid_t v;
    CHECK_OK(seg_alloc("orig", test_base(0), SEG_SIZE, 0640, &s));
    CHECK_OK(seg_alloc("other", test_base(1), SEG_SIZE, 0600, &t));
    CHECK_OK(seg_alloc("local", test_base(2), SEG_SIZE, 0600, &l));
    CHECK(s != 0 && t != 0 && l != 0 && s != t && t != l && s != l);
    check_seg_info(s, "orig", test_base(0), SEG_SIZE, 0640);
    check_seg_info(t, "other", test_base(1), SEG_SIZE, 0600);
    segid_t found;
    CHECK_OK(seg_find("other", &found));
    CHECK_EQ(found, t);

    CHECK_OK(vas_create("v", 0640, &v));
    CHECK(v != 0);
    check_vas_info(v, "v", 0640, 0, NULL, NULL, NULL);
    CHECK_OK(seg_attach(v, s, SEG_RDWR));
    CHECK_OK(seg_attach(v, t, SEG_RDONLY));
    const segid_t sids[] = {s, t};
    const char *const names[] = {"orig", "other"};
    const int flags[] = {SEG_RDWR, SEG_RDONLY};
    check_vas_info(v, "v", 0640, 2, sids, names, flags);
    vasid_t vfound;
    CHECK_OK(vas_find("v", &vfound));
    CHECK_EQ(vfound, v);

    int go_fd;
    pid_t outsider = spawn_outsider(v, test_base(2), &go_fd);

    /* Data in the original. */
    vhandle_t vh;
    CHECK_OK(vas_attach(v, &vh));
    CHECK_OK(vas_switch(vh));
    fill(test_base(0), SEG_SIZE, 0x1111);
    CHECK_OK(vas_switch(VAS_HOME));

    /* seg_clone: same base, size, page size and mode; new id and name; a copy of the data
     * that is not shared with the original. */
    segid_t sc;
    CHECK_OK(seg_clone(s, "orig-copy", &sc));
    CHECK(sc != s && sc != t && sc != l);
    check_seg_info(sc, "orig-copy", test_base(0), SEG_SIZE, 0640);
    check_seg_info(s, "orig", test_base(0), SEG_SIZE, 0640);
    vasid_t vc;
    vhandle_t vch;
    CHECK_OK(vas_create("vcopy", 0600, &vc));
    CHECK_OK(seg_attach(vc, sc, SEG_RDWR));
    CHECK_OK(vas_attach(vc, &vch));
    CHECK_OK(vas_switch(vch));
    expect(test_base(0), SEG_SIZE, 0x1111);
    fill(test_base(0), SEG_SIZE, 0x2222);
    CHECK_OK(vas_switch(vh));
    expect(test_base(0), SEG_SIZE, 0x1111);
    CHECK_OK(vas_switch(vch));
    expect(test_base(0), SEG_SIZE, 0x2222);
    CHECK_OK(vas_switch(VAS_HOME));
    /* The clone may get its own permissions. */
    mode_t m = 0604;
    CHECK_OK(seg_ctl(sc, SEG_CTL_SET_MODE, &m));
    check_seg_info(sc, "orig-copy", test_base(0), SEG_SIZE, 0604);
    check_seg_info(s, "orig", test_base(0), SEG_SIZE, 0640);

    /* vas_clone: the same segments with the same access and mode; the segments are shared. */
    vasid_t v2;
    CHECK_OK(vas_clone(v, "v-clone", &v2));
    CHECK(v2 != v && v2 != vc);
    check_vas_info(v2, "v-clone", 0640, 2, sids, names, flags);
    m = 0600;
    CHECK_OK(vas_ctl(VAS_CTL_SET_MODE, v2, &m));
    check_vas_info(v2, "v-clone", 0600, 2, sids, names, flags);
    check_vas_info(v, "v", 0640, 2, sids, names, flags);
    vhandle_t v2h;
    CHECK_OK(vas_attach(v2, &v2h));
    CHECK(v2h != vh && v2h != vch && v2h != VAS_HOME);
    CHECK_OK(vas_switch(v2h));
    expect(test_base(0), SEG_SIZE, 0x1111);
    fill(test_base(0), SEG_SIZE, 0x3333);
    CHECK(test_faults((const void *)test_base(1), 1));   /* RDONLY in the clone too */
    CHECK(!test_faults((const void *)test_base(1), 0));
    CHECK_OK(vas_switch(vh));
    expect(test_base(0), SEG_SIZE, 0x3333);

    /* seg_attach_local: visible at once when the handle is current, in this process only,
     * and the VAS record does not list it. */
    CHECK(test_faults((const void *)test_base(2), 0));
    CHECK_OK(seg_attach_local(vh, l, SEG_RDWR));
    CHECK(!test_faults((const void *)test_base(2), 1));
    fill(test_base(2), SEG_SIZE, 0x4444);
    check_vas_info(v, "v", 0640, 2, sids, names, flags);
    CHECK_OK(vas_switch(v2h));                       /* not in the clone's attachment */
    CHECK(test_faults((const void *)test_base(2), 0));
    CHECK_OK(vas_switch(vh));
    expect(test_base(2), SEG_SIZE, 0x4444);
    /* The other process must not see it (it needs our RW lock on "orig": go home). */
    CHECK_OK(vas_switch(VAS_HOME));
    CHECK_EQ(write(go_fd, "g", 1), 1);
    close(go_fd);
    int status;
    CHECK_EQ(waitpid(outsider, &status, 0), outsider);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_OK(vas_switch(vh));
    expect(test_base(2), SEG_SIZE, 0x4444);
    /* seg_detach_local hides it at once; the rest of the VAS stays. */
    CHECK_OK(seg_detach_local(vh, l));
    CHECK(test_faults((const void *)test_base(2), 0));
    expect(test_base(0), SEG_SIZE, 0x3333);
    CHECK_ERR(seg_detach_local(vh, l), EXO_ENOENT);
    /* Attached locally while not current: visible on the next switch in. */
    CHECK_OK(vas_switch(VAS_HOME));
    CHECK_OK(seg_attach_local(vh, l, SEG_RDONLY));
    CHECK(test_faults((const void *)test_base(2), 0));
    CHECK_OK(vas_switch(vh));
    expect(test_base(2), SEG_SIZE, 0x4444);
    CHECK(test_faults((const void *)test_base(2), 1));
    /* A local segment overlapping the VAS's own is refused. */
    CHECK_ERR(seg_attach_local(vh, sc, SEG_RDWR), EXO_EOVERLAP);
    CHECK_OK(vas_switch(VAS_HOME));
    CHECK_OK(seg_detach_local(vh, l));
    check_vas_info(v, "v", 0640, 2, sids, names, flags);

    /* vas_delete leaves the segments and their data; the process keeps its attachment. */
    CHECK_OK(vas_delete(v2));
    CHECK_ERR(vas_find("v-clone", &vfound), EXO_ENOENT);
    CHECK_OK(seg_find("orig", &found));
    CHECK_EQ(found, s);
    CHECK_OK(vas_switch(v2h));
    expect(test_base(0), SEG_SIZE, 0x3333);
    CHECK_OK(vas_switch(VAS_HOME));
    CHECK_OK(vas_detach(v2h));
    CHECK_OK(vas_switch(vh));
    expect(test_base(0), SEG_SIZE, 0x3333);
    CHECK_OK(vas_switch(VAS_HOME));

    /* Delete everything: the registry is left empty. */
    CHECK_OK(vas_detach(vh));
    CHECK_OK(vas_detach(vch));
    CHECK_OK(seg_detach(v, s));
    CHECK_OK(seg_detach(v, t));
    CHECK_OK(seg_detach(vc, sc));
    check_vas_info(v, "v", 0640, 0, NULL, NULL, NULL);
    CHECK_OK(vas_delete(v));
    CHECK_OK(vas_delete(vc));
    CHECK_OK(seg_delete(s));
    CHECK_OK(seg_delete(t));
    CHECK_OK(seg_delete(l));
    CHECK_OK(seg_delete(sc));
    size_t n, corrupt;
    CHECK_OK(seg_list(NULL, 0, &n, &corrupt));
    CHECK_EQ(n, 0);
    CHECK_EQ(corrupt, 0);
    CHECK_OK(vas_list(NULL, 0, &n, &corrupt));
    CHECK_EQ(n, 0);
    CHECK_EQ(dir_entries("segs") + dir_entries("vases") + dir_entries("names"), 0);
    printf("test_clone: ok\n");
    return 0;
}
