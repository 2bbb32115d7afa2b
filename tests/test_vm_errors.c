/* Error paths of the Appel-Li primitives: each fails with its code, errno and a message,
 * and changes nothing. Also an engine the kernel lacks (softdirty here; uffd when
 * EXOMEM_VM_DISABLE_UFFD is set) is refused at region creation. */
#include "test_vm_util.h"
#include "os/os.h"

#include <fcntl.h>
#include <stdlib.h>

static exo_vm_action never(exo_vm_fault *f, void *arg)
{
    (void)f;
    (void)arg;
    fprintf(stderr, "handler ran on a page that should not be protected\n");
    exit(1);
}

static void uffd_disabled(void *arg)
{
    (void)arg;
    setenv("EXOMEM_VM_DISABLE_UFFD", "1", 1);
    const char *why = NULL;
    CHECK_ERR(exo_vm_engine_supported(EXO_VM_ENGINE_UFFD, 0, &why), EXO_ENOTSUP);
    CHECK(why && strstr(why, "EXOMEM_VM_DISABLE_UFFD"));
    char *mem = vm_test_map(4 * PG);
    exo_vm_region *r;
    exo_vm_options opt = {.engine = EXO_VM_ENGINE_UFFD};
    CHECK_ERR(exo_vm_region_create(mem, 4 * PG, &opt, &r), EXO_ENOTSUP);
    CHECK(strstr(exomem_last_error(), "EXOMEM_VM_DISABLE_UFFD"));
    opt.flags = EXO_VM_TRACK_DIRTY;
    CHECK_ERR(exo_vm_region_create(mem, 4 * PG, &opt, &r), EXO_ENOTSUP);
    /* AUTO falls back to the signal engine. */
    opt.engine = EXO_VM_ENGINE_AUTO;
    CHECK_OK(exo_vm_region_create(mem, 4 * PG, &opt, &r));
    CHECK_EQ(exo_vm_region_engine(r), EXO_VM_ENGINE_SIGNAL);
    CHECK_OK(exo_vm_region_destroy(r));
}

static void creation_errors(void)
{
    char *mem = vm_test_map(8 * PG);
    exo_vm_region *r = (exo_vm_region *)1;
    exo_vm_options opt = {.engine = EXO_VM_ENGINE_SIGNAL};
    CHECK_ERR(exo_vm_region_create(mem + 1, 4 * PG, &opt, &r), EXO_EALIGN);
    CHECK(r == NULL);
    CHECK(strstr(exomem_last_error(), "aligned"));
    CHECK_ERR(exo_vm_region_create(mem, 100, &opt, &r), EXO_EALIGN);
    CHECK_ERR(exo_vm_region_create(mem, 0, &opt, &r), EXO_ESIZE);
    CHECK_ERR(exo_vm_region_create(mem, 4 * PG, &opt, NULL), EXO_EINVAL);
    opt.engine = (exo_vm_engine)9;
    CHECK_ERR(exo_vm_region_create(mem, 4 * PG, &opt, &r), EXO_EINVAL);
    CHECK_ERR(exo_vm_engine_supported((exo_vm_engine)9, 0, NULL), EXO_EINVAL);
    opt.engine = EXO_VM_ENGINE_SIGNAL;
    opt.flags = 0x80;
    CHECK_ERR(exo_vm_region_create(mem, 4 * PG, &opt, &r), EXO_EINVAL);
    opt.flags = 0;

    /* Not all mapped: a hole in the middle. */
    CHECK(munmap(mem + 6 * PG, PG) == 0);
    CHECK_ERR(exo_vm_region_create(mem, 8 * PG, &opt, &r), EXO_ENOTMAPPED);
    char hole[32];
    snprintf(hole, sizeof hole, "%#lx", (unsigned long)(mem + 6 * PG));
    CHECK(strstr(exomem_last_error(), hole));
    /* Inaccessible memory. */
    CHECK(mprotect(mem + 5 * PG, PG, PROT_NONE) == 0);
    CHECK_ERR(exo_vm_region_create(mem, 6 * PG, &opt, &r), EXO_EINVAL);
    CHECK(mprotect(mem + 5 * PG, PG, PROT_READ | PROT_WRITE) == 0);

    /* Overlaps, across engines too. */
    exo_vm_region *a, *b;
    CHECK_OK(exo_vm_region_create(mem, 4 * PG, &opt, &a));
    CHECK_ERR(exo_vm_region_create(mem + 2 * PG, 4 * PG, &opt, &r), EXO_EOVERLAP);
    CHECK_ERR(exo_vm_region_create(mem, 4 * PG, &opt, &r), EXO_EOVERLAP);
    exo_vm_options dirty = {.engine = EXO_VM_ENGINE_AUTO, .flags = EXO_VM_TRACK_DIRTY};
    CHECK_ERR(exo_vm_region_create(mem + 3 * PG, PG, &dirty, &r), EXO_EOVERLAP);
    CHECK(strstr(exomem_last_error(), "overlaps"));
    CHECK_OK(exo_vm_region_create(mem + 4 * PG, 2 * PG, &dirty, &b)); /* adjacent is fine */
    CHECK_OK(exo_vm_region_destroy(b));
    CHECK_OK(exo_vm_region_destroy(a));
    CHECK_OK(exo_vm_region_create(mem + 2 * PG, 4 * PG, &opt, &a)); /* free again */
    CHECK_OK(exo_vm_region_destroy(a));
    CHECK_ERR(exo_vm_region_destroy(NULL), EXO_EINVAL);
    munmap(mem, 8 * PG);
}

