/* The allocator's lock-free paths under stress: seg_malloc/seg_free in several threads while
 * another thread switches the VAS out and in (a call either works or fails cleanly, never
 * touches an unmapped heap; a switch waits for a call under way), thread caches given back
 * when threads exit, another process that sees this process's cached chunks as freed, two
 * processes in one heap at once, a full heap, more heaps than a thread caches, and processes
 * killed with -9 holding cached chunks (with and without the heap's mutex): the heap stays
 * consistent and every byte comes back. */
#include "alloc/heap.h"
#include "vas/view.h"
#include "harness.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sched.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SEG_SIZE (UINT64_C(8) << 20)
#define WORKERS 3
#define SLOTS 64
#define SWITCH_ROUNDS 400

static segid_t sid;
static vasid_t vid;
static vhandle_t vh;
static atomic_int stop, ready;
static atomic_long refused;   /* calls that failed because the VAS was switched out */

#define CHECK_ALLOC_FAILS(expr, code) do { void *_p = (expr); CHECK(_p == NULL); \
    CHECK_EQ(seg_heap_last_code(), -(code)); } while (0)

static size_t size_of(uint64_t *rng)
{
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    return 16 + (size_t)(*rng % 3000);
}


/* Allocate and free at random until told to stop; then free what is left (the VAS is
 * switched in again by then). Counts calls that worked. */
static void *worker(void *arg)
{
    uint64_t rng = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15u | 1;
    void *slot[SLOTS] = {0};
    void *first = seg_malloc(sid, 100);   /* before the switching starts: must work */
    CHECK(first != NULL);
    CHECK_OK(seg_free(first));
    atomic_fetch_add(&ready, 1);
    for (unsigned i = 0; !atomic_load(&stop); i = (i + 7) % SLOTS) {
        if (slot[i]) {
            errno = 0;
            int rc = seg_free(slot[i]);
            if (rc == 0) {
                slot[i] = NULL;
            } else {
                CHECK_EQ(rc, -EXO_EINVAL);   /* switched out: in no visible segment */
                atomic_fetch_add(&refused, 1);
            }
        } else {
            slot[i] = seg_malloc(sid, size_of(&rng));
            if (!slot[i])
                CHECK_EQ(seg_heap_last_code(), -EXO_ENOTMAPPED);
            if (!slot[i])
                atomic_fetch_add(&refused, 1);
        }
    }
    for (int i = 0; i < SLOTS; i++)
        CHECK_OK(seg_free(slot[i]));
    return NULL;
}

static struct seg_heap_stats stats(void)
{
    struct seg_heap_stats st;
    CHECK_OK(seg_heap_stats(sid, &st));
    return st;
}

/* The parent's threads that were inside an allocator call at the fork do not exist here:
 * a switch must not wait for them. */
static void forked_mid_call(void *arg)
{
    (void)arg;
    CHECK_OK(vas_switch(vh));
    void *p = seg_malloc(sid, 100);
    CHECK(p != NULL);
    CHECK_OK(seg_free(p));
    stats();   /* gives this thread's cache back: _exit() will not */
    CHECK_OK(vas_switch(VAS_HOME));
    CHECK_ALLOC_FAILS(seg_malloc(sid, 100), EXO_ENOTMAPPED);
}

