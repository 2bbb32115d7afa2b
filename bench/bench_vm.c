/* bench_vm: Appel and Li's virtual-memory primitives (ASPLOS 1991) and the AVM paper's
 * table (Engler et al.), redone on this machine with exomem's vm engines (include/exomem/vm.h).
 *
 *   vm_add        time of one add in a dependent chain (normalises machines, as the paper)
 *   vm_trap       one write fault on a read-only page + handler (which unprotects) + resume
 *   vm_prot1      exo_vm_prot1 of one random page          vm_unprot  exo_vm_unprot of it
 *   vm_protn      exo_vm_protn of 100 pages (layout contiguous, as the paper; or scattered)
 *   vm_unprotn    exo_vm_protect(READWRITE) of those 100 contiguous pages (AVM's unprot100)
 *   vm_appel1     per access: 100 of 1024 pages protected; write a random protected one; the
 *                 handler protects another page and unprotects the faulting one
 *   vm_appel2     per page: protn 100 pages, write each in random order, handler unprotects
 *   vm_map2       exo_vm_map2_create of one page (views read-write and read-only), checked:
 *                 a write through view a is read back through view b
 *   vm_dirty_*    a dirty-tracking region; per cycle 1% of its pages (random, fixed seeds)
 *                 are written, then exo_vm_dirty collects and re-arms: cycle = writes + collect
 *   vm_protn_region  exo_vm_protn of every page (layout all) or 1% scattered, per region size
 *                 (1 MiB, 16 MiB, 256 MiB, 1 GiB, 8 GiB; --quick up to 256 MiB); DIRTY too
 *   vm_mappings   /proc/self/maps lines before/after exo_vm_protn of 10,000 and 100,000
 *                 scattered pages of 1 GiB (vm_protn_scattered: the time of that call)
 *   vm_loadavg    the machine's load at the start and end (other work inflates trap times)
 *
 * All protection is read-only and every access a write, because the uffd engine traps writes
 * only; the signal engine is measured the same way so that the rows compare. Times are the
 * median of repeats taken by the driver (one JSON line per repeat, bench/run.py). Engines the
 * kernel lacks give a "skip" line with the library's reason.
 */
#include "bench_util.h"
#include "vm_bench.h"

#include <exomem/vm.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define MIB (1ull << 20)
#define GIB (1ull << 30)
#define PG 4096u
#define PROTN_N 100
#define APPEL1_PAGES 1024
#define APPEL1_PROTECTED 100
#define MAPS_PAGES 100000

static int repeats = 11;
static bool quick;

static const exo_vm_engine trap_engines[] = { EXO_VM_ENGINE_SIGNAL, EXO_VM_ENGINE_UFFD };
static const exo_vm_engine dirty_engines[] = { EXO_VM_ENGINE_SIGNAL, EXO_VM_ENGINE_UFFD,
                                               EXO_VM_ENGINE_SOFTDIRTY };
#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* ---- the trap handler, shared by every trap region ---- */

enum trap_mode { TRAP_UNPROT, TRAP_APPEL1 };

static struct trap_state {
    exo_vm_region *region;
    char *base;
    enum trap_mode mode;
    long faults;    /* handler runs */
    long mistakes;  /* faults on a page we did not expect, failed calls in the handler */
    /* appel1: the protected pages, which slot is being written, a page -> protected map */
    char *prot[APPEL1_PROTECTED];
    size_t cur;
    unsigned char is_prot[APPEL1_PAGES];
    vmb_rng rng;
} ts;

static exo_vm_action on_fault(exo_vm_fault *f, void *arg)
{
    struct trap_state *s = arg;
    __atomic_fetch_add(&s->faults, 1, __ATOMIC_RELAXED);
    if (s->mode == TRAP_APPEL1) {
        if (f->page != s->prot[s->cur])
            __atomic_fetch_add(&s->mistakes, 1, __ATOMIC_RELAXED);
        size_t other;
        do
            other = (size_t)vmb_rng_below(&s->rng, APPEL1_PAGES);
        while (s->is_prot[other]);
        if (exo_vm_prot1(s->region, s->base + other * PG, EXO_VM_READONLY) != 0)
            __atomic_fetch_add(&s->mistakes, 1, __ATOMIC_RELAXED);
        s->is_prot[other] = 1;
        s->is_prot[((char *)f->page - s->base) / PG] = 0;
        s->prot[s->cur] = s->base + other * PG;
    }
    if (exo_vm_unprot(s->region, f->page) != 0) {
        __atomic_fetch_add(&s->mistakes, 1, __ATOMIC_RELAXED);
        return EXO_VM_DECLINE;
    }
    return EXO_VM_RESUME;
}

