/* Unit tests of the in-region heap (src/alloc/heap.c) over anonymous shared memory: results,
 * contents, consistency after every kind of misuse, and survival of processes that share the
 * heap, including one killed while holding its mutex. */
#include "alloc/heap.h"
#include "harness.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HEAP_SIZE (16u << 20)

static void *region_new(size_t size)
{
    void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED);
    return m;
}

static struct exo_heap *heap_new(void *region, size_t size)
{
    struct exo_heap *h = NULL;
    CHECK_OK(exo_heap_open(region, size, &h));
    CHECK(h != NULL);
    return h;
}

static struct seg_heap_stats stats_of(struct exo_heap *h)
{
    struct seg_heap_stats st;
    CHECK_OK(exo_heap_check(h, &st));
    CHECK_EQ(st.used_bytes + st.free_bytes, st.heap_bytes);
    return st;
}

/* Fill / verify a block with bytes derived from a seed, so mixed-up blocks are caught. */
static void fill(void *p, size_t n, uint32_t seed)
{
    unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        b[i] = (unsigned char)(seed * 131u + i * 7u + (i >> 8));
}

static int intact(const void *p, size_t n, uint32_t seed)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != (unsigned char)(seed * 131u + i * 7u + (i >> 8)))
            return 0;
    return 1;
}

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static size_t random_size(uint64_t *rng)
{
    uint64_t r = rng_next(rng);
    if (r % 50 == 0)
        return 4096 + r % 60000;
    return r % 600;
}

static void test_basic(void)
{
    void *region = region_new(HEAP_SIZE);
    struct exo_heap *h = heap_new(region, HEAP_SIZE);
    struct seg_heap_stats fresh = stats_of(h);
    CHECK_EQ(fresh.allocations, 0);
    CHECK_EQ(fresh.free_chunks, 1);
    CHECK(fresh.heap_bytes > HEAP_SIZE - 4096 && fresh.heap_bytes < HEAP_SIZE);

    static const size_t sizes[] = {0, 1, 8, 15, 16, 17, 24, 100, 1000, 1023, 1024, 5000, 70000};
    enum { N = sizeof sizes / sizeof sizes[0] };
    void *p[N];
    int code = 1;
    for (int i = 0; i < N; i++) {
        p[i] = exo_heap_malloc(h, sizes[i], &code);
        CHECK(p[i] != NULL);
        CHECK_EQ(code, 0);
        CHECK_EQ((uintptr_t)p[i] % 16, 0);
        CHECK(exo_heap_owns(h, p[i]));
        CHECK(exo_heap_usable_size(h, p[i]) >= sizes[i]);
        fill(p[i], exo_heap_usable_size(h, p[i]), (uint32_t)i);
        for (int j = 0; j < i; j++)
            CHECK(p[j] != p[i]);
    }
    CHECK_EQ(stats_of(h).allocations, N);
    for (int i = 0; i < N; i++)
        CHECK(intact(p[i], exo_heap_usable_size(h, p[i]), (uint32_t)i));
    for (int i = 0; i < N; i += 2)
        CHECK_OK(exo_heap_free(h, p[i]));
    CHECK_EQ(stats_of(h).allocations, N / 2);
    for (int i = 1; i < N; i += 2)
        CHECK(intact(p[i], exo_heap_usable_size(h, p[i]), (uint32_t)i));
    for (int i = 1; i < N; i += 2)
        CHECK_OK(exo_heap_free(h, p[i]));
    struct seg_heap_stats st = stats_of(h);
    CHECK_EQ(st.allocations, 0);
    CHECK_EQ(st.free_chunks, 1);
    CHECK_EQ(st.free_bytes, st.heap_bytes);
    CHECK_OK(exo_heap_free(h, NULL));

    /* Reopening a formatted heap validates it and keeps its contents (root included). */
    void *keep = exo_heap_malloc(h, 64, NULL);
    fill(keep, 64, 99);
    CHECK_OK(exo_heap_set_root(h, keep));
    struct exo_heap *again = heap_new(region, HEAP_SIZE);
    CHECK(exo_heap_get_root(again) == keep);
    CHECK(intact(keep, 64, 99));
    CHECK_EQ(stats_of(again).allocations, 1);
    struct exo_heap *ro = NULL;
    CHECK_OK(exo_heap_open_ro(region, HEAP_SIZE, &ro));
    CHECK(ro == again);
    CHECK_OK(exo_heap_check_nolock(ro, NULL));
    munmap(region, HEAP_SIZE);
}

