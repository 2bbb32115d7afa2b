/* The runtime's mover thread. Every move runs on it, so the thread that asked for a move is
 * stopped like the others and its own registers and stack are patched too; and it moves
 * the worst-case allocation at a fixed rate when asked (the paper's Figure 9 experiment,
 * EXOMEM_CARAT_MOVES=rate). Its own stack holds no pointer of the program. */
#include "carat/carat_internal.h"
#include "carat/shadow.h"
#include "os/os.h"
#include "os/os_vm.h"
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake, done;
    pthread_t thread;
    bool running, stopping;
    double rate;                  /* moves per second of the worst case, 0: none */
    /* one request at a time */
    bool pending, finished;
    uintptr_t addr;
    pid_t requester;              /* the thread waiting in exo_carat_move */
    uintptr_t requester_floor;    /* its stack pointer there (exo_carat_move_now) */
    void *new_base;
    struct exo_carat_move_cost cost;
    int rc;
    char msg[256];                /* the failed move's message, for the caller's thread */
    uint64_t serial;
} mv = { .lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER,
         .done = PTHREAD_COND_INITIALIZER };
/* Held by a caller of exo_carat_move from its request until it has read the result. */
static pthread_mutex_t one_move = PTHREAD_MUTEX_INITIALIZER;

static void deadline_after(struct timespec *ts, double seconds)
{
    clock_gettime(CLOCK_REALTIME, ts);
    uint64_t ns = (uint64_t)ts->tv_nsec + (uint64_t)(seconds * 1e9);
    ts->tv_sec += (time_t)(ns / 1000000000u);
    ts->tv_nsec = (long)(ns % 1000000000u);
}

/* One tick's move of the worst case. Skipped while a caller of exo_carat_move holds
 * one_move: its address waits in mv.addr, and then its result in mv.new_base, both in
 * runtime memory that no move patches. A worst-case move taken in that gap (the caller's
 * block is often the worst case) left the caller with the address of the freed copy, or
 * asked to move an address no longer tracked. Not waited for: the caller waits for this
 * thread. */
static void move_worst(void)
{
    if (pthread_mutex_trylock(&one_move) != 0)
        return;
    pthread_mutex_lock(&exo_carat.lock);
    uintptr_t w = exo_carat_worst_heap();
    /* With the shadow, the table's choice when every pick was refused lately: the same
     * block at every tick else (tests/carat/move_refused_pick.c). The escape sets offer
     * no other choice, and a refusal there is often over by the next tick (a thread busy
     * in the C library): tried again. */
    if (w && exo_carat_shadow_on && exo_carat_shadow_refused_lately(w))
        w = 0;
    pthread_mutex_unlock(&exo_carat.lock);
    if (w)
        exo_carat_move_now(w, 0, 0, NULL, NULL);   /* EAGAIN (freed meanwhile): the next tick tries */
    pthread_mutex_unlock(&one_move);
}

static void *mover_main(void *arg)
{
    (void)arg;
    sigset_t old;
    exo_os_block_signals(&old);
    pthread_mutex_lock(&mv.lock);
    struct timespec next;
    deadline_after(&next, mv.rate > 0 ? 1.0 / mv.rate : 3600);
    while (!mv.stopping) {
        if (mv.pending) {
            mv.pending = false;
            uintptr_t addr = mv.addr;
            pid_t requester = mv.requester;
            uintptr_t floor = mv.requester_floor;
            pthread_mutex_unlock(&mv.lock);
            void *nb = NULL;
            struct exo_carat_move_cost c;
            int rc = exo_carat_move_now(addr, requester, floor, &nb, &c);
            pthread_mutex_lock(&mv.lock);
            mv.rc = rc;
            if (rc)   /* the message is this thread's: the caller's thread gets a copy */
                snprintf(mv.msg, sizeof mv.msg, "%s", exomem_last_error());
            mv.new_base = nb;
            mv.cost = c;
            mv.finished = true;
            pthread_cond_broadcast(&mv.done);
            continue;
        }
        int w = pthread_cond_timedwait(&mv.wake, &mv.lock, &next);
        if (w == ETIMEDOUT && mv.rate > 0 && !mv.stopping) {
            pthread_mutex_unlock(&mv.lock);
            uint64_t t0 = exo_os_now_ns();
            move_worst();
            double took = (double)(exo_os_now_ns() - t0) / 1e9;
            pthread_mutex_lock(&mv.lock);
            /* The next tick after 1/rate, but never sooner than the move took: the world is
             * stopped at most half the time. A worst case with millions of escapes takes
             * tens of milliseconds to move, and at 10,000 ticks a second back-to-back moves
             * left Lua's errors.lua a thousandth of the time to run. */
            deadline_after(&next, took > 1.0 / mv.rate ? took : 1.0 / mv.rate);
        } else if (w == ETIMEDOUT) {
            deadline_after(&next, 3600);
        }
    }
    pthread_mutex_unlock(&mv.lock);
    return NULL;
}

/* Start the thread if it is not running (mv.lock held). */
static int ensure_thread(void)
{
    if (mv.running)
        return 0;
    mv.stopping = false;
    int err = pthread_create(&mv.thread, NULL, mover_main, NULL);
    if (err)
        return exo_fail(EXO_ENOMEM, "cannot start the CARAT mover thread");
    mv.running = true;
    return 0;
}

