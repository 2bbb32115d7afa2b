/* A switch never leaves a hole in the address space: while the main thread switches between
 * two VASes thousands of times, another thread mmaps and munmaps in a loop (anywhere, with
 * hints at the segment bases and the parking slots, and with MAP_FIXED_NOREPLACE there).
 * It must never get an address inside a segment's range or a parking slot, its own mappings
 * must never change under it, and the segments' data must stay intact. */
#include "harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MIB (UINT64_C(1) << 20)
#define SEG_SIZE (4 * MIB)
#define SWITCHES 3000
#define MAX_RANGES 64

struct range {
    uint64_t start, end;
};

/* Ranges the mapping thread must never be given: segment bases and parking slots. */
static struct range forbidden[MAX_RANGES];
static int nforbidden;

static atomic_int stop;
static atomic_long violations, thread_maps;

static void add_forbidden(uint64_t start, uint64_t end)
{
    for (int i = 0; i < nforbidden; i++)
        if (forbidden[i].start == start && forbidden[i].end == end)
            return;
    CHECK(nforbidden < MAX_RANGES);
    forbidden[nforbidden].start = start;
    forbidden[nforbidden].end = end;
    nforbidden++;
}

/* Every mapping of a registry data file (segments at their bases or parked) is exomem's. */
static void collect_exomem_mappings(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    CHECK(f != NULL);
    char line[4600];
    const char *root = exomem_root();
    while (fgets(line, sizeof line, f)) {
        unsigned long start, end;
        if (sscanf(line, "%lx-%lx", &start, &end) == 2 && strstr(line, root))
            add_forbidden(start, end);
    }
    fclose(f);
}

static int overlaps_forbidden(uint64_t start, uint64_t len)
{
    for (int i = 0; i < nforbidden; i++)
        if (start < forbidden[i].end && forbidden[i].start < start + len)
            return 1;
    return 0;
}

