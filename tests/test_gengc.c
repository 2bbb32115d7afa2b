/* The generational collector (apps/gengc): the binary-trees mutator (with pointer stores into
 * old objects) gives identical results whether the remembered set comes from a card-marking
 * write barrier or from DIRTY, with each dirty-tracking engine the kernel has (uffd and
 * signal must both be tested where they work); the heap is verified after every collection;
 * and a remembered set that drops what DIRTY (or the cards) reported is caught by the
 * verifier, so the verifier can fail. */
#include "harness.h"

#include "gengc.h"

#include <exomem/vm.h>
#include <string.h>

static const struct lh_bintrees_params params = {
    .min_depth = 4, .max_depth = 10, .long_depth = 12, .ring_slots = 256,
    .mutate_every = 2, .scale = 64, .seed = 7,
};

struct variant {
    const char *name;
    enum gengc_rs rs;
    exo_vm_engine engine;
};

static gengc_heap *make(const struct variant *v, int drop)
{
    struct gengc_config cfg = {.nursery_bytes = 256u << 10, .old_bytes = 12u << 20,
                               .rs = v->rs, .engine = v->engine, .verify_each_gc = 1,
                               .test_drop_dirty = drop};
    gengc_heap *h = NULL;
    CHECK_OK(gengc_create(&cfg, &h));
    if (v->rs == GENGC_RS_DIRTY)
        CHECK_EQ(gengc_engine(h), v->engine);
    return h;
}

static uint64_t run(const struct variant *v)
{
    gengc_heap *h = make(v, 0);
    struct lh_heap_if hi;
    gengc_heap_if(h, &hi);
    struct lh_bintrees_result res;
    CHECK_OK(lh_bintrees_run(&hi, &params, &res));
    CHECK_EQ(res.bad_checks, 0);
    CHECK(res.trees > 1000);
    gengc_minor(h);
    CHECK_EQ(gengc_verify(h), 0);
    struct gengc_stats st;
    gengc_get_stats(h, &st);
    CHECK_EQ(st.verify_errors, 0);
    CHECK(st.minor > 20);
    CHECK(st.major >= 1);
    CHECK(st.rs_bytes > 0);
    fprintf(stderr, "%s: %llu minor (%.1f ms), %llu major (%.1f ms), rs %llu KiB scanned in "
            "%.1f ms, %llu KiB promoted\n", v->name, (unsigned long long)st.minor,
            st.minor_ns / 1e6, (unsigned long long)st.major, st.major_ns / 1e6,
            (unsigned long long)(st.rs_bytes >> 10), st.rs_ns / 1e6,
            (unsigned long long)(st.promoted_bytes >> 10));
    gengc_destroy(h);
    return res.digest;
}

/* An old vector gets young conses stored into it; the next minor collection must find them
 * through the remembered set. With `drop` it does not: the verifier must say so. */
static long old_to_young(const struct variant *v, int drop)
{
    gengc_heap *h = make(v, drop);
    struct lh_heap_if hi;
    gengc_heap_if(h, &hi);
    struct lh_roots *r = gengc_roots(h);
    lh_val vec = gengc_alloc(h, LH_T_VEC, 200);
    CHECK(vec != LH_NIL);
    lh_root_push(r, vec);
    gengc_minor(h); /* the vector is old now */
    CHECK_EQ(gengc_verify(h), 0);
    for (unsigned i = 0; i < 200; i += 7) {
        lh_val c = gengc_alloc(h, LH_T_CONS, 2);
        CHECK(c != LH_NIL);
        hi.store(h, c, 0, lh_fix(i));
        hi.store(h, r->slot[0], i, c);
    }
    gengc_minor(h);
    long bad = gengc_verify(h);
    if (!drop) {
        CHECK_EQ(bad, 0);
        for (unsigned i = 0; i < 200; i++) {
            lh_val c = lh_field(r->slot[0], i);
            if (i % 7)
                CHECK(c == LH_NIL);
            else
                CHECK_EQ(lh_fixval(lh_field(c, 0)), i);
        }
    }
    gengc_destroy(h);
    return bad;
}

int main(void)
{
    struct variant vars[] = {
        {"cards", GENGC_RS_CARDS, EXO_VM_ENGINE_AUTO},
        {"dirty/uffd", GENGC_RS_DIRTY, EXO_VM_ENGINE_UFFD},
        {"dirty/signal", GENGC_RS_DIRTY, EXO_VM_ENGINE_SIGNAL},
        {"dirty/softdirty", GENGC_RS_DIRTY, EXO_VM_ENGINE_SOFTDIRTY},
    };
    uint64_t digest = 0;
    int tested = 0, dirty_tested = 0;
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const struct variant *v = &vars[i];
        const char *why = NULL;
        if (v->rs == GENGC_RS_DIRTY &&
            exo_vm_engine_supported(v->engine, EXO_VM_TRACK_DIRTY, &why) != 0) {
            /* uffd and signal are required where the kernel has them; softdirty is optional */
            fprintf(stderr, "%s: not tested: %s\n", v->name, why ? why : "unsupported");
            continue;
        }
        CHECK_EQ(old_to_young(v, 0), 0);
        CHECK(old_to_young(v, 1) > 0);
        uint64_t d = run(v);
        if (tested++ == 0)
            digest = d;
        CHECK(d == digest);
        dirty_tested += v->rs == GENGC_RS_DIRTY;
    }
    CHECK(dirty_tested >= 1);
    printf("test_gengc: ok (%d variants)\n", tested);
    return 0;
}