static void test_realloc(void)
{
    void *region = region_new(HEAP_SIZE);
    struct exo_heap *h = heap_new(region, HEAP_SIZE);
    int code;

    /* Grows in place into a free neighbour. */
    char *a = exo_heap_malloc(h, 100, &code);
    char *b = exo_heap_malloc(h, 400, &code);
    char *fence = exo_heap_malloc(h, 16, &code);
    CHECK(a && b && fence);
    fill(a, 100, 1);
    CHECK_OK(exo_heap_free(h, b));
    char *a2 = exo_heap_realloc(h, a, 300, &code);
    CHECK(a2 == a);
    CHECK(exo_heap_usable_size(h, a2) >= 300);
    CHECK(intact(a2, 100, 1));
    stats_of(h);

    /* Shrinks in place, giving the tail back. */
    fill(a2, 300, 2);
    char *a3 = exo_heap_realloc(h, a2, 40, &code);
    CHECK(a3 == a2);
    CHECK(exo_heap_usable_size(h, a3) >= 40 && exo_heap_usable_size(h, a3) < 300);
    CHECK(intact(a3, 40, 2));
    stats_of(h);

    /* Moves when the neighbour is in use, keeping the contents. */
    fill(fence, 16, 3);
    char *f2 = exo_heap_realloc(h, fence, 5000, &code);
    CHECK(f2 != NULL);
    CHECK(intact(f2, 16, 3));
    char *a4 = exo_heap_realloc(h, a3, 20000, &code);
    CHECK(a4 != NULL && a4 != a3);
    CHECK(intact(a4, 40, 2));
    CHECK_EQ(exo_heap_free(h, a3), -EXO_EINVAL);

    /* NULL acts as malloc; size 0 frees; a foreign pointer is refused and left alone. */
    char *n = exo_heap_realloc(h, NULL, 50, &code);
    CHECK(n != NULL);
    CHECK(exo_heap_realloc(h, n, 0, &code) == NULL);
    CHECK_EQ(code, 0);
    CHECK_EQ(exo_heap_free(h, n), -EXO_EINVAL);
    char local[64];
    CHECK(exo_heap_realloc(h, local + 16, 10, &code) == NULL);
    CHECK_EQ(code, -EXO_EINVAL);
    /* Failing growth leaves p as it was. */
    CHECK(exo_heap_realloc(h, a4, HEAP_SIZE, &code) == NULL);
    CHECK_EQ(code, -EXO_ENOMEM);
    CHECK(intact(a4, 40, 2));
    CHECK_OK(exo_heap_free(h, a4));
    CHECK_OK(exo_heap_free(h, f2));
    struct seg_heap_stats st = stats_of(h);
    CHECK_EQ(st.allocations, 0);
    CHECK_EQ(st.free_chunks, 1);
    munmap(region, HEAP_SIZE);
}