static long faults_now(void)
{
    return __atomic_load_n(&ts.faults, __ATOMIC_RELAXED);
}

/* A trap region over [base, base+len) with engine e, or NULL after a skip line. */
static exo_vm_region *trap_region(char *base, size_t len, exo_vm_engine e, const char *params)
{
    const char *why = NULL;
    if (exo_vm_engine_supported(e, 0, &why) != 0) {
        vmb_skip(params, why ? why : "engine not supported");
        return NULL;
    }
    exo_vm_options o = { .engine = e, .handler = on_fault, .arg = &ts };
    exo_vm_region *r = NULL;
    if (exo_vm_region_create(base, len, &o, &r) != 0) {
        vmb_skip(params, exomem_last_error());
        return NULL;
    }
    ts.region = r;
    ts.base = base;
    ts.mode = TRAP_UNPROT;
    return r;
}

/* ---- the micro-benchmarks on one trap region of `npages` pages ---- */

#define BATCH 256 /* operations per timed batch */

static bool bench_trap(exo_vm_region *r, char *base, const char *params)
{
    if (exo_vm_protect(r, base, BATCH * PG, EXO_VM_READONLY) != 0)
        return vmb_failed(params, "trap: exo_vm_protect");
    long f0 = faults_now();
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < BATCH; i++)
        vmb_write_page(base + i * PG, i);
    double ms = vmb_ms_since(t0);
    long got = faults_now() - f0;
    for (size_t i = 0; i < BATCH; i++)
        if (*(uint64_t *)(base + i * PG) != i) {
            vmb_skip(params, "trap: a write through a trap did not land");
            return false;
        }
    if (got != BATCH) {
        char msg[128];
        snprintf(msg, sizeof msg, "trap: handler ran %ld times for %d faults", got, BATCH);
        vmb_skip(params, msg);
        return false;
    }
    vmb_emit("vm_trap", "us", ms * 1e3 / BATCH, params, NULL);
    return true;
}

static bool bench_prot1_unprot(exo_vm_region *r, char *base, size_t npages, vmb_rng *rng,
                               const char *params)
{
    size_t idx[BATCH];
    if (vmb_pick_pages(rng, npages, BATCH, idx) != 0)
        return vmb_failed(params, "prot1: out of memory");
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < BATCH; i++)
        if (exo_vm_prot1(r, base + idx[i] * PG, EXO_VM_READONLY) != 0)
            return vmb_failed(params, "exo_vm_prot1");
    double prot_ms = vmb_ms_since(t0);
    t0 = bench_now_ns();
    for (size_t i = 0; i < BATCH; i++)
        if (exo_vm_unprot(r, base + idx[i] * PG) != 0)
            return vmb_failed(params, "exo_vm_unprot");
    double unprot_ms = vmb_ms_since(t0);
    vmb_emit("vm_prot1", "us", prot_ms * 1e3 / BATCH, params, NULL);
    vmb_emit("vm_unprot", "us", unprot_ms * 1e3 / BATCH, params, NULL);
    return true;
}

#define PROTN_ROUNDS 20

/* PROTN of 100 pages, contiguous (then AVM's unprot100 of the range) and scattered; and,
 * like for like with AVM's prot100 (read-protection), the contiguous 100 pages made
 * inaccessible where the engine can (the uffd engine can only write-protect). */
