/* Switching among three attached VASes, in both engines:
 *   A = {S1 rw @base0 4M, SS rw @base2 4M}
 *   B = {S2 rw @base1 4M, SS rw @base2 4M, S4 ro @base3 4M}
 *   C = {S3 rw @base0 2M, S4 rw @base3 4M}        (S3 has S1's base: allowed across VASes)
 * After vas_switch(h) exactly h's segments are accessible at their bases, with h's access,
 * holding the data written before; everything else faults. SS, shared by A and B, stays in
 * place on an A<->B switch. The park limit evicts the least recently used VAS without losing
 * data. A child started with EXOMEM_SWITCH=remap runs the same checks with that default. */
#include "harness.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#define MIB (UINT64_C(1) << 20)
#define PAGE 4096

enum { S1, S2, SS, S3, S4, NSEG };
enum { VA, VB, VC, NVAS };

struct seg_def {
    const char *name;
    int base_index;
    uint64_t size;
};

static const struct seg_def seg_defs[NSEG] = {
    [S1] = {"s1", 0, 4 * MIB}, [S2] = {"s2", 1, 4 * MIB}, [SS] = {"ss", 2, 4 * MIB},
    [S3] = {"s3", 0, 2 * MIB}, [S4] = {"s4", 3, 4 * MIB},
};

/* Which segments each VAS lists, and how: -1 absent, else SEG_RDWR / SEG_RDONLY. */
static const int vas_segs[NVAS][NSEG] = {
    [VA] = {[S1] = SEG_RDWR, [S2] = -1, [SS] = SEG_RDWR, [S3] = -1, [S4] = -1},
    [VB] = {[S1] = -1, [S2] = SEG_RDWR, [SS] = SEG_RDWR, [S3] = -1, [S4] = SEG_RDONLY},
    [VC] = {[S1] = -1, [S2] = -1, [SS] = -1, [S3] = SEG_RDWR, [S4] = SEG_RDWR},
};
static const char *const vas_names[NVAS] = {"A", "B", "C"};

static segid_t sids[NSEG];
static vasid_t vids[NVAS];
static vhandle_t handles[NVAS];
static uint64_t tags[NSEG];   /* the pattern each segment holds now */

static uint64_t seg_base(int s)
{
    return test_base(seg_defs[s].base_index);
}

/* What segment s holds at off: its pattern, or zeros before anything was written. */
static uint64_t word_at(int s, uint64_t off)
{
    return tags[s] ? (tags[s] << 32) ^ off : 0;
}

static void fill(int s, uint64_t tag)
{
    tags[s] = tag;
    for (uint64_t off = 0; off < seg_defs[s].size; off += PAGE)
        *(volatile uint64_t *)(seg_base(s) + off) = word_at(s, off);
}

static void expect_data(int s)
{
    for (uint64_t off = 0; off < seg_defs[s].size; off += PAGE) {
        uint64_t v = *(volatile uint64_t *)(seg_base(s) + off);
        if (v != word_at(s, off)) {
            fprintf(stderr, "segment %s offset %#" PRIx64 ": %#" PRIx64 ", expected %#"
                    PRIx64 "\n", seg_defs[s].name, off, v, word_at(s, off));
            exit(1);
        }
    }
}

/* Exactly VAS v's segments (v = -1: none) are accessible, with their access and data. */
static void check_view(int v)
{
    CHECK_EQ(vas_current(), v < 0 ? VAS_HOME : handles[v]);
    for (int s = 0; s < NSEG; s++) {
        uint64_t probes[3] = {seg_base(s), seg_base(s) + seg_defs[s].size / 2,
                              seg_base(s) + seg_defs[s].size - PAGE};
        for (int i = 0; i < 3; i++) {
            uint64_t a = probes[i];
            int owner = -1;   /* the segment of v that covers a */
            for (int t = 0; v >= 0 && t < NSEG; t++)
                if (vas_segs[v][t] >= 0 && a >= seg_base(t) && a < seg_base(t) + seg_defs[t].size)
                    owner = t;
            if (owner < 0) {
                if (!test_faults((const void *)a, 0)) {
                    fprintf(stderr, "VAS %s current: %#" PRIx64 " (segment %s) is readable\n",
                            v < 0 ? "home" : vas_names[v], a, seg_defs[s].name);
                    exit(1);
                }
                continue;
            }
            CHECK(!test_faults((const void *)a, 0));
            CHECK_EQ(*(volatile uint64_t *)a, word_at(owner, a - seg_base(owner)));
            int ro = vas_segs[v][owner] == SEG_RDONLY;
            if (test_faults((const void *)a, 1) != ro) {
                fprintf(stderr, "VAS %s: write to %#" PRIx64 " (segment %s) %s\n",
                        vas_names[v], a, seg_defs[owner].name, ro ? "works" : "faults");
                exit(1);
            }
        }
    }
    if (v >= 0)
        for (int s = 0; s < NSEG; s++)
            if (vas_segs[v][s] >= 0)
                expect_data(s);
}