/* Zero the stack just below the caller's frame, where the request's own frame is about to
 * lie. Its unset slots (padding, a sanitizer's frame layout) are scanned by the move's check
 * for addresses derived from the block (they lie above the floor), and still hold what the
 * program's earlier calls at that depth left: an address next to a block (the runtime's
 * head-word arithmetic, base - 8, spilled in the sanitizer build) refused the move. */
/* Not instrumented: AddressSanitizer would put the array on its fake stack, off the
 * thread's own. */
CARAT_NO_ASAN static __attribute__((noinline)) void scrub_stack(void)
{
    unsigned char area[4096];
    memset(area, 0, sizeof area);
    __asm__ volatile("" : : "r"(area) : "memory");   /* kept: nothing reads it */
}

static __attribute__((noinline)) int request_move(const void *addr, void **new_base,
                                                  struct exo_carat_move_cost *cost);

EXO_API int exo_carat_move(const void *addr, void **new_base, struct exo_carat_move_cost *cost)
{
    scrub_stack();
    return request_move(addr, new_base, cost);
}

static int request_move(const void *addr, void **new_base, struct exo_carat_move_cost *cost)
{
    /* Zeroed now, not at the end: this frame is live while the move scans this thread's
     * stack, and old addresses left in an unset buffer here would look like addresses
     * derived from the block and refuse the move. */
    char msg[sizeof mv.msg] = "";
    /* Every callee-saved register into this frame: the caller's words then all lie from
     * this frame's stack pointer up, and the move's check for addresses derived from the
     * block need not read the frames of the wait below (move.c, patch_thread). */
    __builtin_unwind_init();
    uintptr_t floor = 0;
#if defined(__x86_64__)
    __asm__ volatile("mov %%rsp, %0" : "=r"(floor));
#endif
    carat_ensure_init();
    pthread_mutex_lock(&one_move);
    pthread_mutex_lock(&mv.lock);
    int rc = ensure_thread();
    if (!rc) {
        mv.addr = (uintptr_t)addr;
        mv.requester = exo_os_gettid();
        mv.requester_floor = floor;
        mv.pending = true;
        mv.finished = false;
        pthread_cond_signal(&mv.wake);
        while (!mv.finished)
            pthread_cond_wait(&mv.done, &mv.lock);   /* stopped and patched in here */
        rc = mv.rc;
        if (!rc && new_base)
            *new_base = mv.new_base;
        if (!rc && cost)
            *cost = mv.cost;
    }
    snprintf(msg, sizeof msg, "%s", rc ? mv.msg : "");
    pthread_mutex_unlock(&mv.lock);
    pthread_mutex_unlock(&one_move);
    if (rc && msg[0])
        return exo_fail(-rc, "%s", msg);
    if (rc)
        errno = exomem_errno(-rc);
    return rc;
}

void exo_carat_mover_fork_prepare(void)
{
    pthread_mutex_lock(&one_move);   /* no move asked for, nor one's result unread */
    pthread_mutex_lock(&mv.lock);
}

void exo_carat_mover_fork_parent(void)
{
    pthread_mutex_unlock(&mv.lock);
    pthread_mutex_unlock(&one_move);
}

void exo_carat_mover_fork_child(void)
{
    /* The thread is the parent's: the child starts one of its own at its first move. */
    mv.running = mv.stopping = mv.pending = mv.finished = false;
    mv.rate = 0;
    pthread_cond_init(&mv.wake, NULL);
    pthread_cond_init(&mv.done, NULL);
    pthread_mutex_unlock(&mv.lock);
    pthread_mutex_unlock(&one_move);
}

EXO_API int exo_carat_mover_start(double rate)
{
    if (!(rate >= 1 && rate <= 1e6))
        return exo_fail(EXO_EINVAL, "move rate %g is not in 1..1000000 a second", rate);
    carat_ensure_init();
    pthread_mutex_lock(&mv.lock);
    int rc = 0;
    if (mv.rate > 0) {
        rc = exo_fail(EXO_EEXIST, "a mover already runs at %g moves a second", mv.rate);
    } else {
        mv.rate = rate;
        rc = ensure_thread();
        if (rc)
            mv.rate = 0;
        pthread_cond_signal(&mv.wake);
    }
    pthread_mutex_unlock(&mv.lock);
    return rc;
}

EXO_API void exo_carat_mover_stop(void)
{
    pthread_mutex_lock(&mv.lock);
    bool was = mv.running;
    mv.stopping = true;
    mv.rate = 0;
    pthread_cond_signal(&mv.wake);
    pthread_mutex_unlock(&mv.lock);
    if (was)
        pthread_join(mv.thread, NULL);
    pthread_mutex_lock(&mv.lock);
    mv.running = false;
    mv.stopping = false;
    pthread_mutex_unlock(&mv.lock);
}

int exo_carat_mover_autostart(void)
{
    double rate = exo_config()->carat_moves;
    if (rate <= 0)
        return 0;
    int rc = exo_carat_mover_start(rate);
    if (rc)
        fprintf(stderr, "exomem carat: EXOMEM_CARAT_MOVES=%g: %s\n", rate, exomem_strerror(rc));
    return rc;
}