static void test_memalign(void)
{
    void *region = region_new(HEAP_SIZE);
    struct exo_heap *h = heap_new(region, HEAP_SIZE);
    int code;
    void *p[64];
    int n = 0;
    for (size_t align = 1; align <= (1u << 20); align <<= 1) {
        for (size_t size = 1; size < 3000; size += 1499) {
            void *q = exo_heap_memalign(h, align, size, &code);
            CHECK(q != NULL);
            CHECK_EQ((uintptr_t)q % align, 0);
            CHECK_EQ((uintptr_t)q % 16, 0);
            CHECK(exo_heap_usable_size(h, q) >= size);
            fill(q, size, (uint32_t)n);
            p[n++] = q;
        }
        stats_of(h);
    }
    for (int i = 0; i < n; i++) {
        CHECK(intact(p[i], 1, (uint32_t)i));
        CHECK_OK(exo_heap_free(h, p[i]));
    }
    CHECK(exo_heap_memalign(h, 0, 10, &code) == NULL);
    CHECK_EQ(code, -EXO_EINVAL);
    CHECK(exo_heap_memalign(h, 48, 10, &code) == NULL);
    CHECK_EQ(code, -EXO_EINVAL);
    CHECK(exo_heap_memalign(h, (size_t)1 << 40, 10, &code) == NULL);
    CHECK_EQ(code, -EXO_ENOMEM);
    struct seg_heap_stats st = stats_of(h);
    CHECK_EQ(st.free_chunks, 1);
    CHECK_EQ(st.free_bytes, st.heap_bytes);
    munmap(region, HEAP_SIZE);
}

struct slot {
    char *p;
    size_t n;
    uint32_t seed;
};

/* Random malloc / free / realloc / memalign over `nslots` slots, verifying contents; checks
 * the whole heap every `check_every` ops (0: never). Frees everything at the end. */
static void random_ops(struct exo_heap *h, uint64_t seed, int ops, int nslots, int check_every)
{
    struct slot *s = calloc((size_t)nslots, sizeof *s);
    CHECK(s != NULL);
    uint64_t rng = seed | 1;
    for (int op = 1; op <= ops; op++) {
        struct slot *x = &s[rng_next(&rng) % (uint64_t)nslots];
        uint32_t tag = (uint32_t)(seed * 7919u + (uint64_t)op);
        int code;
        if (x->p) {
            CHECK(intact(x->p, x->n, x->seed));
            if (rng_next(&rng) % 4 == 0) {
                size_t n = random_size(&rng);
                char *q = exo_heap_realloc(h, x->p, n, &code);
                CHECK(q != NULL || n == 0);
                CHECK(n == 0 || intact(q, n < x->n ? n : x->n, x->seed));
                x->p = q;
                x->n = n;
                if (q)
                    fill(q, n, x->seed = tag);
            } else {
                CHECK_OK(exo_heap_free(h, x->p));
                x->p = NULL;
            }
        } else {
            x->n = random_size(&rng);
            if (rng_next(&rng) % 10 == 0)
                x->p = exo_heap_memalign(h, (size_t)64 << (rng_next(&rng) % 8), x->n, &code);
            else
                x->p = exo_heap_malloc(h, x->n, &code);
            CHECK(x->p != NULL);
            CHECK(exo_heap_usable_size(h, x->p) >= x->n);
            fill(x->p, x->n, x->seed = tag);
        }
        if (check_every && op % check_every == 0)
            stats_of(h);
    }
    for (int i = 0; i < nslots; i++) {
        if (s[i].p) {
            CHECK(intact(s[i].p, s[i].n, s[i].seed));
            CHECK_OK(exo_heap_free(h, s[i].p));
        }
    }
    free(s);
}

static void test_stress(void)
{
    void *region = region_new(HEAP_SIZE * 4);
    struct exo_heap *h = heap_new(region, HEAP_SIZE * 4);
    random_ops(h, 12345, 40000, 1000, 500);
    struct seg_heap_stats st = stats_of(h);
    CHECK_EQ(st.allocations, 0);
    CHECK_EQ(st.free_chunks, 1);
    CHECK_EQ(st.free_bytes, st.heap_bytes);
    munmap(region, HEAP_SIZE * 4);
}