static void switch_to(int v)
{
    CHECK_OK(vas_switch(v < 0 ? VAS_HOME : handles[v]));
    check_view(v);
}

static void get_stats(struct vas_park_stats *st)
{
    CHECK_OK(vas_ctl(VAS_CTL_PARK_STATS, 0, st));
}

static void create_registry(void)
{
    for (int s = 0; s < NSEG; s++)
        CHECK_OK(seg_alloc(seg_defs[s].name, seg_base(s), seg_defs[s].size, 0600, &sids[s]));
    for (int v = 0; v < NVAS; v++) {
        CHECK_OK(vas_create(vas_names[v], 0600, &vids[v]));
        for (int s = 0; s < NSEG; s++)
            if (vas_segs[v][s] >= 0)
                CHECK_OK(seg_attach(vids[v], sids[s], vas_segs[v][s]));
    }
}

static void attach_all(void)
{
    for (int v = 0; v < NVAS; v++) {
        CHECK_OK(vas_find(vas_names[v], &vids[v]));
        CHECK_OK(vas_attach(vids[v], &handles[v]));
        CHECK(handles[v] != VAS_HOME);
        for (int w = 0; w < v; w++)
            CHECK(handles[v] != handles[w]);
    }
    for (int s = 0; s < NSEG; s++)
        CHECK_OK(seg_find(seg_defs[s].name, &sids[s]));
    check_view(-1);   /* attaching shows nothing */
}

/* --- SS stays in place: a thread reads it while the main thread switches A <-> B --- */

static atomic_int reader_stop;
static atomic_long reader_faults, reader_reads;
static _Thread_local int in_reader;
static _Thread_local sigjmp_buf reader_jmp;

