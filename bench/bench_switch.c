/* bench_switch: what a vas_switch costs on each engine (SpaceJMP, Table 2 and Figure 1).
 *
 * Two VASes A and B, each of N populated segments (default 1 GiB, N = 1 and --max-segs),
 * are attached and switched A->B->A in a loop; one switch costs total / (2 * round trips).
 * Engines: park, keep (A and B are at different bases, so after the first round trip
 * nothing moves: a switch is its locks) and remap. Measured in the same run, for the ratios:
 *   mmap_populate   what a switch replaces on stock Linux: mmap(MAP_SHARED|MAP_POPULATE) of
 *                   the same N segments of an already-filled tmpfs file, then munmap;
 *   ctxswitch_pipe  one process context switch: two processes pinned to one CPU ping-pong a
 *                   byte over pipes (a round trip is two switches).
 * When memory cannot hold 2 * N segments (plus a 3 GiB margin), B is one 2 MiB segment
 * ("peer":"small"). One JSON object per line on stdout (one per repeat); messages on stderr.
 * Everything runs in a private registry under /dev/shm that is removed at the end, even if
 * the measuring process dies.
 */
#include <exomem/exomem.h>
#include "bench_util.h"
#include "internal.h"

#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)
#define PAGE UINT64_C(4096)
#define BASE0 UINT64_C(0x300000000000) /* above mmap's placements, 1 GiB aligned */
#define MARGIN (3 * GIB)               /* memory left free for everything else */
#define SMALL_SEG (2 * MIB)            /* the peer segment when memory is short */
#define MAX_SEGS 32

static struct {
    uint64_t seg_size;
    int max_segs;
    int repeats;
    int park_trips;   /* A->B->A round trips per repeat, park engine */
    int remap_trips;  /* ... remap engine (each switch maps and populates everything) */
    int pipe_trips;   /* ping-pong round trips per repeat */
} opt = { GIB, 8, 5, 200, 5, 50000 };

/* One measured configuration: A has `segs` segments of seg_bytes; B the same or one small. */
struct config {
    int segs;
    uint64_t seg_bytes;
    bool small_peer;
    vasid_t a, b;
};

/* ---- output ---- */

static void emit(const char *name, double value, const struct config *c, const char *baseline,
                 const char *note)
{
    char params[128] = "";
    if (c)
        snprintf(params, sizeof params, "\"segs\":%d,\"seg_bytes\":%" PRIu64 ",\"peer\":\"%s\"",
                 c->segs, c->seg_bytes, c->small_peer ? "small" : "vas");
    bench_emit(name, "us", value, params, baseline, note);
}

/* ---- VASes ---- */

/* Segment slot i sits at its own 1 GiB-aligned base, at least 4 GiB from the next one. */
static uint64_t slot_base(int i)
{
    uint64_t stride = (opt.seg_size + GIB - 1) / GIB * GIB;
    if (stride < 4 * GIB)
        stride = 4 * GIB;
    return BASE0 + (uint64_t)i * stride;
}

/* Make VAS `name` holding n read-write segments of `size` bytes in slots first.. */
static vasid_t make_vas(const char *name, int first, int n, uint64_t size)
{
    vasid_t vid = bench_make_vas(name);
    for (int i = 0; i < n; i++) {
        char seg_name[EXOMEM_NAME_MAX + 1];
        snprintf(seg_name, sizeof seg_name, "%s-%d", name, i);
        TRY(seg_attach(vid, bench_make_seg(seg_name, slot_base(first + i), size), SEG_RDWR));
    }
    return vid;
}

/* Write `tag` into one byte of every 4K page of the current VAS's segments (populating
 * them), or, when `check`, verify that the first byte of each segment holds it. */
static void touch_vas(vasid_t vid, uint8_t tag, bool check)
{
    static struct vas_info vi;
    TRY(vas_ctl(VAS_CTL_INFO, vid, &vi));
    for (unsigned s = 0; s < vi.nsegs; s++) {
        struct seg_info si;
        TRY(seg_ctl(vi.segs[s].sid, SEG_CTL_INFO, &si));
        volatile uint8_t *p = (volatile uint8_t *)(uintptr_t)si.base;
        if (check) {
            if (p[0] != tag) {
                fprintf(stderr, "bench_switch: segment %s holds %#x, expected %#x: switch broken\n",
                        si.name, p[0], tag);
                exit(1);
            }
            continue;
        }
        for (uint64_t off = 0; off < si.size; off += PAGE)
            p[off] = tag;
    }
}

