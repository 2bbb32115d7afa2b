/* Helpers shared by the benchmark programs; see bench_util.h. */
#include "bench_util.h"

#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_SEGS 128
#define MAX_VASES 8
#define MAX_HANDLES 8

#define PROG program_invocation_short_name

static char root[64];

static segid_t made_segs[MAX_SEGS];
static int n_made_segs;
static vasid_t made_vases[MAX_VASES];
static int n_made_vases;
static vhandle_t handles[MAX_HANDLES];
static int n_handles;

_Noreturn void bench_die(const char *what, int rc)
{
    fprintf(stderr, "%s: %s: %s (%s)\n", PROG, what, exomem_strerror(rc), exomem_last_error());
    exit(1);
}

long bench_positive(const char *s)
{
    char *end;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || *end || v <= 0 || v > 100000000) {
        fprintf(stderr, "%s: expected a positive number, got '%s'\n", PROG, s ? s : "");
        exit(2);
    }
    return v;
}

bool bench_has_flag(int argc, char **argv, const char *flag)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], flag))
            return true;
    return false;
}

static _Noreturn void bench_usage(const char *more_usage, int code)
{
    FILE *f = code ? stderr : stdout;
    fprintf(f, "usage: %s [--repeats N] [--quick]\n%s", PROG, more_usage ? more_usage : "");
    exit(code);
}

bool bench_parse_args(int argc, char **argv, int *repeats, int quick_repeats,
                      const char *more_usage)
{
    bool quick = false;
    int explicit_repeats = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = true;
        else if (!strcmp(argv[i], "--repeats") && i + 1 < argc)
            explicit_repeats = (int)bench_positive(argv[++i]);
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            bench_usage(more_usage, 0);
        else
            bench_usage(more_usage, 2);
    }
    if (explicit_repeats)
        *repeats = explicit_repeats;
    else if (quick)
        *repeats = quick_repeats;
    return quick;
}

uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

const char *bench_root(void)
{
    return root;
}

/* ---- private registry ---- */

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st, (void)type, (void)ftw;
    remove(path);
    return 0;
}

void bench_remove_tree(const char *dir)
{
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static pid_t worker;

static void forward_signal(int sig)
{
    if (worker > 0)
        kill(worker, sig);
}

int bench_run_in_private_registry(int (*body)(void))
{
    snprintf(root, sizeof root, "/dev/shm/exomem-bench-XXXXXX");
    if (!mkdtemp(root)) {
        fprintf(stderr, "%s: mkdtemp: %s\n", PROG, strerror(errno));
        root[0] = '\0';
        return 1;
    }
    setenv("EXOMEM_ROOT", root, 1); /* before any exomem call: the config is read once */
    fflush(NULL);
    worker = fork();
    if (worker == 0) {
        atexit(bench_teardown);
        exit(body());
    }
    int status = 1 << 8;
    if (worker > 0) {
        struct sigaction sa = { .sa_handler = forward_signal };
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);
        while (waitpid(worker, &status, 0) < 0)
            ;
    } else {
        fprintf(stderr, "%s: fork: %s\n", PROG, strerror(errno));
    }
    bench_remove_tree(root);
    if (WIFSIGNALED(status)) {
        fprintf(stderr, "%s: killed by signal %d\n", PROG, WTERMSIG(status));
        return 1;
    }
    return WEXITSTATUS(status);
}

/* ---- registry objects ---- */

static void too_many(const char *what)
{
    fprintf(stderr, "%s: more %s than bench_util keeps track of\n", PROG, what);
    exit(1);
}

segid_t bench_make_seg(const char *name, uint64_t base, uint64_t size)
{
    if (n_made_segs == MAX_SEGS)
        too_many("segments");
    segid_t sid;
    TRY(seg_alloc(name, base, size, 0600, &sid));
    made_segs[n_made_segs++] = sid;
    return sid;
}

vasid_t bench_make_vas(const char *name)
{
    if (n_made_vases == MAX_VASES)
        too_many("VASes");
    vasid_t vid;
    TRY(vas_create(name, 0600, &vid));
    made_vases[n_made_vases++] = vid;
    return vid;
}

