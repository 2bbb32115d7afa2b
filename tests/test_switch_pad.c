/* Padded segments (src/vas/space.c): with the park engine, a 4K segment at a 1 GiB-aligned
 * base is mapped over its size rounded up to whole GiBs, so that a switch moves whole
 * page-table pages. Checked here: the padding is one mapping with the segment, is reserved
 * (nothing else can be mapped there) and faults; two VASes with a small segment each at
 * the same base switch with their data intact; a segment of a third VAS whose base lies in
 * the padding takes the padding away, the freed range is given back, and everything still
 * switches; a foreign mapping where the padding would go keeps a segment unpadded and is
 * left untouched; detaching gives the whole range back. While the padded segments switch,
 * another thread keeps trying to map inside their GiB (with and without
 * MAP_FIXED_NOREPLACE) and must never get an address there. */
#include "harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#define KIB (UINT64_C(1) << 10)
#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)

/* The end of the mapping that contains addr, or 0 if none does. */
static uint64_t mapping_end(uint64_t addr)
{
    FILE *f = fopen("/proc/self/maps", "r");
    CHECK(f != NULL);
    char line[4600];
    uint64_t found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && lo <= addr && addr < hi)
            found = hi;
    }
    fclose(f);
    return found;
}

/* Can a page be mapped at addr without replacing anything? (It is unmapped again.) */
static int free_at(uint64_t addr, uint64_t len)
{
    void *p = mmap((void *)(uintptr_t)addr, len, PROT_READ,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED)
        return 0;
    munmap(p, len);
    return (uint64_t)(uintptr_t)p == addr;
}

static void fill(uint64_t base, uint64_t size, uint64_t tag)
{
    for (uint64_t off = 0; off < size; off += 4096)
        *(volatile uint64_t *)(base + off) = tag ^ off;
}

static void expect(uint64_t base, uint64_t size, uint64_t tag)
{
    for (uint64_t off = 0; off < size; off += 4096)
        CHECK_EQ(*(volatile uint64_t *)(base + off), tag ^ off);
}

static uint64_t probed_base;
static atomic_int stop_probing;
static atomic_long probes, violations;

/* Try to map pages all over [probed_base, +1 GiB), which padded segments own throughout. */
static void *prober(void *arg)
{
    (void)arg;
    for (unsigned k = 0; !atomic_load(&stop_probing); k++) {
        uint64_t at = probed_base + (uint64_t)(k % 16) * 64 * MIB + (k % 3) * 4096;
        for (int fixed = 0; fixed < 2; fixed++) {
            void *p = mmap((void *)(uintptr_t)at, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS |
                           (fixed ? MAP_FIXED_NOREPLACE : 0), -1, 0);
            if (p == MAP_FAILED)
                continue;
            uint64_t got = (uint64_t)(uintptr_t)p;
            if (got >= probed_base && got < probed_base + GIB)
                atomic_fetch_add(&violations, 1);
            munmap(p, 4096);
        }
        atomic_fetch_add(&probes, 1);
    }
    return NULL;
}

struct one {
    segid_t sid;
    vasid_t vid;
    vhandle_t vh;
    uint64_t base, size, tag;
};

static void make(struct one *o, const char *name, uint64_t base, uint64_t size, uint64_t tag)
{
    o->base = base;
    o->size = size;
    o->tag = tag;
    CHECK_OK(seg_alloc(name, base, size, 0600, &o->sid));
    CHECK_OK(vas_create(name, 0600, &o->vid));
    CHECK_OK(seg_attach(o->vid, o->sid, SEG_RDWR));
    CHECK_OK(vas_attach(o->vid, &o->vh));
}

static void drop(struct one *o)
{
    CHECK_OK(vas_detach(o->vh));
    CHECK_OK(seg_detach(o->vid, o->sid));
    CHECK_OK(vas_delete(o->vid));
    CHECK_OK(seg_delete(o->sid));
}

/* Switch into each VAS in turn `rounds` times, checking each one's data when it is in. */
static void rotate(struct one *const *all, int n, int rounds)
{
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < n; i++) {
            CHECK_OK(vas_switch(all[i]->vh));
            expect(all[i]->base, all[i]->size, all[i]->tag);
        }
}