/* Map, check where it landed, fill with a pattern, check the pattern, unmap. */
static void probe_map(void *hint, size_t len, int flags, unsigned seed)
{
    unsigned char *p = mmap(hint, len, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
    if (p == MAP_FAILED)
        return;   /* refused: fine (MAP_FIXED_NOREPLACE over a reservation) */
    atomic_fetch_add(&thread_maps, 1);
    if (overlaps_forbidden((uint64_t)p, len)) {
        fprintf(stderr, "mapping thread got %p+%#zx (hint %p) inside exomem's ranges\n",
                (void *)p, len, hint);
        atomic_fetch_add(&violations, 1);
    }
    for (size_t off = 0; off < len; off += 4096)
        p[off] = (unsigned char)(seed + off / 4096);
    sched_yield();
    for (size_t off = 0; off < len; off += 4096)
        if (p[off] != (unsigned char)(seed + off / 4096)) {
            fprintf(stderr, "mapping thread's page %p changed under it\n", (void *)(p + off));
            atomic_fetch_add(&violations, 1);
            break;
        }
    munmap(p, len);
}

static void *mapper_main(void *arg)
{
    (void)arg;
    unsigned seed = 1;
    static const size_t sizes[] = {4096, 64 * 1024, 2 * MIB, 4 * MIB, 8 * MIB};
    while (!atomic_load(&stop)) {
        seed++;
        probe_map(NULL, sizes[seed % 5], 0, seed);
        int i = (int)(seed % (unsigned)nforbidden);
        void *hint = (void *)forbidden[i].start;
        size_t len = 4096 << (seed % 4);
        probe_map(hint, len, 0, seed);
        probe_map(hint, len, MAP_FIXED_NOREPLACE, seed);
        probe_map((void *)(forbidden[i].end - 4096), 8192, MAP_FIXED_NOREPLACE, seed);
    }
    return NULL;
}

static void fill(uint64_t base, uint64_t tag)
{
    for (uint64_t off = 0; off < SEG_SIZE; off += 4096)
        *(volatile uint64_t *)(base + off) = tag ^ off;
}

static void expect(uint64_t base, uint64_t tag)
{
    for (uint64_t off = 0; off < SEG_SIZE; off += 4096)
        if (*(volatile uint64_t *)(base + off) != (tag ^ off)) {
            fprintf(stderr, "segment at %#" PRIx64 " lost its data at %#" PRIx64 "\n", base,
                    off);
            exit(1);
        }
}

static void run(int engine, vhandle_t h1, vhandle_t h2)
{
    CHECK_OK(vas_ctl(VAS_CTL_SET_ENGINE, 0, &engine));
    nforbidden = 0;
    add_forbidden(test_base(0), test_base(0) + SEG_SIZE);
    add_forbidden(test_base(1), test_base(1) + SEG_SIZE);
    add_forbidden(test_base(2), test_base(2) + SEG_SIZE);
    /* Warm up so that both VASes are parked somewhere, then learn where. */
    for (int i = 0; i < 3; i++) {
        CHECK_OK(vas_switch(h1));
        collect_exomem_mappings();
        CHECK_OK(vas_switch(h2));
        collect_exomem_mappings();
    }
    CHECK_OK(vas_switch(h1));
    fill(test_base(0), 0xa1 + (uint64_t)engine);
    fill(test_base(2), 0xc1 + (uint64_t)engine);
    CHECK_OK(vas_switch(h2));
    fill(test_base(1), 0xb1 + (uint64_t)engine);

    atomic_store(&stop, 0);
    atomic_store(&violations, 0);
    atomic_store(&thread_maps, 0);
    pthread_t th;
    CHECK_OK(pthread_create(&th, NULL, mapper_main, NULL));
    for (int i = 0; i < SWITCHES; i++) {
        CHECK_OK(vas_switch(i % 2 ? h2 : h1));
        if (i % 100 == 0) {
            if (i % 2) {
                expect(test_base(1), 0xb1 + (uint64_t)engine);
            } else {
                expect(test_base(0), 0xa1 + (uint64_t)engine);
            }
            expect(test_base(2), 0xc1 + (uint64_t)engine);
        }
    }
    atomic_store(&stop, 1);
    CHECK_OK(pthread_join(th, NULL));
    CHECK(atomic_load(&thread_maps) > 0);
    CHECK_EQ(atomic_load(&violations), 0);

    CHECK_OK(vas_switch(h1));
    expect(test_base(0), 0xa1 + (uint64_t)engine);
    expect(test_base(2), 0xc1 + (uint64_t)engine);
    CHECK(test_faults((const void *)test_base(1), 0));
    CHECK_OK(vas_switch(h2));
    expect(test_base(1), 0xb1 + (uint64_t)engine);
    expect(test_base(2), 0xc1 + (uint64_t)engine);
    CHECK(test_faults((const void *)test_base(0), 0));
    CHECK_OK(vas_switch(VAS_HOME));
}

int main(void)
{
    test_root_setup();
    segid_t s0, s1, s2;
    vasid_t v1, v2;
    CHECK_OK(seg_alloc("a", test_base(0), SEG_SIZE, 0600, &s0));
    CHECK_OK(seg_alloc("b", test_base(1), SEG_SIZE, 0600, &s1));
    CHECK_OK(seg_alloc("shared", test_base(2), SEG_SIZE, 0600, &s2));
    CHECK_OK(vas_create("v1", 0600, &v1));
    CHECK_OK(seg_attach(v1, s0, SEG_RDWR));
    CHECK_OK(seg_attach(v1, s2, SEG_RDWR));
    CHECK_OK(vas_create("v2", 0600, &v2));
    CHECK_OK(seg_attach(v2, s1, SEG_RDWR));
    CHECK_OK(seg_attach(v2, s2, SEG_RDWR));
    vhandle_t h1, h2;
    CHECK_OK(vas_attach(v1, &h1));
    CHECK_OK(vas_attach(v2, &h2));

    run(VAS_ENGINE_PARK, h1, h2);
    run(VAS_ENGINE_REMAP, h1, h2);

    CHECK_OK(vas_detach(h1));
    CHECK_OK(vas_detach(h2));
    CHECK_OK(seg_detach(v1, s0));
    CHECK_OK(seg_detach(v1, s2));
    CHECK_OK(seg_detach(v2, s1));
    CHECK_OK(seg_detach(v2, s2));
    CHECK_OK(vas_delete(v1));
    CHECK_OK(vas_delete(v2));
    CHECK_OK(seg_delete(s0));
    CHECK_OK(seg_delete(s1));
    CHECK_OK(seg_delete(s2));
    printf("test_nohole: ok\n");
    return 0;
}