static void softdirty(void)
{
    char *mem = vm_test_map(4 * PG);
    exo_vm_region *r;
    exo_vm_options opt = {.engine = EXO_VM_ENGINE_SOFTDIRTY};
    const char *why = NULL;
    CHECK_ERR(exo_vm_engine_supported(EXO_VM_ENGINE_SOFTDIRTY, 0, &why), EXO_ENOTSUP);
    CHECK_ERR(exo_vm_region_create(mem, 4 * PG, &opt, &r), EXO_EINVAL); /* trap region */
    opt.flags = EXO_VM_TRACK_DIRTY;
    if (exo_vm_engine_supported(EXO_VM_ENGINE_SOFTDIRTY, EXO_VM_TRACK_DIRTY, &why) == 0) {
        printf("softdirty is available on this kernel\n");
        CHECK_OK(exo_vm_region_create(mem, 4 * PG, &opt, &r));
        CHECK_OK(exo_vm_region_destroy(r));
    } else {
        printf("softdirty: %s\n", why);
        CHECK_ERR(exo_vm_region_create(mem, 4 * PG, &opt, &r), EXO_ENOTSUP);
        CHECK(strstr(exomem_last_error(), "soft-dirty"));
    }
    munmap(mem, 4 * PG);
}

static void call_errors(exo_vm_engine engine)
{
    char *mem = vm_test_map(8 * PG);
    exo_vm_region *trap, *dirty;
    exo_vm_options opt = {.engine = engine, .handler = never};
    CHECK_OK(exo_vm_region_create(mem, 4 * PG, &opt, &trap));
    exo_vm_options dopt = {.engine = engine, .flags = EXO_VM_TRACK_DIRTY};
    CHECK_OK(exo_vm_region_create(mem + 4 * PG, 4 * PG, &dopt, &dirty));

    /* Protection calls on a dirty region, DIRTY on a trap region. */
    void *p = mem + 4 * PG;
    CHECK_ERR(exo_vm_prot1(dirty, p, EXO_VM_READONLY), EXO_EINVAL);
    CHECK(strstr(exomem_last_error(), "dirty"));
    CHECK_ERR(exo_vm_protn(dirty, &p, 1, EXO_VM_READONLY), EXO_EINVAL);
    CHECK_ERR(exo_vm_protect(dirty, p, PG, EXO_VM_READONLY), EXO_EINVAL);
    CHECK_ERR(exo_vm_unprot(dirty, p), EXO_EINVAL);
    CHECK_ERR(exo_vm_dirty(trap, NULL, NULL), EXO_EINVAL);
    CHECK_ERR(exo_vm_dirty(NULL, NULL, NULL), EXO_EINVAL);

    /* Pages outside the region, unaligned, bad access values. */
    CHECK_ERR(exo_vm_prot1(trap, mem + 4 * PG, EXO_VM_READONLY), EXO_EINVAL);
    CHECK(strstr(exomem_last_error(), "outside"));
    CHECK_ERR(exo_vm_prot1(trap, mem - PG, EXO_VM_READONLY), EXO_EINVAL);
    CHECK_ERR(exo_vm_prot1(trap, mem + 1, EXO_VM_READONLY), EXO_EALIGN);
    CHECK_ERR(exo_vm_unprot(trap, mem + 9 * PG), EXO_EINVAL);
    CHECK_ERR(exo_vm_prot1(trap, mem, 2), EXO_EINVAL);
    CHECK_ERR(exo_vm_prot1(NULL, mem, EXO_VM_READONLY), EXO_EINVAL);
    CHECK_ERR(exo_vm_protect(trap, mem, 100, EXO_VM_READONLY), EXO_EALIGN);
    CHECK_ERR(exo_vm_protect(trap, mem + 2 * PG, 4 * PG, EXO_VM_READONLY), EXO_EINVAL);
    CHECK_ERR(exo_vm_protn(trap, NULL, 2, EXO_VM_READONLY), EXO_EINVAL);
    /* A list with one bad page changes none of the good ones. */
    void *list[] = {mem, mem + PG, mem + 6 * PG};
    CHECK_ERR(exo_vm_protn(trap, list, 3, EXO_VM_READONLY), EXO_EINVAL);
    mem[0] = 1; /* would run `never` if protected */
    mem[PG] = 1;
    CHECK_OK(exo_vm_protn(trap, list, 0, EXO_VM_READONLY));

    CHECK_OK(exo_vm_region_destroy(trap));
    CHECK_OK(exo_vm_region_destroy(dirty));
    munmap(mem, 8 * PG);
}

