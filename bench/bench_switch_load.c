/* bench_switch_load: what a vas_switch costs at each segment size while other
 * threads of the process run or sleep (issue 11).
 *
 * Two VASes A and B hold one populated read-write segment each, of the same size at the
 * same 1 GiB-aligned base (as a new user would set them up), with their segment locks; the
 * process switches A->B->A in a loop and one switch costs total / (2 * round trips). Each
 * size runs under these loads: no other thread; 1 or 3 other threads spinning (always on a
 * CPU, so every TLB flush of the switch must interrupt them); 1 or 3 other threads blocked
 * in a condition variable (asleep in a futex). Segments under 1 GiB are measured padded
 * (exomem's default, see src/vas/space.c) and unpadded (a one-page mapping of our own in
 * the padding's range makes exomem do without), in the same run. The park statistics give
 * each configuration's per-switch breakdown: mremap, mprotect, segment locks and the rest.
 * The yardstick, measured in the same run: ctxswitch_pipe, one process context switch on
 * one CPU (pipe ping-pong); switch_load's ratio is in context switches.
 *
 * Then, for the default (padded) mapping, "into and out of a 1-segment VAS": home -> A ->
 * home, timed per round trip, on the park engine and on the keep engine (which leaves A's
 * segment mapped while at home, so that the round trip is its lock and unlock).
 *
 * Output: JSON lines; switch_load (us per switch; params seg_bytes, load none/spin/blocked,
 * threads, pad yes/no), switch_inout (us per round trip; the same params plus engine
 * park/keep), *_step (the same params plus step), ctxswitch_pipe.
 * Everything runs in a private registry under /dev/shm that is removed at the end.
 */
#include <exomem/exomem.h>
#include "bench_util.h"
#include "internal.h"

#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define KIB (UINT64_C(1) << 10)
#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)
#define PAGE UINT64_C(4096)
#define BASE UINT64_C(0x300000000000) /* above mmap's placements, 1 GiB aligned */
#define MARGIN (3 * GIB)              /* memory left free for everything else */
#define MAX_SIZES 8

static struct {
    uint64_t sizes[MAX_SIZES];
    int nsizes;
    int repeats;
    int trips;        /* A->B->A round trips per repeat */
    int pipe_trips;
} opt = { { 64 * KIB, 2 * MIB, 64 * MIB, GIB, 4 * GIB }, 5, 5, 200, 50000 };

/* ---- other threads ---- */

enum load { LOAD_NONE, LOAD_SPIN, LOAD_BLOCKED };
static const char *const load_names[] = { "none", "spin", "blocked" };

static atomic_int stop_load;
static pthread_mutex_t sleep_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sleep_cond = PTHREAD_COND_INITIALIZER;

static void *spinner(void *arg)
{
    (void)arg;
    while (!atomic_load_explicit(&stop_load, memory_order_relaxed))
        ;
    return NULL;
}

static void *sleeper(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&sleep_mutex);
    while (!atomic_load(&stop_load))
        pthread_cond_wait(&sleep_cond, &sleep_mutex);
    pthread_mutex_unlock(&sleep_mutex);
    return NULL;
}

static void start_load(enum load load, int n, pthread_t *th)
{
    atomic_store(&stop_load, 0);
    for (int i = 0; i < n; i++)
        if (pthread_create(&th[i], NULL, load == LOAD_SPIN ? spinner : sleeper, NULL) != 0) {
            perror("bench_switch_load: pthread_create");
            exit(1);
        }
    usleep(20000); /* let them spin, or fall asleep */
}

static void stop_load_threads(int n, pthread_t *th)
{
    pthread_mutex_lock(&sleep_mutex);
    atomic_store(&stop_load, 1);
    pthread_cond_broadcast(&sleep_cond);
    pthread_mutex_unlock(&sleep_mutex);
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
}

/* ---- one configuration ---- */

static void fill(uint64_t size, uint8_t tag)
{
    for (uint64_t off = 0; off < size; off += PAGE)
        ((volatile uint8_t *)(uintptr_t)BASE)[off] = tag;
}

static void check(uint64_t size, uint8_t tag)
{
    volatile uint8_t *p = (volatile uint8_t *)(uintptr_t)BASE;
    if (p[0] != tag || p[size - PAGE] != tag) {
        fprintf(stderr, "bench_switch_load: segment holds %#x, expected %#x: switch broken\n",
                p[0], tag);
        exit(1);
    }
}

