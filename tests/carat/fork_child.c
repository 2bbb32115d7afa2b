/* A multi-threaded program forks, while its other thread reallocs (a realloc window open
 * now and then) and allocates:
 * - children that exec at once (as Tcl's `open |cmd` does in SQLite's multi-client tests):
 *   the runtime's fork handler runs in each, which must reach its exec. The handler once
 *   walked thread records a child did not inherit, and every such child died of SIGSEGV;
 * - children that go on running instrumented code (a server's workers): they free and
 *   allocate blocks, realloc, store pointers, and move a block the parent made, whose
 *   pointers (stored before the fork, and in the child) must lead to the copy. The
 *   runtime's memory was not inherited (MADV_DONTFORK), and such a child died at its first
 *   allocation. The parent has moved a block first, so its mover thread runs: each child
 *   starts one of its own. */
#include "carat_check.h"

#include <exomem/carat.h>
#include <exomem/error.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define BLOCKS 64

static atomic_int stop;
static long *blocks[BLOCKS];
static long **holders[BLOCKS];   /* holders[i][0] points into blocks[i] */

static void *churner(void *arg)
{
    (void)arg;
    void *p = malloc(100);
    CHECK(p);
    while (!atomic_load(&stop)) {
        void *wall = malloc(16);
        void *q = realloc(p, 5000);
        CHECK(q && wall);
        p = realloc(q, 100);
        CHECK(p);
        free(wall);
    }
    free(p);
    return NULL;
}

/* What a child that goes on does; its exit status says how it went (0: all good). */
static int child_goes_on(int round)
{
    /* Its own blocks, made and freed, with pointers between them. */
    long *mine[BLOCKS];
    for (int i = 0; i < BLOCKS; i++) {
        mine[i] = malloc(32 + 8 * i);
        if (!mine[i])
            return 2;
        mine[i][0] = (long)(intptr_t)(i ? mine[i - 1] : NULL);
    }
    for (int i = 0; i < BLOCKS; i += 2) {
        long *bigger = realloc(mine[i], 4096);
        if (!bigger)
            return 2;
        mine[i] = bigger;
    }
    /* A block the parent made and stored pointers to (before the fork) moves here. */
    int k = round % BLOCKS;
    long **extra = malloc(sizeof *extra);   /* and one stored by the child */
    if (!extra)
        return 2;
    *extra = blocks[k] + 1;
    void *to;
    int rc = exo_carat_move(blocks[k], &to, NULL);
    if (rc) {
        fprintf(stderr, "fork_child: move in child %d: %s\n", round, exomem_last_error());
        return 3;
    }
    if (holders[k][0] != (long *)to + 2 || *extra != (long *)to + 1 || ((long *)to)[2] != k) {
        fprintf(stderr, "fork_child: child %d: block %p moved to %p; holder %p, extra %p\n",
                round, (void *)blocks[k], to, (void *)holders[k][0], (void *)*extra);
        return 4;
    }
    for (int i = BLOCKS - 1; i >= 0; i--)
        free(mine[i]);
    free(extra);
    return 0;
}

static void run_children(bool go_on, int rounds)
{
    for (int i = 0; i < rounds; i++) {
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            if (go_on)
                _exit(child_goes_on(i));
            execl("/bin/true", "true", (char *)NULL);
            _exit(127);
        }
        int status;
        CHECK(waitpid(pid, &status, 0) == pid);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fprintf(stderr, "fork_child: %s child %d: %s %d\n", go_on ? "going-on" : "exec'ing",
                    i, WIFSIGNALED(status) ? "signal" : "exit status",
                    WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
}

int main(void)
{
    for (int i = 0; i < BLOCKS; i++) {
        blocks[i] = malloc(8 * sizeof(long));
        holders[i] = malloc(sizeof *holders[i]);
        CHECK(blocks[i] && holders[i]);
        for (int j = 0; j < 8; j++)
            blocks[i][j] = i;
        holders[i][0] = blocks[i] + 2;
    }
    /* A move first: the parent's mover thread runs (a child has none of its own). */
    void *moved;
    CHECK(exo_carat_move(blocks[BLOCKS - 1], &moved, NULL) == 0);
    CHECK(holders[BLOCKS - 1][0] == (long *)moved + 2);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, churner, NULL) == 0);
    run_children(false, 50);
    run_children(true, 50);
    atomic_store(&stop, 1);
    CHECK(pthread_join(th, NULL) == 0);
    /* The parent's own blocks stayed where they were. */
    for (int i = 0; i < BLOCKS; i++)
        CHECK(holders[i][0] == blocks[i] + 2 && blocks[i][2] == i);
    puts("fork_child: ok");
    return 0;
}
