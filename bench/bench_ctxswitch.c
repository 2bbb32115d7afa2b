/* bench_ctxswitch: what one process context switch costs -- the yardstick SpaceJMP's
 * Table 2 holds vas_switch against.
 *
 * Two processes ping-pong one byte over a pair of pipes. A round trip is two switches, so
 * one switch costs round-trip time / 2. Two variants:
 *   ctxswitch_pipe       both processes pinned to one CPU: every hand-over is a real
 *                        context switch on that CPU;
 *   ctxswitch_pipe_2cpu  each process pinned to its own CPU: a cross-CPU wake-up instead
 *                        (skipped on a one-CPU machine).
 * One JSON object per line on stdout (one per repeat), unit "us". Self-contained: uses no
 * exomem call.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WARMUP_TRIPS 1000

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static bool pin_to(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set) == 0;
}

/* One byte each way; false when the other side has gone or a call failed. */
static bool pass_byte(int out_fd, int in_fd)
{
    char b = 'x';
    ssize_t n;
    while ((n = write(out_fd, &b, 1)) < 0 && errno == EINTR)
        ;
    if (n != 1)
        return false;
    while ((n = read(in_fd, &b, 1)) < 0 && errno == EINTR)
        ;
    return n == 1;
}

/* Microseconds per switch with the parent on parent_cpu and the child on child_cpu, or a
 * negative number (errno set) on failure. */
static double ping_pong(int parent_cpu, int child_cpu, long trips)
{
    int ping[2], pong[2];
    if (!pin_to(parent_cpu) || pipe(ping) != 0)
        return -1;
    if (pipe(pong) != 0) {
        close(ping[0]);
        close(ping[1]);
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) { /* echo each byte back until the parent closes its end */
        close(ping[1]);
        close(pong[0]);
        char b;
        bool ok = pin_to(child_cpu);
        while (ok && read(ping[0], &b, 1) == 1)
            ok = write(pong[1], &b, 1) == 1;
        _exit(ok ? 0 : 1);
    }
    close(ping[0]);
    close(pong[1]);
    double us = -1;
    bool ok = pid > 0;
    for (long k = 0; ok && k < WARMUP_TRIPS; k++)
        ok = pass_byte(ping[1], pong[0]);
    double t0 = now_us();
    for (long k = 0; ok && k < trips; k++)
        ok = pass_byte(ping[1], pong[0]);
    if (ok)
        us = (now_us() - t0) / (2.0 * (double)trips);
    int saved = errno;
    close(ping[1]);
    close(pong[0]);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    errno = saved;
    return us;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_ctxswitch [--repeats N] [--round-trips N] [--quick]\n"
               "--quick: 3 repeats of 20000 round trips.\n");
}

int main(int argc, char **argv)
{
    int repeats = 5;
    long trips = 100000;
    for (int i = 1; i < argc; i++) /* --quick first, so explicit options override it */
        if (!strcmp(argv[i], "--quick")) {
            repeats = 3;
            trips = 20000;
        }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick"))
            continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        bool ok = v != NULL;
        if (ok && !strcmp(a, "--repeats"))
            ok = (repeats = atoi(v)) > 0;
        else if (ok && !strcmp(a, "--round-trips"))
            ok = (trips = atol(v)) > 0;
        else
            ok = false;
        if (!ok) {
            usage(stderr);
            return 2;
        }
        i++;
    }
    signal(SIGPIPE, SIG_IGN); /* a dead echo child shows up as EPIPE, not as our death */

    /* The first two CPUs we may run on: cpu 0 on an unrestricted machine. */
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
        perror("bench_ctxswitch: sched_getaffinity");
        return 1;
    }
    int cpus[2] = { -1, -1 }, n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
        if (CPU_ISSET(c, &allowed))
            cpus[n++] = c;

    static const struct {
        const char *name;
        int other; /* index into cpus[] of the child's CPU */
    } variants[] = { { "ctxswitch_pipe", 0 }, { "ctxswitch_pipe_2cpu", 1 } };
    for (size_t v = 0; v < 2; v++) {
        if (cpus[variants[v].other] < 0) {
            printf("{\"name\":\"skip\",\"params\":{\"bench\":\"%s\"},\"reason\":"
                   "\"only one CPU available\"}\n", variants[v].name);
            continue;
        }
        for (int r = 0; r < repeats; r++) {
            double us = ping_pong(cpus[0], cpus[variants[v].other], trips);
            if (us < 0) {
                fprintf(stderr, "bench_ctxswitch: %s: %s\n", variants[v].name,
                        strerror(errno));
                return 1;
            }
            printf("{\"name\":\"%s\",\"unit\":\"us\",\"value\":%.4f,\"params\":"
                   "{\"round_trips\":%ld}}\n", variants[v].name, us, trips);
            fflush(stdout);
        }
    }
    sched_setaffinity(0, sizeof allowed, &allowed);
    return 0;
}
