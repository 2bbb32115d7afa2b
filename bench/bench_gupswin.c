/* bench_gupswin: SpaceJMP Figures 8 and 9 redone on Linux -- GUPS over windows (apps/gupswin):
 * one logical table split into 1..64 windows, a batch of 16 or 64 updates to a random window
 * per iteration, in the paper's three designs side by side in one run:
 *   map       one address space; a window change maps the window's piece of a memfd with
 *             mmap(MAP_FIXED | MAP_POPULATE): page tables built on the critical path
 *   map_lazy  the same without MAP_POPULATE: the change is cheap, the updates fault
 *   vas       one segment per window, each in its own VAS, pending batches in a heap segment
 *             shared by all; a change is vas_switch()
 *   vas_nolock the same without segment locks (VAS_CTL_SET_LOCKING 0): the paper's GUPS
 *             uses no lockable segments, so this is its vas_switch; "vas" is exomem's default
 *   mp        Open MPI: one process per window (gupswin_mpi under mpirun, the real peer),
 *             batches sent as messages by rank 0 (which holds window 0)
 * Every run is time-limited (--ms) and verified with HPCC's rule, window by window; a failed
 * verification prints a "skip" line (gupswin_failed) and makes the exit status 1.
 *
 * Lines (gupswin_emit()): "gupswin" MUP/s against "map" of the same windows and batch;
 * "gupswin_changes" window changes per second (vas: Figure 9's switch rate; mp: messages);
 * "gupswin_change_time" us per change; "gupswin_update_time" ns per update outside the
 * changes (where the TLB misses after a change show); "gupswin_faults" page faults per 1000
 * updates. This VM has no performance counters, so Figure 9's TLB misses are not counted.
 *
 * Each (design, windows) runs in a forked child (bench_child), so a killed run leaves no
 * segment behind; the whole program works in a private registry.
 */
#include "bench_child.h"
#include "bench_memory.h"
#include "bench_util.h"
#include "gupswin.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WINDOW_BASE UINT64_C(0x340000000000) /* 1 GiB aligned, clear of the other benches */
#define HEAP_BASE UINT64_C(0x348000000000)

static struct {
    unsigned window_log2, max_windows;
    unsigned long ms;
    int repeats;
    bool mp;
} opt = { 23, 64, 300, 3, true }; /* 64 MiB windows: up to 4 GiB of table */

static const unsigned batches[] = { 16, 64 };
#define NBATCHES (sizeof batches / sizeof batches[0])

struct job {
    const char *design;
    unsigned windows;
};

/* Child: one design and window count, every batch size and repeat. Exit status 1 when a
 * verification failed, 3 when the design could not be set up (skip line printed). */
static int measure(void *arg)
{
    const struct job *job = arg;
    struct gupswin_config cfg = { .windows = job->windows, .window_log2 = opt.window_log2,
                                  .batch = batches[0], .max_ns = opt.ms * 1000000u };
    struct gupswin_map *m = NULL;
    struct gupswin_vas *v = NULL;
    uint64_t *pending = NULL;
    unsigned *fill = NULL, own_fill[GUPSWIN_MAX_WINDOWS];
    struct gupswin_design design;
    int rc;
    bool is_vas = strncmp(job->design, "vas", 3) == 0;
    if (strcmp(job->design, "vas_nolock") == 0) {
        int off = 0; /* at home, before anything is attached */
        TRY(vas_ctl(VAS_CTL_SET_LOCKING, 0, &off));
    }
    /* The pending batches are sized for the biggest batch, so one table serves all. */
    cfg.batch = batches[NBATCHES - 1];
    if (is_vas) {
        rc = gupswin_vas_open(&cfg, "gupswin", WINDOW_BASE, HEAP_BASE, &v);
        if (rc == 0)
            design = gupswin_vas_design(v, &pending, &fill);
    } else {
        rc = gupswin_map_open(&cfg, WINDOW_BASE, strcmp(job->design, "map") == 0, &m);
        if (rc == 0) {
            design = gupswin_map_design(m);
            pending = malloc(sizeof(uint64_t) * cfg.windows * cfg.batch);
            fill = own_fill;
            if (!pending)
                bench_die("malloc", -EXO_ENOMEM);
        }
    }
    if (rc) {
        char p[256];
        gupswin_params(p, sizeof p, job->design, &cfg);
        char why[300];
        snprintf(why, sizeof why, "setting up: %s", exomem_last_error());
        for (char *c = why; *c; c++)
            if (*c == '"' || *c == '\\')
                *c = '\'';
        bench_emit_skip(p, why);
        return 3;
    }
    int status = 0;
    for (int r = 0; r < opt.repeats && !bench_stop && !status; r++) {
        for (size_t b = 0; b < NBATCHES && !bench_stop && !status; b++) {
            cfg.batch = batches[b];
            struct gupswin_result res;
            TRY(gupswin_drive(&cfg, &design, pending, fill, &res));
            uint64_t errors = is_vas ? gupswin_vas_verify(v, res.updates)
                                     : gupswin_map_verify(m, res.updates);
            status |= !gupswin_emit(stdout, job->design, &cfg, &res, errors, NULL);
        }
    }
    if (is_vas) {
        TRY(gupswin_vas_close(v));
    } else {
        gupswin_map_close(m);
        free(pending);
    }
    return bench_stop ? 1 : status;
}

/* The MP design: gupswin_mpi under mpirun, its JSON lines copied to our stdout. Returns 1
 * when it failed (a verification, or mpirun itself), 0 otherwise (also when skipped). */
