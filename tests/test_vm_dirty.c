/* DIRTY on each engine the kernel has: exactly the pages written (populated or not) are
 * reported, reads are not, a second call is empty, a callback may stop early without losing
 * pages, and a writer thread running during the calls loses no write. */
#include "test_vm_util.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#define NPAGES 64

struct seen {
    char *base;
    unsigned char page[NPAGES];
    long runs;
    long stop_after; /* stop after this many runs (0: never) */
    uintptr_t last_end;
};

static int collect(void *addr, size_t len, void *arg)
{
    struct seen *s = arg;
    CHECK((uintptr_t)addr % PG == 0 && len % PG == 0 && len > 0);
    CHECK((uintptr_t)addr >= s->last_end); /* address order, no overlap */
    s->last_end = (uintptr_t)addr + len;
    for (size_t off = 0; off < len; off += PG) {
        size_t i = (size_t)((char *)addr + off - s->base) / PG;
        CHECK(i < NPAGES);
        CHECK(!s->page[i]);
        s->page[i] = 1;
    }
    s->runs++;
    return s->stop_after && s->runs >= s->stop_after;
}

/* Call exo_vm_dirty and check that the pages reported are exactly `want`. */
static void expect_dirty(exo_vm_region *r, char *base, const int *want, size_t n,
                         long stop_after)
{
    struct seen s = {.base = base, .stop_after = stop_after};
    long got = exo_vm_dirty(r, collect, &s);
    CHECK(got >= 0);
    long count = 0;
    for (size_t i = 0; i < NPAGES; i++) {
        int expected = 0;
        for (size_t k = 0; k < n; k++)
            expected |= want[k] == (int)i;
        if (s.page[i] != expected) {
            fprintf(stderr, "page %zu: reported %d, expected %d\n", i, s.page[i], expected);
            exit(1);
        }
        count += expected;
    }
    CHECK_EQ(got, count);
}

static void exact_sets(exo_vm_engine engine)
{
    char *mem = vm_test_map(NPAGES * PG);
    for (int i = 0; i < NPAGES / 2; i++) /* the upper half stays unpopulated */
        mem[i * PG] = 1;
    exo_vm_options opt = {.engine = engine, .flags = EXO_VM_TRACK_DIRTY};
    exo_vm_region *r;
    CHECK_OK(exo_vm_region_create(mem, NPAGES * PG, &opt, &r));
    CHECK_EQ(exo_vm_region_engine(r), engine);
    expect_dirty(r, mem, NULL, 0, 0);

    int first[] = {0, 1, 2, 10, 33, 40, 41, 63};
    for (size_t k = 0; k < sizeof first / sizeof first[0]; k++)
        ((volatile char *)mem)[first[k] * PG + 17] = 'd';
    (void)((volatile char *)mem)[5 * PG];  /* reads, populated and not, are not writes */
    (void)((volatile char *)mem)[50 * PG];
    expect_dirty(r, mem, first, sizeof first / sizeof first[0], 0);
    expect_dirty(r, mem, NULL, 0, 0);

    int second[] = {2, 45};
    ((volatile char *)mem)[2 * PG] = 'e';
    ((volatile char *)mem)[45 * PG + 4095] = 'e';
    expect_dirty(r, mem, second, 2, 0);

    /* Stop after the first run: the others stay dirty for the next call. */
    int third[] = {3, 20, 21, 30}, third_a[] = {3}, third_b[] = {20, 21, 30};
    for (size_t k = 0; k < 4; k++)
        ((volatile char *)mem)[third[k] * PG] = 'f';
    expect_dirty(r, mem, third_a, 1, 1);
    expect_dirty(r, mem, third_b, 3, 0);
    expect_dirty(r, mem, NULL, 0, 0);

    /* Destroy: writes go through untracked, contents kept. */
    CHECK_OK(exo_vm_region_destroy(r));
    mem[33 * PG] = 'g';
    CHECK_EQ(mem[33 * PG + 17], 'd');
    munmap(mem, NPAGES * PG);
}

/* --- a writer thread during the calls: the callback copies each reported page into a
 * shadow (an incremental checkpoint); at the end the shadow must equal the memory.
 *
 * Overlap is arranged, not hoped for: every callback (which runs inside exo_vm_dirty(), with
 * runs of the scan still to come) asks the writer for a burst of writes to random pages and
 * waits until it is done, so writes land on pages already reported, pages being reported and
 * pages not reported yet, all while the call runs. Between calls the writer keeps writing.
 * The test needs OVERLAPS such bursts inside calls, and that no write is lost. --- */