vhandle_t bench_attach(vasid_t vid)
{
    if (n_handles == MAX_HANDLES)
        too_many("VAS handles");
    vhandle_t vh;
    TRY(vas_attach(vid, &vh));
    handles[n_handles++] = vh;
    return vh;
}

void bench_detach_all(void)
{
    while (n_handles > 0)
        TRY(vas_detach(handles[--n_handles]));
}

void bench_teardown(void)
{
    if (vas_current() != VAS_HOME && vas_switch(VAS_HOME) != 0)
        fprintf(stderr, "%s: cleanup: switch home: %s\n", PROG, exomem_last_error());
    while (n_handles > 0)
        vas_detach(handles[--n_handles]);
    while (n_made_vases > 0)
        if (vas_delete(made_vases[--n_made_vases]) != 0)
            fprintf(stderr, "%s: cleanup: vas_delete: %s\n", PROG, exomem_last_error());
    while (n_made_segs > 0)
        if (seg_delete(made_segs[--n_made_segs]) != 0)
            fprintf(stderr, "%s: cleanup: seg_delete: %s\n", PROG, exomem_last_error());
}

/* ---- output ---- */

void bench_emit(const char *name, const char *unit, double value, const char *params,
                const char *baseline, const char *note)
{
    bench_emit_against(name, unit, value, params, baseline, NULL, note);
}

void bench_emit_against(const char *name, const char *unit, double value, const char *params,
                        const char *baseline, const char *baseline_params, const char *note)
{
    printf("{\"name\":\"%s\",\"unit\":\"%s\",\"value\":%.3f,\"params\":{%s}", name, unit, value,
           params);
    if (baseline)
        printf(",\"baseline\":\"%s\"", baseline);
    if (baseline && baseline_params)
        printf(",\"baseline_params\":{%s}", baseline_params);
    if (note)
        printf(",\"note\":\"%s\"", note);
    printf("}\n");
    fflush(stdout);
}

/* ---- yardsticks ---- */

/* Two processes pinned to one CPU pass a byte back and forth over two pipes; returns the
 * time of one context switch (half a round trip) in microseconds. */
double bench_ctxswitch_pipe_us(int trips)
{
    cpu_set_t old, one;
    if (sched_getaffinity(0, sizeof old, &old) != 0)
        return -1;
    int cpu = 0;
    while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &old))
        cpu++;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0)
        return -1;
    int ping[2], pong[2];
    if (pipe(ping) != 0 || pipe(pong) != 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) { /* echo until the pipe closes; _exit: no atexit cleanup in this child */
        close(ping[1]);
        close(pong[0]);
        char b;
        while (read(ping[0], &b, 1) == 1 && write(pong[1], &b, 1) == 1)
            ;
        _exit(0);
    }
    close(ping[0]);
    close(pong[1]);
    char b = 'x';
    double us = -1;
    bool ok = pid > 0;
    uint64_t t0 = 0;
    for (int k = -1000; ok && k < trips; k++) { /* k < 0: warm-up */
        if (k == 0)
            t0 = bench_now_ns();
        ok = write(ping[1], &b, 1) == 1 && read(pong[0], &b, 1) == 1;
    }
    if (ok)
        us = (bench_now_ns() - t0) / 1e3 / (2.0 * trips);
    close(ping[1]);
    close(pong[0]);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    sched_setaffinity(0, sizeof old, &old);
    return us;
}

/* ---- memory budget ---- */

static uint64_t mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    uint64_t kib = 0;
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %" SCNu64, &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib * 1024;
}

bool bench_shm_fits(uint64_t bytes, uint64_t margin)
{
    struct statvfs sv;
    if (statvfs(bench_root(), &sv) != 0)
        return false;
    uint64_t shm_free = (uint64_t)sv.f_bavail * sv.f_frsize;
    return bytes + margin <= mem_available() && bytes + margin <= shm_free;
}
