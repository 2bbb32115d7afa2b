/* bench_alloc: the per-segment heap against glibc on one mixed-size workload.
 *
 *   alloc_glibc_malloc      malloc/free of the process heap (the baseline);
 *   alloc_seg_malloc        seg_malloc/seg_free in a switched-in segment: the public calls,
 *                           which find the segment's heap through the current view each time;
 *   alloc_heap_direct       the same heap called directly (src/alloc/heap.h), to show what the
 *                           view lookup costs.
 * Workload: a working set of `live` objects; each step frees a random one and allocates a new
 * block in its place. Sizes are uniform in 16 B..4 KiB, and 1% up to 64 KiB. The size and slot
 * sequences are drawn once up front, so every allocator does exactly the same work. Unit:
 * million operations (a malloc or a free) per second. One JSON object per line on stdout,
 * one per repeat; messages on stderr. Everything runs in a private registry under /dev/shm
 * that is removed at the end, however the measuring process ends.
 */
#include "alloc/heap.h"
#include "bench_util.h"

#include <exomem/exomem.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BASE UINT64_C(0x300000000000)   /* above mmap's placements, 1 GiB aligned */
#define SEG_BYTES (UINT64_C(512) << 20)
#define MIN_SIZE 16
#define MAX_SIZE 4096
#define BIG_MAX 65536
#define BIG_PERMILLE 10

static struct {
    int repeats;
    long ops;       /* replacement steps (each is a free and a malloc) */
    long live;      /* working set */
} opt = {5, 1000000, 10000};

/* ---- the workload ---- */

struct workload {
    size_t *sizes;      /* live + ops sizes: the initial fill, then one per step */
    uint32_t *slots;    /* ops slots: which live object each step replaces */
    void **objs;
};

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void workload_make(struct workload *w)
{
    uint64_t rng = 0x9e3779b97f4a7c15u;
    w->sizes = malloc(sizeof *w->sizes * (size_t)(opt.live + opt.ops));
    w->slots = malloc(sizeof *w->slots * (size_t)opt.ops);
    w->objs = calloc((size_t)opt.live, sizeof *w->objs);
    if (!w->sizes || !w->slots || !w->objs) {
        fprintf(stderr, "bench_alloc: out of memory for the workload\n");
        exit(1);
    }
    for (long i = 0; i < opt.live + opt.ops; i++) {
        uint64_t r = rng_next(&rng);
        if (r % 1000 < BIG_PERMILLE)
            w->sizes[i] = MAX_SIZE + (r >> 10) % (BIG_MAX - MAX_SIZE + 1);
        else
            w->sizes[i] = MIN_SIZE + (r >> 10) % (MAX_SIZE - MIN_SIZE + 1);
    }
    for (long i = 0; i < opt.ops; i++)
        w->slots[i] = (uint32_t)(rng_next(&rng) % (uint64_t)opt.live);
}

/* One allocator under test. */
struct allocator {
    const char *name;
    void *(*alloc)(void *ctx, size_t size);
    void (*release)(void *ctx, void *p);
    void *ctx;
};

static void *must(void *p, const struct allocator *a, size_t size)
{
    if (!p) {
        fprintf(stderr, "bench_alloc: %s: allocation of %zu bytes failed (%s)\n", a->name,
                size, exomem_last_error());
        exit(1);
    }
    *(volatile char *)p = 1;   /* touch, as a program would */
    return p;
}

/* Run the workload once; returns Mops/s over the replacement steps. */
static double run(const struct allocator *a, struct workload *w)
{
    for (long i = 0; i < opt.live; i++)
        w->objs[i] = must(a->alloc(a->ctx, w->sizes[i]), a, w->sizes[i]);
    uint64_t t0 = bench_now_ns();
    for (long i = 0; i < opt.ops; i++) {
        uint32_t k = w->slots[i];
        size_t size = w->sizes[opt.live + i];
        a->release(a->ctx, w->objs[k]);
        w->objs[k] = must(a->alloc(a->ctx, size), a, size);
    }
    uint64_t t1 = bench_now_ns();
    for (long i = 0; i < opt.live; i++)
        a->release(a->ctx, w->objs[i]);
    return 2.0 * (double)opt.ops / ((double)(t1 - t0) / 1e3);
}