#define CPAGES 256
#define BURST 64
#define OVERLAPS 300

struct race {
    uint64_t *mem;
    uint64_t shadow[CPAGES];
    atomic_int stop;
    atomic_int burst;     /* 1: the callback asks for a burst; 2: the writer did it */
    atomic_long writes;
    long reports, overlaps;
};

static void *race_writer(void *p)
{
    struct race *s = p;
    uint64_t x = 88172645463325252ull, v = 0;
    while (!atomic_load(&s->stop)) {
        int burst = atomic_load(&s->burst) == 1;
        for (int k = 0; k < (burst ? BURST : 1); k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            size_t page = (size_t)(x % CPAGES);
            __atomic_store_n(&s->mem[page * (PG / 8)], ++v, __ATOMIC_RELAXED);
        }
        atomic_fetch_add(&s->writes, burst ? BURST : 1);
        if (burst)
            atomic_store(&s->burst, 2);
    }
    return NULL;
}

static int race_copy(void *addr, size_t len, void *arg)
{
    struct race *s = arg;
    for (size_t off = 0; off < len; off += PG) {
        size_t i = (size_t)((char *)addr + off - (char *)s->mem) / PG;
        s->shadow[i] = __atomic_load_n(&s->mem[i * (PG / 8)], __ATOMIC_RELAXED);
    }
    s->reports++;
    if (!atomic_load(&s->stop)) { /* a burst of writes while this call is running */
        atomic_store(&s->burst, 1);
        while (atomic_load(&s->burst) != 2)
            sched_yield();
        atomic_store(&s->burst, 0);
        s->overlaps++;
    }
    return 0;
}

static void concurrent_writer(exo_vm_engine engine)
{
    static struct race s;
    memset(&s, 0, sizeof s);
    s.mem = (uint64_t *)vm_test_map(CPAGES * PG);
    exo_vm_options opt = {.engine = engine, .flags = EXO_VM_TRACK_DIRTY};
    exo_vm_region *r;
    CHECK_OK(exo_vm_region_create(s.mem, CPAGES * PG, &opt, &r));
    pthread_t t;
    CHECK(pthread_create(&t, NULL, race_writer, &s) == 0);
    long calls = 0;
    while (s.overlaps < OVERLAPS || atomic_load(&s.writes) < 100000) {
        CHECK(exo_vm_dirty(r, race_copy, &s) >= 0);
        CHECK(++calls < 10000000); /* the writer never made anything dirty: broken */
    }
    atomic_store(&s.stop, 1);
    pthread_join(t, NULL);
    CHECK(exo_vm_dirty(r, race_copy, &s) >= 0);
    for (size_t i = 0; i < CPAGES; i++)
        if (s.shadow[i] != s.mem[i * (PG / 8)]) {
            fprintf(stderr, "page %zu: write %llu lost (checkpoint has %llu)\n", i,
                    (unsigned long long)s.mem[i * (PG / 8)], (unsigned long long)s.shadow[i]);
            exit(1);
        }
    CHECK(s.overlaps >= OVERLAPS);
    printf("  %s: %ld dirty calls, %ld bursts of %d writes inside a call, %ld writes in all, "
           "%ld runs reported, none lost\n", exo_vm_engine_name(engine), calls, s.overlaps,
           BURST, (long)atomic_load(&s.writes), s.reports);
    CHECK_OK(exo_vm_region_destroy(r));
    munmap(s.mem, CPAGES * PG);
}

int main(void)
{
    exo_vm_engine engines[] = {EXO_VM_ENGINE_SIGNAL, EXO_VM_ENGINE_UFFD,
                               EXO_VM_ENGINE_SOFTDIRTY};
    int ran = 0;
    for (size_t i = 0; i < sizeof engines / sizeof engines[0]; i++) {
        if (!vm_test_engine_ok(engines[i], EXO_VM_TRACK_DIRTY))
            continue;
        printf("engine %s\n", exo_vm_engine_name(engines[i]));
        exact_sets(engines[i]);
        if (engines[i] != EXO_VM_ENGINE_SOFTDIRTY) /* softdirty may lose racing writes */
            concurrent_writer(engines[i]);
        ran++;
    }
    CHECK(ran >= 1);
    printf("ok\n");
    return 0;
}
