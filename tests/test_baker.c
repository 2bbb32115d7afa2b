/* Baker's concurrent copying collector (apps/baker): the binary-trees mutator gives the same
 * results under the stop-the-world baseline, the fault-driven collector (no thread: every
 * page the mutator touches is scanned by the TRAP handler) and the concurrent one, with the
 * heap verified at every flip; faults must really be taken; and the verifier must catch a
 * collector that leaves a page unscanned. */
#include "harness.h"

#include "baker.h"

#include <exomem/vm.h>
#include <string.h>
#include <unistd.h>

#define SEMI (8u << 20)

static const struct lh_bintrees_params params = {
    .min_depth = 4, .max_depth = 10, .long_depth = 12, .ring_slots = 64,
    .mutate_every = 4, .scale = 256, .seed = 42,
};

static baker_heap *make(enum baker_mode mode, int no_thread, int skip)
{
    struct baker_config cfg = {.semispace_bytes = SEMI, .mode = mode, .no_thread = no_thread,
                               .verify_each_gc = 1, .test_skip_page = skip};
    baker_heap *h = NULL;
    CHECK_OK(baker_create(&cfg, &h));
    return h;
}

/* Run the mutator; check it and the heap; return the digest. */
static uint64_t run(enum baker_mode mode, int no_thread, struct baker_stats *st)
{
    baker_heap *h = make(mode, no_thread, 0);
    struct lh_heap_if hi;
    baker_heap_if(h, &hi);
    struct lh_bintrees_result res;
    CHECK_OK(lh_bintrees_run(&hi, &params, &res));
    CHECK_EQ(res.bad_checks, 0);
    CHECK(res.trees > 1000);
    baker_collect(h); /* one more flip, verified, then a final check of the empty heap */
    CHECK_EQ(baker_verify(h), 0);
    baker_get_stats(h, st);
    CHECK_EQ(st->verify_errors, 0);
    CHECK(st->flips >= 5);
    CHECK(st->bytes_copied > 0);
    const uint64_t *p;
    CHECK(baker_pauses(h, &p) >= st->flips);
    fprintf(stderr, "%s%s: %llu flips, %llu faults (%llu scans), %llu thread scans, "
            "%llu sync scans, %llu KiB copied\n",
            mode == BAKER_STW ? "stw" : "concurrent", no_thread ? " (no thread)" : "",
            (unsigned long long)st->flips, (unsigned long long)st->faults,
            (unsigned long long)st->fault_scans, (unsigned long long)st->thread_scans,
            (unsigned long long)st->sync_scans, (unsigned long long)(st->bytes_copied >> 10));
    baker_destroy(h);
    return res.digest;
}

/* A list of n conses (car = fixnum i) in root slot 0. */
static void make_list(baker_heap *h, int n)
{
    struct lh_roots *r = baker_roots(h);
    lh_root_push(r, LH_NIL);
    for (int i = 0; i < n; i++) {
        lh_val c = baker_alloc(h, LH_T_CONS, 2);
        CHECK(c != LH_NIL);
        lh_obj(c)[1] = lh_fix(i);
        lh_obj(c)[2] = r->slot[0];
        r->slot[0] = c;
    }
}

static void check_list(baker_heap *h, int n)
{
    lh_val c = baker_roots(h)->slot[0];
    for (int i = n - 1; i >= 0; i--) {
        CHECK(lh_is_ptr(c));
        CHECK_EQ(lh_fixval(lh_field(c, 0)), i);
        c = lh_field(c, 1);
    }
    CHECK(c == LH_NIL);
}

/* After a flip the list lies on no-access pages; walking it faults them in one by one. */
static void test_faults_scan_pages(void)
{
    baker_heap *h = make(BAKER_CONCURRENT, 1, 0);
    make_list(h, 20000);
    baker_collect(h);
    struct baker_stats st;
    baker_get_stats(h, &st);
    CHECK_EQ(st.faults, 0);
    check_list(h, 20000);
    baker_get_stats(h, &st);
    CHECK(st.faults > 10); /* ~80 pages of conses, each scanned on its first touch */
    CHECK_EQ(st.faults, st.fault_scans);
    CHECK_EQ(baker_verify(h), 0);
    baker_collect(h);
    check_list(h, 20000);
    CHECK_EQ(baker_verify(h), 0);
    baker_destroy(h);
}

/* Left alone, the collector thread completes a collection by itself (and unprotects what it
 * scanned: walking the list afterwards takes no fault). */
static void test_thread_completes(void)
{
    baker_heap *h = make(BAKER_CONCURRENT, 0, 0);
    make_list(h, 20000);
    baker_collect(h);
    for (int i = 0; i < 10000 && baker_collecting(h); i++)
        usleep(1000);
    CHECK(!baker_collecting(h));
    struct baker_stats st;
    baker_get_stats(h, &st);
    CHECK(st.thread_scans > 10);
    CHECK_EQ(st.sync_scans + st.fault_scans + st.assist_scans, 0);
    check_list(h, 20000);
    baker_get_stats(h, &st);
    CHECK_EQ(st.faults, 0);
    CHECK_EQ(baker_verify(h), 0);
    baker_destroy(h);
}

/* The verifier is not vacuous: a collection that leaves one page unscanned is caught. */
static void test_verifier_catches_unscanned_page(enum baker_mode mode)
{
    baker_heap *h = make(mode, 1, 1);
    make_list(h, 20000);
    baker_collect(h);
    baker_finish(h);
    CHECK(baker_verify(h) > 0);
    baker_destroy(h);
    h = make(mode, 1, 0); /* the same without the hook is healthy */
    make_list(h, 20000);
    baker_collect(h);
    baker_finish(h);
    CHECK_EQ(baker_verify(h), 0);
    check_list(h, 20000);
    baker_destroy(h);
}

int main(void)
{
    struct baker_stats stw, nothread, conc;
    uint64_t d_stw = run(BAKER_STW, 0, &stw);
    CHECK_EQ(stw.faults, 0);
    test_verifier_catches_unscanned_page(BAKER_STW);

    const char *why = NULL;
    if (exo_vm_engine_supported(EXO_VM_ENGINE_SIGNAL, 0, &why) != 0)
        SKIP("signal engine: %s (only the stop-the-world collector was tested)", why);
    test_faults_scan_pages();
    test_verifier_catches_unscanned_page(BAKER_CONCURRENT);

    uint64_t d_nothread = run(BAKER_CONCURRENT, 1, &nothread);
    CHECK(d_nothread == d_stw);
    CHECK(nothread.faults > 0);
    CHECK(nothread.fault_scans > 0);
    CHECK_EQ(nothread.thread_scans, 0);

    uint64_t d_conc = run(BAKER_CONCURRENT, 0, &conc);
    CHECK(d_conc == d_stw);
    test_thread_completes();
    printf("test_baker: ok\n");
    return 0;
}
