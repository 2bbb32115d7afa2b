/* A thread that runs on the memory of its alternate signal stack outside any handler (a
 * coroutine whose stack the program also gave sigaltstack), holding the block's address
 * there. The stop finds it "on its alternate stack", but no signal frame at the top of that
 * stack leads to its own one: a move must patch what it can see and never leave a word it
 * cannot see pointing at the freed copy. The thread holds the address on its own stack
 * too, below the coroutine.
 *  - "unseen": no stop saw the thread off that stack before, and it never registered with
 *    the runtime (it stores no pointer the runtime hears of): its own stack is not known,
 *    and the move is refused with EAGAIN, a message naming the alternate stack, and
 *    nothing changed.
 *  - "seen": a move stopped it on its own stack first: both stacks are scanned (the whole
 *    mapping of its own), and the block moves.
 * Either way both words must be the block's address afterwards. */
#include "carat_check.h"

#include <exomem/carat.h>
#include <exomem/error.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#define CO_STACK (64 * 1024)
#define SCRAMBLE ((uintptr_t)0x5a5a5a5a5a5a5a5a)

static char *volatile keep;        /* escapes: the runtime patches it */
static char *volatile pad[2];
static char *volatile warm;       /* moved while the thread waits on its own stack */
static atomic_int published, seen_step, in_coroutine, go, verdict;
static ucontext_t thread_ctx, coroutine_ctx;

static void spin_until(atomic_int *v, int value)
{
    while (atomic_load(v) != value)   /* not in the C library: a thread stopped there refuses */
        __builtin_ia32_pause();
}

/* Runs on the alternate stack's memory, outside any handler. */
static void coroutine(void)
{
    char *volatile mine = keep;
    atomic_store(&in_coroutine, 1);
    spin_until(&go, 1);
    atomic_store(&verdict, mine == keep && strcmp(mine, "block") == 0 ? 1 : 2);
}

static void *runner(void *arg)
{
    void *mem = mmap(NULL, CO_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return NULL;
    stack_t ss = { .ss_sp = mem, .ss_size = CO_STACK, .ss_flags = 0 };
    if (sigaltstack(&ss, NULL) != 0 || getcontext(&coroutine_ctx) != 0)
        return NULL;
    coroutine_ctx.uc_stack = ss;
    coroutine_ctx.uc_link = &thread_ctx;
    makecontext(&coroutine_ctx, coroutine, 0);
    spin_until(&published, 1);
    char *volatile held = keep;
    if (arg) {   /* seen: wait here, on its own stack, through a move */
        atomic_store(&seen_step, 1);
        spin_until(&seen_step, 2);
    }
    if (swapcontext(&thread_ctx, &coroutine_ctx) != 0 || held != keep)
        return NULL;
    stack_t off = { .ss_flags = SS_DISABLE };
    sigaltstack(&off, NULL);
    munmap(mem, CO_STACK);
    return (void *)1;
}

int main(int argc, char **argv)
{
    bool seen = argc > 1 && strcmp(argv[1], "seen") == 0;
    /* As in move_altstack: the thread made before the block, and the block between two
     * tracked ones, so that no address the C library holds for the thread looks derived
     * from it. */
    pthread_t t;
    warm = malloc(48);
    CHECK(warm && exo_carat_move(warm, NULL, NULL) == 0);   /* the mover's thread exists */
    CHECK(pthread_create(&t, NULL, runner, seen ? (void *)1 : NULL) == 0);
    pad[0] = malloc(1000);
    keep = malloc(200);
    pad[1] = malloc(1000);
    CHECK(pad[0] && keep && pad[1]);
    strcpy(keep, "block");
    /* Kept scrambled in memory: the move patches the registers and stack words of this
     * thread that look like the block's address too. */
    volatile uintptr_t before = (uintptr_t)keep ^ SCRAMBLE;
    atomic_store(&published, 1);
    if (seen) {
        spin_until(&seen_step, 1);
        CHECK(exo_carat_move(warm, NULL, NULL) == 0);
        atomic_store(&seen_step, 2);
    }
    spin_until(&in_coroutine, 1);

    int rc = exo_carat_move(keep, NULL, NULL);
    if (seen) {
        CHECK(rc == 0);
        CHECK(((uintptr_t)keep ^ SCRAMBLE) != before);
    } else {
        CHECK(rc == -EXO_EAGAIN);
        CHECK(strstr(exomem_last_error(), "alternate") != NULL);
        CHECK(((uintptr_t)keep ^ SCRAMBLE) == before);
    }
    atomic_store(&go, 1);
    void *ok;
    CHECK(pthread_join(t, &ok) == 0);
    CHECK(ok == (void *)1);
    CHECK(atomic_load(&verdict) == 1);
    CHECK(strcmp(keep, "block") == 0);
    free(pad[0]);
    free(pad[1]);
    free(keep);
    free(warm);
    printf("move_altstack_unknown: ok (%s: %s)\n", seen ? "seen" : "unseen",
           rc == 0 ? "moved" : "refused");
    return 0;
}
