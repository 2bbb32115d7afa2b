/* The keep engine (src/vas/switch.c): a segment leaving the current VAS stays mapped at its
 * base, unlocked, until a VAS that needs its range comes in. Checked here:
 *   - switching home and back into a VAS moves and maps nothing after the first time, and
 *     the data stays right;
 *   - the locks are exactly the park engine's: at home another process gets the segment
 *     exclusively (and its writes show through the kept mapping, which maps the same
 *     file); while this process is in the read-write VAS it gets neither VAS; while this
 *     one is in the read-only VAS it shares it but cannot write;
 *   - a VAS with another segment at the same base parks the kept one, and each VAS finds
 *     its own data afterwards; so does a segment added with seg_attach_local();
 *   - detaching, leaving the keep engine and fork all take kept segments off their bases;
 *   - the heap's view follows the current VAS, not what is kept. */
#include "harness.h"

#include <exomem/alloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB (UINT64_C(1) << 20)

enum { K1, K2, X, NSEG };        /* K1 and X share base 0; K2 is at base 1 */
enum { A, ARO, B, C, NVAS };     /* A = {K1 rw}, ARO = {K1 ro}, B = {K2 rw}, C = {X rw} */

static const char *const seg_names[NSEG] = {"keep-k1", "keep-k2", "keep-x"};
static const char *const vas_names[NVAS] = {"keep-a", "keep-aro", "keep-b", "keep-c"};
static const int vas_seg[NVAS] = {K1, K1, K2, X};
static const int vas_flags[NVAS] = {SEG_RDWR, SEG_RDONLY, SEG_RDWR, SEG_RDWR};
static segid_t sids[NSEG];
static vasid_t vids[NVAS];
static vhandle_t vh[NVAS];

static uint64_t seg_base(int s)
{
    return test_base(s == K2 ? 1 : 0);
}

static uint64_t seg_size(int s)
{
    return s == X ? 2 * MIB : 4 * MIB;
}

static void fill(int s, uint64_t tag)
{
    for (uint64_t off = 0; off < seg_size(s); off += 4096)
        *(volatile uint64_t *)(seg_base(s) + off) = tag ^ off;
}

static void expect(int s, uint64_t tag)
{
    for (uint64_t off = 0; off < seg_size(s); off += 4096)
        CHECK_EQ(*(volatile uint64_t *)(seg_base(s) + off), tag ^ off);
}

static void stats(struct vas_park_stats *st)
{
    CHECK_OK(vas_ctl(VAS_CTL_PARK_STATS, 0, st));
}

static void attach_all(void)
{
    for (int v = 0; v < NVAS; v++) {
        CHECK_OK(vas_find(vas_names[v], &vids[v]));
        CHECK_OK(vas_attach(vids[v], &vh[v]));
    }
}

static void use_keep(void)
{
    int e = VAS_ENGINE_KEEP;
    CHECK_OK(vas_ctl(VAS_CTL_SET_ENGINE, 0, &e));
}

/* Another process's view of the locks (run with test_run_self). */
static int child(const char *role)
{
    use_keep();
    attach_all();
    if (!strcmp(role, "child-write")) {         /* parent at home: K1 is free */
        CHECK_OK(vas_try_switch(vh[A]));
        expect(K1, 0x1000);
        fill(K1, 0x2000);
        CHECK_OK(vas_switch(VAS_HOME));
    } else if (!strcmp(role, "child-excluded")) { /* parent in A */
        CHECK_ERR(vas_try_switch(vh[A]), EXO_EBUSY);
        CHECK_ERR(vas_try_switch(vh[ARO]), EXO_EBUSY);
        CHECK_OK(vas_try_switch(vh[B]));          /* K2 is only kept there */
        CHECK_OK(vas_switch(VAS_HOME));
    } else if (!strcmp(role, "child-shared")) {   /* parent in ARO */
        CHECK_OK(vas_try_switch(vh[ARO]));
        expect(K1, 0x2000);
        CHECK_ERR(vas_try_switch(vh[A]), EXO_EBUSY);
        CHECK_OK(vas_switch(VAS_HOME));
    } else {
        return 2;
    }
    return 0;
}

static void create_registry(void)
{
    for (int s = 0; s < NSEG; s++)
        CHECK_OK(seg_alloc(seg_names[s], seg_base(s), seg_size(s), 0600, &sids[s]));
    for (int v = 0; v < NVAS; v++) {
        CHECK_OK(vas_create(vas_names[v], 0600, &vids[v]));
        CHECK_OK(seg_attach(vids[v], sids[vas_seg[v]], vas_flags[v]));
    }
}

