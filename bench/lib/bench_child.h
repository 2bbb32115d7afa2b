/* Measuring in a forked child, so that a child the kernel kills (out of memory) or a timeout
 * stops cannot leave a segment -- and with it huge pages grown into the system-wide pool, a
 * private mount under the registry -- behind: the process that waited for it deletes what
 * the child left in the (private) registry. Also the stop flag that lets a benchmark end at
 * the next step boundary on SIGTERM (run.py's timeout) or SIGINT and still clean up. */
#ifndef EXOMEM_BENCH_CHILD_H
#define EXOMEM_BENCH_CHILD_H

#include <signal.h>
#include <sys/types.h>

/* Set by SIGTERM or SIGINT once bench_stop_on_signals() is in force, and in the waiting
 * process of bench_in_child() when it forwards one of those signals to its child. */
extern volatile sig_atomic_t bench_stop;

/* From now on (and in forked children) SIGTERM and SIGINT set bench_stop instead of ending
 * the process: for programs that check it between steps. */
void bench_stop_on_signals(void);

/* Run fn(arg) in a forked child; its exit status is fn's result (exit() runs the child's
 * atexit cleanup). From the first call on, SIGTERM, SIGINT and SIGHUP only set bench_stop
 * in the calling process (so it always lives to clean up) and, while a child runs, are
 * passed on to it; the child keeps the dispositions the caller had before the first call
 * (default: it ends; after bench_stop_on_signals(): it sets its flag). When the child ends by a signal, `what` names
 * it in a message and bench_sweep_registry() deletes what it left. Returns the child's exit
 * status, or 1 when it was killed or could not be forked. */
int bench_in_child(int (*fn)(void *arg), void *arg, const char *what);

/* Fork and exec argv (a path, or a name looked up in PATH) in a process group of its own,
 * in directory dir, with stdout to the file `out` and stderr to `err` (the same path for
 * both is one file), after setting each "NAME=VALUE" of env (NULL-terminated; may be NULL).
 * The child exits 126 if it cannot set that up and 127 (with a message on its stderr) if
 * the exec fails. Returns the child's pid, which is also its process group, or -1. */
pid_t bench_spawn(const char *const *argv, const char *dir, const char *out, const char *err,
                  const char *const *env);

/* Stop a bench_spawn() child's whole process group: SIGTERM, up to grace_ms to end, then
 * SIGKILL; reaps the child and returns its wait status. */
int bench_stop_group(pid_t pid, int grace_ms);

/* Delete every VAS and then every segment of the registry (EXOMEM_ROOT), reporting but
 * surviving failures: for a private registry whose user died. seg_delete() returns the
 * huge pages the library added to the pool for a segment and unmounts the private mount
 * it empties. */
void bench_sweep_registry(void);

#endif
