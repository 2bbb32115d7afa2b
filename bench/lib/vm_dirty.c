/* bench_vm's DIRTY measurement (see vm_bench.h): steady-state cycles of writes, collect and
 * re-arm on dirty-tracking regions, the engines taking turns cycle by cycle. */
#include "bench_util.h"
#include "vm_bench.h"

#include <stdio.h>
#include <stdlib.h>

#define PG 4096u
#define WARM_CYCLES 2
#define MAX_ENGINES 4

static int count_dirty(void *addr, size_t len, void *arg)
{
    (void)addr;
    *(long *)arg += (long)(len / PG);
    return 0;
}

/* One engine's region in the comparison; r == NULL once it is out (skipped or failed). */
struct dirty_run {
    exo_vm_engine engine;
    char *base;
    exo_vm_region *r;
    char params[128];
};

static void dirty_start(struct dirty_run *d, size_t bytes)
{
    snprintf(d->params, sizeof d->params, "\"engine\":\"%s\",\"bytes\":%zu,\"written_pct\":1",
             exo_vm_engine_name(d->engine), bytes);
    d->r = NULL;
    const char *why = NULL;
    if (exo_vm_engine_supported(d->engine, EXO_VM_TRACK_DIRTY, &why) != 0) {
        vmb_skip(d->params, why ? why : "engine not supported");
        return;
    }
    exo_vm_options o = { .engine = d->engine, .flags = EXO_VM_TRACK_DIRTY };
    uint64_t t0 = bench_now_ns();
    if (exo_vm_region_create(d->base, bytes, &o, &d->r) != 0) {
        vmb_failed(d->params, "exo_vm_region_create TRACK_DIRTY");
        d->r = NULL;
        return;
    }
    double create_ms = vmb_ms_since(t0);
    long pages = 0;
    if (exo_vm_dirty(d->r, count_dirty, &pages) < 0) {
        vmb_failed(d->params, "exo_vm_dirty (first)");
        exo_vm_region_destroy(d->r);
        d->r = NULL;
        return;
    }
    if (pages != 0)
        fprintf(stderr, "bench_vm: %s: a fresh region reported %ld dirty pages\n", d->params,
                pages);
    vmb_emit("vm_dirty_create", "ms", create_ms, d->params, NULL);
}

/* One cycle: write the k pages idx[], collect; emits unless warming up. False on failure. */
static bool dirty_cycle(struct dirty_run *d, const size_t *idx, size_t k, int c, bool emit)
{
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < k; i++)
        vmb_write_page(d->base + idx[i] * PG, (uint64_t)c);
    double write_ms = vmb_ms_since(t0);
    long pages = 0;
    t0 = bench_now_ns();
    long n = exo_vm_dirty(d->r, count_dirty, &pages);
    double collect_ms = vmb_ms_since(t0);
    if (n < 0)
        return vmb_failed(d->params, "exo_vm_dirty");
    if (n != pages || (size_t)n < k) {
        char msg[160];
        snprintf(msg, sizeof msg, "exo_vm_dirty returned %ld, reported %ld pages, %zu were "
                 "written", n, pages, k);
        vmb_skip(d->params, msg);
        return false;
    }
    if (!emit)
        return true;
    char note[96];
    snprintf(note, sizeof note, "%ld pages reported, %zu written", n, k);
    vmb_emit("vm_dirty_cycle", "ms", write_ms + collect_ms, d->params,
             (size_t)n == k ? NULL : note);
    vmb_emit("vm_dirty_collect", "ms", collect_ms, d->params, NULL);
    vmb_emit("vm_dirty_writes", "ms", write_ms, d->params, NULL);
    return true;
}

void vmb_bench_dirty(char *const *bases, size_t bytes, const exo_vm_engine *engines, size_t n,
                     int cycles)
{
    struct dirty_run runs[MAX_ENGINES];
    n = n < MAX_ENGINES ? n : MAX_ENGINES;
    for (size_t e = 0; e < n; e++) {
        runs[e].engine = engines[e];
        runs[e].base = bases[e];
        dirty_start(&runs[e], bytes);
    }
    size_t npages = bytes / PG, k = npages / 100 ? npages / 100 : 1;
    size_t *idx = malloc(k * sizeof *idx);
    for (int c = 0; idx && c < WARM_CYCLES + cycles; c++) {
        vmb_rng rng = vmb_rng_seeded(0x5eed0000u + (unsigned)c);
        if (vmb_pick_pages(&rng, npages, k, idx) != 0)
            break;
        for (size_t e = 0; e < n; e++) /* the same pages for every engine in a cycle */
            if (runs[e].r && !dirty_cycle(&runs[e], idx, k, c, c >= WARM_CYCLES)) {
                exo_vm_region_destroy(runs[e].r);
                runs[e].r = NULL;
            }
    }
    if (!idx)
        fprintf(stderr, "bench_vm: DIRTY at %zu bytes: out of memory\n", bytes);
    free(idx);
    for (size_t e = 0; e < n; e++)
        if (runs[e].r && exo_vm_region_destroy(runs[e].r) != 0)
            vmb_failed(runs[e].params, "exo_vm_region_destroy");
}