static int measure_mp(unsigned windows)
{
    char prog[4200], self[4096], p[256];
    struct gupswin_config cfg = { .windows = windows, .window_log2 = opt.window_log2, .batch = 16 };
    gupswin_params(p, sizeof p, "mp", &cfg);
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return 1;
    self[n] = 0;
    *strrchr(self, '/') = 0; /* BUILD/bench */
    snprintf(prog, sizeof prog, "%s/../apps/gupswin/gupswin_mpi", self);
    if (access(prog, X_OK) != 0) {
        bench_emit_skip(p, "gupswin_mpi was not built: CMake found no MPI");
        return 0;
    }
    char np[16], log2[16], ms[32], reps[16], out[4300];
    snprintf(np, sizeof np, "%u", windows);
    snprintf(log2, sizeof log2, "%u", opt.window_log2);
    snprintf(ms, sizeof ms, "%lu", opt.ms);
    snprintf(reps, sizeof reps, "%d", opt.repeats);
    snprintf(out, sizeof out, "%s/mp-%u.out", bench_root(), windows);
    const char *argv[] = { "mpirun", "--allow-run-as-root", "--oversubscribe", "-np", np,
                           "-x", "ASAN_OPTIONS", prog, "--window-log2", log2, "--batches",
                           "16,64", "--ms", ms, "--repeats", reps, NULL };
    /* In a sanitized build, Open MPI's own unfreed allocations are not ours to report. Its
     * shared-memory segments and session directory go into our private registry, which
     * is removed however we end. */
    static char vader[4200], tmpdir[4200];
    snprintf(vader, sizeof vader, "OMPI_MCA_btl_vader_backing_directory=%s", bench_root());
    snprintf(tmpdir, sizeof tmpdir, "OMPI_MCA_orte_tmpdir_base=%s", bench_root());
    const char *env[] = { "ASAN_OPTIONS=detect_leaks=0", vader, tmpdir, NULL };
    pid_t pid = bench_spawn(argv, "/", out, "/dev/stderr", env);
    if (pid < 0) {
        bench_emit_skip(p, "cannot start mpirun");
        return 1;
    }
    /* It runs 2 x repeats timed runs plus start-up and verification: allow it a minute more. */
    uint64_t limit = bench_now_ns() + (2u * (uint64_t)opt.repeats * opt.ms + 60000) * 1000000u;
    int status = 0;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            break;
        if (bench_stop || bench_now_ns() > limit) {
            status = bench_stop_group(pid, 2000);
            if (!bench_stop)
                bench_emit_skip(p, "mpirun did not finish in time: stopped");
            break;
        }
        nanosleep(&(struct timespec){ 0, 20000000 }, NULL);
    }
    FILE *f = fopen(out, "r");
    char line[2048];
    while (f && fgets(line, sizeof line, f))
        if (line[0] == '{')
            fputs(line, stdout);
    if (f)
        fclose(f);
    unlink(out);
    fflush(stdout);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        bench_emit_skip(p, "mpirun is not installed");
    return !(WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 127));
}

static int worker(void)
{
    static const char *const designs[] = { "map", "map_lazy", "vas", "vas_nolock" };
    int failed = 0;
    for (unsigned w = 1; w <= opt.max_windows && !bench_stop; w *= 2) {
        uint64_t need = (sizeof(uint64_t) << opt.window_log2) * w, have = bench_mem_available();
        if (have && need + need / 4 > have) {
            char p[96], why[160];
            snprintf(p, sizeof p, "\"windows\":%u", w);
            snprintf(why, sizeof why, "the table needs %.1f GiB, MemAvailable is %.1f GiB",
                     need / 1073741824.0, have / 1073741824.0);
            bench_emit_skip(p, why);
            continue;
        }
        for (size_t d = 0; d < sizeof designs / sizeof designs[0] && !bench_stop; d++) {
            struct job job = { designs[d], w };
            char what[64];
            snprintf(what, sizeof what, "%s, %u windows", designs[d], w);
            failed |= bench_in_child(measure, &job, what) == 1;
        }
        if (opt.mp && !bench_stop)
            failed |= measure_mp(w);
    }
    return failed || bench_stop;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_gupswin [--quick] [--repeats R] [--window-log2 L] [--ms MS]\n"
               "                     [--max-windows W] [--no-mp]\n"
               "GUPS over 1..W windows (default 64) of 2^L words (default 2^23: 64 MiB) in\n"
               "the map, map_lazy, vas, vas_nolock and mp designs, batches of 16 and 64, each\n"
               "run MS ms (default 300). --quick: 16 MiB windows, 150 ms, 2 repeats.\n");
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "repeats", required_argument, NULL, 'r' },
        { "window-log2", required_argument, NULL, 'l' },
        { "ms", required_argument, NULL, 'm' },
        { "max-windows", required_argument, NULL, 'w' },
        { "no-mp", no_argument, NULL, 'n' },
        BENCH_COMMON_LONGOPTS,
    };
    if (bench_has_flag(argc, argv, "--quick"))
        opt.window_log2 = 21, opt.ms = 150, opt.repeats = 2;
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'r': opt.repeats = (int)bench_positive(optarg); break;
        case 'l': opt.window_log2 = (unsigned)bench_positive(optarg); break;
        case 'm': opt.ms = (unsigned long)bench_positive(optarg); break;
        case 'w': opt.max_windows = (unsigned)bench_positive(optarg); break;
        case 'n': opt.mp = false; break;
        case 'q': break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    struct gupswin_config check = { .windows = 1, .window_log2 = opt.window_log2, .batch = 16 };
    if (optind != argc || opt.max_windows > GUPSWIN_MAX_WINDOWS || gupswin_check(&check) != 0) {
        usage(stderr);
        return 2;
    }
    bench_stop_on_signals();
    return bench_run_in_private_registry(worker);
}