static void test_switch_race(void)
{
    CHECK_OK(vas_switch(vh));
    pthread_t t[WORKERS];
    for (uintptr_t i = 0; i < WORKERS; i++)
        CHECK_EQ(pthread_create(&t[i], NULL, worker, (void *)(i + 1)), 0);
    while (atomic_load(&ready) < WORKERS)
        sched_yield();
    /* Switch until the workers have run into a switched-out VAS a few times (on a loaded
     * machine they may get little CPU), within a bound. */
    time_t t0 = time(NULL);
    for (int r = 0; r < SWITCH_ROUNDS || (atomic_load(&refused) < 1000 && time(NULL) - t0 < 3);
         r++) {
        CHECK_OK(vas_switch(VAS_HOME));
        if (r % 100 == 50) {   /* detach and attach again, the heap's segment goes too */
            CHECK_OK(vas_detach(vh));
            CHECK_OK(vas_attach(vid, &vh));
        }
        if (r == 20)   /* a child forked while the workers are inside calls */
            CHECK_EQ(test_in_child(forked_mid_call, NULL), 0);
        CHECK_OK(vas_switch(vh));
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < WORKERS; i++)
        CHECK_EQ(pthread_join(t[i], NULL), 0);
    fprintf(stderr, "switch race: %ld calls refused while switched out\n",
            atomic_load(&refused));
    /* Every worker's cache went back to the heap when it exited. */
    struct seg_heap_stats st = stats();
    CHECK_EQ(st.allocations, 0);
    CHECK_EQ(st.free_chunks, 1);
    CHECK_OK(vas_switch(VAS_HOME));
}

/* A switch in another thread waits for a thread inside an allocator call (here: inside
 * the view such a call enters), so the heap it works on stays mapped until it leaves. */
static atomic_int switched;

static void *switch_home(void *arg)
{
    (void)arg;
    CHECK_OK(vas_switch(VAS_HOME));
    atomic_store(&switched, 1);
    return NULL;
}

static void test_switch_waits(void)
{
    CHECK_OK(vas_switch(vh));
    CHECK_OK(seg_free(seg_malloc(sid, 10)));   /* the thread's snapshot is now current */
    const struct exo_view *v = exo_view_enter();
    const struct exo_view_seg *vs;
    CHECK_OK(exo_view_find(v, sid, &vs));
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, switch_home, NULL), 0);
    struct timespec pause = {0, 50000000};
    nanosleep(&pause, NULL);
    CHECK(!atomic_load(&switched));
    CHECK(!test_faults((const void *)(uintptr_t)vs->base, 1));
    exo_view_leave(v);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK(atomic_load(&switched));
    CHECK(test_faults((const void *)(uintptr_t)test_base(0), 0));   /* now it is gone */
}

/* A request that needs the space this thread's cache holds gets it: the cache goes back to
 * the heap before the call fails. */
static void test_full_heap(void)
{
    CHECK_OK(vas_switch(vh));
    uint64_t heap_bytes = stats().heap_bytes;
    static void *small[SEG_SIZE / 4000];
    size_t n = 0;
    while (n < sizeof small / sizeof small[0] && (small[n] = seg_malloc(sid, 4000)) != NULL)
        n++;
    CHECK(n > 100);
    for (size_t i = 0; i < n; i++)
        CHECK_OK(seg_free(small[i]));   /* the last few stay in this thread's cache */
    void *all = seg_malloc(sid, heap_bytes - 32);
    CHECK(all != NULL);
    CHECK_OK(seg_free(all));
    struct seg_heap_stats st = stats();
    CHECK_EQ(st.allocations, 0);
    CHECK_EQ(st.free_chunks, 1);
    CHECK_OK(vas_switch(VAS_HOME));
}

/* More heaps than a thread keeps caches for: each call still works, and every heap gets
 * all its bytes back. */
#define MANY 6

