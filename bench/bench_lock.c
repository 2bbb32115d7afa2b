/* bench_lock: what SpaceJMP's lockable segments cost (Section 3, "lockable segments").
 *
 *   switch_locked / switch_unlocked   one vas_switch between two VASes of 1 and 8 small
 *                                     (2 MiB) segments with segment locking on and off
 *                                     (VAS_CTL_SET_LOCKING); the difference is the locks' cost;
 *   lock_contention_rw / _ro          1 or 2 processes each looping: switch into a VAS holding
 *                                     one shared segment (read-write: exclusive lock and an
 *                                     increment; read-only: shared lock and a read), switch
 *                                     home. Unit: switch-ins per second, all processes summed;
 *   ofd_lock_unlock                   a raw OFD lock + unlock of a file (fcntl), for reference.
 * One JSON object per line on stdout (one per repeat); messages on stderr. Everything runs in
 * a private registry under /dev/shm that is removed at the end, even if the measuring process
 * dies.
 */
#include "bench_util.h"

#include <exomem/exomem.h>

#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)
#define BASE0 UINT64_C(0x300000000000) /* above mmap's placements, 1 GiB aligned */
#define SEG_BYTES (2 * MIB)
#define MANY_SEGS 8
#define MAX_PROCS 2

static struct {
    int repeats;
    int trips;       /* A->B->A round trips per repeat */
    double seconds;  /* length of one contention run */
    int ofd_iters;
} opt = { 5, 2000, 1.0, 1000000 };

/* Segment slot i: a 1 GiB-aligned base of its own. */
static uint64_t slot_base(int i)
{
    return BASE0 + (uint64_t)i * GIB;
}

static segid_t make_seg(const char *name, int slot)
{
    return bench_make_seg(name, slot_base(slot), SEG_BYTES);
}

/* ---- switch cost with and without locks ---- */

static void set_locking(int on)
{
    TRY(vas_ctl(VAS_CTL_SET_LOCKING, 0, &on));
}

/* Nanoseconds per switch over opt.trips round trips A->B->A, starting and ending in A. */
static double time_switches(vhandle_t ha, vhandle_t hb)
{
    uint64_t t0 = bench_now_ns();
    for (int k = 0; k < opt.trips; k++) {
        TRY(vas_switch(hb));
        TRY(vas_switch(ha));
    }
    return (double)(bench_now_ns() - t0) / (2.0 * opt.trips);
}

static void bench_switch_locking(int segs)
{
    vasid_t a = bench_make_vas("blk-a"), b = bench_make_vas("blk-b");
    for (int i = 0; i < segs; i++) {
        char name[32];
        snprintf(name, sizeof name, "blk-a-%d", i);
        TRY(seg_attach(a, make_seg(name, i), SEG_RDWR));
        snprintf(name, sizeof name, "blk-b-%d", i);
        TRY(seg_attach(b, make_seg(name, segs + i), SEG_RDWR));
    }
    vhandle_t ha = bench_attach(a), hb = bench_attach(b);
    for (int round = 0; round < 2; round++) { /* populate and warm up both */
        TRY(vas_switch(ha));
        for (int i = 0; i < segs; i++)
            memset((void *)(uintptr_t)slot_base(i), 0xa, SEG_BYTES);
        TRY(vas_switch(hb));
        for (int i = 0; i < segs; i++)
            memset((void *)(uintptr_t)slot_base(segs + i), 0xb, SEG_BYTES);
    }
    char params[96];
    snprintf(params, sizeof params, "\"segs\":%d,\"seg_bytes\":%" PRIu64, segs, SEG_BYTES);
    for (int r = 0; r < opt.repeats; r++) { /* alternate, so drift hits both alike */
        double ns[2];
        for (int locking = 1; locking >= 0; locking--) {
            TRY(vas_switch(VAS_HOME)); /* change the setting with no locks held */
            set_locking(locking);
            TRY(vas_switch(ha));
            ns[locking] = time_switches(ha, hb);
        }
        bench_emit("switch_locked", "us", ns[1] / 1e3, params, "switch_unlocked", NULL);
        bench_emit("switch_unlocked", "us", ns[0] / 1e3, params, NULL, NULL);
    }
    TRY(vas_switch(VAS_HOME));
    set_locking(1);
    bench_teardown();
}