/* Home <-> A costs no page-table change once K1 is kept, and the locks come and go. */
static void check_round_trips(void)
{
    CHECK_OK(vas_switch(vh[A]));
    fill(K1, 0x1000);
    CHECK_OK(vas_switch(VAS_HOME));
    struct vas_park_stats st0, st1;
    stats(&st0);
    for (int i = 0; i < 100; i++) {
        CHECK_OK(vas_switch(vh[A]));
        CHECK_EQ(*(volatile uint64_t *)seg_base(K1), UINT64_C(0x1000));
        CHECK_OK(vas_switch(VAS_HOME));
    }
    stats(&st1);
    CHECK_EQ(st1.moves, st0.moves);
    CHECK_EQ(st1.maps, st0.maps);
    CHECK_EQ(st1.switches - st0.switches, UINT64_C(200));
    expect(K1, 0x1000);                           /* kept: still readable at home */
    CHECK(seg_malloc(sids[K1], 64) == NULL);      /* but the heap sees home, not K1 */
    CHECK(vas_malloc(64) == NULL);

    test_run_self("child-write", NULL, NULL);     /* K1's lock is free at home */
    expect(K1, 0x2000);                           /* the child's writes, same file */

    CHECK_OK(vas_switch(vh[A]));
    test_run_self("child-excluded", NULL, NULL);
    CHECK_OK(vas_switch(vh[ARO]));
    test_run_self("child-shared", NULL, NULL);
    CHECK_OK(vas_switch(vh[B]));                  /* no overlap: K1 stays, K2 comes in */
    fill(K2, 0x3000);
    expect(K1, 0x2000);
}

/* C's segment X has K1's base: K1 must go to its parking slot, and come back. */
static void check_conflict(void)
{
    struct vas_park_stats st0, st1;
    stats(&st0);
    CHECK_OK(vas_switch(vh[C]));
    stats(&st1);
    CHECK_EQ(st1.moves - st0.moves, UINT64_C(1)); /* K1 parked */
    fill(X, 0x4000);
    expect(K2, 0x3000);                           /* K2 kept from B */
    CHECK_OK(vas_switch(vh[A]));
    expect(K1, 0x2000);
    CHECK_OK(vas_switch(vh[C]));
    expect(X, 0x4000);
    CHECK(test_faults((const void *)(uintptr_t)(seg_base(X) + 2 * MIB), 0)); /* not K1 */

    /* A segment added to the current VAS outside a switch also moves a kept one away. */
    CHECK_OK(vas_switch(vh[B]));                  /* X stays kept at base 0 */
    expect(X, 0x4000);
    CHECK_OK(seg_attach_local(vh[B], sids[K1], SEG_RDWR));
    expect(K1, 0x2000);
    expect(K2, 0x3000);
    CHECK_OK(seg_detach_local(vh[B], sids[K1]));
    CHECK(test_faults((const void *)(uintptr_t)seg_base(K1), 0));
    CHECK_OK(vas_switch(vh[C]));
    expect(X, 0x4000);
    CHECK_OK(vas_switch(VAS_HOME));
}

/* A forked child starts at home with nothing kept. */
static void check_fork(void)
{
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0)
        _exit(test_faults((const void *)(uintptr_t)seg_base(K2), 0) &&
              test_faults((const void *)(uintptr_t)seg_base(X), 0) ? 0 : 1);
    int status = 0;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    expect(K2, 0x3000);                           /* the parent still keeps it */
}

/* Leaving the keep engine hides what is kept; detaching the last user gives its range
 * back. */
static void check_leave(void)
{
    int e = VAS_ENGINE_PARK;
    CHECK_OK(vas_ctl(VAS_CTL_SET_ENGINE, 0, &e));
    CHECK(test_faults((const void *)(uintptr_t)seg_base(K2), 0));
    CHECK(test_faults((const void *)(uintptr_t)seg_base(X), 0));
    use_keep();
    CHECK_OK(vas_switch(vh[B]));
    expect(K2, 0x3000);
    CHECK_OK(vas_switch(VAS_HOME));
    CHECK_OK(vas_detach(vh[B]));                  /* K2's last user, while kept */
    void *p = mmap((void *)(uintptr_t)seg_base(K2), 4096, PROT_READ,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    CHECK(p == (void *)(uintptr_t)seg_base(K2));
    munmap(p, 4096);
    for (int v = 0; v < NVAS; v++)
        if (v != B)
            CHECK_OK(vas_detach(vh[v]));
}

int main(int argc, char **argv)
{
    if (argc > 1)
        return child(argv[1]);
    test_root_setup();
    create_registry();
    use_keep();
    attach_all();
    check_round_trips();
    check_conflict();
    check_fork();
    check_leave();
    for (int v = 0; v < NVAS; v++) {
        CHECK_OK(seg_detach(vids[v], sids[vas_seg[v]]));
        CHECK_OK(vas_delete(vids[v]));
    }
    for (int s = 0; s < NSEG; s++)
        CHECK_OK(seg_delete(sids[s]));
    return 0;
}