static void test_many_heaps(void)
{
    vasid_t mv;
    vhandle_t mh;
    segid_t ms[MANY];
    CHECK_OK(vas_create("many", 0600, &mv));
    for (int i = 0; i < MANY; i++) {
        char name[16];
        snprintf(name, sizeof name, "many%d", i);
        CHECK_OK(seg_alloc(name, test_base(1 + i), SEG_SIZE, 0600, &ms[i]));
        CHECK_OK(seg_attach(mv, ms[i], SEG_RDWR));
    }
    CHECK_OK(vas_attach(mv, &mh));
    CHECK_OK(vas_switch(mh));
    void *p[MANY][8];
    uint64_t rng = 3;
    for (int round = 0; round < 50; round++) {
        for (int i = 0; i < MANY; i++)
            for (int k = 0; k < 8; k++)
                CHECK((p[i][k] = seg_malloc(ms[i], size_of(&rng))) != NULL);
        for (int k = 0; k < 8; k++)
            for (int i = 0; i < MANY; i++)
                CHECK_OK(seg_free(p[i][k]));
    }
    for (int i = 0; i < MANY; i++) {
        struct seg_heap_stats st;
        CHECK_OK(seg_heap_stats(ms[i], &st));
        CHECK_EQ(st.allocations, 0);
        CHECK_EQ(st.free_chunks, 1);
    }
    CHECK_OK(vas_switch(VAS_HOME));
    CHECK_OK(vas_detach(mh));
    CHECK_OK(vas_delete(mv));
    for (int i = 0; i < MANY; i++)
        CHECK_OK(seg_delete(ms[i]));
}

/* ---- other processes ---- */

static void *parked;   /* freed by the parent, so in its thread cache */

/* A fork child: the parent's cached chunk is freed memory here (and not in this process's
 * cache, which started empty). */
static void other_process(void *arg)
{
    (void)arg;
    CHECK_OK(vas_switch(vh));
    CHECK_ERR(seg_free(parked), EXO_EINVAL);
    void *q = seg_malloc(sid, 100);
    CHECK(q != NULL && q != parked);
    CHECK_OK(seg_free(q));
    CHECK_OK(vas_switch(VAS_HOME));
}

static void test_other_process(void)
{
    CHECK_OK(vas_switch(vh));
    parked = seg_malloc(sid, 100);
    CHECK(parked != NULL);
    CHECK_OK(seg_free(parked));
    CHECK_OK(vas_switch(VAS_HOME));   /* the child needs the segment's exclusive lock */
    CHECK_EQ(test_in_child(other_process, NULL), 0);
    CHECK_OK(vas_switch(vh));
    CHECK(seg_malloc(sid, 100) == parked);   /* still this thread's, from its cache */
    CHECK_OK(seg_free(parked));
    CHECK_OK(vas_switch(VAS_HOME));
}

/* Two processes in the same heap at once (segment locks off, as for measurements): each
 * thread cache works beside the other process's locked heap calls and stashes. */
static void churn_shared(uint64_t seed)
{
    int off = 0;
    CHECK_OK(vas_ctl(VAS_CTL_SET_LOCKING, 0, &off));
    CHECK_OK(vas_switch(vh));
    uint64_t rng = seed;
    void *slot[SLOTS] = {0};
    for (int i = 0; i < 100000; i++) {
        unsigned k = (unsigned)(rng % SLOTS);
        if (slot[k]) {
            CHECK_OK(seg_free(slot[k]));
            slot[k] = NULL;
        } else {
            size_t n = size_of(&rng);
            CHECK((slot[k] = seg_malloc(sid, n % 7 == 0 ? n * 4 : n)) != NULL);
            memset(slot[k], (int)k, 16);
        }
    }
    for (int k = 0; k < SLOTS; k++)
        CHECK_OK(seg_free(slot[k]));
    stats();   /* consistent, with the other process's cache counted as free */
    CHECK_OK(vas_switch(VAS_HOME));
}

