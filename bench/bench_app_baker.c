/* bench_app_baker: pause times of Baker's concurrent copying collector (apps/baker: TRAP +
 * PROTN + UNPROT + MAP2) against a stop-the-world copy of the same heap, on the binary-trees
 * mutator (lispheap). A pause is a time the mutator is stopped: a flip (for the baseline, the
 * whole collection), a fault handler scanning a page, or finishing a collection it ran out of
 * room for. Fault pauses are timed inside the handler, so they leave out the kernel's signal
 * delivery and return (bench_vm's vm_trap measures those, a few microseconds).
 *
 *   stw_pause_max / _median / _total    the stop-the-world baseline
 *   baker_pause_max / _median / _total  the concurrent collector (baseline: the stw_ ones)
 *   stw_run / baker_run                 the whole mutator run, ms (baseline stw_run)
 *   baker_faults, baker_flips, stw_flips counts
 * One JSON line per measurement and repeat on stdout; messages on stderr.
 */
#include "baker.h"
#include "bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
    int repeats;
    int semi_mib;
    unsigned headroom_pct;
    struct lh_bintrees_params p;
} opt = {3, 48, 25, {4, 14, 16, 128, 4, 64, 1, 12}};

static void emit(const char *name, const char *unit, double v, const char *baseline)
{
    char params[160];
    snprintf(params, sizeof params,
             "\"semispace_mib\": %d, \"headroom_pct\": %u, \"max_depth\": %d, "
             "\"long_depth\": %d, \"ring\": %d", opt.semi_mib, opt.headroom_pct, opt.p.max_depth, opt.p.long_depth, opt.p.ring_slots);
    bench_emit(name, unit, v, params, baseline, NULL);
}

/* One run of the mutator under `mode`; emits its measurements with prefix `pre`. */
static void measure(enum baker_mode mode, const char *pre, const char *base_pre)
{
    struct baker_config cfg = {.semispace_bytes = (size_t)opt.semi_mib << 20, .mode = mode,
                               .max_pauses = 1u << 20, .headroom_pct = opt.headroom_pct};
    baker_heap *h;
    TRY(baker_create(&cfg, &h));
    struct lh_heap_if hi;
    baker_heap_if(h, &hi);
    struct lh_bintrees_result res;
    uint64_t t0 = bench_now_ns();
    if (lh_bintrees_run(&hi, &opt.p, &res) != 0 || res.bad_checks != 0) {
        fprintf(stderr, "bench_app_baker: %s: mutator failed (%llu bad checks)\n", pre,
                (unsigned long long)res.bad_checks);
        exit(1);
    }
    double run_ms = (double)(bench_now_ns() - t0) / 1e6;
    struct baker_stats st;
    baker_get_stats(h, &st);
    size_t n;
    uint64_t *sorted = baker_pauses_sorted(h, &n);
    if (!sorted)
        exit(1);
    char name[64], base[64];
#define EMIT(suffix, unit, value)                                                              \
    do {                                                                                       \
        snprintf(name, sizeof name, "%s_%s", pre, suffix);                                     \
        snprintf(base, sizeof base, "%s_%s", base_pre ? base_pre : "", suffix);                \
        emit(name, unit, value, base_pre ? base : NULL);                                       \
    } while (0)
    EMIT("pause_max", "us", n ? (double)sorted[n - 1] / 1e3 : 0);
    EMIT("pause_median", "us", n ? (double)sorted[n / 2] / 1e3 : 0);
    EMIT("pause_p99", "us", n ? (double)sorted[(n * 99) / 100] / 1e3 : 0);
    EMIT("pause_total", "ms", (double)st.pause_total_ns / 1e6);
    EMIT("run", "ms", run_ms);
    snprintf(name, sizeof name, "%s_flips", pre);
    emit(name, "count", (double)st.flips, NULL);
    if (mode == BAKER_CONCURRENT) {
        emit("baker_flip_max", "us", (double)st.max_flip_ns / 1e3, NULL);
        emit("baker_fault_max", "us", (double)st.max_fault_ns / 1e3, NULL);
        emit("baker_assist_max", "us", (double)st.max_assist_ns / 1e3, NULL);
        emit("baker_wait_max", "us", (double)st.max_wait_ns / 1e3, NULL);
        emit("baker_faults", "count", (double)st.faults, NULL);
        emit("baker_pauses", "count", (double)n, NULL);
    }
    fprintf(stderr, "bench_app_baker: %s: %.0f ms, %llu flips, %zu pauses (max %.0f us), "
            "%llu faults, %llu thread / %llu assist / %llu sync page scans; max flip %.0f, fault %.0f, "
            "assist %.0f, wait %.0f us\n", pre, run_ms,
            (unsigned long long)st.flips, n, n ? sorted[n - 1] / 1e3 : 0.0,
            (unsigned long long)st.faults, (unsigned long long)st.thread_scans,
            (unsigned long long)st.assist_scans, (unsigned long long)st.sync_scans,
            st.max_flip_ns / 1e3, st.max_fault_ns / 1e3, st.max_assist_ns / 1e3,
            st.max_wait_ns / 1e3);
    free(sorted);
    baker_destroy(h);
}

static int bench_main(void)
{
    const char *why;
    int concurrent = exo_vm_engine_supported(EXO_VM_ENGINE_SIGNAL, 0, &why) == 0;
    if (!concurrent)
        printf("{\"name\": \"skip\", \"params\": {\"collector\": \"concurrent\"}, "
               "\"reason\": \"signal engine: %s\"}\n", why);
    for (int r = 0; r < opt.repeats; r++) {
        measure(BAKER_STW, "stw", NULL);
        if (concurrent)
            measure(BAKER_CONCURRENT, "baker", "stw");
        fflush(stdout);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (bench_parse_args(argc, argv, &opt.repeats, 2, NULL)) {
        opt.semi_mib = 16;
        opt.p.max_depth = 12;
        opt.p.long_depth = 14;
        opt.p.ring_slots = 64;
        opt.p.scale = 64;
    }
    return bench_run_in_private_registry(bench_main);
}
