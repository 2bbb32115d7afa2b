/* bench_app_guardheap: heap-overflow detection by guard page against the bound check on every
 * allocation (Appel and Li, application 6), on the same bump/size-class allocator.
 *
 *   guardheap_alloc       million small allocations (32 B, bump path) per second; the guard
 *                         variant's baseline is the checking variant with the same growth step.
 *                         "cold": a fresh heap, so the kernel also zero-fills every page;
 *                         "warm": the heap was grown once and reset (gh_reset), so only the
 *                         growth (trap + protect, or check + protect) differs;
 *                         "committed": the whole heap is accessible from the start, so nothing
 *                         grows and only the bound check itself differs.
 *   guardheap_faults      guard faults (= growth steps) one run of the guard variant takes.
 *   guardheap_page_alloc  thousand page-sized allocations per second with a 4 KiB growth step:
 *                         every allocation grows the heap, so this is the trap's cost against
 *                         the check's (both then call exo_vm_protect).
 * Each repeat prints one JSON line per measurement (bench/run.py protocol).
 */
#include "bench_util.h"
#include "guardheap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
    int repeats;
    long objects;      /* small allocations per run */
    long page_objects; /* page-sized allocations per run */
} opt = { 5, 2000000, 20000 };

#define SMALL 32

static void emit(const char *name, const char *unit, double value, const char *mode,
                 const char *params, int with_baseline)
{
    printf("{\"name\":\"%s\",\"unit\":\"%s\",\"value\":%.4f,\"params\":{\"mode\":\"%s\",%s}",
           name, unit, value, mode, params);
    if (with_baseline)
        printf(",\"baseline\":\"%s\",\"baseline_params\":{\"mode\":\"check\",%s}", name, params);
    printf("}\n");
    fflush(stdout);
}

static guardheap *make_heap(gh_mode mode, exo_vm_engine engine, size_t grow, size_t max,
                            size_t initial)
{
    guardheap *h;
    gh_options o = { .max_bytes = max, .grow_bytes = grow, .initial_bytes = initial,
                     .mode = mode, .engine = engine };
    TRY(gh_create(&o, &h));
    return h;
}

/* n small allocations; returns seconds. The loop is the same for both modes but for the
 * inlined fast path. */
static double alloc_loop(guardheap *h, long n)
{
    uint64_t t0 = bench_now_ns();
    if (h->mode == GH_GUARD) {
        for (long i = 0; i < n; i++)
            if (!gh_alloc_guard(h, SMALL))
                bench_die("gh_alloc_guard", -1);
    } else {
        for (long i = 0; i < n; i++)
            if (!gh_alloc_check(h, SMALL))
                bench_die("gh_alloc_check", -1);
    }
    return (double)(bench_now_ns() - t0) / 1e9;
}

static double page_loop(guardheap *h, long n)
{
    size_t size = 4096 - GH_HEADER; /* large path: one header + object per page */
    uint64_t t0 = bench_now_ns();
    for (long i = 0; i < n; i++) {
        char *p = gh_alloc(h, size);
        if (!p)
            bench_die("gh_alloc", -1);
        p[size - 1] = 1; /* touch the end too, as a program would */
    }
    return (double)(bench_now_ns() - t0) / 1e9;
}

struct variant {
    const char *name;
    gh_mode mode;
    exo_vm_engine engine;
};

static int bench_main(void)
{
    struct variant variants[3] = {
        { "check", GH_CHECK, EXO_VM_ENGINE_SIGNAL },
        { "guard", GH_GUARD, EXO_VM_ENGINE_SIGNAL },
        { "guard-uffd", GH_GUARD, EXO_VM_ENGINE_UFFD },
    };
    int nvariants = 3;
    const char *why = NULL;
    if (exo_vm_engine_supported(EXO_VM_ENGINE_UFFD, 0, &why) != 0) {
        printf("{\"name\":\"skip\",\"params\":{\"mode\":\"guard-uffd\"},\"reason\":\"%s\"}\n",
               why ? why : "uffd engine unavailable");
        nvariants = 2;
    }
    size_t heap = (size_t)opt.objects * (SMALL + GH_HEADER) + (4u << 20);
    heap = (heap + (1u << 20) - 1) & ~(size_t)((1u << 20) - 1);
    static const size_t grows[] = { 4096, 65536, 1u << 20 };
    char params[160];
    for (int r = 0; r < opt.repeats; r++) {
        for (size_t g = 0; g < sizeof grows / sizeof *grows; g++) {
            for (int v = 0; v < nvariants; v++) {
                static const char *const states[] = { "cold", "warm", "committed" };
                for (int warm = 0; warm < 3; warm++) {
                    if (warm == 2 && g > 0)
                        continue; /* no growth at all: the step does not matter */
                    guardheap *h = make_heap(variants[v].mode, variants[v].engine, grows[g],
                                             heap, warm == 2 ? heap : 0);
                    if (warm) {
                        alloc_loop(h, opt.objects);
                        TRY(gh_reset(h));
                    }
                    /* without growth a pass takes a millisecond or so: time several */
                    int passes = warm == 2 ? 10 : 1;
                    double s = 0;
                    for (int k = 0; k < passes; k++) {
                        if (k)
                            TRY(gh_reset(h));
                        s += alloc_loop(h, opt.objects);
                    }
                    gh_stats st = gh_get_stats(h);
                    snprintf(params, sizeof params, "\"grow\":%zu,\"size\":%d,\"heap\":\"%s\"",
                             grows[g], SMALL, states[warm]);
                    emit("guardheap_alloc", "Malloc/s", (double)opt.objects * passes / s / 1e6,
                         variants[v].name, params, variants[v].mode == GH_GUARD);
                    if (variants[v].mode == GH_GUARD)
                        emit("guardheap_faults", "faults", (double)st.faults, variants[v].name,
                             params, 0);
                    TRY(gh_destroy(h));
                }
            }
        }
        for (int v = 0; v < nvariants; v++) {
            size_t max = (size_t)opt.page_objects * 4096 + (1u << 20);
            guardheap *h = make_heap(variants[v].mode, variants[v].engine, 4096, max, 0);
            page_loop(h, opt.page_objects);
            TRY(gh_reset(h));
            double s = page_loop(h, opt.page_objects);
            snprintf(params, sizeof params, "\"grow\":4096,\"heap\":\"warm\"");
            emit("guardheap_page_alloc", "Kalloc/s", (double)opt.page_objects / s / 1e3,
                 variants[v].name, params, variants[v].mode == GH_GUARD);
            TRY(gh_destroy(h));
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (bench_has_flag(argc, argv, "--quick")) {
        opt.objects = 500000;
        opt.page_objects = 5000;
        opt.repeats = 3;
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--repeats") && i + 1 < argc) {
            opt.repeats = (int)bench_positive(argv[++i]);
        } else if (!strcmp(argv[i], "--objects") && i + 1 < argc) {
            opt.objects = bench_positive(argv[++i]);
        } else if (strcmp(argv[i], "--quick") != 0) {
            fprintf(stderr, "usage: bench_app_guardheap [--repeats N] [--objects N] [--quick]\n");
            return 2;
        }
    }
    return bench_run_in_private_registry(bench_main);
}
