/* guardheap (apps/guardheap): the heap grows from the fault handler when an allocation meets
 * the guard; the checking variant returns the same addresses; a store past the maximum size
 * is not resumed and kills the program with SIGSEGV. */
#include "guardheap.h"
#include "harness.h"

#include <exomem/exomem.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

#define PAGE 4096u

static int asan_build(void)
{
#if defined(__SANITIZE_ADDRESS__)
    return 1;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    return 1;
#endif
#endif
    return 0;
}

/* Allocate n objects of `size`, fill each with its index, then check them all. */
static void fill_and_check(guardheap *h, int n, size_t size, void **objs)
{
    for (int i = 0; i < n; i++) {
        objs[i] = gh_alloc(h, size);
        CHECK(objs[i] != NULL);
        CHECK(((uintptr_t)objs[i] & 15) == 0);
        memset(objs[i], i & 0xff, size);
    }
    for (int i = 0; i < n; i++)
        for (size_t k = 0; k < size; k++)
            CHECK_EQ(((unsigned char *)objs[i])[k], i & 0xff);
}

static void test_growth_by_faults(void)
{
    guardheap *h;
    gh_options o = { .max_bytes = 4u << 20, .mode = GH_GUARD };
    CHECK_OK(gh_create(&o, &h));
    gh_stats s = gh_get_stats(h);
    CHECK_EQ(s.committed, PAGE);
    CHECK_EQ(s.faults, 0);
    enum { N = 10000, SIZE = 64 };
    static void *objs[N];
    fill_and_check(h, N, SIZE, objs);
    s = gh_get_stats(h);
    CHECK_EQ(s.used, (size_t)N * (SIZE + GH_HEADER));
    /* every byte up to the bump pointer was written, so the heap grew exactly that far,
     * one page per fault and no other way */
    CHECK_EQ(s.committed, (s.used + PAGE - 1) / PAGE * PAGE);
    CHECK_EQ(s.faults, s.committed / PAGE - 1);
    CHECK_EQ(s.grows, s.faults);
    /* freed objects are reused without touching the guard */
    gh_free(h, objs[5]);
    CHECK(gh_alloc(h, SIZE) == objs[5]);
    CHECK_EQ(gh_get_stats(h).faults, s.faults);
    CHECK_OK(gh_destroy(h));
    printf("growth by faults: %d objects, %lu faults, %zu KiB committed\n", N, s.faults,
           s.committed >> 10);
}

/* The same mixed sequence (sizes, frees, a few large objects) in both modes. */
static void run_sequence(gh_mode mode, exo_vm_engine engine, size_t *offsets, int n,
                         gh_stats *out)
{
    guardheap *h;
    gh_options o = { .max_bytes = 64u << 20, .grow_bytes = 16 * PAGE, .mode = mode,
                     .engine = engine };
    CHECK_OK(gh_create(&o, &h));
    static void *objs[4096];
    memset(objs, 0, sizeof objs);
    uint64_t rng = 12345;
    for (int i = 0; i < n; i++) {
        rng = rng * 6364136223846793005u + 1442695040888963407u;
        size_t size = (rng >> 33) % 200 == 0 ? 1500 + (rng >> 20) % 20000 : (rng >> 40) % 700;
        int slot = (int)((rng >> 17) % 4096);
        if ((rng >> 11) % 3 == 0) {
            gh_free(h, objs[slot]);
            objs[slot] = NULL;
        }
        void *p = gh_alloc(h, size);
        CHECK(p != NULL);
        memset(p, 0x5a, size); /* touch all of it: the guard variant grows here */
        offsets[i] = (size_t)((char *)p - h->base);
        if (!objs[slot])
            objs[slot] = p;
    }
    *out = gh_get_stats(h);
    CHECK_OK(gh_destroy(h));
}