static void *glibc_alloc(void *ctx, size_t size) { (void)ctx; return malloc(size); }
static void glibc_free(void *ctx, void *p) { (void)ctx; free(p); }

static void *seg_alloc_fn(void *ctx, size_t size) { return seg_malloc(*(segid_t *)ctx, size); }

static void seg_free_fn(void *ctx, void *p)
{
    (void)ctx;
    if (seg_free(p) != 0) {
        fprintf(stderr, "bench_alloc: seg_free: %s\n", exomem_last_error());
        exit(1);
    }
}

static void *heap_alloc_fn(void *ctx, size_t size) { return exo_heap_malloc(ctx, size, NULL); }

static void heap_free_fn(void *ctx, void *p)
{
    if (exo_heap_free(ctx, p) != 0) {
        fprintf(stderr, "bench_alloc: exo_heap_free failed\n");
        exit(1);
    }
}

static void emit(const char *name, double value, const char *baseline)
{
    char params[160];
    snprintf(params, sizeof params, "\"ops\":%ld,\"live\":%ld,\"min_size\":%d,\"max_size\":%d,"
             "\"big_max\":%d,\"big_permille\":%d", 2 * opt.ops, opt.live, MIN_SIZE, MAX_SIZE,
             BIG_MAX, BIG_PERMILLE);
    bench_emit(name, "Mops/s", value, params, baseline, NULL);
}

static int bench_main(void)
{
    fprintf(stderr, "bench_alloc: registry %s, %ld ops on %ld live objects, %d repeats\n",
            bench_root(), 2 * opt.ops, opt.live, opt.repeats);
    segid_t seg = bench_make_seg("bench-alloc", BASE, SEG_BYTES);
    vasid_t vas = bench_make_vas("bench-alloc");
    TRY(seg_attach(vas, seg, SEG_RDWR));
    TRY(vas_switch(bench_attach(vas)));
    struct exo_heap *heap;
    TRY(exo_heap_open((void *)(uintptr_t)BASE, SEG_BYTES, &heap));

    struct workload w;
    workload_make(&w);
    struct allocator glibc = {"glibc", glibc_alloc, glibc_free, NULL};
    struct allocator segm = {"seg_malloc", seg_alloc_fn, seg_free_fn, &seg};
    struct allocator direct = {"heap_direct", heap_alloc_fn, heap_free_fn, heap};
    run(&glibc, &w);   /* warm-up: fault in both heaps' memory before measuring */
    run(&segm, &w);
    for (int r = 0; r < opt.repeats; r++) {
        emit("alloc_glibc_malloc", run(&glibc, &w), NULL);
        emit("alloc_seg_malloc", run(&segm, &w), "alloc_glibc_malloc");
        emit("alloc_heap_direct", run(&direct, &w), "alloc_glibc_malloc");
    }
    struct seg_heap_stats st;
    TRY(seg_heap_stats(seg, &st));
    if (st.allocations != 0) {
        fprintf(stderr, "bench_alloc: %" PRIu64 " allocations left in the heap\n",
                st.allocations);
        return 1;
    }
    free(w.sizes);
    free(w.slots);
    free(w.objs);
    return 0;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--repeats")) {
            opt.repeats = (int)bench_positive(argv[++i]);
        } else if (!strcmp(argv[i], "--ops")) {
            opt.ops = bench_positive(argv[++i]);
        } else if (!strcmp(argv[i], "--live")) {
            opt.live = bench_positive(argv[++i]);
        } else if (!strcmp(argv[i], "--quick")) {
            opt.ops = 200000;
            opt.repeats = 3;
        } else {
            fprintf(stderr, "usage: bench_alloc [--repeats N] [--ops N] [--live N] [--quick]\n");
            return 2;
        }
    }
    return bench_run_in_private_registry(bench_main);
}