/* Time `trips` round trips between handles h1 and h2 (VAS_HOME for "into and out of") under
 * one load; one `name` line per repeat (us per switch, or per round trip when `per_trip`)
 * and its breakdown (name_step) per switch. */
static void measure(const char *name, const char *extra, vhandle_t h1, vhandle_t h2,
                    uint64_t size, bool pad, enum load load, int threads, bool per_trip)
{
    pthread_t th[8];
    start_load(load, threads, th);
    char params[200], step_name[64];
    snprintf(params, sizeof params, "\"seg_bytes\":%" PRIu64 ",\"load\":\"%s\",\"threads\":%d,"
             "\"pad\":\"%s\"%s", size, load_names[load], threads, pad ? "yes" : "no", extra);
    snprintf(step_name, sizeof step_name, "%s_step", name);
    for (int r = 0; r < opt.repeats; r++) {
        struct vas_park_stats a, b;
        TRY(vas_ctl(VAS_CTL_PARK_STATS, 0, &a));
        uint64_t t0 = bench_now_ns();
        for (int k = 0; k < opt.trips; k++) {
            TRY(vas_switch(h2));
            TRY(vas_switch(h1));
        }
        double per = (bench_now_ns() - t0) / 1e3 / ((per_trip ? 1.0 : 2.0) * opt.trips);
        TRY(vas_ctl(VAS_CTL_PARK_STATS, 0, &b));
        bench_emit_against(name, "us", per, params, "ctxswitch_pipe", "", NULL);
        double n = (double)(b.switches - a.switches) * 1e3;
        if (b.maps != a.maps)
            fprintf(stderr, "bench_switch_load: %" PRIu64 " maps (not moves) in %s\n",
                    b.maps - a.maps, params);
        static const char *const steps[] = {"mremap", "mprotect", "locks", "other"};
        uint64_t ns[] = {b.remap_ns - a.remap_ns, b.protect_ns - a.protect_ns,
                         b.lock_ns - a.lock_ns, b.other_ns - a.other_ns};
        for (int i = 0; i < 4; i++) {
            char p[256];
            snprintf(p, sizeof p, "%s,\"step\":\"%s\"", params, steps[i]);
            bench_emit(step_name, "us", ns[i] / n, p, NULL, NULL);
        }
    }
    stop_load_threads(threads, th);
}

static const struct { enum load load; int threads; } loads[] = {
    { LOAD_NONE, 0 }, { LOAD_SPIN, 1 }, { LOAD_SPIN, 3 }, { LOAD_BLOCKED, 1 },
    { LOAD_BLOCKED, 3 },
};

/* Into A and back home, per round trip, on the park engine and on the keep engine (which
 * leaves A's segment at its base while home: the round trip is its two lock calls). */
static void measure_inout(vhandle_t ha, uint64_t size, bool pad)
{
    static const struct { int engine; const char *name; } engines[] = {
        { VAS_ENGINE_PARK, "park" }, { VAS_ENGINE_KEEP, "keep" },
    };
    for (size_t e = 0; e < sizeof engines / sizeof engines[0]; e++) {
        TRY(vas_switch(VAS_HOME));
        int engine = engines[e].engine;
        TRY(vas_ctl(VAS_CTL_SET_ENGINE, 0, &engine));
        TRY(vas_switch(ha)); /* warm up */
        TRY(vas_switch(VAS_HOME));
        char extra[64];
        snprintf(extra, sizeof extra, ",\"engine\":\"%s\"", engines[e].name);
        for (size_t i = 0; i < sizeof loads / sizeof loads[0]; i++)
            measure("switch_inout", extra, VAS_HOME, ha, size, pad, loads[i].load,
                    loads[i].threads, true);
    }
    TRY(vas_switch(VAS_HOME));
    int park = VAS_ENGINE_PARK;
    TRY(vas_ctl(VAS_CTL_SET_ENGINE, 0, &park));
}

/* Both VASes at BASE with one `size` segment each; unpadded: a page of our own is mapped
 * where the padding would go first, so that exomem leaves it out. */
