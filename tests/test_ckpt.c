/* Concurrent and incremental checkpointing (apps/ckpt), with each trap engine the kernel has:
 * a checkpoint taken while a writer thread keeps writing restores bit-exact to the region as
 * it was when the checkpoint began; writes to pages not yet copied are copied first (counted
 * exactly while the copier is held back, so the test fails without the mechanism); an
 * incremental checkpoint writes exactly the pages written since the previous one; damaged
 * chains and misuse are refused.
 */
#include "ckpt.h"
#include "harness.h"

#include <exomem/vm.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define REGION_PAGES 2048 /* 8 MiB */

static size_t ps;
static size_t len;
static char dir[512];
static const char *root;

static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static char *map_region(void)
{
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    return p;
}

/* The chain in dir restores to exactly `expect` (upto as for ckpt_restore). */
static void check_restore(const char *expect, unsigned upto)
{
    char *r = map_region();
    CHECK_OK(ckpt_restore(dir, r, len, upto));
    for (size_t i = 0; i < len; i += ps)
        if (memcmp(r + i, expect + i, ps) != 0) {
            fprintf(stderr, "restore differs at page %zu (upto %u)\n", i / ps, upto);
            CHECK(0);
        }
    munmap(r, len);
}

/* A writer thread: the running program, writing random pages until told to stop. */
struct writer {
    char *region;
    atomic_int stop;
    _Atomic uint64_t writes;
    uint64_t seed;
};

static void *writer_main(void *arg)
{
    struct writer *w = arg;
    while (!atomic_load(&w->stop)) {
        uint64_t r = rng(&w->seed);
        w->region[(r % REGION_PAGES) * ps + (r >> 40) % ps] = (char)(r >> 8);
        atomic_fetch_add_explicit(&w->writes, 1, memory_order_relaxed);
    }
    return NULL;
}

/* Checkpoint while a writer thread writes; the checkpoint must be the region at begin. */
static void checkpoint_under_writer(struct ckpt *c, char *region, enum ckpt_kind kind,
                                    char *shadow, uint64_t seed)
{
    memcpy(shadow, region, len);
    CHECK_OK(ckpt_begin(c, kind)); /* the copier is held until the writer is going */
    struct writer w = {.region = region, .seed = seed};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, writer_main, &w) == 0);
    while (atomic_load(&w.writes) < 500)
        sched_yield();
    ckpt_release_copier(c);
    while (!ckpt_done(c)) /* the writer keeps writing while the copier runs */
        sched_yield();
    CHECK_OK(ckpt_wait(c));
    atomic_store(&w.stop, 1);
    pthread_join(t, NULL);
    CHECK(w.writes > 0);
    check_restore(shadow, 0);
}

