/* bench_app_gengc: a generational collector whose remembered set comes from DIRTY (apps/gengc,
 * per dirty-tracking engine) against the same collector with a card-marking write barrier,
 * on the same binary-trees mutator (lispheap) with pointer stores into old objects (a ring of
 * recent trees held by old vectors, and subtrees replaced deep in an old tree).
 *
 *   gengc_run       the whole mutator run, ms
 *   gengc_mutator   of which the mutator (run - collections), ms: the barrier's cost is here
 *   gengc_minor     time in minor collections, ms; gengc_minor_each, us per minor collection
 *   gengc_rs        of gengc_minor, finding + scanning the remembered set (DIRTY call or card
 *                   table), ms
 *   gengc_major     time in major collections, ms
 * params: rs = cards | dirty, engine = the dirty-tracking engine. The dirty variants name the
 * cards variant as their baseline. Every variant must compute the same digest, else exit 1.
 * One JSON line per measurement and repeat on stdout; messages on stderr.
 */
#include "bench_util.h"
#include "gengc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
    int repeats;
    int nursery_kib, old_mib;
    struct lh_bintrees_params p;
} opt = {3, 1024, 64, {4, 14, 16, 1024, 1, 64, 3, 8}};

struct variant {
    enum gengc_rs rs;
    exo_vm_engine engine;
};

static void emit(const struct variant *v, const char *name, const char *unit, double value)
{
    char common[160];
    snprintf(common, sizeof common,
             "\"nursery_kib\": %d, \"old_mib\": %d, \"max_depth\": %d, \"ring\": %d",
             opt.nursery_kib, opt.old_mib, opt.p.max_depth, opt.p.ring_slots);
    printf("{\"name\": \"%s\", \"unit\": \"%s\", \"value\": %.3f, \"params\": {\"rs\": \"%s\", "
           "\"engine\": \"%s\", %s}", name, unit, value,
           v->rs == GENGC_RS_CARDS ? "cards" : "dirty",
           v->rs == GENGC_RS_CARDS ? "none" : exo_vm_engine_name(v->engine), common);
    if (v->rs == GENGC_RS_DIRTY)
        printf(", \"baseline\": \"%s\", \"baseline_params\": {\"rs\": \"cards\", "
               "\"engine\": \"none\", %s}", name, common);
    printf("}\n");
}

/* One run; returns the mutator's digest. */
static uint64_t measure(const struct variant *v)
{
    struct gengc_config cfg = {.nursery_bytes = (size_t)opt.nursery_kib << 10,
                               .old_bytes = (size_t)opt.old_mib << 20, .rs = v->rs,
                               .engine = v->engine};
    gengc_heap *h;
    TRY(gengc_create(&cfg, &h));
    struct lh_heap_if hi;
    gengc_heap_if(h, &hi);
    struct lh_bintrees_result res;
    uint64_t t0 = bench_now_ns();
    if (lh_bintrees_run(&hi, &opt.p, &res) != 0 || res.bad_checks != 0) {
        fprintf(stderr, "bench_app_gengc: mutator failed (%llu bad checks)\n",
                (unsigned long long)res.bad_checks);
        exit(1);
    }
    double run = (double)(bench_now_ns() - t0) / 1e6;
    struct gengc_stats st;
    gengc_get_stats(h, &st);
    double minor = st.minor_ns / 1e6, major = st.major_ns / 1e6;
    emit(v, "gengc_run", "ms", run);
    emit(v, "gengc_mutator", "ms", run - minor - major);
    emit(v, "gengc_minor", "ms", minor);
    emit(v, "gengc_minor_each", "us", st.minor ? st.minor_ns / 1e3 / (double)st.minor : 0);
    emit(v, "gengc_rs", "ms", st.rs_ns / 1e6);
    emit(v, "gengc_major", "ms", major);
    fprintf(stderr, "bench_app_gengc: %s/%s: %.0f ms (mutator %.0f), %llu minor %.1f ms "
            "(remembered set %.1f ms, %llu MiB scanned), %llu major %.1f ms\n",
            v->rs == GENGC_RS_CARDS ? "cards" : "dirty",
            v->rs == GENGC_RS_CARDS ? "-" : exo_vm_engine_name(v->engine), run,
            run - minor - major, (unsigned long long)st.minor, minor, st.rs_ns / 1e6,
            (unsigned long long)(st.rs_bytes >> 20), (unsigned long long)st.major, major);
    gengc_destroy(h);
    return res.digest;
}

static int bench_main(void)
{
    struct variant vars[] = {
        {GENGC_RS_CARDS, EXO_VM_ENGINE_AUTO},
        {GENGC_RS_DIRTY, EXO_VM_ENGINE_UFFD},
        {GENGC_RS_DIRTY, EXO_VM_ENGINE_SIGNAL},
        {GENGC_RS_DIRTY, EXO_VM_ENGINE_SOFTDIRTY},
    };
    size_t nv = sizeof vars / sizeof vars[0];
    int ok[4];
    for (size_t i = 0; i < nv; i++) {
        const char *why = NULL;
        ok[i] = vars[i].rs == GENGC_RS_CARDS ||
                exo_vm_engine_supported(vars[i].engine, EXO_VM_TRACK_DIRTY, &why) == 0;
        if (!ok[i])
            printf("{\"name\": \"skip\", \"params\": {\"rs\": \"dirty\", \"engine\": \"%s\"}, "
                   "\"reason\": \"%s\"}\n", exo_vm_engine_name(vars[i].engine),
                   why ? why : "unsupported");
    }
    uint64_t digest = 0;
    for (int r = 0; r < opt.repeats; r++) {
        for (size_t i = 0; i < nv; i++) {
            if (!ok[i])
                continue;
            uint64_t d = measure(&vars[i]);
            if (r == 0 && i == 0)
                digest = d;
            if (d != digest) {
                fprintf(stderr, "bench_app_gengc: variant %zu computed a different digest\n", i);
                return 1;
            }
        }
        fflush(stdout);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (bench_parse_args(argc, argv, &opt.repeats, 2, NULL)) {
        opt.old_mib = 24;
        opt.p.max_depth = 12;
        opt.p.long_depth = 14;
        opt.p.ring_slots = 256;
        opt.p.scale = 32;
    }
    return bench_run_in_private_registry(bench_main);
}
