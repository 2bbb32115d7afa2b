/* Moves while another thread copies arrays of pointers with memcpy: the copy hook reads
 * the source's pointers (and, with the shadow, copies the source's shadow to the
 * destination's) through addresses it derived from both ends, which no move can patch. The
 * hook is bracketed as the runtime's own code, so a move waits for it to end; without that,
 * a move of either end stopped the thread in the middle, the hook went on at the old block,
 * and the copy's pointers were not known at their new slots (SQLite's speedtest1 in WAL
 * mode faulted in the shadow's copy, 5 runs in 150, at 10,000 moves a second).
 *
 * The main thread moves the copies' sources, their destinations and the blocks their
 * pointers point to, in turn; the copying thread checks every copy against the targets'
 * addresses of the moment, and at the end every destination must still point at the
 * targets wherever they went. */
#include "carat_move.h"

#include <exomem/carat.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#define TARGETS 64
#define ARRAYS 8
#define WORDS 4096   /* 32 KiB a copy: long enough to be stopped in */
#define MOVES 2000

struct target {
    long id;
    long pad[3];
};

/* Global slots, not static: the compiler reads them again after every call. */
struct target *targets[TARGETS];
struct target **sources[ARRAYS], **copies[ARRAYS];
atomic_int stop;
atomic_long copies_made;

/* Does every word of a point at the target it was made for, where that target is now? */
static void check_array(struct target *const *a, int which)
{
    for (int j = 0; j < WORDS; j++) {
        int id = (which * 7 + j) % TARGETS;
        CHECK(a[j] == targets[id]);
        CHECK(a[j]->id == id);
    }
}

static void *copier(void *arg)
{
    (void)arg;
    unsigned i = 0;
    while (!atomic_load(&stop)) {
        int which = (int)(i++ % ARRAYS);
        /* The last copy into it: its pointers were patched by the moves since, which needs
         * the runtime to have known them at their new slots */
        check_array(copies[which], which);
        /* A move stops this thread only outside the hook: before the copy, or after it */
        memcpy(copies[which], sources[which], WORDS * sizeof *copies[which]);
        check_array(copies[which], which);
        atomic_fetch_add(&copies_made, 1);
    }
    return NULL;
}

int main(void)
{
    for (int t = 0; t < TARGETS; t++) {
        targets[t] = malloc(sizeof *targets[t]);
        CHECK(targets[t]);
        targets[t]->id = t;
    }
    for (int a = 0; a < ARRAYS; a++) {
        sources[a] = malloc(WORDS * sizeof *sources[a]);
        copies[a] = malloc(WORDS * sizeof *copies[a]);
        CHECK(sources[a] && copies[a]);
        for (int j = 0; j < WORDS; j++)
            sources[a][j] = targets[(a * 7 + j) % TARGETS];
        memcpy(copies[a], sources[a], WORDS * sizeof *copies[a]);
    }
    pthread_t th;
    CHECK(pthread_create(&th, NULL, copier, NULL) == 0);
    int moved = 0;
    for (int m = 0; m < MOVES; m++) {
        if (m % 3 == 0)
            moved += carat_move_retrying(sources[m / 3 % ARRAYS], 20) != NULL;
        else if (m % 3 == 1)
            moved += carat_move_retrying(copies[m / 3 % ARRAYS], 20) != NULL;
        else
            moved += carat_move_retrying(targets[m / 3 % TARGETS], 20) != NULL;
    }
    atomic_store(&stop, 1);
    CHECK(pthread_join(th, NULL) == 0);
    for (int a = 0; a < ARRAYS; a++) {
        check_array(sources[a], a);
        check_array(copies[a], a);
    }
    CHECK(moved >= MOVES / 2);
    CHECK(atomic_load(&copies_made) > 0);
    for (int a = 0; a < ARRAYS; a++) {
        free(copies[a]);
        free(sources[a]);
    }
    for (int t = 0; t < TARGETS; t++)
        free(targets[t]);
    printf("move_copies: ok (%d moves, %ld copies)\n", moved, atomic_load(&copies_made));
    return 0;
}