/* Print the park statistics gathered since the previous call (moves and maps are totals). */
static void print_park_stats(const char *label, int segs)
{
    static struct vas_park_stats last;
    struct vas_park_stats st;
    if (vas_ctl(VAS_CTL_PARK_STATS, 0, &st) != 0) {
        fprintf(stderr, "bench_switch: park stats: %s\n", exomem_last_error());
        return;
    }
    fprintf(stderr, "bench_switch: %s segs=%d: park stats moves=%" PRIu64 " maps=%" PRIu64
            " evictions=%" PRIu64 " (this run), parked_bytes=%" PRIu64 "\n", label, segs,
            st.moves - last.moves, st.maps - last.maps, st.evictions - last.evictions,
            st.parked_bytes);
    last = st;
}

/* Time A->B->A round trips with one engine; one JSON line per repeat. */
static void bench_engine(const struct config *c, int engine, const char *name, int trips)
{
    TRY(vas_ctl(VAS_CTL_SET_ENGINE, 0, &engine));
    vhandle_t ha = bench_attach(c->a), hb = bench_attach(c->b);

    uint64_t t0 = bench_now_ns();
    TRY(vas_switch(ha));
    touch_vas(c->a, 0xa1, false);
    TRY(vas_switch(hb));
    touch_vas(c->b, 0xb2, false);
    TRY(vas_switch(ha));
    fprintf(stderr, "bench_switch: %s segs=%d: attach, populate: %.1f ms\n", name, c->segs,
            (bench_now_ns() - t0) / 1e6);
    if (engine != VAS_ENGINE_REMAP) { /* warm up; a remap switch is too slow to waste */
        TRY(vas_switch(hb));
        TRY(vas_switch(ha));
    }

    for (int r = 0; r < opt.repeats; r++) {
        t0 = bench_now_ns();
        for (int k = 0; k < trips; k++) {
            TRY(vas_switch(hb));
            TRY(vas_switch(ha));
        }
        emit(name, (bench_now_ns() - t0) / 1e3 / (2.0 * trips), c, "mmap_populate", NULL);
    }
    touch_vas(c->a, 0xa1, true);
    TRY(vas_switch(hb));
    touch_vas(c->b, 0xb2, true);
    TRY(vas_switch(VAS_HOME));
    print_park_stats(name, c->segs);
    bench_detach_all();
}

/* ---- baselines ---- */

/* mmap(MAP_SHARED|MAP_POPULATE) the N segments' worth of an already-filled tmpfs file, one
 * mapping per segment as a switch maps them, then munmap: what one remap switch replaces. */
static void bench_mmap_populate(const struct config *c)
{
    uint64_t total = (uint64_t)c->segs * c->seg_bytes;
    if (!bench_shm_fits(total, MARGIN)) {
        fprintf(stderr, "bench_switch: mmap_populate segs=%d: not enough memory, skipped\n",
                c->segs);
        return;
    }
    char path[128];
    snprintf(path, sizeof path, "%s/baseline.data", bench_root());
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        perror("bench_switch: baseline file");
        exit(1);
    }
    unlink(path); /* lives while fd is open, never left behind */
    if (fallocate(fd, 0, 0, (off_t)total) != 0) {
        perror("bench_switch: fallocate baseline file");
        exit(1);
    }
    int iters = (int)(16 * GIB / total);
    iters = iters < 1 ? 1 : iters > 20 ? 20 : iters;
    void *maps[MAX_SEGS];
    double map_ns = 0, unmap_ns = 0;
    for (int r = -1; r < opt.repeats; r++) { /* r == -1: warm-up, fills the file's pages */
        uint64_t map_sum = 0, unmap_sum = 0;
        for (int it = 0; it < iters; it++) {
            uint64_t t0 = bench_now_ns();
            for (int s = 0; s < c->segs; s++) {
                maps[s] = mmap(NULL, c->seg_bytes, PROT_READ | PROT_WRITE,
                               MAP_SHARED | MAP_POPULATE, fd, (off_t)(s * c->seg_bytes));
                if (maps[s] == MAP_FAILED) {
                    perror("bench_switch: mmap");
                    exit(1);
                }
            }
            uint64_t t1 = bench_now_ns();
            for (int s = 0; s < c->segs; s++)
                munmap(maps[s], c->seg_bytes);
            map_sum += t1 - t0;
            unmap_sum += bench_now_ns() - t1;
        }
        if (r < 0)
            continue;
        map_ns += (double)map_sum / iters;
        unmap_ns += (double)unmap_sum / iters;
        emit("mmap_populate", (double)(map_sum + unmap_sum) / iters / 1e3, c, NULL,
             "mmap MAP_SHARED|MAP_POPULATE of a filled tmpfs file + munmap");
    }
    close(fd);
    fprintf(stderr, "bench_switch: mmap_populate segs=%d: mmap+populate %.1f us, munmap %.1f us"
            " (mean)\n", c->segs, map_ns / opt.repeats / 1e3, unmap_ns / opt.repeats / 1e3);
}

