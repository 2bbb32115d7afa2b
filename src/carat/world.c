/* Stopping the world for a move, as CARAT's kernel module does with its signal: every
 * other thread gets a signal whose handler records where the kernel saved its registers
 * (the ucontext, on its own stack) and waits on a futex until the move is over. The mover
 * then sees, and may patch, every thread's registers; returning from the handler loads the
 * patched values. A thread inside the runtime (holding its lock, or half-way through a log
 * append) is not parked there: the handler notes the request and the thread parks itself on
 * its way out of the runtime (carat_leave). */
#include "carat/carat_internal.h"
#include "os/os.h"
#include "os/os_vm.h"
#include "internal.h"

#include <errno.h>
#include <signal.h>
#include <ucontext.h>

#define MAX_THREADS 4096

static struct {
    _Atomic uint32_t epoch;       /* odd while the world is stopped */
    _Atomic uint32_t claimed;     /* slots of parked[] taken */
    _Atomic uint32_t arrived;     /* slots of parked[] filled in */
    struct carat_parked parked[MAX_THREADS];
    int sig;
} world;

/* Did the signal interrupt the thread on its alternate signal stack (in a handler of the
 * program's, or AddressSanitizer's)? The kernel saves the stack's settings in the context,
 * not whether the thread was on it (its ss_flags are the ones sigaltstack set). */
static bool on_alternate_stack(const ucontext_t *uc)
{
#if defined(__x86_64__)
    uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
    return !(uc->uc_stack.ss_flags & SS_DISABLE) &&
           sp - (uintptr_t)uc->uc_stack.ss_sp < uc->uc_stack.ss_size;
#else
    (void)uc;
    return false;
#endif
}

/* An address in the thread's own stack: the stack pointer this stop interrupted, unless
 * that was on the alternate stack; then the last one seen off it, or the stack's end as
 * registered (0: none known). */
static uintptr_t own_stack(const ucontext_t *uc, bool alternate)
{
#if defined(__x86_64__)
    if (!alternate)
        exo_carat_tls.own_sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
#else
    (void)uc;
    (void)alternate;
#endif
    if (exo_carat_tls.own_sp)
        return exo_carat_tls.own_sp;
    return exo_carat_tls.stack_end ? exo_carat_tls.stack_end - 8 : 0;
}

static void on_stop(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    bool alternate = on_alternate_stack(uc);
    uintptr_t own = own_stack(uc, alternate);
    if (exo_carat_tls.in_runtime) {
        exo_carat_tls.park_pending = 1;
        return;
    }
    int saved = errno;
    uint32_t e = atomic_load(&world.epoch);
    /* One arrival per thread and stop: a second signal for the same stop (a late one from a
     * stop that timed out, delivered while we wait here) must not count another thread. */
    if ((e & 1) && exo_carat_tls.parked_epoch != e) {
        exo_carat_tls.parked_epoch = e;
        /* Fill the slot in before counting the arrival: the mover reads every slot once
         * all have arrived. */
        uint32_t i = atomic_fetch_add(&world.claimed, 1);
        if (i < MAX_THREADS) {
            world.parked[i].tid = exo_os_gettid();
            world.parked[i].ucontext = uc;
            world.parked[i].on_alternate_stack = alternate;
            world.parked[i].own_stack = own;
            world.parked[i].runtime_tls = (uintptr_t)&exo_carat_tls;
            world.parked[i].thread_pointer = exo_os_thread_pointer();
        }
        atomic_fetch_add_explicit(&world.arrived, 1, memory_order_release);
        while (atomic_load(&world.epoch) == e)
            exo_os_futex_wait((const uint32_t *)&world.epoch, e);
    }
    errno = saved;
}

void exo_carat_park_self(void)
{
    exo_carat_tls.park_pending = 0;
    exo_os_signal_thread(exo_os_gettid(), world.sig);
}

int exo_carat_world_install(void)
{
    world.sig = SIGRTMIN + 5;   /* glibc keeps the first real-time signals for itself */
    /* Never nested: the next stop's signal reached threads still in this handler, on their
     * way out of the last stop, and a thread with an alternate signal stack (every thread
     * under AddressSanitizer) then parked with a context on that stack: the move patched
     * it, and left the words of the real stack, the program's, as they were. Blocked while
     * the handler runs, the signal comes after it returns, to the program's own context. */
    return exo_os_signal_install_unnested(world.sig, on_stop, NULL);
}

/* How many of the n threads in ids still exist (one listing into tids). */
static int still_alive(const pid_t *ids, int n, pid_t *tids)
{
    int nt = exo_os_list_threads(tids, MAX_THREADS);
    if (nt < 0)
        return n;   /* cannot tell: assume all */
    int alive = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < nt; j++)
            if (tids[j] == ids[i]) {
                alive++;
                break;
            }
    return alive;
}

int exo_carat_world_stop(struct carat_parked **parked, int *n, uint64_t timeout_ns)
{
    static pid_t tids[MAX_THREADS], signalled[MAX_THREADS];
    int nsig = 0;
    pid_t self = exo_os_gettid();
    atomic_store(&world.claimed, 0);
    atomic_store(&world.arrived, 0);
    atomic_fetch_add(&world.epoch, 1);             /* now odd: handlers park */
    uint64_t deadline = exo_os_now_ns() + timeout_ns;
    /* List the threads again after each round: one may have made a new thread before it
     * stopped. Done when a listing names no thread we have not signalled. */
    for (;;) {
        int nt = exo_os_list_threads(tids, MAX_THREADS);
        if (nt < 0) {
            exo_carat_world_resume();
            return exo_fail(-nt, "cannot list the process's threads");
        }
        int fresh = 0;
        for (int i = 0; i < nt; i++) {
            bool known = tids[i] == self;
            for (int j = 0; j < nsig && !known; j++)
                known = signalled[j] == tids[i];
            if (!known && nsig < MAX_THREADS &&
                exo_os_signal_thread(tids[i], world.sig) == 0) {
                signalled[nsig++] = tids[i];
                fresh++;
            }
        }
        /* Wait for them; a thread that exits before parking is no longer waited for. */
        int need = nsig;
        for (uint64_t next_check = exo_os_now_ns() + 1000000;
             atomic_load(&world.arrived) < (uint32_t)need ||
             atomic_load(&world.arrived) != atomic_load(&world.claimed);) {
            uint64_t now = exo_os_now_ns();
            if (now > deadline) {
                int missing = need - (int)atomic_load(&world.arrived);
                exo_carat_world_resume();
                return exo_fail(EXO_EBUSY, "%d of %d threads did not stop for a move "
                                "(blocking signal %d?)", missing, nsig, world.sig);
            }
            if (now > next_check) {
                need = still_alive(signalled, nsig, tids);
                next_check = now + 1000000;
            }
            exo_os_sleep_ns(10000);
        }
        if (!fresh)
            break;
    }
    *parked = world.parked;
    uint32_t got = atomic_load(&world.arrived);
    *n = got < MAX_THREADS ? (int)got : MAX_THREADS;
    return 0;
}

void exo_carat_world_resume(void)
{
    atomic_fetch_add(&world.epoch, 1);             /* even: handlers return */
    exo_os_futex_wake_all((const uint32_t *)&world.epoch);
}