static void run_engine(exo_vm_engine engine)
{
    const char *name = exo_vm_engine_name(engine);
    char *region = map_region(), *shadow = malloc(len), *older = malloc(len);
    CHECK(shadow && older);
    uint64_t seed = 42 + (uint64_t)engine;
    for (size_t i = 0; i < len; i += 8) {
        uint64_t v = rng(&seed);
        memcpy(region + i, &v, 8);
    }
    snprintf(dir, sizeof dir, "%s/ckpt-%s", root, name);

    struct ckpt *c;
    struct ckpt_options o = {.engine = engine, .flags = CKPT_TRACK | CKPT_HOLD_COPIER};
    CHECK_OK(ckpt_create(region, len, dir, &o, &c));
    CHECK_EQ(ckpt_engine(c), engine);
    CHECK_ERR(ckpt_begin(c, CKPT_INCREMENTAL), EXO_EINVAL); /* no base yet */

    /* 1. Copy-on-write, counted exactly: with the copier held back, the first write to each
     * of 100 pages traps and the handler copies the page before the write goes through. */
    memcpy(shadow, region, len);
    CHECK_OK(ckpt_begin(c, CKPT_FULL));
    CHECK_ERR(ckpt_begin(c, CKPT_FULL), EXO_EBUSY);
    for (int k = 0; k < 100; k++)
        for (int rep = 0; rep < 3; rep++)
            region[(size_t)(REGION_PAGES - 1 - 7 * k) * ps + (size_t)rep * 64] ^= 0x5a;
    struct ckpt_stats st;
    ckpt_get_stats(c, &st);
    CHECK_EQ(st.last_cow_copies, 100);
    CHECK(st.traps >= 100);
    CHECK(!ckpt_done(c));
    ckpt_release_copier(c);
    CHECK_OK(ckpt_wait(c));
    ckpt_get_stats(c, &st);
    CHECK_EQ(st.last_pages, REGION_PAGES);
    CHECK_EQ(st.chain_len, 1);
    check_restore(shadow, 0);
    CHECK_OK(ckpt_destroy(c));

    /* 2. Full and incremental checkpoints with a writer thread running throughout. */
    CHECK_OK(ckpt_create(region, len, dir, &o, &c));
    checkpoint_under_writer(c, region, CKPT_FULL, shadow, seed + 1);
    ckpt_get_stats(c, &st);
    uint64_t traps_before = st.traps;
    checkpoint_under_writer(c, region, CKPT_INCREMENTAL, shadow, seed + 2);
    ckpt_get_stats(c, &st);
    CHECK(st.traps > traps_before); /* the writer's writes went through the handler */
    CHECK_EQ(st.chain_len, 2);

    /* 3. An incremental checkpoint writes exactly the pages written since the previous one:
     * flush what the writer left dirty, then write 37 pages (several times each). */
    CHECK_OK(ckpt_stop_and_copy(c, CKPT_INCREMENTAL));
    memcpy(older, region, len);
    ckpt_get_stats(c, &st);
    uint64_t dirty_before = st.dirty_traps;
    for (int rep = 0; rep < 4; rep++)
        for (int k = 0; k < 37; k++)
            region[(size_t)(13 + 41 * k) * ps + (size_t)rep * 100] += 1;
    ckpt_get_stats(c, &st);
    CHECK_EQ(st.dirty_traps - dirty_before, 37); /* one trap per page, not per write */
    memcpy(shadow, region, len);
    CHECK_OK(ckpt_begin(c, CKPT_INCREMENTAL));
    CHECK_OK(ckpt_wait(c));
    ckpt_get_stats(c, &st);
    CHECK_EQ(st.last_pages, 37);
    CHECK_EQ(st.last_bytes, ps + 37 * ps); /* one page of header and index, then the pages */
    CHECK_EQ(st.chain_len, 4);
    check_restore(shadow, 0);
    check_restore(older, 3); /* base + first two deltas: the state before the 37 writes */

    /* Nothing written: an empty delta, still restorable. */
    CHECK_OK(ckpt_begin(c, CKPT_INCREMENTAL));
    CHECK_OK(ckpt_wait(c));
    ckpt_get_stats(c, &st);
    CHECK_EQ(st.last_pages, 0);
    check_restore(shadow, 0);

    /* 4. Stop-and-copy full checkpoint: starts a new chain. */
    region[5 * ps] ^= 1;
    memcpy(shadow, region, len);
    CHECK_OK(ckpt_stop_and_copy(c, CKPT_FULL));
    ckpt_get_stats(c, &st);
    CHECK_EQ(st.chain_len, 1);
    check_restore(shadow, 0);
    CHECK_OK(ckpt_destroy(c));
    CHECK(!test_faults(region, 1)); /* destroy made the region writable again */

    /* 5. Without CKPT_TRACK: only full checkpoints, and no traps once one is complete. */
    o.flags = CKPT_HOLD_COPIER;
    CHECK_OK(ckpt_create(region, len, dir, &o, &c));
    checkpoint_under_writer(c, region, CKPT_FULL, shadow, seed + 3);
    CHECK_ERR(ckpt_begin(c, CKPT_INCREMENTAL), EXO_EINVAL);
    ckpt_get_stats(c, &st);
    traps_before = st.traps;
    for (size_t i = 0; i < len; i += ps)
        region[i] ^= 1;
    ckpt_get_stats(c, &st);
    CHECK_EQ(st.traps, traps_before);
    CHECK_OK(ckpt_destroy(c));

    /* 6. Damaged chains are refused. */
    char *r = map_region();
    CHECK_ERR(ckpt_restore(dir, r, len / 2, 0), EXO_ESIZE);
    char path[1024];
    snprintf(path, sizeof path, "%s/MANIFEST", dir);
    FILE *f = fopen(path, "r");
    char line[256], file[256];
    CHECK(f && fgets(line, sizeof line, f) && fgets(file, sizeof file, f));
    fclose(f);
    file[strcspn(file, "\n")] = 0;
    snprintf(path, sizeof path, "%s/%s", dir, file);
    int fd = open(path, O_RDWR);
    CHECK(fd >= 0);
    CHECK(ftruncate(fd, (off_t)len) == 0); /* lose the last page */
    CHECK_ERR(ckpt_restore(dir, r, len, 0), EXO_ECORRUPT);
    CHECK(pwrite(fd, "X", 1, 0) == 1); /* and the magic */
    close(fd);
    CHECK_ERR(ckpt_restore(dir, r, len, 0), EXO_ECORRUPT);
    munmap(r, len);

    fprintf(stderr, "engine %s: ok\n", name);
    munmap(region, len);
    free(shadow);
    free(older);
}

int main(void)
{
    root = test_root_setup();
    ps = exo_vm_page_size();
    len = REGION_PAGES * ps;
    exo_vm_engine engines[] = {EXO_VM_ENGINE_SIGNAL, EXO_VM_ENGINE_UFFD};
    int ran = 0;
    for (size_t i = 0; i < sizeof engines / sizeof engines[0]; i++) {
        const char *why = NULL;
        if (exo_vm_engine_supported(engines[i], 0, &why) != 0) {
            fprintf(stderr, "engine %s: skipped: %s\n", exo_vm_engine_name(engines[i]),
                    why ? why : "not supported");
            continue;
        }
        run_engine(engines[i]);
        ran++;
    }
    if (!ran)
        SKIP("no trap engine works here");
    return 0;
}