/* ---- driver ---- */

static void bench_config(int segs)
{
    struct config c = { .segs = segs, .seg_bytes = opt.seg_size };
    uint64_t one = (uint64_t)segs * opt.seg_size;
    if (!bench_shm_fits(2 * one, MARGIN)) {
        if (!bench_shm_fits(one + SMALL_SEG, MARGIN)) {
            fprintf(stderr, "bench_switch: segs=%d: not enough memory for %" PRIu64
                    " bytes, skipped\n", segs, one);
            return;
        }
        c.small_peer = true;
        fprintf(stderr, "bench_switch: segs=%d: memory holds one VAS only; B is one 2 MiB"
                " segment\n", segs);
    }
    bench_mmap_populate(&c); /* first: its file is gone before the VASes take memory */
    c.a = make_vas("bsw-a", 0, segs, opt.seg_size);
    c.b = c.small_peer ? make_vas("bsw-b", segs, 1, SMALL_SEG)
                       : make_vas("bsw-b", segs, segs, opt.seg_size);
    bench_engine(&c, VAS_ENGINE_PARK, "switch_park", opt.park_trips);
    bench_engine(&c, VAS_ENGINE_KEEP, "switch_keep", opt.park_trips);
    bench_engine(&c, VAS_ENGINE_REMAP, "switch_remap", opt.remap_trips);
    bench_teardown();
}

static int bench_main(void)
{
    fprintf(stderr, "bench_switch: registry %s, segments of %" PRIu64 " bytes, 1 and %d per"
            " VAS\n", bench_root(), opt.seg_size, opt.max_segs);
    bench_config(1);
    if (opt.max_segs > 1)
        bench_config(opt.max_segs);
    for (int r = 0; r < opt.repeats; r++) {
        double us = bench_ctxswitch_pipe_us(opt.pipe_trips);
        if (us < 0) {
            perror("bench_switch: ctxswitch_pipe");
            return 1;
        }
        emit("ctxswitch_pipe", us, NULL, NULL, NULL);
    }
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_switch [--seg-size SIZE] [--max-segs N] [--repeats N]\n"
               "       [--park-trips K] [--remap-trips K] [--quick]\n");
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "seg-size", required_argument, NULL, 's' },
        { "max-segs", required_argument, NULL, 'n' },
        { "repeats", required_argument, NULL, 'r' },
        { "park-trips", required_argument, NULL, 'p' },
        { "remap-trips", required_argument, NULL, 'm' },
        BENCH_COMMON_LONGOPTS,
    };
    if (bench_has_flag(argc, argv, "--quick")) { /* first, so explicit options override it */
        opt.seg_size = 64 * MIB;
        opt.repeats = 2;
        opt.park_trips = 50;
        opt.remap_trips = 2;
        opt.pipe_trips = 10000;
    }
    int ch;
    while ((ch = getopt_long(argc, argv, "s:n:r:p:m:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 's':
            if (exo_parse_size(optarg, &opt.seg_size) != 0 || opt.seg_size == 0 ||
                opt.seg_size % PAGE != 0) {
                fprintf(stderr, "bench_switch: bad --seg-size %s\n", optarg);
                return 2;
            }
            break;
        case 'n':
            opt.max_segs = (int)bench_positive(optarg);
            if (opt.max_segs > MAX_SEGS) {
                fprintf(stderr, "bench_switch: --max-segs at most %d\n", MAX_SEGS);
                return 2;
            }
            break;
        case 'r': opt.repeats = (int)bench_positive(optarg); break;
        case 'p': opt.park_trips = (int)bench_positive(optarg); break;
        case 'm': opt.remap_trips = (int)bench_positive(optarg); break;
        case 'q': break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    return bench_run_in_private_registry(bench_main);
}