/* ---- contention between processes ---- */

struct contender_result {
    uint64_t switches;
    uint64_t ns;
};

/* Child body: attach `vid`, report ready, wait for the start (go pipe closing), then loop
 * switch in / touch the counter / switch home for opt.seconds; write the result to `out`.
 * Exits with _exit(): the parent's atexit cleanup must not run here. */
static void contender(vasid_t vid, bool rw, int ready, int go, int out)
{
    vhandle_t vh;
    int rc = vas_attach(vid, &vh);
    volatile uint64_t *counter = (volatile uint64_t *)(uintptr_t)slot_base(0);
    uint64_t sink = 0;
    if (rc == 0 && (rc = vas_switch(vh)) == 0) { /* warm-up: map the segment once */
        sink += *counter;
        rc = vas_switch(VAS_HOME);
    }
    if (rc != 0) {
        fprintf(stderr, "bench_lock[%d]: contender setup: %s\n", (int)getpid(),
                exomem_last_error());
        _exit(1);
    }
    char b = 'r';
    if (write(ready, &b, 1) != 1)
        _exit(1);
    close(ready); /* so the parent sees EOF, not a hang, if another contender fails */
    if (read(go, &b, 1) != 0)
        _exit(1);
    struct contender_result res = { 0, 0 };
    uint64_t t0 = bench_now_ns(), deadline = t0 + (uint64_t)(opt.seconds * 1e9), t = t0;
    while (t < deadline) {
        if ((rc = vas_switch(vh)) != 0)
            break;
        if (rw)
            (*counter)++;
        else
            sink += *counter;
        if ((rc = vas_switch(VAS_HOME)) != 0)
            break;
        res.switches++;
        t = bench_now_ns();
    }
    res.ns = t - t0;
    if (rc != 0) {
        fprintf(stderr, "bench_lock[%d]: contender switch: %s\n", (int)getpid(),
                exomem_last_error());
        _exit(1);
    }
    vas_detach(vh);
    if (write(out, &res, sizeof res) != (ssize_t)sizeof res)
        _exit(1);
    _exit(sink == UINT64_MAX); /* uses sink so the reads are not optimised away */
}

/* Read or reset the shared counter from this process. */
static uint64_t counter_access(vasid_t rw_vas, bool reset)
{
    TRY(vas_switch(bench_attach(rw_vas)));
    volatile uint64_t *counter = (volatile uint64_t *)(uintptr_t)slot_base(0);
    uint64_t v = *counter;
    if (reset)
        *counter = 0;
    TRY(vas_switch(VAS_HOME));
    bench_detach_all();
    return v;
}