static bool bench_protn(exo_vm_region *r, char *base, size_t npages, vmb_rng *rng,
                        const char *engine_params)
{
    void *pages[PROTN_N];
    double contig_ms = 0, unprotn_ms = 0, scat_ms = 0, read_ms = 0;
    bool read_ok = true;
    char params[160];
    snprintf(params, sizeof params, "%s,\"n\":%d", engine_params, PROTN_N);
    for (int k = 0; k < PROTN_ROUNDS; k++) {
        size_t start = (size_t)vmb_rng_below(rng, npages - PROTN_N);
        for (size_t i = 0; i < PROTN_N; i++)
            pages[i] = base + (start + i) * PG;
        uint64_t t0 = bench_now_ns();
        if (exo_vm_protn(r, pages, PROTN_N, EXO_VM_READONLY) != 0)
            return vmb_failed(params, "exo_vm_protn (contiguous)");
        contig_ms += vmb_ms_since(t0);
        t0 = bench_now_ns();
        if (exo_vm_protect(r, pages[0], PROTN_N * PG, EXO_VM_READWRITE) != 0)
            return vmb_failed(params, "exo_vm_protect READWRITE");
        unprotn_ms += vmb_ms_since(t0);
        t0 = bench_now_ns();
        read_ok = read_ok && exo_vm_protn(r, pages, PROTN_N, EXO_VM_NOACCESS) == 0;
        read_ms += vmb_ms_since(t0);
        if (read_ok && exo_vm_protect(r, pages[0], PROTN_N * PG, EXO_VM_READWRITE) != 0)
            return vmb_failed(params, "exo_vm_protect READWRITE after read-protection");

        size_t idx[PROTN_N];
        if (vmb_pick_pages(rng, npages, PROTN_N, idx) != 0)
            return vmb_failed(params, "protn: out of memory");
        for (size_t i = 0; i < PROTN_N; i++)
            pages[i] = base + idx[i] * PG;
        t0 = bench_now_ns();
        if (exo_vm_protn(r, pages, PROTN_N, EXO_VM_READONLY) != 0)
            return vmb_failed(params, "exo_vm_protn (scattered)");
        scat_ms += vmb_ms_since(t0);
        if (exo_vm_protect(r, base, npages * PG, EXO_VM_READWRITE) != 0)
            return vmb_failed(params, "exo_vm_protect READWRITE");
    }
    char p2[200];
    snprintf(p2, sizeof p2, "%s,\"layout\":\"contiguous\"", params);
    vmb_emit("vm_protn", "us", contig_ms * 1e3 / PROTN_ROUNDS, p2, NULL);
    vmb_emit("vm_unprotn", "us", unprotn_ms * 1e3 / PROTN_ROUNDS, p2, NULL);
    snprintf(p2, sizeof p2, "%s,\"layout\":\"contiguous\",\"protect\":\"read\"", params);
    if (read_ok)
        vmb_emit("vm_protn_read", "us", read_ms * 1e3 / PROTN_ROUNDS, p2, NULL);
    else
        vmb_skip(p2, "this engine cannot read-protect (userfaultfd only write-protects)");
    snprintf(p2, sizeof p2, "%s,\"layout\":\"scattered\"", params);
    vmb_emit("vm_protn", "us", scat_ms * 1e3 / PROTN_ROUNDS, p2, NULL);
    return true;
}

#define APPEL1_ACCESSES 1000

