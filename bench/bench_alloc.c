/* bench_alloc: the per-segment heap against glibc, jemalloc and mimalloc on one mixed-size
 * workload, with 1, 2 and 4 threads, all in the same run.
 *
 *   alloc_glibc_malloc      malloc/free of the process heap (the baseline of every ratio);
 *   alloc_seg_malloc        seg_malloc/seg_free in a switched-in segment: the public calls,
 *                           which find the segment's heap through the current view each time;
 *   alloc_heap_direct       the same heap called directly (src/alloc/heap.h): no view lookup
 *                           and no per-thread cache, to show what each costs;
 *   alloc_jemalloc          Debian's libjemalloc.so.2, loaded with dlopen (its malloc/free
 *                           looked up on the handle), skipped with a message if absent;
 *   alloc_mimalloc          Debian's libmimalloc.so.2 (mi_malloc/mi_free), likewise.
 * Workload: each thread keeps a working set of live/threads objects; each step frees a random
 * one and allocates a new block in its place. Sizes are uniform in 16 B..4 KiB, and 1% up to
 * 64 KiB. The size and slot sequences are drawn once up front (per thread), so every
 * allocator does exactly the same work. Unit: million operations (a malloc or a free) per
 * second over all threads, wall clock from the first thread's start to the last one's end.
 * The one-thread rounds run first, on the main thread, while the process has no other
 * thread, as a single-threaded program would. One JSON object per line on stdout, one per
 * repeat; messages on stderr. Everything runs in a private registry under /dev/shm that is
 * removed at the end, however the measuring process ends.
 */
#include "alloc/heap.h"
#include "bench_util.h"

#include <dlfcn.h>
#include <exomem/exomem.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BASE UINT64_C(0x300000000000)   /* above mmap's placements, 1 GiB aligned */
#define SEG_BYTES (UINT64_C(512) << 20)
#define MIN_SIZE 16
#define MAX_SIZE 4096
#define BIG_MAX 65536
#define BIG_PERMILLE 10
#define MAX_THREADS 4

static const int thread_counts[] = {1, 2, 4};

static struct {
    int repeats;
    long ops;       /* replacement steps (each is a free and a malloc), over all threads */
    long live;      /* working set, over all threads */
} opt = {5, 1000000, 10000};

/* ---- the workload ---- */

struct workload {
    long live, ops;
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

static void workload_make(struct workload *w, long live, long ops, uint64_t seed)
{
    uint64_t rng = 0x9e3779b97f4a7c15u ^ (seed * 0xbf58476d1ce4e5b9u);
    w->live = live;
    w->ops = ops;
    w->sizes = malloc(sizeof *w->sizes * (size_t)(live + ops));
    w->slots = malloc(sizeof *w->slots * (size_t)ops);
    w->objs = calloc((size_t)live, sizeof *w->objs);
    if (!w->sizes || !w->slots || !w->objs) {
        fprintf(stderr, "bench_alloc: out of memory for the workload\n");
        exit(1);
    }
    for (long i = 0; i < live + ops; i++) {
        uint64_t r = rng_next(&rng);
        if (r % 1000 < BIG_PERMILLE)
            w->sizes[i] = MAX_SIZE + (r >> 10) % (BIG_MAX - MAX_SIZE + 1);
        else
            w->sizes[i] = MIN_SIZE + (r >> 10) % (MAX_SIZE - MIN_SIZE + 1);
    }
    for (long i = 0; i < ops; i++)
        w->slots[i] = (uint32_t)(rng_next(&rng) % (uint64_t)live);
}

static void workload_free(struct workload *w)
{
    free(w->sizes);
    free(w->slots);
    free(w->objs);
}

/* One allocator under test. */
struct allocator {
    const char *name;       /* measurement name */
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

struct worker {
    pthread_t tid;
    const struct allocator *a;
    struct workload *w;
    pthread_barrier_t *start;
    uint64_t start_ns, end_ns;
};

/* Fill the working set, wait for the common start, run the steps, note the end, empty. */
static void *worker_main(void *arg)
{
    struct worker *k = arg;
    const struct allocator *a = k->a;
    struct workload *w = k->w;
    for (long i = 0; i < w->live; i++)
        w->objs[i] = must(a->alloc(a->ctx, w->sizes[i]), a, w->sizes[i]);
    pthread_barrier_wait(k->start);
    k->start_ns = bench_now_ns();
    for (long i = 0; i < w->ops; i++) {
        uint32_t s = w->slots[i];
        size_t size = w->sizes[w->live + i];
        a->release(a->ctx, w->objs[s]);
        w->objs[s] = must(a->alloc(a->ctx, size), a, size);
    }
    k->end_ns = bench_now_ns();
    for (long i = 0; i < w->live; i++)
        a->release(a->ctx, w->objs[i]);
    return NULL;
}

/* Run the workload on `threads` threads at once; returns Mops/s over all of them, from the
 * first thread's start to the last one's end. One thread runs on the calling thread, so that
 * single-threaded rounds run in a process that has no other thread (glibc's malloc takes
 * no atomic locks until a process starts its first thread). */
static double run(const struct allocator *a, struct workload *ws, int threads)
{
    struct worker k[MAX_THREADS];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads);
    for (int t = 0; t < threads; t++)
        k[t] = (struct worker){.a = a, .w = &ws[t], .start = &start};
    for (int t = 1; t < threads; t++) {
        if (pthread_create(&k[t].tid, NULL, worker_main, &k[t]) != 0) {
            fprintf(stderr, "bench_alloc: cannot start a thread\n");
            exit(1);
        }
    }
    worker_main(&k[0]);
    uint64_t t0 = k[0].start_ns, t1 = k[0].end_ns;
    long ops = ws[0].ops;
    for (int t = 1; t < threads; t++) {
        pthread_join(k[t].tid, NULL);
        t0 = k[t].start_ns < t0 ? k[t].start_ns : t0;
        t1 = k[t].end_ns > t1 ? k[t].end_ns : t1;
        ops += ws[t].ops;
    }
    pthread_barrier_destroy(&start);
    return 2.0 * (double)ops / ((double)(t1 - t0) / 1e3);
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

/* A peer allocator from a shared library: malloc-like and free-like symbols of the handle. */
struct peer {
    void *(*malloc_fn)(size_t);
    void (*free_fn)(void *);
};

static void *peer_alloc(void *ctx, size_t size) { return ((struct peer *)ctx)->malloc_fn(size); }
static void peer_free(void *ctx, void *p) { ((struct peer *)ctx)->free_fn(p); }

/* Load `lib` and look up its two calls; false (with a message) when it is not installed. */
static bool peer_load(struct peer *pr, const char *lib, const char *m, const char *f)
{
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "bench_alloc: %s not loaded (%s): left out\n", lib, dlerror());
        return false;
    }
    *(void **)&pr->malloc_fn = dlsym(h, m);
    *(void **)&pr->free_fn = dlsym(h, f);
    if (!pr->malloc_fn || !pr->free_fn) {
        fprintf(stderr, "bench_alloc: %s has no %s/%s: left out\n", lib, m, f);
        return false;
    }
    return true;
}