int main(void)
{
    test_root_setup();
    int engine = VAS_ENGINE_PARK;
    CHECK_OK(vas_ctl(VAS_CTL_SET_ENGINE, 0, &engine));
    uint64_t base = test_base(0);

    /* Two VASes, a 64 KiB and a 2 MiB segment at the same base: both padded to 1 GiB. */
    struct one a, b;
    make(&a, "pad-a", base, 64 * KIB, 0xa1);
    make(&b, "pad-b", base, 2 * MIB, 0xb2);
    CHECK_OK(vas_switch(a.vh));
    fill(a.base, a.size, a.tag);
    CHECK_EQ(mapping_end(base), base + GIB);
    CHECK(!free_at(base + 512 * MIB, 4096));      /* the padding is reserved */
    CHECK(test_faults((const void *)(uintptr_t)(base + 64 * KIB), 0)); /* and faults */
    CHECK_OK(vas_switch(b.vh));
    fill(b.base, b.size, b.tag);
    CHECK_EQ(mapping_end(base), base + GIB);
    struct vas_park_stats before, after;
    CHECK_OK(vas_ctl(VAS_CTL_PARK_STATS, 0, &before));
    struct one *ab[] = {&a, &b};
    probed_base = base;
    pthread_t th;
    CHECK_OK(pthread_create(&th, NULL, prober, NULL));
    rotate(ab, 2, 100);
    CHECK_OK(vas_ctl(VAS_CTL_PARK_STATS, 0, &after));
    CHECK_EQ(after.maps, before.maps);               /* every switch moved page tables */
    CHECK_EQ(after.moves - before.moves, 2 * 200);
    CHECK_EQ(after.switches - before.switches, 200);
    CHECK(after.remap_ns > before.remap_ns);
    while (atomic_load(&probes) < 50) /* the prober must have run between switches */
        rotate(ab, 2, 1);
    atomic_store(&stop_probing, 1);
    CHECK_OK(pthread_join(th, NULL));
    CHECK_EQ(atomic_load(&violations), 0);
    CHECK(!free_at(base + 512 * MIB, 4096));

    /* A third VAS's segment inside the padding: the padding goes, the rest is given back. */
    struct one c;
    make(&c, "pad-c", base + 512 * MIB, 64 * KIB, 0xc3);
    CHECK_EQ(mapping_end(base), base + 2 * MIB);   /* b is in; a's and b's padding gone */
    CHECK(free_at(base + 256 * MIB, 4096));
    CHECK(free_at(base + 768 * MIB, 4096));
    CHECK_OK(vas_switch(c.vh));
    fill(c.base, c.size, c.tag);
    CHECK(test_faults((const void *)(uintptr_t)base, 0));
    struct one *abc[] = {&a, &b, &c};
    rotate(abc, 3, 50);
    CHECK_OK(vas_switch(a.vh));
    CHECK_EQ(mapping_end(base), base + 64 * KIB);
    CHECK(test_faults((const void *)(uintptr_t)c.base, 0));
    drop(&c);
    rotate(ab, 2, 20);

    /* A foreign mapping where the padding would go: the segment does without. */
    uint64_t base2 = test_base(1);
    unsigned char *foreign = mmap((void *)(uintptr_t)(base2 + 128 * MIB), 4096,
                                  PROT_READ | PROT_WRITE,
                                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    CHECK(foreign != MAP_FAILED);
    memset(foreign, 0x5a, 4096);
    struct one d;
    make(&d, "pad-d", base2, 64 * KIB, 0xd4);
    CHECK_OK(vas_switch(d.vh));
    fill(d.base, d.size, d.tag);
    CHECK_EQ(mapping_end(base2), base2 + 64 * KIB);
    struct one *abd[] = {&a, &b, &d};
    rotate(abd, 3, 20);
    CHECK_EQ(foreign[0], 0x5a);
    CHECK_EQ(foreign[4095], 0x5a);
    munmap(foreign, 4096);

    /* Detached, every range is given back. */
    CHECK_OK(vas_switch(VAS_HOME));
    drop(&a);
    drop(&b);
    drop(&d);
    CHECK(free_at(base, GIB));
    CHECK(free_at(base2, GIB));
    printf("test_switch_pad: ok\n");
    return 0;
}
