/* A thread stopped while a signal handler of its own runs on an alternate signal stack: the
 * program's frames, and in them the block's address, are on the thread's own stack, and the
 * context the signal interrupted is on the alternate one. Moves scanned only the stack the
 * stop found the thread on, and left the address on its own stack pointing at the freed
 * copy. It happened to every thread under AddressSanitizer, which gives each an alternate
 * stack: a stop's signal that reached a thread still on its way out of the last stop's
 * handler ran nested, there (move_result failed one run in twenty in the sanitizer build).
 *  - unseen: a thread stopped on the alternate stack the first time a move sees it. Its own
 *    stack is found from the signal frame at the top of the alternate one; a move may still
 *    be refused (a word there that looks derived from the block), but never leaves the
 *    address the thread holds pointing at the freed copy.
 *  - seen: a thread a move has stopped on its own stack before: moved, and its address on
 *    that stack follows the block. */
#include "carat_check.h"

#include <exomem/carat.h>
#include <exomem/error.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#define ALT_STACK (64 * 1024)

static char *volatile keep;        /* escapes: the runtime patches it */
static char *volatile pad[2];
static atomic_int ready, published;
static struct holder {
    pthread_t thread;
    atomic_int step;               /* 1: holds the address, off the alternate stack */
    atomic_int in_handler, go;
} seen, unseen;
static _Thread_local struct holder *me;

static void wait_in_handler(int sig)
{
    (void)sig;
    atomic_store(&me->in_handler, 1);
    while (!atomic_load(&me->go))   /* not in the C library: a thread stopped there refuses */
        __builtin_ia32_pause();
}

static void spin_until(atomic_int *v, int value)
{
    while (atomic_load(v) != value)
        __builtin_ia32_pause();
}

/* Holds the block's address on its own stack, and then waits in the handler on its alternate
 * stack (the seen one after a move has stopped it off it); 1 if the address it held was the
 * block's after. */
static void *hold(void *arg)
{
    me = arg;
    stack_t ss = { .ss_size = ALT_STACK, .ss_flags = 0 };
    ss.ss_sp = mmap(NULL, ALT_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (ss.ss_sp == MAP_FAILED || sigaltstack(&ss, NULL) != 0)
        return NULL;
    atomic_fetch_add(&ready, 1);
    spin_until(&published, 1);
    char *volatile mine = keep;
    if (me == &seen) {
        atomic_store(&me->step, 1);
        spin_until(&me->step, 2);
    }
    pthread_kill(pthread_self(), SIGUSR1);
    void *ok = (void *)(intptr_t)(mine == keep && strcmp(mine, "block") == 0);
    stack_t off = { .ss_flags = SS_DISABLE };
    sigaltstack(&off, NULL);
    munmap(ss.ss_sp, ALT_STACK);
    return ok;
}

/* The move while h waits in its handler, and h's verdict once it returned. */
static int move_and_release(struct holder *h)
{
    spin_until(&h->in_handler, 1);
    int rc = exo_carat_move(keep, NULL, NULL);
    atomic_store(&h->go, 1);
    void *ok;
    CHECK(pthread_join(h->thread, &ok) == 0);
    CHECK(ok == (void *)1);
    return rc;
}

int main(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = wait_in_handler;
    sa.sa_flags = SA_ONSTACK;
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
    /* Every thread (the runtime's mover too) made and started before the block, and the
     * block between two tracked ones, of sizes no free chunk is likely to have: what the C
     * library and the runtime allocate for each thread (its DTV, its registration), whose
     * addresses it holds, then does not lie next to the block, where such an address would
     * look derived from it and refuse every move. */
    char *warm = malloc(32);
    CHECK(warm && exo_carat_move(warm, (void **)&warm, NULL) == 0);
    CHECK(pthread_create(&unseen.thread, NULL, hold, &unseen) == 0);
    CHECK(pthread_create(&seen.thread, NULL, hold, &seen) == 0);
    spin_until(&ready, 2);
    pad[0] = malloc(1000);
    keep = malloc(200);
    pad[1] = malloc(1000);
    CHECK(pad[0] && keep && pad[1]);
    strcpy(keep, "block");
    atomic_store(&published, 1);

    spin_until(&seen.step, 1);    /* the seen thread is stopped on its own stack in this move */
    int first = move_and_release(&unseen);
    CHECK(first == 0 || first == -EXO_EAGAIN);

    CHECK(exo_carat_move(keep, NULL, NULL) == 0);   /* the seen thread holds it: patched */
    atomic_store(&seen.step, 2);
    CHECK(move_and_release(&seen) == 0);
    free(pad[0]);
    free(pad[1]);
    free(keep);
    free(warm);
    printf("move_altstack: ok (the thread first seen on its alternate stack: %s)\n",
           first ? "refused" : "moved");
    return 0;
}