static bool bench_appel1(exo_vm_region *r, char *base, vmb_rng *rng, const char *params)
{
    size_t idx[APPEL1_PROTECTED];
    void *pages[APPEL1_PROTECTED];
    if (vmb_pick_pages(rng, APPEL1_PAGES, APPEL1_PROTECTED, idx) != 0)
        return vmb_failed(params, "appel1: out of memory");
    memset(ts.is_prot, 0, sizeof ts.is_prot);
    for (size_t i = 0; i < APPEL1_PROTECTED; i++) {
        pages[i] = ts.prot[i] = base + idx[i] * PG;
        ts.is_prot[idx[i]] = 1;
    }
    if (exo_vm_protn(r, pages, APPEL1_PROTECTED, EXO_VM_READONLY) != 0)
        return vmb_failed(params, "appel1: exo_vm_protn");
    ts.rng = vmb_rng_seeded(rng->s);
    ts.mode = TRAP_APPEL1;
    long f0 = faults_now(), m0 = __atomic_load_n(&ts.mistakes, __ATOMIC_RELAXED);
    uint64_t t0 = bench_now_ns();
    for (long k = 0; k < APPEL1_ACCESSES; k++) {
        ts.cur = (size_t)vmb_rng_below(rng, APPEL1_PROTECTED);
        vmb_write_page(ts.prot[ts.cur], (uint64_t)k);
    }
    double ms = vmb_ms_since(t0);
    ts.mode = TRAP_UNPROT;
    long got = faults_now() - f0, bad = __atomic_load_n(&ts.mistakes, __ATOMIC_RELAXED) - m0;
    if (exo_vm_protect(r, base, APPEL1_PAGES * PG, EXO_VM_READWRITE) != 0)
        return vmb_failed(params, "appel1: exo_vm_protect READWRITE");
    if (got != APPEL1_ACCESSES || bad) {
        char msg[160];
        snprintf(msg, sizeof msg, "appel1: %ld handler runs for %d accesses, %ld mistakes",
                 got, APPEL1_ACCESSES, bad);
        vmb_skip(params, msg);
        return false;
    }
    vmb_emit("vm_appel1", "us", ms * 1e3 / APPEL1_ACCESSES, params, NULL);
    return true;
}

#define APPEL2_ROUNDS 20

static bool bench_appel2(exo_vm_region *r, char *base, size_t npages, vmb_rng *rng,
                         const char *params)
{
    void *pages[PROTN_N];
    size_t order[PROTN_N];
    double ms = 0;
    for (int k = 0; k < APPEL2_ROUNDS; k++) {
        size_t start = (size_t)vmb_rng_below(rng, npages - PROTN_N);
        for (size_t i = 0; i < PROTN_N; i++)
            pages[i] = base + (start + i) * PG;
        if (vmb_pick_pages(rng, PROTN_N, PROTN_N, order) != 0)
            return vmb_failed(params, "appel2: out of memory");
        long f0 = faults_now();
        uint64_t t0 = bench_now_ns();
        if (exo_vm_protn(r, pages, PROTN_N, EXO_VM_READONLY) != 0)
            return vmb_failed(params, "appel2: exo_vm_protn");
        for (size_t i = 0; i < PROTN_N; i++)
            vmb_write_page(pages[order[i]], i);
        ms += vmb_ms_since(t0);
        if (faults_now() - f0 != PROTN_N) {
            char msg[128];
            snprintf(msg, sizeof msg, "appel2: %ld handler runs for %d pages",
                     faults_now() - f0, PROTN_N);
            vmb_skip(params, msg);
            return false;
        }
    }
    vmb_emit("vm_appel2", "us", ms * 1e3 / (APPEL2_ROUNDS * PROTN_N), params, NULL);
    return true;
}

/* Every trap micro-benchmark, `repeats` times, per trap engine, on one 16 MiB region. */
static void bench_micro(void)
{
    size_t npages = 16 * MIB / PG;
    char *base = vmb_map_populated(npages * PG);
    if (!base) {
        vmb_skip("\"bench\":\"micro\"", "cannot map 16 MiB");
        return;
    }
    for (size_t e = 0; e < N_OF(trap_engines); e++) {
        char params[64];
        snprintf(params, sizeof params, "\"engine\":\"%s\"", exo_vm_engine_name(trap_engines[e]));
        exo_vm_region *r = trap_region(base, npages * PG, trap_engines[e], params);
        if (!r)
            continue;
        vmb_rng rng = vmb_rng_seeded(1991);
        bool ok[5] = { true, true, true, true, true };
        for (int k = 0; k < repeats; k++) {
            ok[0] = ok[0] && bench_trap(r, base, params);
            ok[1] = ok[1] && bench_prot1_unprot(r, base, npages, &rng, params);
            ok[2] = ok[2] && bench_protn(r, base, npages, &rng, params);
            ok[3] = ok[3] && bench_appel1(r, base, &rng, params);
            ok[4] = ok[4] && bench_appel2(r, base, npages, &rng, params);
            exo_vm_protect(r, base, npages * PG, EXO_VM_READWRITE); /* after a failure too */
        }
        if (exo_vm_region_destroy(r) != 0)
            vmb_failed(params, "exo_vm_region_destroy");
    }
    munmap(base, npages * PG);
}