static void bench_size(uint64_t size, bool pad)
{
    void *blocker = NULL;
    uint64_t padded = (size + GIB - 1) / GIB * GIB;
    if (!pad) {
        blocker = mmap((void *)(uintptr_t)(BASE + padded - PAGE), PAGE, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (blocker == MAP_FAILED) {
            perror("bench_switch_load: blocker mapping");
            exit(1);
        }
    }
    vasid_t va = bench_make_vas("bsl-a"), vb = bench_make_vas("bsl-b");
    TRY(seg_attach(va, bench_make_seg("bsl-a0", BASE, size), SEG_RDWR));
    TRY(seg_attach(vb, bench_make_seg("bsl-b0", BASE, size), SEG_RDWR));
    vhandle_t ha = bench_attach(va), hb = bench_attach(vb);
    uint64_t t0 = bench_now_ns();
    TRY(vas_switch(ha));
    fill(size, 0xa1);
    TRY(vas_switch(hb));
    fill(size, 0xb2);
    TRY(vas_switch(ha));
    fprintf(stderr, "bench_switch_load: %" PRIu64 " KiB pad=%s: attach, populate: %.1f ms\n",
            size >> 10, pad ? "yes" : "no", (bench_now_ns() - t0) / 1e6);
    for (size_t i = 0; i < sizeof loads / sizeof loads[0]; i++)
        measure("switch_load", "", ha, hb, size, pad, loads[i].load, loads[i].threads, false);
    if (pad)
        measure_inout(ha, size, pad);
    TRY(vas_switch(ha));
    check(size, 0xa1);
    TRY(vas_switch(hb));
    check(size, 0xb2);
    bench_teardown();
    if (blocker)
        munmap(blocker, PAGE);
}

static int bench_main(void)
{
    int engine = VAS_ENGINE_PARK;
    TRY(vas_ctl(VAS_CTL_SET_ENGINE, 0, &engine));
    for (int r = 0; r < opt.repeats; r++) {
        double us = bench_ctxswitch_pipe_us(opt.pipe_trips);
        if (us < 0) {
            perror("bench_switch_load: ctxswitch_pipe");
            return 1;
        }
        bench_emit("ctxswitch_pipe", "us", us, "", NULL, NULL);
    }
    for (int i = 0; i < opt.nsizes; i++) {
        uint64_t size = opt.sizes[i];
        if (!bench_shm_fits(2 * size, MARGIN)) {
            fprintf(stderr, "bench_switch_load: %" PRIu64 " KiB: not enough memory for two "
                    "segments, skipped\n", size >> 10);
            printf("{\"name\":\"skip\",\"params\":{\"seg_bytes\":%" PRIu64 "},\"reason\":"
                   "\"not enough memory for two segments\"}\n", size);
            continue;
        }
        bench_size(size, true);
        if (size % GIB != 0)
            bench_size(size, false);
    }
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_switch_load [--sizes S1,S2,...] [--repeats N] [--trips K]"
               " [--quick]\n");
}

static int parse_sizes(char *list)
{
    opt.nsizes = 0;
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        uint64_t v;
        if (opt.nsizes == MAX_SIZES || exo_parse_size(tok, &v) != 0 || v == 0 || v % PAGE)
            return -1;
        opt.sizes[opt.nsizes++] = v;
    }
    return opt.nsizes > 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "sizes", required_argument, NULL, 's' },
        { "repeats", required_argument, NULL, 'r' },
        { "trips", required_argument, NULL, 't' },
        BENCH_COMMON_LONGOPTS,
    };
    if (bench_has_flag(argc, argv, "--quick")) { /* first, so explicit options override it */
        opt.nsizes = 4; /* 64 KiB to 1 GiB */
        opt.repeats = 3;
        opt.trips = 50;
        opt.pipe_trips = 10000;
    }
    int ch;
    while ((ch = getopt_long(argc, argv, "s:r:t:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 's':
            if (parse_sizes(optarg) != 0) {
                fprintf(stderr, "bench_switch_load: bad --sizes %s\n", optarg);
                return 2;
            }
            break;
        case 'r': opt.repeats = (int)bench_positive(optarg); break;
        case 't': opt.trips = (int)bench_positive(optarg); break;
        case 'q': break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    return bench_run_in_private_registry(bench_main);
}