/* uffd cannot write-protect a regular file's pages: refused at creation, and AUTO falls
 * back to the signal engine. Read-only memory: only signal trap regions. */
static void memory_kinds(int uffd)
{
    char path[] = "/var/tmp/exomem-test-vm-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    unlink(path);
    CHECK(ftruncate(fd, 4 * PG) == 0);
    char *file = mmap(NULL, 4 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(file != MAP_FAILED);
    exo_vm_region *r;
    exo_vm_options opt = {.engine = EXO_VM_ENGINE_UFFD};
    int uffd_on_file = 0;
    if (uffd) {
        int rc = exo_vm_region_create(file, 4 * PG, &opt, &r);
        uffd_on_file = rc == 0;
        if (rc == 0) {
            printf("uffd write-protects regular files here\n");
            CHECK_OK(exo_vm_region_destroy(r));
        } else {
            CHECK_EQ(rc, -EXO_ENOTSUP);
            printf("uffd on a regular file: %s\n", exomem_last_error());
        }
    }
    /* vm.h: AUTO "picks uffd where it works, else signal". */
    opt.engine = EXO_VM_ENGINE_AUTO;
    CHECK_OK(exo_vm_region_create(file, 4 * PG, &opt, &r));
    printf("AUTO on a regular file: %s\n", exo_vm_engine_name(exo_vm_region_engine(r)));
    CHECK_EQ(exo_vm_region_engine(r), uffd_on_file ? EXO_VM_ENGINE_UFFD : EXO_VM_ENGINE_SIGNAL);
    CHECK_OK(exo_vm_region_destroy(r));
    munmap(file, 4 * PG);
    close(fd);

    char *ro = mmap(NULL, 4 * PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(ro != MAP_FAILED);
    opt.engine = EXO_VM_ENGINE_SIGNAL;
    CHECK_OK(exo_vm_region_create(ro, 4 * PG, &opt, &r));
    CHECK_OK(exo_vm_prot1(r, ro, EXO_VM_NOACCESS));
    CHECK(test_faults(ro, 0));
    CHECK_OK(exo_vm_unprot(r, ro)); /* back to read-only, not read-write */
    CHECK(!test_faults(ro, 0));
    CHECK(test_faults(ro, 1));
    CHECK_OK(exo_vm_region_destroy(r));
    opt.flags = EXO_VM_TRACK_DIRTY;
    CHECK_ERR(exo_vm_region_create(ro, 4 * PG, &opt, &r), EXO_EINVAL);
    if (uffd) {
        opt.engine = EXO_VM_ENGINE_UFFD;
        opt.flags = 0;
        CHECK_ERR(exo_vm_region_create(ro, 4 * PG, &opt, &r), EXO_EINVAL);
    }
    munmap(ro, 4 * PG);
}

/* A protection change that the kernel refuses part-way (an injected EIO on the first or the
 * second of its system calls) changes nothing: every page stays writable without a trap
 * (`never` would fail the test), and the region works afterwards. */
static void failed_protect_changes_nothing(exo_vm_engine engine)
{
    char *mem = vm_test_map(8 * PG);
    exo_vm_region *r;
    exo_vm_options opt = {.engine = engine, .handler = never};
    CHECK_OK(exo_vm_region_create(mem, 8 * PG, &opt, &r));
    void *scattered[] = {mem, mem + 2 * PG, mem + 4 * PG, mem + 6 * PG}; /* four runs */
    exo_os_fault_arm(EXO_FAULT_PROTECT, 1, EIO);
    CHECK_ERR(exo_vm_protect(r, mem, 8 * PG, EXO_VM_READONLY), EXO_EIO);
    exo_os_fault_disarm();
    CHECK(strstr(exomem_last_error(), "nothing changed"));
    for (unsigned long nth = 1; nth <= 3; nth++) { /* fail the first, second, third run */
        exo_os_fault_arm(EXO_FAULT_PROTECT, nth, EIO);
        CHECK_ERR(exo_vm_protn(r, scattered, 4, EXO_VM_READONLY), EXO_EIO);
        CHECK(exo_os_fault_fired());
        exo_os_fault_disarm();
        CHECK(strstr(exomem_last_error(), "nothing changed"));
    }
    for (size_t i = 0; i < 8; i++)
        mem[i * PG] = (char)i; /* a trap here runs `never` */
    CHECK_OK(exo_vm_protn(r, scattered, 4, EXO_VM_READONLY)); /* and it works afterwards */
    for (size_t i = 0; i < 4; i++)
        CHECK_OK(exo_vm_unprot(r, scattered[i]));
    mem[6 * PG] = 6;
    CHECK_OK(exo_vm_region_destroy(r));
    munmap(mem, 8 * PG);
}

/* The probe of the top of user space (exo_os_can_map_at, which CARAT's regions ask at
 * start-up): a failed probe says nothing, not even an injected ENOMEM, which a real probe
 * takes for "past the top"; and it leaves nothing mapped. */
static void top_probe(void)
{
    const uint64_t top = (uint64_t)1 << 47;
    bool can = true;
    exo_os_fault_arm(EXO_FAULT_MAP, 1, ENOMEM);
    CHECK(exo_os_can_map_at(top, &can) < 0);
    CHECK(exo_os_fault_fired() && can);
    exo_os_fault_disarm();
    long maps = exo_os_map_count();
    CHECK_OK(exo_os_can_map_at(top - 2 * PG, &can));   /* below the top: free or taken */
    CHECK(can);
    CHECK_OK(exo_os_can_map_at(top, &can));
    CHECK_EQ(exo_os_map_count(), maps);
}

static void map2_errors(void)
{
    exo_vm_map2 m;
    CHECK_ERR(exo_vm_map2_create(0, EXO_VM_READWRITE, EXO_VM_READWRITE, &m), EXO_ESIZE);
    CHECK_ERR(exo_vm_map2_create(100, EXO_VM_READWRITE, EXO_VM_READWRITE, &m), EXO_EALIGN);
    CHECK_ERR(exo_vm_map2_create(PG, 7, EXO_VM_READWRITE, &m), EXO_EINVAL);
    CHECK_ERR(exo_vm_map2_create(PG, EXO_VM_READWRITE, EXO_VM_READWRITE, NULL), EXO_EINVAL);
    CHECK_ERR(exo_vm_map2_fd(-1, 0, PG, EXO_VM_READWRITE, EXO_VM_READWRITE, &m), EXO_EINVAL);
    CHECK_ERR(exo_vm_map2_fd(0, 1, PG, EXO_VM_READWRITE, EXO_VM_READWRITE, &m), EXO_EALIGN);
    CHECK_ERR(exo_vm_map2_destroy(NULL), EXO_EINVAL);
}

int main(void)
{
    /* First, before this process probes anything: the child must probe afresh. */
    CHECK_EQ(test_in_child(uffd_disabled, NULL), 0);
    CHECK(!strcmp(exo_vm_engine_name(EXO_VM_ENGINE_UFFD), "uffd"));
    CHECK(!strcmp(exo_vm_engine_name(EXO_VM_ENGINE_SIGNAL), "signal"));
    CHECK(!strcmp(exo_vm_engine_name(EXO_VM_ENGINE_SOFTDIRTY), "softdirty"));
    CHECK(!strcmp(exo_vm_engine_name(EXO_VM_ENGINE_AUTO), "auto"));
    CHECK(!strcmp(exo_vm_engine_name((exo_vm_engine)42), "unknown"));
    CHECK_EQ(exo_vm_page_size(), (size_t)sysconf(_SC_PAGESIZE));
    creation_errors();
    softdirty();
    call_errors(EXO_VM_ENGINE_SIGNAL);
    int uffd = vm_test_engine_ok(EXO_VM_ENGINE_UFFD, EXO_VM_TRACK_DIRTY);
    if (uffd)
        call_errors(EXO_VM_ENGINE_UFFD);
    memory_kinds(uffd);
    failed_protect_changes_nothing(EXO_VM_ENGINE_SIGNAL);
    if (uffd)
        failed_protect_changes_nothing(EXO_VM_ENGINE_UFFD);
    map2_errors();
    top_probe();
    printf("ok\n");
    return 0;
}