/* ---- MAP2 ---- */

#define MAP2_ROUNDS 50

static void bench_map2(void)
{
    const char *params = "\"bytes\":4096";
    for (int k = 0; k < repeats; k++) {
        double ms = 0;
        for (int i = 0; i < MAP2_ROUNDS; i++) {
            exo_vm_map2 m;
            uint64_t t0 = bench_now_ns();
            if (exo_vm_map2_create(PG, EXO_VM_READWRITE, EXO_VM_READONLY, &m) != 0) {
                vmb_failed(params, "exo_vm_map2_create");
                return;
            }
            ms += vmb_ms_since(t0);
            uint64_t v = 0x1991000000ull + (uint64_t)i;
            vmb_write_page(m.a, v);
            bool same = *(volatile uint64_t *)m.b == v;
            if (exo_vm_map2_destroy(&m) != 0) {
                vmb_failed(params, "exo_vm_map2_destroy");
                return;
            }
            if (!same) {
                vmb_skip(params, "map2: a write through view a is not seen through view b");
                return;
            }
        }
        vmb_emit("vm_map2", "us", ms * 1e3 / MAP2_ROUNDS, params, NULL);
    }
}

/* ---- scaling: PROTN of every page and of 1% scattered pages, per region size ---- */

static void bench_protn_region(char *base, size_t bytes, exo_vm_engine e, int reps)
{
    char params[128];
    snprintf(params, sizeof params, "\"engine\":\"%s\",\"bytes\":%zu", exo_vm_engine_name(e),
             bytes);
    exo_vm_region *r = trap_region(base, bytes, e, params);
    if (!r)
        return;
    size_t npages = bytes / PG, k = npages / 100 ? npages / 100 : 1;
    void **pages = malloc(npages * sizeof *pages);
    size_t *idx = malloc(k * sizeof *idx);
    vmb_rng rng = vmb_rng_seeded(8);
    if (!pages || !idx) {
        vmb_skip(params, "out of memory");
        goto out;
    }
    for (int rep = 0; rep < reps; rep++) {
        char p2[200];
        for (size_t i = 0; i < npages; i++)
            pages[i] = base + i * PG;
        uint64_t t0 = bench_now_ns();
        if (exo_vm_protn(r, pages, npages, EXO_VM_READONLY) != 0) {
            vmb_failed(params, "exo_vm_protn (all pages)");
            break;
        }
        double all_ms = vmb_ms_since(t0);
        t0 = bench_now_ns();
        if (exo_vm_protect(r, base, bytes, EXO_VM_READWRITE) != 0) {
            vmb_failed(params, "exo_vm_protect READWRITE");
            break;
        }
        double unprot_ms = vmb_ms_since(t0);
        if (vmb_pick_pages(&rng, npages, k, idx) != 0)
            break;
        for (size_t i = 0; i < k; i++)
            pages[i] = base + idx[i] * PG;
        t0 = bench_now_ns();
        if (exo_vm_protn(r, pages, k, EXO_VM_READONLY) != 0) {
            vmb_failed(params, "exo_vm_protn (1% scattered)");
            break;
        }
        double scat_ms = vmb_ms_since(t0);
        if (exo_vm_protect(r, base, bytes, EXO_VM_READWRITE) != 0) {
            vmb_failed(params, "exo_vm_protect READWRITE");
            break;
        }
        snprintf(p2, sizeof p2, "%s,\"layout\":\"all\"", params);
        vmb_emit("vm_protn_region", "ms", all_ms, p2, NULL);
        vmb_emit("vm_unprot_region", "ms", unprot_ms, p2, NULL);
        snprintf(p2, sizeof p2, "%s,\"layout\":\"scattered_1pct\"", params);
        vmb_emit("vm_protn_region", "ms", scat_ms, p2, NULL);
    }
out:
    free(pages);
    free(idx);
    if (exo_vm_region_destroy(r) != 0)
        vmb_failed(params, "exo_vm_region_destroy");
}

/* DIRTY cycles per engine on `bytes`. Up to 1 GiB the engines take turns cycle by cycle, each
 * on its own copy of the memory (base for the first), so that other work on the machine
 * weighs on them alike; larger regions, one engine after the other on base. */
