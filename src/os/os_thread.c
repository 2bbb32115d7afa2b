/* Threads and the CPU: the page size, yielding, and signal masks for helper threads and for
 * socket writes that must not raise SIGPIPE. */
#include "os/os.h"
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

long exo_os_page_size(void)
{
    return sysconf(_SC_PAGESIZE);
}

void exo_os_yield(void)
{
    sched_yield();
}

void exo_os_sleep_ns(long ns)
{
    struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
    nanosleep(&ts, NULL);
}

uint64_t exo_os_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

uint64_t exo_os_peak_rss_bytes(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? (uint64_t)ru.ru_maxrss * 1024u : 0;
}

int exo_os_block_signals(sigset_t *old)
{
    sigset_t all;
    sigfillset(&all);
    int err = pthread_sigmask(SIG_SETMASK, &all, old);
    return err ? -exo_os_code(err) : 0;
}

int exo_os_restore_signals(const sigset_t *old)
{
    int err = pthread_sigmask(SIG_SETMASK, old, NULL);
    return err ? -exo_os_code(err) : 0;
}

static bool sigpipe_pending(void)
{
    sigset_t pending;
    return sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
}

void exo_os_sigpipe_hold_start(exo_os_sigpipe_hold *h)
{
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    h->was_pending = sigpipe_pending();
    pthread_sigmask(SIG_BLOCK, &pipe, &h->old);
}

void exo_os_sigpipe_hold_end(exo_os_sigpipe_hold *h)
{
    int saved = errno;
    if (!h->was_pending && sigpipe_pending()) {
        sigset_t pipe;
        sigemptyset(&pipe);
        sigaddset(&pipe, SIGPIPE);
        struct timespec now = {0, 0};
        while (sigtimedwait(&pipe, NULL, &now) < 0 && errno == EINTR)
            ;
    }
    pthread_sigmask(SIG_SETMASK, &h->old, NULL);
    errno = saved;
}