static void test_same_as_checking(exo_vm_engine engine)
{
    enum { N = 20000 };
    static size_t off_guard[N], off_check[N];
    gh_stats g, c;
    run_sequence(GH_GUARD, engine, off_guard, N, &g);
    run_sequence(GH_CHECK, engine, off_check, N, &c);
    for (int i = 0; i < N; i++)
        CHECK_EQ(off_guard[i], off_check[i]);
    CHECK_EQ(g.used, c.used);
    CHECK_EQ(g.committed, c.committed);
    CHECK(g.faults > 0);
    CHECK_EQ(c.faults, 0);
    CHECK(c.grows > 0);
    printf("same as checking (%s engine): %d calls, guard %lu faults, check %lu grows, "
           "%zu KiB\n", exo_vm_engine_name(engine), N, g.faults, c.grows, g.committed >> 10);
}

/* The checking variant says "full" with NULL; the guard variant dies at the same point. */
static void test_checking_full(void)
{
    guardheap *h;
    gh_options o = { .max_bytes = 64 * 1024, .mode = GH_CHECK };
    CHECK_OK(gh_create(&o, &h));
    int n = 0;
    while (gh_alloc(h, 100) != NULL)
        n++;
    gh_stats s = gh_get_stats(h);
    CHECK_EQ(n, (64 * 1024) / (112 + GH_HEADER));
    CHECK_EQ(s.committed, 64 * 1024);
    CHECK(gh_alloc(h, 5000) == NULL);
    CHECK_OK(gh_destroy(h));
}

static void overflow_child(void *arg)
{
    guardheap *h;
    gh_options o = { .max_bytes = 64 * 1024, .mode = GH_GUARD,
                     .engine = *(exo_vm_engine *)arg };
    if (gh_create(&o, &h) != 0)
        _exit(2);
    for (int i = 0; i < 100000; i++)
        memset(gh_alloc(h, 100), 1, 100); /* no NULL check: the guard is the check */
    _exit(3); /* never reached: the store past 64 KiB must not be resumed */
}

static void test_overflow_kills(exo_vm_engine engine)
{
    if (asan_build())
        fprintf(stderr, "(ASan build: the SEGV report below is the expected overflow)\n");
    int st = test_in_child(overflow_child, &engine);
    if (asan_build()) {
        /* ASan's own SIGSEGV handler is the "previous handler" here: it reports the wild
         * store and exits 1 instead of dying by the signal */
        printf("overflow past max: child status %d (ASan build: its SEGV report)\n", st);
        CHECK(st != 0 && st != 2 && st != 3);
    } else {
        CHECK_EQ(st, 128 + SIGSEGV);
        printf("overflow past max (%s engine): child killed by SIGSEGV\n",
               exo_vm_engine_name(engine));
    }
}

static void test_bad_options(void)
{
    guardheap *h;
    gh_options o = { .max_bytes = 1000 };
    CHECK_ERR(gh_create(&o, &h), EXO_EINVAL);
    o = (gh_options){ .max_bytes = 8 * PAGE, .initial_bytes = 16 * PAGE };
    CHECK_ERR(gh_create(&o, &h), EXO_EINVAL);
    o = (gh_options){ .grow_bytes = 100 };
    CHECK_ERR(gh_create(&o, &h), EXO_EINVAL);
}

int main(void)
{
    const char *why = NULL;
    if (exo_vm_engine_supported(EXO_VM_ENGINE_SIGNAL, 0, &why) != 0)
        SKIP("signal engine unavailable: %s", why ? why : "?");
    test_bad_options();
    test_growth_by_faults();
    test_same_as_checking(EXO_VM_ENGINE_SIGNAL);
    test_checking_full();
    test_overflow_kills(EXO_VM_ENGINE_SIGNAL);
    /* the uffd engine's guard is read-only (uffd cannot trap reads) but stores trap alike */
    if (exo_vm_engine_supported(EXO_VM_ENGINE_UFFD, 0, &why) == 0) {
        test_same_as_checking(EXO_VM_ENGINE_UFFD);
        test_overflow_kills(EXO_VM_ENGINE_UFFD);
    } else {
        printf("uffd engine not tested: %s\n", why ? why : "unavailable");
    }
    printf("test_guardheap: ok\n");
    return 0;
}