static void dirty_engines_at(char *base, size_t bytes, int cycles)
{
    char *bases[N_OF(dirty_engines)] = { base };
    exo_vm_engine engines[N_OF(dirty_engines)];
    size_t n = 0;
    for (size_t e = 0; e < N_OF(dirty_engines); e++) {
        const char *why = NULL;
        if (exo_vm_engine_supported(dirty_engines[e], EXO_VM_TRACK_DIRTY, &why) != 0) {
            char params[128];
            snprintf(params, sizeof params, "\"engine\":\"%s\",\"bytes\":%zu,\"written_pct\":1",
                     exo_vm_engine_name(dirty_engines[e]), bytes);
            vmb_skip(params, why ? why : "engine not supported");
            continue;
        }
        engines[n++] = dirty_engines[e];
    }
    bool together = bytes <= GIB && vmb_mem_available() > n * bytes + 2 * GIB;
    for (size_t e = 1; together && e < n; e++)
        together = (bases[e] = vmb_map_populated(bytes)) != NULL;
    if (together)
        vmb_bench_dirty(bases, bytes, engines, n, cycles);
    for (size_t e = 0; e < n; e++) {
        if (!together)
            vmb_bench_dirty(&base, bytes, &engines[e], 1, cycles);
        if (e > 0 && bases[e])
            munmap(bases[e], bytes);
    }
}

static void bench_scaling(void)
{
    static const size_t full[] = { MIB, 16 * MIB, 256 * MIB, GIB, 8 * GIB };
    static const size_t small[] = { MIB, 16 * MIB, 256 * MIB };
    const size_t *sizes = quick ? small : full;
    size_t n = quick ? N_OF(small) : N_OF(full);
    for (size_t s = 0; s < n; s++) {
        size_t bytes = sizes[s];
        char params[64];
        snprintf(params, sizeof params, "\"bytes\":%zu", bytes);
        if (vmb_mem_available() < bytes + 2 * GIB) {
            vmb_skip(params, "not enough available memory for this region size");
            continue;
        }
        char *base = vmb_map_populated(bytes);
        if (!base) {
            vmb_skip(params, "cannot map and populate the region");
            continue;
        }
        int reps = bytes >= 8 * GIB ? 3 : quick ? 3 : 5;
        for (size_t e = 0; e < N_OF(trap_engines); e++)
            bench_protn_region(base, bytes, trap_engines[e], reps);
        /* the table's DIRTY (1 GiB; 256 MiB in --quick) gets the full number of repeats */
        int cycles = (bytes == GIB || (quick && bytes == 256 * MIB)) ? repeats : reps;
        dirty_engines_at(base, bytes, cycles);
        munmap(base, bytes);
    }
}

/* ---- mapping count after PROTN of 100,000 scattered pages ---- */

#define PROTN_SAMPLE 100

/* Write to PROTN_SAMPLE of the n protected pages (each must trap once: the handler
 * unprotects it) and to pages outside the list (none may trap). False, with a failure line,
 * when the protection was not what PROTN was asked for. */
static bool protn_took_effect(void *const *pages, size_t n, char *base, size_t bytes,
                              const char *params)
{
    long f0 = faults_now();
    size_t step = n / PROTN_SAMPLE;
    for (size_t i = 0; i < PROTN_SAMPLE; i++)
        ((volatile char *)pages[i * step])[0] = 1;
    long trapped = faults_now() - f0;
    /* PROTN_SAMPLE pages spread over the region that are not in the list: none may trap. */
    long f1 = faults_now();
    for (size_t k = 0; k < PROTN_SAMPLE; k++) {
        char *pg = base + k * (bytes / PG / PROTN_SAMPLE) * PG;
        bool listed = false;
        for (size_t i = 0; i < n && !listed; i++)
            listed = pages[i] == pg;
        if (!listed)
            ((volatile char *)pg)[0] = 1;
    }
    long stray = faults_now() - f1;
    if (trapped == PROTN_SAMPLE && stray == 0)
        return true;
    char what[160];
    snprintf(what, sizeof what, "PROTN did not protect as asked: %ld of %d sampled pages "
             "trapped, %ld unlisted pages trapped", trapped, PROTN_SAMPLE, stray);
    return vmb_failed(params, what);
}