static void test_overflow(void)
{
    void *region = region_new(HEAP_SIZE);
    struct exo_heap *h = heap_new(region, HEAP_SIZE);
    void *live = exo_heap_malloc(h, 1000, NULL);
    struct seg_heap_stats before = stats_of(h);
    static const size_t huge[] = {SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 15, SIZE_MAX - 16,
                                  SIZE_MAX / 2, SIZE_MAX / 2 + 1, (size_t)1 << 48, HEAP_SIZE};
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        int code = 0;
        CHECK(exo_heap_malloc(h, huge[i], &code) == NULL);
        CHECK_EQ(code, -EXO_ENOMEM);
        code = 0;
        CHECK(exo_heap_memalign(h, 4096, huge[i], &code) == NULL);
        CHECK_EQ(code, -EXO_ENOMEM);
        code = 0;
        CHECK(exo_heap_memalign(h, (size_t)1 << 63, huge[i], &code) == NULL);
        CHECK_EQ(code, -EXO_ENOMEM);
        code = 0;
        CHECK(exo_heap_realloc(h, live, huge[i], &code) == NULL);
        CHECK_EQ(code, -EXO_ENOMEM);
    }
    struct seg_heap_stats after = stats_of(h);
    CHECK(memcmp(&before, &after, sizeof before) == 0);

    /* The largest block that fits is the whole free chunk; then nothing more fits. */
    CHECK_OK(exo_heap_free(h, live));
    size_t all = (size_t)after.heap_bytes - 16;
    void *big = exo_heap_malloc(h, all, NULL);
    CHECK(big != NULL);
    CHECK(exo_heap_usable_size(h, big) == all);
    int code = 0;
    CHECK(exo_heap_malloc(h, 1, &code) == NULL);
    CHECK_EQ(code, -EXO_ENOMEM);
    CHECK_OK(exo_heap_free(h, big));
    CHECK(exo_heap_malloc(h, all + 1, &code) == NULL);
    CHECK_EQ(code, -EXO_ENOMEM);
    CHECK_EQ(stats_of(h).free_chunks, 1);
    munmap(region, HEAP_SIZE);
}

static void test_bad_free(void)
{
    void *region = region_new(HEAP_SIZE);
    struct exo_heap *h = heap_new(region, HEAP_SIZE);
    char *a = exo_heap_malloc(h, 200, NULL);
    char *b = exo_heap_malloc(h, 200, NULL);
    char *c = exo_heap_malloc(h, 200, NULL);
    fill(b, 200, 5);
    struct seg_heap_stats before = stats_of(h);
    char local[32];
    void *bad[] = {b + 16, b + 1, b - 16, local, (char *)region + 8, (char *)region + HEAP_SIZE - 16,
                   (char *)h, (void *)(uintptr_t)16};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ(exo_heap_free(h, bad[i]), -EXO_EINVAL);
        CHECK_EQ(exo_heap_usable_size(h, bad[i]), 0);
    }
    struct seg_heap_stats after = stats_of(h);
    CHECK(memcmp(&before, &after, sizeof before) == 0);
    CHECK(intact(b, 200, 5));

    /* Double free, also after the chunk merged with its free neighbours. */
    CHECK_OK(exo_heap_free(h, a));
    CHECK_EQ(exo_heap_free(h, a), -EXO_EINVAL);
    CHECK_OK(exo_heap_free(h, b));
    CHECK_EQ(exo_heap_free(h, b), -EXO_EINVAL);
    CHECK_EQ(exo_heap_free(h, a), -EXO_EINVAL);
    CHECK_EQ(stats_of(h).allocations, 1);
    char *l = exo_heap_malloc(h, 64, NULL), *m = exo_heap_malloc(h, 64, NULL);
    char *r = exo_heap_malloc(h, 64, NULL), *fence = exo_heap_malloc(h, 64, NULL);
    CHECK_OK(exo_heap_free(h, l));
    CHECK_OK(exo_heap_free(h, r));
    CHECK_OK(exo_heap_free(h, m));   /* merges with both neighbours */
    CHECK_EQ(exo_heap_free(h, m), -EXO_EINVAL);
    CHECK_EQ(exo_heap_free(h, r), -EXO_EINVAL);
    CHECK_OK(exo_heap_free(h, fence));
    CHECK_EQ(stats_of(h).allocations, 1);

    /* An overrun that smashes the next chunk's tag: reported, never made worse. */
    char *x = exo_heap_malloc(h, 100, NULL);
    char *y = exo_heap_malloc(h, 100, NULL);
    size_t ux = exo_heap_usable_size(h, x);
    uint64_t saved_tag;
    memcpy(&saved_tag, x + ux + 8, sizeof saved_tag);   /* past x's footer: y's header */
    memset(x + ux + 8, 0x41, 8);
    CHECK_EQ(exo_heap_check(h, NULL), -EXO_ECORRUPT);
    CHECK_EQ(exo_heap_free(h, y), -EXO_EINVAL);
    CHECK_EQ(exo_heap_free(h, x), -EXO_ECORRUPT);
    memcpy(x + ux + 8, &saved_tag, sizeof saved_tag);
    CHECK_OK(exo_heap_check(h, NULL));
    CHECK_OK(exo_heap_free(h, x));
    CHECK_OK(exo_heap_free(h, y));
    CHECK_OK(exo_heap_free(h, c));
    CHECK_EQ(stats_of(h).free_chunks, 1);
    munmap(region, HEAP_SIZE);
}

