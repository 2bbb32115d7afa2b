/* Helpers shared by the benchmark programs (one per bench/ source file): a private registry
 * that is removed however the measuring process ends, the registry objects a benchmark makes
 * (deleted again at exit), error exits, argument parsing, the clock and the JSON output line.
 * Messages are prefixed with the program's name (program_invocation_short_name).
 */
#ifndef EXOMEM_BENCH_UTIL_H
#define EXOMEM_BENCH_UTIL_H

#include <exomem/exomem.h>

#include <stdbool.h>
#include <stdint.h>

/* Print "<program>: <what>: <error> (<last error>)" and exit(1). */
_Noreturn void bench_die(const char *what, int rc);

/* Evaluate an exomem call; on a nonzero result die, naming the call. */
#define TRY(expr)                                                                              \
    do {                                                                                       \
        int rc_ = (expr);                                                                      \
        if (rc_ != 0)                                                                          \
            bench_die(#expr, rc_);                                                             \
    } while (0)

/* Parse a command-line number in 1..100000000; anything else (also NULL) exits with 2. */
long bench_positive(const char *s);

/* The end of a getopt_long table (needs <getopt.h>): --quick as 'q' (act on it beforehand,
 * with bench_has_flag, so that explicit options override it) and --help as 'h'. */
#define BENCH_COMMON_LONGOPTS                                                                  \
    { "quick", no_argument, NULL, 'q' }, { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 }

/* Is `flag` one of the arguments (checked before option parsing, e.g. for --quick)? */
bool bench_has_flag(int argc, char **argv, const char *flag);

/* Parse the arguments of a benchmark that takes only --quick, --repeats N and --help (-h).
 * Returns whether --quick was given; sets *repeats to N of --repeats N, else (with --quick)
 * to quick_repeats, else leaves it alone, so an explicit --repeats wins in either order.
 * --help prints "usage: <program> [--repeats N] [--quick]" and `more_usage` (when not NULL)
 * to stdout and exits 0; anything else (also a stray argument) prints it to stderr, exit 2. */
bool bench_parse_args(int argc, char **argv, int *repeats, int quick_repeats,
                      const char *more_usage);

/* Monotonic clock in nanoseconds. */
uint64_t bench_now_ns(void);

/* Remove directory `dir` and everything below it (not following links), going on past
 * entries it cannot remove: for cleaning up a benchmark's work files. */
void bench_remove_tree(const char *dir);

/* The private registry directory (EXOMEM_ROOT) of this run; "" before it exists. */
const char *bench_root(void);

/* Make a fresh registry under /dev/shm, point EXOMEM_ROOT at it and run body() in a forked
 * worker (so that a crash still leaves the parent to clean up), forwarding SIGINT, SIGTERM
 * and SIGHUP to it; then remove the registry. The worker deletes the objects it made with
 * bench_make_* at exit. Returns body()'s result, or 1 on failure or a signal. */
int bench_run_in_private_registry(int (*body)(void));

/* Allocate segment `name` (mode 0600) and remember it for bench_teardown(); dies on error. */
segid_t bench_make_seg(const char *name, uint64_t base, uint64_t size);

/* Create VAS `name` (mode 0600) and remember it for bench_teardown(); dies on error. */
vasid_t bench_make_vas(const char *name);

/* Attach VAS `vid` to this process and remember the handle; dies on error. */
vhandle_t bench_attach(vasid_t vid);

/* Detach every handle bench_attach() gave out; dies on error. */
void bench_detach_all(void);

/* Switch home, detach the handles and delete the VASes and segments made so far (newest
 * first); reports but survives failures, so it can run at exit after an error. */
void bench_teardown(void);

/* Print one measurement as a JSON line on stdout: `params` is the inside of the params
 * object ("" for none); `baseline` and `note` are left out when NULL. */
void bench_emit(const char *name, const char *unit, double value, const char *params,
                const char *baseline, const char *note);

/* bench_emit, compared with the baseline measurement `baseline` taken with other params
 * (baseline_params: the inside of that params object; NULL: the same params). */
void bench_emit_against(const char *name, const char *unit, double value, const char *params,
                        const char *baseline, const char *baseline_params, const char *note);

/* One process context switch on one CPU, in microseconds: this process and a forked child,
 * both pinned to one CPU, pass a byte back and forth over two pipes `trips` times (after
 * 1000 warm-up trips); a round trip is two switches. -1 (errno set) on failure. */
double bench_ctxswitch_pipe_us(int trips);

/* Can `bytes` more of tmpfs-backed memory be had in this run's registry, leaving `margin`
 * free both in RAM (MemAvailable) and in the registry's file system? */
bool bench_shm_fits(uint64_t bytes, uint64_t margin);

#endif