static void bench_mappings(void)
{
    size_t bytes = GIB, npages = bytes / PG;
    char *base = vmb_map_populated(bytes);
    size_t *idx = malloc(MAPS_PAGES * sizeof *idx);
    void **pages = malloc(MAPS_PAGES * sizeof *pages);
    vmb_rng rng = vmb_rng_seeded(100000);
    if (!base || !idx || !pages || vmb_pick_pages(&rng, npages, MAPS_PAGES, idx) != 0) {
        vmb_skip("\"bench\":\"mappings\"", "cannot map 1 GiB");
        goto out;
    }
    for (size_t i = 0; i < MAPS_PAGES; i++)
        pages[i] = base + idx[i] * PG;
    static const size_t counts[] = { MAPS_PAGES / 10, MAPS_PAGES };
    for (size_t e = 0; e < N_OF(trap_engines); e++)
        for (size_t c = 0; c < N_OF(counts); c++) { /* a prefix of a random order: random too */
            char params[128], p2[160];
            snprintf(params, sizeof params, "\"engine\":\"%s\",\"pages\":%zu,\"bytes\":%zu",
                     exo_vm_engine_name(trap_engines[e]), counts[c], bytes);
            exo_vm_region *r = trap_region(base, bytes, trap_engines[e], params);
            if (!r)
                continue;
            long before = vmb_count_mappings();
            uint64_t t0 = bench_now_ns();
            int rc = exo_vm_protn(r, pages, counts[c], EXO_VM_READONLY);
            double ms = vmb_ms_since(t0);
            long after = vmb_count_mappings();
            char note[400] = "";
            if (rc != 0)
                snprintf(note, sizeof note, "exo_vm_protn failed (%s): %s", exomem_strerror(rc),
                         exomem_last_error());
            snprintf(p2, sizeof p2, "%s,\"stage\":\"before\"", params);
            vmb_emit("vm_mappings", "mappings", (double)before, p2, NULL);
            snprintf(p2, sizeof p2, "%s,\"stage\":\"after\"", params);
            vmb_emit("vm_mappings", "mappings", (double)after, p2, rc ? note : NULL);
            /* A PROTN that did nothing would meet the mapping target: check that the pages
             * really trap (a sample of them, and none of their unprotected neighbours). */
            if (rc == 0 && !protn_took_effect(pages, counts[c], base, bytes, params))
                rc = -EXO_EIO;
            else if (rc == 0)
                vmb_emit("vm_protn_scattered", "ms", ms, params, NULL);
            else
                vmb_skip(params, note);
            if (exo_vm_protect(r, base, bytes, EXO_VM_READWRITE) != 0)
                vmb_failed(params, "exo_vm_protect READWRITE");
            if (exo_vm_region_destroy(r) != 0)
                vmb_failed(params, "exo_vm_region_destroy");
        }
out:
    free(idx);
    free(pages);
    if (base)
        munmap(base, bytes);
}

int main(int argc, char **argv)
{
    quick = bench_parse_args(argc, argv, &repeats, 5,
                             "--quick: 5 repeats, regions up to 256 MiB (DIRTY's table row "
                             "at 256 MiB).\n");
    if (exo_vm_page_size() != PG) {
        fprintf(stderr, "bench_vm: page size %zu, expected %u\n", exo_vm_page_size(), PG);
        return 1;
    }
    vmb_emit("vm_loadavg", "load", vmb_loadavg(), "\"when\":\"start\"", NULL);
    for (int k = 0; k < repeats; k++)
        vmb_emit("vm_add", "ns", vmb_add_ns(quick ? 2000000 : 10000000), "", NULL);
    bench_micro();
    bench_map2();
    bench_mappings();
    bench_scaling();
    vmb_emit("vm_loadavg", "load", vmb_loadavg(), "\"when\":\"end\"", NULL);
    if (vmb_failure_count()) {
        fprintf(stderr, "bench_vm: %d measurements failed (see the skip lines)\n",
                vmb_failure_count());
        return 1;
    }
    return 0;
}