/* Run `procs` contenders on VAS `vid` at once; returns switch-ins per second, all summed. */
static double run_contention(vasid_t vid, vasid_t rw_vas, bool rw, int procs)
{
    counter_access(rw_vas, true);
    int ready[2], go[2], out[2];
    if (pipe(ready) != 0 || pipe(go) != 0 || pipe(out) != 0) {
        perror("bench_lock: pipe");
        exit(1);
    }
    pid_t pids[MAX_PROCS];
    fflush(NULL);
    for (int p = 0; p < procs; p++) {
        pids[p] = fork();
        if (pids[p] < 0) {
            perror("bench_lock: fork");
            exit(1);
        }
        if (pids[p] == 0) {
            close(ready[0]);
            close(go[1]);
            close(out[0]);
            contender(vid, rw, ready[1], go[0], out[1]);
        }
    }
    close(ready[1]);
    close(go[0]);
    close(out[1]);
    char b;
    for (int p = 0; p < procs; p++)
        if (read(ready[0], &b, 1) != 1)
            break; /* a child failed; its status says so below */
    close(go[1]); /* starts all contenders at once */
    uint64_t switches = 0, ns = 1;
    struct contender_result res;
    char counts[64] = "";
    while (read(out[0], &res, sizeof res) == (ssize_t)sizeof res) {
        switches += res.switches;
        ns = res.ns > ns ? res.ns : ns;
        snprintf(counts + strlen(counts), sizeof counts - strlen(counts), " %" PRIu64,
                 res.switches);
    }
    close(ready[0]);
    close(out[0]);
    bool ok = true;
    for (int p = 0; p < procs; p++) {
        int status;
        while (waitpid(pids[p], &status, 0) < 0)
            ;
        ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    if (!ok) {
        fprintf(stderr, "bench_lock: a contender failed\n");
        exit(1);
    }
    uint64_t counter = counter_access(rw_vas, false);
    fprintf(stderr, "bench_lock: %s procs=%d: switches per process:%s; counter %" PRIu64 "\n",
            rw ? "rw" : "ro", procs, counts, counter);
    if (rw && counter != switches) {
        fprintf(stderr, "bench_lock: counter %" PRIu64 " != %" PRIu64 " increments: the"
                " exclusive lock did not serialise them\n", counter, switches);
        exit(1);
    }
    return switches / (ns / 1e9);
}

static void bench_contention(void)
{
    segid_t sid = make_seg("blk-shared", 0);
    vasid_t rw = bench_make_vas("blk-rw"), ro = bench_make_vas("blk-ro");
    TRY(seg_attach(rw, sid, SEG_RDWR));
    TRY(seg_attach(ro, sid, SEG_RDONLY));
    for (int r = 0; r < opt.repeats; r++)
        for (int procs = 1; procs <= MAX_PROCS; procs++) {
            char params[32];
            snprintf(params, sizeof params, "\"procs\":%d", procs);
            bench_emit("lock_contention_rw", "switches/s",
                       run_contention(rw, rw, true, procs), params, NULL, NULL);
            bench_emit("lock_contention_ro", "switches/s",
                       run_contention(ro, rw, false, procs), params, NULL, NULL);
        }
    bench_teardown();
}

/* ---- raw OFD lock ---- */

static void bench_ofd(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/ofd.lock", bench_root());
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        perror("bench_lock: lock file");
        exit(1);
    }
    unlink(path);
    struct flock lock = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
    struct flock unlock = { .l_type = F_UNLCK, .l_whence = SEEK_SET };
    for (int r = -1; r < opt.repeats; r++) { /* r == -1: warm-up */
        uint64_t t0 = bench_now_ns();
        for (int i = 0; i < opt.ofd_iters; i++) {
            if (fcntl(fd, F_OFD_SETLKW, &lock) != 0 || fcntl(fd, F_OFD_SETLK, &unlock) != 0) {
                perror("bench_lock: fcntl OFD lock");
                exit(1);
            }
        }
        if (r >= 0)
            bench_emit("ofd_lock_unlock", "ns", (double)(bench_now_ns() - t0) / opt.ofd_iters,
                       "", NULL, NULL);
    }
    close(fd);
}

/* ---- driver ---- */

static int bench_main(void)
{
    fprintf(stderr, "bench_lock: registry %s\n", bench_root());
    bench_switch_locking(1);
    bench_switch_locking(MANY_SEGS);
    bench_contention();
    bench_ofd();
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "repeats", required_argument, NULL, 'r' },
        { "trips", required_argument, NULL, 't' },
        { "seconds", required_argument, NULL, 's' },
        BENCH_COMMON_LONGOPTS,
    };
    if (bench_has_flag(argc, argv, "--quick")) { /* first, so explicit options override it */
        opt.repeats = 2;
        opt.trips = 300;
        opt.seconds = 0.2;
        opt.ofd_iters = 100000;
    }
    int ch;
    while ((ch = getopt_long(argc, argv, "r:t:s:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'r': opt.repeats = (int)bench_positive(optarg); break;
        case 't': opt.trips = (int)bench_positive(optarg); break;
        case 's':
            opt.seconds = atof(optarg);
            if (opt.seconds <= 0) {
                fprintf(stderr, "bench_lock: bad --seconds %s\n", optarg);
                return 2;
            }
            break;
        case 'q': break;
        case 'h':
        default:
            fprintf(ch == 'h' ? stdout : stderr,
                    "usage: bench_lock [--repeats N] [--trips K] [--seconds S] [--quick]\n");
            return ch == 'h' ? 0 : 2;
        }
    }
    return bench_run_in_private_registry(bench_main);
}