static void test_open_errors(void)
{
    void *region = region_new(HEAP_SIZE);
    struct exo_heap *h = NULL;
    CHECK_EQ(exo_heap_open(region, 64, &h), -EXO_EINVAL);
    CHECK_EQ(exo_heap_open((char *)region + 8, HEAP_SIZE - 16, &h), -EXO_EINVAL);
    CHECK_EQ(exo_heap_open(NULL, HEAP_SIZE, &h), -EXO_EINVAL);
    CHECK_OK(exo_heap_open_ro(region, HEAP_SIZE, &h));
    CHECK(h == NULL);   /* fresh: no heap yet */

    /* Junk in an otherwise zero header is not a fresh segment. */
    ((char *)region)[100] = 1;
    CHECK_EQ(exo_heap_open(region, HEAP_SIZE, &h), -EXO_ECORRUPT);
    ((char *)region)[100] = 0;
    h = heap_new(region, HEAP_SIZE);
    CHECK_EQ(exo_heap_open(region, HEAP_SIZE / 2, &h), -EXO_ECORRUPT);
    for (int byte = 0; byte < 8; byte++) {   /* magic, then version */
        int off = byte < 4 ? byte : 4 + byte;
        ((unsigned char *)region)[off] ^= 0x20;
        CHECK_EQ(exo_heap_open(region, HEAP_SIZE, &h), -EXO_ECORRUPT);
        CHECK_EQ(exo_heap_open_ro(region, HEAP_SIZE, &h), -EXO_ECORRUPT);
        ((unsigned char *)region)[off] ^= 0x20;
    }
    CHECK_OK(exo_heap_open(region, HEAP_SIZE, &h));
    CHECK_OK(exo_heap_check(h, NULL));
    munmap(region, HEAP_SIZE);
}

static void *thread_ops(void *arg)
{
    static _Atomic uint64_t seeds = 1000;
    random_ops(arg, seeds++, 20000, 200, 0);
    return NULL;
}

static void test_threads(void)
{
    void *region = region_new(HEAP_SIZE);
    struct exo_heap *h = heap_new(region, HEAP_SIZE);
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        CHECK_EQ(pthread_create(&t[i], NULL, thread_ops, h), 0);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    struct seg_heap_stats st = stats_of(h);
    CHECK_EQ(st.allocations, 0);
    CHECK_EQ(st.free_chunks, 1);
    munmap(region, HEAP_SIZE);
}