static void test_two_processes(void)
{
    pid_t kid[2];
    for (int i = 0; i < 2; i++) {
        fflush(NULL);
        kid[i] = fork();
        CHECK(kid[i] >= 0);
        if (kid[i] == 0) {
            churn_shared((uint64_t)i * 977 + 5);
            fflush(NULL);
            _exit(0);
        }
    }
    for (int i = 0; i < 2; i++) {
        int status;
        CHECK(waitpid(kid[i], &status, 0) == kid[i]);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    CHECK_OK(vas_switch(vh));
    struct seg_heap_stats st = stats();
    CHECK_EQ(st.allocations, 0);
    CHECK_OK(vas_switch(VAS_HOME));
}

/* A fork child that fills its thread cache, checks that the heap counts the cached chunks as
 * free, and is killed; holding the heap's mutex (with its free lists dropped) when asked. */
static void die_with_cache(void *hold)
{
    CHECK_OK(vas_switch(vh));
    uint64_t rng = 7;
    void *p[500];
    for (int i = 0; i < 500; i++)
        CHECK((p[i] = seg_malloc(sid, size_of(&rng))) != NULL);
    for (int i = 0; i < 500; i++)
        CHECK_OK(seg_free(p[i]));
    struct exo_heap *h;
    CHECK_OK(exo_heap_open((void *)(uintptr_t)test_base(0), SEG_SIZE, &h));
    struct seg_heap_stats st;
    CHECK_OK(exo_heap_check(h, &st));   /* the heap's view: no flush of this cache */
    CHECK_EQ(st.allocations, 0);
    CHECK(st.free_chunks > 1);          /* cached chunks are free but not merged */
    if (hold)
        CHECK_OK(exo_heap_test_hold(h, 1));
    raise(SIGKILL);
}

static void test_killed(void)
{
    struct exo_heap *h;
    uint64_t deaths0, deaths;

    /* Killed holding the mutex: the next locker recovers and reclaims the cached chunks. */
    CHECK_EQ(test_in_child(die_with_cache, (void *)1), 128 + SIGKILL);
    CHECK_OK(vas_switch(vh));
    CHECK_OK(exo_heap_open((void *)(uintptr_t)test_base(0), SEG_SIZE, &h));
    exo_heap_recoveries(h, &deaths0, NULL);
    struct seg_heap_stats st = stats();
    exo_heap_recoveries(h, &deaths, NULL);
    CHECK_EQ(deaths, deaths0 + 1);
    CHECK_EQ(st.allocations, 0);
    CHECK_EQ(st.free_chunks, 1);
    CHECK_OK(vas_switch(VAS_HOME));

    /* Killed between calls: its cached chunks stay until the heap runs out of space, then
     * they are reclaimed and the whole heap can be allocated. */
    CHECK_EQ(test_in_child(die_with_cache, NULL), 128 + SIGKILL);
    CHECK_OK(vas_switch(vh));
    st = stats();
    CHECK_EQ(st.allocations, 0);
    CHECK(st.free_chunks > 1);
    uint64_t heap_bytes = st.heap_bytes, got = 0;
    static void *big[SEG_SIZE / 65536 + 1];
    size_t n = 0;
    while (n < sizeof big / sizeof big[0] && (big[n] = seg_malloc(sid, 65536 - 16)) != NULL)
        got += 65536, n++;
    CHECK_EQ(seg_heap_last_code(), -EXO_ENOMEM);
    CHECK(got + 65536 + 4096 > heap_bytes);   /* no more than a block's room was missing */
    for (size_t i = 0; i < n; i++)
        CHECK_OK(seg_free(big[i]));
    st = stats();
    CHECK_EQ(st.allocations, 0);
    CHECK_EQ(st.free_chunks, 1);
    CHECK_OK(vas_switch(VAS_HOME));
}

int main(void)
{
    test_root_setup();
    CHECK_OK(seg_alloc("tc0", test_base(0), SEG_SIZE, 0600, &sid));
    CHECK_OK(vas_create("tc", 0600, &vid));
    CHECK_OK(seg_attach(vid, sid, SEG_RDWR));
    CHECK_OK(vas_attach(vid, &vh));

    test_switch_waits();
    test_switch_race();
    test_full_heap();
    test_many_heaps();
    test_other_process();
    test_two_processes();
    test_killed();

    CHECK_OK(vas_detach(vh));
    CHECK_OK(vas_delete(vid));
    CHECK_OK(seg_delete(sid));
    fprintf(stderr, "test_heap_cache: ok\n");
    return 0;
}