static void emit(const char *name, double value, int threads)
{
    char params[200];
    snprintf(params, sizeof params, "\"threads\":%d,\"ops\":%ld,\"live\":%ld,\"min_size\":%d,"
             "\"max_size\":%d,\"big_max\":%d,\"big_permille\":%d", threads, 2 * opt.ops,
             opt.live, MIN_SIZE, MAX_SIZE, BIG_MAX, BIG_PERMILLE);
    bool base = !strcmp(name, "alloc_glibc_malloc");
    bench_emit(name, "Mops/s", value, params, base ? NULL : "alloc_glibc_malloc", NULL);
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

    struct peer je, mi;
    struct allocator all[5];
    int n = 0;
    all[n++] = (struct allocator){"alloc_glibc_malloc", glibc_alloc, glibc_free, NULL};
    all[n++] = (struct allocator){"alloc_seg_malloc", seg_alloc_fn, seg_free_fn, &seg};
    all[n++] = (struct allocator){"alloc_heap_direct", heap_alloc_fn, heap_free_fn, heap};
    if (peer_load(&je, "libjemalloc.so.2", "malloc", "free"))
        all[n++] = (struct allocator){"alloc_jemalloc", peer_alloc, peer_free, &je};
    if (peer_load(&mi, "libmimalloc.so.2", "mi_malloc", "mi_free"))
        all[n++] = (struct allocator){"alloc_mimalloc", peer_alloc, peer_free, &mi};

    size_t nt = sizeof thread_counts / sizeof thread_counts[0];
    struct workload ws[sizeof thread_counts / sizeof thread_counts[0]][MAX_THREADS];
    for (size_t i = 0; i < nt; i++)
        for (int t = 0; t < thread_counts[i]; t++)
            workload_make(&ws[i][t], opt.live / thread_counts[i], opt.ops / thread_counts[i],
                          (uint64_t)t + 1);
    for (int a = 0; a < n; a++)
        run(&all[a], ws[0], 1);   /* warm-up: fault in every heap's memory before measuring */
    /* Fewest threads first: the one-thread rounds run before the process has any thread.
     * Side by side: each allocator once per round. */
    for (size_t i = 0; i < nt; i++)
        for (int r = 0; r < opt.repeats; r++)
            for (int a = 0; a < n; a++)
                emit(all[a].name, run(&all[a], ws[i], thread_counts[i]), thread_counts[i]);

    struct seg_heap_stats st;
    TRY(seg_heap_stats(seg, &st));
    if (st.allocations != 0) {
        fprintf(stderr, "bench_alloc: %" PRIu64 " allocations left in the heap\n",
                st.allocations);
        return 1;
    }
    for (size_t i = 0; i < nt; i++)
        for (int t = 0; t < thread_counts[i]; t++)
            workload_free(&ws[i][t]);
    return 0;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--repeats") && i + 1 < argc) {
            opt.repeats = (int)bench_positive(argv[++i]);
        } else if (!strcmp(argv[i], "--ops") && i + 1 < argc) {
            opt.ops = bench_positive(argv[++i]);
        } else if (!strcmp(argv[i], "--live") && i + 1 < argc) {
            opt.live = bench_positive(argv[++i]);
        } else if (!strcmp(argv[i], "--quick")) {
            opt.ops = 200000;
            opt.repeats = 3;
        } else {
            fprintf(stderr, "usage: bench_alloc [--repeats N] [--ops N] [--live N] [--quick]\n");
            return 2;
        }
    }
    /* Debian's jemalloc uses initial-exec TLS, which a dlopen()ed library gets only from the
     * static TLS surplus: ask the loader for more, once, by running again with the tunable. */
    if (!getenv("GLIBC_TUNABLES")) {
        setenv("GLIBC_TUNABLES", "glibc.rtld.optional_static_tls=65536", 1);
        execv("/proc/self/exe", argv);
        unsetenv("GLIBC_TUNABLES");   /* exec failed: run without jemalloc */
    }
    if (opt.live < MAX_THREADS || opt.ops < MAX_THREADS) {
        fprintf(stderr, "bench_alloc: --live and --ops must be at least %d\n", MAX_THREADS);
        return 2;
    }
    return bench_run_in_private_registry(bench_main);
}
