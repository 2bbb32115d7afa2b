/* MAP2: two views of the same memory stay coherent, each keeps its own protection, and a
 * region on view a traps while a collector reads and writes through view b. Also MAP2 over
 * a /dev/shm file and over an exomem segment's data file, and a region on a segment. */
#include "test_vm_util.h"

#include <fcntl.h>
#include <stdatomic.h>

static atomic_int traps;

static exo_vm_action unprot_handler(exo_vm_fault *f, void *arg)
{
    (void)arg;
    atomic_fetch_add(&traps, 1);
    return exo_vm_unprot(f->region, f->page) == 0 ? EXO_VM_RESUME : EXO_VM_DECLINE;
}

static void coherence(void)
{
    exo_vm_map2 m;
    CHECK_OK(exo_vm_map2_create(16 * PG, EXO_VM_READWRITE, EXO_VM_READONLY, &m));
    CHECK(m.a != m.b && m.len == 16 * PG && m.fd >= 0 && m.owns_fd);
    char *a = m.a, *b = m.b;
    for (size_t i = 0; i < 16 * PG; i += 512)
        a[i] = (char)(i / 512);
    for (size_t i = 0; i < 16 * PG; i += 512)
        CHECK_EQ(b[i], (char)(i / 512));
    CHECK(test_faults(b, 1));   /* view b is read-only */
    CHECK(!test_faults(b, 0));
    CHECK(!test_faults(a, 1));
    CHECK_OK(exo_vm_map2_destroy(&m));
    CHECK(m.a == NULL && m.fd == -1);
}

/* The collector's pattern: view a (the mutator's) protected, view b (the collector's) not. */
static void region_on_view(exo_vm_engine engine)
{
    exo_vm_map2 m;
    CHECK_OK(exo_vm_map2_create(8 * PG, EXO_VM_READWRITE, EXO_VM_READWRITE, &m));
    char *a = m.a, *b = m.b;
    exo_vm_options opt = {.engine = engine, .handler = unprot_handler};
    exo_vm_region *r;
    CHECK_OK(exo_vm_region_create(a, 8 * PG, &opt, &r));
    CHECK_EQ(exo_vm_region_engine(r), engine);
    int access = engine == EXO_VM_ENGINE_SIGNAL ? EXO_VM_NOACCESS : EXO_VM_READONLY;
    CHECK_OK(exo_vm_protect(r, a, 8 * PG, access));
    atomic_store(&traps, 0);
    for (size_t i = 0; i < 8; i++) { /* the collector works through b: no trap */
        b[i * PG] = (char)('A' + i);
        CHECK_EQ(b[i * PG], 'A' + (char)i);
    }
    CHECK_EQ(atomic_load(&traps), 0);
    if (engine == EXO_VM_ENGINE_SIGNAL) {
        CHECK_EQ(((volatile char *)a)[3 * PG], 'D'); /* the mutator reads: trap, then sees b's write */
        CHECK_EQ(atomic_load(&traps), 1);
    }
    ((volatile char *)a)[5 * PG + 1] = 'm';  /* the mutator writes: trap */
    CHECK_EQ(atomic_load(&traps), engine == EXO_VM_ENGINE_SIGNAL ? 2 : 1);
    CHECK_EQ(b[5 * PG + 1], 'm');
    CHECK_OK(exo_vm_region_destroy(r));
    CHECK_OK(exo_vm_map2_destroy(&m));
}

static void shm_file(void)
{
    char path[64];
    snprintf(path, sizeof path, "/dev/shm/exomem-test-vm-%d", (int)getpid());
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    unlink(path);
    CHECK(ftruncate(fd, 8 * PG) == 0);
    exo_vm_map2 m;
    CHECK_OK(exo_vm_map2_fd(fd, 4 * PG, 4 * PG, EXO_VM_READONLY, EXO_VM_READWRITE, &m));
    CHECK(!m.owns_fd && m.fd == fd);
    ((char *)m.b)[10] = 'q';
    CHECK_EQ(((char *)m.a)[10], 'q');
    char c;
    CHECK(pread(fd, &c, 1, 4 * PG + 10) == 1 && c == 'q'); /* the offset is honoured */
    CHECK(test_faults(m.a, 1));
    CHECK_OK(exo_vm_map2_destroy(&m));
    CHECK(fcntl(fd, F_GETFD) >= 0); /* the caller's fd stays open */
    close(fd);
}

/* A dirty region on a visible exomem segment, and MAP2 over the segment's data file. */
static void segment(const char *root)
{
    uint64_t base = test_base(0);
    segid_t sid;
    vasid_t vid;
    vhandle_t vh;
    CHECK_OK(seg_alloc("vmseg", base, 16 * PG, 0600, &sid));
    CHECK_OK(vas_create("vmvas", 0600, &vid));
    CHECK_OK(seg_attach(vid, sid, SEG_RDWR));
    CHECK_OK(vas_attach(vid, &vh));
    CHECK_OK(vas_switch(vh));
    char *mem = (char *)base;

    exo_vm_options opt = {.flags = EXO_VM_TRACK_DIRTY}; /* AUTO */
    exo_vm_region *r;
    CHECK_OK(exo_vm_region_create(mem, 16 * PG, &opt, &r));
    printf("  dirty region on a segment: engine %s\n", exo_vm_engine_name(exo_vm_region_engine(r)));
    CHECK_EQ(exo_vm_dirty(r, NULL, NULL), 0);
    mem[2 * PG] = 1;
    mem[9 * PG] = 1;
    CHECK_EQ(exo_vm_dirty(r, NULL, NULL), 2);
    CHECK_EQ(exo_vm_dirty(r, NULL, NULL), 0);

    char path[4200];
    snprintf(path, sizeof path, "%s/segs/%llu.data", root, (unsigned long long)sid);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    CHECK(fd >= 0);
    exo_vm_map2 m;
    CHECK_OK(exo_vm_map2_fd(fd, 0, 16 * PG, EXO_VM_READWRITE, EXO_VM_READONLY, &m));
    ((char *)m.a)[3 * PG] = 'S';
    CHECK_EQ(mem[3 * PG], 'S');
    CHECK_EQ(((char *)m.b)[3 * PG], 'S');
    /* Writes through another view are not writes through the region's mapping. */
    CHECK_EQ(exo_vm_dirty(r, NULL, NULL), 0);
    CHECK_OK(exo_vm_map2_destroy(&m));
    close(fd);

    CHECK_OK(exo_vm_region_destroy(r));
    CHECK_OK(vas_switch(VAS_HOME));
    CHECK_OK(vas_detach(vh));
    CHECK_OK(vas_delete(vid));
    CHECK_OK(seg_delete(sid));
}

int main(void)
{
    /* First: the library reads its environment (EXOMEM_ROOT among it) once, at its first
     * call of any kind. */
    const char *root = test_root_setup();
    coherence();
    vm_test_each_trap_engine(region_on_view);
    shm_file();
    segment(root);
    printf("ok\n");
    return 0;
}
