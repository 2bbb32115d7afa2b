/* Signal wrappers for the signal engine of the Appel-Li primitives. */
#include "os/os.h"
#include "os/os_vm.h"
#include "internal.h"

#include <signal.h>
#include <ucontext.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int install(int sig, void (*fn)(int, siginfo_t *, void *), struct sigaction *old,
                   int flags)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = fn;
    /* ONSTACK: works on a thread that has an alternate stack (stack overflow detectors). */
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART | flags;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, old) != 0)
        return -exo_os_code(errno);
    return 0;
}

int exo_os_signal_install(int sig, void (*fn)(int, siginfo_t *, void *), struct sigaction *old)
{
    /* NODEFER: a handler may touch another protected page (nested fault) without the kernel
     * killing the process for a blocked synchronous signal. */
    return install(sig, fn, old, SA_NODEFER);
}

int exo_os_signal_install_unnested(int sig, void (*fn)(int, siginfo_t *, void *),
                                   struct sigaction *old)
{
    return install(sig, fn, old, 0);
}

int exo_os_signal_restore(int sig, const struct sigaction *act)
{
    if (sigaction(sig, act, NULL) != 0)
        return -exo_os_code(errno);
    return 0;
}

void exo_os_signal_default(int sig)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
}

void exo_os_signal_chain(int sig, siginfo_t *si, void *ctx, const struct sigaction *old)
{
    if (old->sa_flags & SA_SIGINFO) {
        if (old->sa_sigaction) {
            old->sa_sigaction(sig, si, ctx);
            return;
        }
    } else if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
        old->sa_handler(sig);
        return;
    }
    /* Default action. A fault raised by the hardware happens again when we return, this
     * time without a handler, so the core shows the real faulting instruction; a signal
     * sent by someone must be sent again. */
    exo_os_signal_default(sig);
    if (si->si_code <= 0)
        exo_os_signal_thread(exo_os_gettid(), sig);
}

int exo_os_fault_is_write(void *ctx)
{
#if defined(__x86_64__)
    const ucontext_t *uc = ctx;
    return (uc->uc_mcontext.gregs[REG_ERR] & 2) ? 1 : 0;
#else
    (void)ctx;
    return -1;
#endif
}

int exo_os_signal_thread(pid_t tid, int sig)
{
    if (syscall(SYS_tgkill, getpid(), tid, sig) != 0)
        return -exo_os_code(errno);
    return 0;
}

pid_t exo_os_gettid(void)
{
    return (pid_t)syscall(SYS_gettid);
}
