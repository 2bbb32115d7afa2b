/* Measuring in a forked child and cleaning up after it; see bench_child.h. */
#include "bench_child.h"
#include "bench_util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROG program_invocation_short_name
#define SWEEP_MAX 256

volatile sig_atomic_t bench_stop;

static void set_stop(int sig)
{
    (void)sig;
    bench_stop = 1;
}

void bench_stop_on_signals(void)
{
    struct sigaction sa = { .sa_handler = set_stop };
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
}

static volatile pid_t waited_child;

static void pass_on(int sig)
{
    bench_stop = 1;
    if (waited_child > 0)
        kill(waited_child, sig);
}

static const int passed_signals[] = { SIGTERM, SIGINT, SIGHUP };
#define NPASSED (sizeof passed_signals / sizeof passed_signals[0])

int bench_in_child(int (*fn)(void *arg), void *arg, const char *what)
{
    static struct sigaction saved[NPASSED];
    static bool installed;
    struct sigaction sa = { .sa_handler = pass_on };
    fflush(NULL);
    waited_child = 0;
    for (size_t i = 0; !installed && i < NPASSED; i++)
        sigaction(passed_signals[i], &sa, &saved[i]);
    installed = true;
    pid_t child = fork();
    if (child == 0) {
        for (size_t i = 0; i < NPASSED; i++)
            sigaction(passed_signals[i], &saved[i], NULL);
        exit(fn(arg));
    }
    int status = 1 << 8;
    if (child < 0) {
        fprintf(stderr, "%s: fork: %s\n", PROG, strerror(errno));
    } else {
        waited_child = child;
        if (bench_stop) /* a signal came between fork() and now */
            kill(child, SIGTERM);
        while (waitpid(child, &status, 0) < 0 && errno == EINTR)
            ;
        waited_child = 0;
    }
    /* The handlers stay: a signal sent to the whole group reaches this process twice (once
     * forwarded by bench_run_in_private_registry()), and the second must not end it in the
     * middle of the clean-up below or its caller's. */
    if (WIFSIGNALED(status)) {
        fprintf(stderr, "%s: %s: killed by signal %d\n", PROG, what, WTERMSIG(status));
        bench_sweep_registry();
        return 1;
    }
    return WEXITSTATUS(status);
}

void bench_sweep_registry(void)
{
    static struct vas_info vases[SWEEP_MAX];
    static struct seg_info segs[SWEEP_MAX];
    size_t n = 0;
    if (vas_list(vases, SWEEP_MAX, &n, NULL) == 0)
        for (size_t i = 0; i < n && i < SWEEP_MAX; i++)
            if (vas_delete(vases[i].id) != 0)
                fprintf(stderr, "%s: cleanup: vas_delete %s: %s\n", PROG, vases[i].name,
                        exomem_last_error());
    n = 0;
    if (seg_list(segs, SWEEP_MAX, &n, NULL) == 0)
        for (size_t i = 0; i < n && i < SWEEP_MAX; i++)
            if (seg_delete(segs[i].id) != 0)
                fprintf(stderr, "%s: cleanup: seg_delete %s: %s\n", PROG, segs[i].name,
                        exomem_last_error());
}

pid_t bench_spawn(const char *const *argv, const char *dir, const char *out, const char *err,
                  const char *const *env)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0) {
        if (pid > 0)
            setpgid(pid, pid); /* also here, so the group exists before the caller signals it */
        return pid < 0 ? -1 : pid;
    }
    setpgid(0, 0); /* its own group: the program and whatever it starts stop together */
    int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int e = strcmp(out, err) == 0 ? o : open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (o < 0 || e < 0 || chdir(dir) != 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
        _exit(126);
    for (size_t i = 0; env && env[i]; i++)
        if (putenv((char *)env[i]) != 0)
            _exit(126);
    execvp(argv[0], (char *const *)argv);
    dprintf(2, "cannot execute %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

int bench_stop_group(pid_t pid, int grace_ms)
{
    int status = 0;
    kill(-pid, SIGTERM);
    for (int waited = 0; waited < grace_ms; waited += 100) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            break;
        struct timespec tenth = { 0, 100000000 };
        nanosleep(&tenth, NULL);
    }
    kill(-pid, SIGKILL); /* what is left of the group, e.g. daemons the program started */
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return status;
}