static struct exo_heap *shared_heap;

static void child_ops(void *arg)
{
    random_ops(shared_heap, (uint64_t)(uintptr_t)arg, 20000, 300, 2000);
}

static void test_processes(void)
{
    void *region = region_new(HEAP_SIZE);
    shared_heap = heap_new(region, HEAP_SIZE);
    char *root = exo_heap_malloc(shared_heap, 256, NULL);
    fill(root, 256, 77);
    CHECK_OK(exo_heap_set_root(shared_heap, root));
    fflush(NULL);
    pid_t kids[2];
    for (int i = 0; i < 2; i++) {
        kids[i] = fork();
        CHECK(kids[i] >= 0);
        if (kids[i] == 0) {
            child_ops((void *)(uintptr_t)(i + 5));
            _exit(0);
        }
    }
    for (int i = 0; i < 2; i++) {
        int status;
        CHECK(waitpid(kids[i], &status, 0) == kids[i]);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    struct seg_heap_stats st = stats_of(shared_heap);
    CHECK_EQ(st.allocations, 1);
    CHECK(exo_heap_get_root(shared_heap) == root);
    CHECK(intact(root, 256, 77));
    munmap(region, HEAP_SIZE);
}

/* Allocation churn without touching the blocks, so that most of the time goes by inside the
 * heap's critical sections; never returns. */
static void churn_forever(struct exo_heap *h)
{
    void *slot[128] = {0};
    uint64_t rng = (uint64_t)getpid() * 2654435761u | 1;
    for (;;) {
        void **x = &slot[rng_next(&rng) % 128];
        uint64_t r = rng_next(&rng);
        if (*x && r % 3 == 0)
            *x = exo_heap_realloc(h, *x, random_size(&rng), NULL);
        else if (*x) {
            CHECK_OK(exo_heap_free(h, *x));
            *x = NULL;
        }
        else if (r % 7 == 0)
            *x = exo_heap_memalign(h, 256, random_size(&rng), NULL);
        else
            *x = exo_heap_malloc(h, random_size(&rng), NULL);
    }
}

static void die_holding(void *drop)
{
    CHECK_OK(exo_heap_test_hold(shared_heap, drop != NULL));
    raise(SIGKILL);
}

static void test_owner_death(void)
{
    void *region = region_new(HEAP_SIZE);
    shared_heap = heap_new(region, HEAP_SIZE);
    struct exo_heap *h = shared_heap;
    char *root = exo_heap_malloc(h, 128, NULL);
    fill(root, 128, 9);
    exo_heap_set_root(h, root);
    void *p[64];
    for (int i = 0; i < 64; i++)
        p[i] = exo_heap_malloc(h, 100 + (size_t)i * 50, NULL);
    for (int i = 0; i < 64; i += 2)
        CHECK_OK(exo_heap_free(h, p[i]));
    struct seg_heap_stats before = stats_of(h);

    /* Death with the heap consistent: the next locker goes on without a rebuild. */
    uint64_t deaths, rebuilds;
    CHECK_EQ(test_in_child(die_holding, NULL), 128 + SIGKILL);
    void *q = exo_heap_malloc(h, 10, NULL);
    CHECK(q != NULL);
    exo_heap_recoveries(h, &deaths, &rebuilds);
    CHECK_EQ(deaths, 1);
    CHECK_EQ(rebuilds, 0);
    CHECK_OK(exo_heap_free(h, q));

    /* Death in mid-operation, free lists lost: rebuilt from the chunk tags. */
    CHECK_EQ(test_in_child(die_holding, (void *)1), 128 + SIGKILL);
    struct seg_heap_stats after = stats_of(h);
    exo_heap_recoveries(h, &deaths, &rebuilds);
    CHECK_EQ(deaths, 2);
    CHECK_EQ(rebuilds, 1);
    CHECK(memcmp(&before, &after, sizeof before) == 0);
    for (int i = 1; i < 64; i += 2)
        CHECK_OK(exo_heap_free(h, p[i]));
    CHECK_EQ(stats_of(h).free_chunks, 1);   /* every free byte came back */

    /* Children killed at random moments of an allocation loop. */
    uint64_t rng = (uint64_t)time(NULL) | 1;
    for (int round = 0; round < 30; round++) {
        fflush(NULL);
        pid_t kid = fork();
        CHECK(kid >= 0);
        if (kid == 0)
            churn_forever(h);
        struct timespec ts = {0, (long)(1000000 + rng_next(&rng) % 4000000)};
        nanosleep(&ts, NULL);
        kill(kid, SIGKILL);
        int status;
        CHECK(waitpid(kid, &status, 0) == kid);
        CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        stats_of(h);
        CHECK(exo_heap_get_root(h) == root);
        CHECK(intact(root, 128, 9));
        void *r = exo_heap_malloc(h, 5000, NULL);
        CHECK(r != NULL);
        CHECK_OK(exo_heap_free(h, r));
    }
    exo_heap_recoveries(h, &deaths, &rebuilds);
    fprintf(stderr, "random kills: %" PRIu64 " owner deaths, %" PRIu64 " rebuilds\n",
            deaths - 2, rebuilds - 1);
    munmap(region, HEAP_SIZE);
}

/* The public face of the same heap (alloc.h: seg_heap_*): codes, errno and a message. */
static void test_public_api(void)
{
    void *region = region_new(HEAP_SIZE);
    seg_heap *h = NULL;
    CHECK_ERR(seg_heap_open(region, 64, &h), EXO_EINVAL);
    CHECK(strstr(exomem_last_error(), "cannot hold a heap") != NULL);
    CHECK_ERR(seg_heap_open(NULL, HEAP_SIZE, &h), EXO_EINVAL);
    ((char *)region)[100] = 1;
    CHECK_ERR(seg_heap_open(region, HEAP_SIZE, &h), EXO_ECORRUPT);
    ((char *)region)[100] = 0;
    CHECK_OK(seg_heap_open(region, HEAP_SIZE, &h));
    char *p = seg_heap_malloc(h, 100);
    CHECK(p != NULL && seg_heap_owns(h, p) && !seg_heap_owns(h, &h));
    memset(p, 0xab, 100);
    errno = 0;
    CHECK(seg_heap_malloc(h, HEAP_SIZE) == NULL);
    CHECK_EQ(errno, ENOMEM);
    CHECK_EQ(seg_heap_last_code(), -EXO_ENOMEM);
    CHECK(strstr(exomem_last_error(), "no free space") != NULL);
    struct seg_heap_stats st;
    CHECK_OK(seg_heap_check(h, &st));
    CHECK_EQ(st.allocations, 1);
    CHECK_OK(seg_heap_free(h, p));
    CHECK_ERR(seg_heap_free(h, p), EXO_EINVAL);
    CHECK_OK(seg_heap_free(h, NULL));
    CHECK_OK(seg_heap_check(h, &st));
    CHECK_EQ(st.allocations, 0);
    /* Reopened, it is the same heap, not a new one. */
    char *q = seg_heap_malloc(h, 64);
    CHECK(q != NULL);
    CHECK_OK(seg_heap_open(region, HEAP_SIZE, &h));
    CHECK_OK(seg_heap_check(h, &st));
    CHECK_EQ(st.allocations, 1);
    munmap(region, HEAP_SIZE);
}

int main(void)
{
    test_public_api();
    test_basic();
    test_realloc();
    test_memalign();
    test_stress();
    test_overflow();
    test_bad_free();
    test_open_errors();
    test_threads();
    test_processes();
    test_owner_death();
    fprintf(stderr, "test_heap: ok\n");
    return 0;
}