static void reader_fault(int sig)
{
    if (!in_reader) {   /* a fault of the main thread is a real crash */
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    siglongjmp(reader_jmp, 1);
}

static void *reader_main(void *arg)
{
    (void)arg;
    in_reader = 1;
    volatile uint64_t *p = (volatile uint64_t *)seg_base(SS);
    while (!atomic_load(&reader_stop)) {
        if (sigsetjmp(reader_jmp, 1) != 0) {
            atomic_fetch_add(&reader_faults, 1);
            continue;
        }
        for (uint64_t off = 0; off < seg_defs[SS].size / 8; off += PAGE / 8)
            if (p[off] != word_at(SS, off * 8))
                atomic_fetch_add(&reader_faults, 1);
        atomic_fetch_add(&reader_reads, 1);
    }
    return NULL;
}

static void check_shared_stays(int engine, int rounds)
{
    switch_to(VA);
    struct sigaction sa, old_segv, old_bus;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = reader_fault;
    sigemptyset(&sa.sa_mask);
    CHECK_OK(sigaction(SIGSEGV, &sa, &old_segv));
    CHECK_OK(sigaction(SIGBUS, &sa, &old_bus));
    atomic_store(&reader_stop, 0);
    atomic_store(&reader_faults, 0);
    atomic_store(&reader_reads, 0);
    pthread_t th;
    CHECK_OK(pthread_create(&th, NULL, reader_main, NULL));
    while (atomic_load(&reader_reads) == 0)
        sched_yield();
    struct vas_park_stats st0, st1;
    get_stats(&st0);
    for (int i = 0; i < rounds; i++) {
        CHECK_OK(vas_switch(handles[VB]));
        CHECK_OK(vas_switch(handles[VA]));
    }
    get_stats(&st1);
    atomic_store(&reader_stop, 1);
    CHECK_OK(pthread_join(th, NULL));
    CHECK_OK(sigaction(SIGSEGV, &old_segv, NULL));
    CHECK_OK(sigaction(SIGBUS, &old_bus, NULL));
    if (atomic_load(&reader_faults) != 0) {
        fprintf(stderr, "engine %d: shared segment SS faulted or changed %ld times while "
                "switching A<->B (%ld clean passes)\n", engine, atomic_load(&reader_faults),
                atomic_load(&reader_reads));
        exit(1);
    }
    /* A->B moves S1 out and S2, S4 in; B->A the reverse: 3 segments per switch. Moving SS
     * too would make it 5. */
    if (engine == VAS_ENGINE_PARK) {
        CHECK_EQ(st1.moves - st0.moves, (uint64_t)rounds * 2 * 3);
        CHECK_EQ(st1.maps, st0.maps);
        CHECK_EQ(st1.evictions, st0.evictions);
    } else {
        CHECK_EQ(st1.moves, st0.moves);
        CHECK_EQ(st1.maps - st0.maps, (uint64_t)rounds * 3);   /* S2, S4 in; S1 in */
    }
    check_view(VA);
}

/* --- the scenario, run once per engine --- */

static void run_engine(int engine, uint64_t tag_base)
{
    int e = 0;
    CHECK_OK(vas_ctl(VAS_CTL_GET_ENGINE, 0, &e));
    CHECK_EQ(e, engine);
    struct vas_park_stats st0, st1;
    get_stats(&st0);

    /* Write each segment's pattern through a VAS that has it read-write. */
    switch_to(VA);
    fill(S1, tag_base + S1);
    fill(SS, tag_base + SS);
    check_view(VA);
    CHECK_OK(vas_switch(handles[VC]));
    fill(S3, tag_base + S3);
    fill(S4, tag_base + S4);
    check_view(VC);
    CHECK_OK(vas_switch(handles[VB]));
    fill(S2, tag_base + S2);
    check_view(VB);

    /* Every order of switches, data kept. */
    static const int order[] = {VA, VB, VA, VC, VB, VC, VA, -1, VC, -1, VB, VB, -1, VA};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        switch_to(order[i]);
    /* Changes made in one VAS are seen in another that shares the segment. */
    switch_to(VB);
    fill(SS, tag_base + 0x100 + SS);
    switch_to(VA);
    switch_to(VC);
    fill(S4, tag_base + 0x100 + S4);
    switch_to(VB);

    /* vas_try_switch behaves as vas_switch when nothing conflicts. */
    CHECK_OK(vas_try_switch(handles[VC]));
    check_view(VC);
    CHECK_OK(vas_try_switch(VAS_HOME));
    check_view(-1);

    /* The engine is chosen only at home. */
    switch_to(VA);
    int other = engine == VAS_ENGINE_PARK ? VAS_ENGINE_REMAP : VAS_ENGINE_PARK;
    CHECK(vas_ctl(VAS_CTL_SET_ENGINE, 0, &other) < 0);
    CHECK_OK(vas_ctl(VAS_CTL_GET_ENGINE, 0, &e));
    CHECK_EQ(e, engine);
    check_view(VA);

    get_stats(&st1);
    if (engine == VAS_ENGINE_PARK)
        CHECK(st1.moves > st0.moves);
    else
        CHECK(st1.maps > st0.maps);

    check_shared_stays(engine, 200);
    switch_to(-1);
}

/* A small park limit: cycling through the VASes evicts the least recently used, and data
 * survives eviction. */
static void check_park_limit(void)
{
    int e = VAS_ENGINE_PARK;
    CHECK_OK(vas_ctl(VAS_CTL_SET_ENGINE, 0, &e));
    struct vas_park_stats st0, st1;
    uint64_t limit = 13 * MIB;
    CHECK_OK(vas_ctl(VAS_CTL_SET_PARK_LIMIT, 0, &limit));
    get_stats(&st0);
    CHECK_EQ(st0.limit_bytes, limit);
    for (int round = 0; round < 4; round++)
        for (int v = 0; v < NVAS; v++) {
            switch_to(v);
            get_stats(&st1);
            CHECK(st1.parked_bytes <= limit);
        }
    switch_to(-1);
    get_stats(&st1);
    CHECK(st1.parked_bytes <= limit);
    CHECK(st1.evictions > st0.evictions);
    CHECK(st1.maps > st0.maps);   /* evicted VASes were mapped again */
    for (int v = 0; v < NVAS; v++)
        switch_to(v);
    switch_to(-1);
    limit = UINT64_C(64) << 30;
    CHECK_OK(vas_ctl(VAS_CTL_SET_PARK_LIMIT, 0, &limit));
}

/* Detached and never-attached handles; detaching the current handle goes home. */
static void check_detach(void)
{
    CHECK_ERR(vas_switch(9999), EXO_EDETACHED);
    CHECK_ERR(vas_try_switch(9999), EXO_EDETACHED);
    CHECK_EQ(vas_current(), VAS_HOME);
    switch_to(VC);
    CHECK_ERR(vas_switch(9999), EXO_EDETACHED);
    check_view(VC);   /* a failed switch changes nothing */
    CHECK_OK(vas_detach(handles[VC]));
    CHECK_EQ(vas_current(), VAS_HOME);
    check_view(-1);
    CHECK_ERR(vas_switch(handles[VC]), EXO_EDETACHED);
    CHECK_ERR(vas_try_switch(handles[VC]), EXO_EDETACHED);
    CHECK_EQ(vas_current(), VAS_HOME);
    /* The other attachments still work. */
    switch_to(VA);
    CHECK_OK(vas_detach(handles[VB]));   /* not current: A stays */
    CHECK_EQ(vas_current(), handles[VA]);
    expect_data(S1);
    expect_data(SS);
    CHECK(test_faults((const void *)seg_base(S2), 0));
    CHECK_OK(vas_detach(handles[VA]));
    CHECK_EQ(vas_current(), VAS_HOME);
    CHECK(test_faults((const void *)seg_base(S1), 0));
}

static void delete_registry(void)
{
    for (int v = 0; v < NVAS; v++) {
        for (int s = 0; s < NSEG; s++)
            if (vas_segs[v][s] >= 0)
                CHECK_OK(seg_detach(vids[v], sids[s]));
        CHECK_OK(vas_delete(vids[v]));
    }
    for (int s = 0; s < NSEG; s++)
        CHECK_OK(seg_delete(sids[s]));
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "remap-child")) {
        /* Fresh process: the environment chose the engine. The registry exists. */
        CHECK(getenv("EXOMEM_ROOT") != NULL);
        attach_all();
        /* The parent left each segment's data with tags 0x2100 + s (SS, S4) or 0x2000 + s. */
        for (int s = 0; s < NSEG; s++)
            tags[s] = UINT64_C(0x2000) + s + ((s == SS || s == S4) ? 0x100 : 0);
        switch_to(VA);
        switch_to(VB);
        switch_to(VC);
        switch_to(-1);
        run_engine(VAS_ENGINE_REMAP, 0x3000);
        check_detach();
        return 0;
    }

    test_root_setup();
    CHECK_EQ(vas_current(), VAS_HOME);
    create_registry();
    attach_all();

    run_engine(VAS_ENGINE_PARK, 0x1000);
    int e = VAS_ENGINE_REMAP;
    CHECK_OK(vas_ctl(VAS_CTL_SET_ENGINE, 0, &e));
    for (int v = 0; v < NVAS; v++)   /* data survives the change of engine */
        switch_to(v);
    switch_to(-1);
    CHECK_OK(vas_ctl(VAS_CTL_SET_ENGINE, 0, &e));
    run_engine(VAS_ENGINE_REMAP, 0x2000);
    check_park_limit();

    /* The parent is at home and holds no segment lock: the child can switch freely. */
    test_run_self("remap-child", "EXOMEM_SWITCH", "remap");
    for (int s = 0; s < NSEG; s++)
        tags[s] = UINT64_C(0x3000) + s + ((s == SS || s == S4) ? 0x100 : 0);
    for (int v = 0; v < NVAS; v++)
        switch_to(v);
    switch_to(-1);

    check_detach();
    delete_registry();
    printf("test_switch: ok\n");
    return 0;
}
