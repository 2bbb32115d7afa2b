/* The mover's choice after a refused move (escapes in the shadow, EXOMEM_CARAT_PARTS=
 * track,shadow). The block with the most escapes sits right after freed memory, and this
 * frame keeps an address 200 bytes below it for the whole run (as a dead `char *` into a
 * freed string would): every move of it is refused. Meanwhile a block with fewer escapes is
 * allocated, moved by the mover and freed, fifty times a second. Before, each free of the
 * mover's pick started its count again from the first, and the refused block was tried
 * again at once: about once per freed block (Lua's workload: 778 refusals of one block in
 * a run); and once every pick had been refused, the table's own choice was the same block
 * at every tick of the mover. Now a refused block is left out of the counts, and the mover
 * leaves it be, for a second: the other blocks still move. */
#include "carat_check.h"

#include <exomem/carat.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#define REFS 64
#define FEW 8
#define STEADY 4
void *refs[REFS];     /* the refused block's escapes: it is the worst case */
void *few[FEW];       /* the block freed and made again */
void *steady[STEADY]; /* a block that stays: the count is never empty */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(void)
{
    char *pad = malloc(400);
    char *stuck = malloc(256);
    char *other = malloc(512);
    CHECK(pad && stuck && other);
    free(pad);   /* below stuck: freed memory, no tracked block's */
    volatile uintptr_t below = (uintptr_t)stuck - 200;
    for (int i = 0; i < REFS; i++)
        refs[i] = stuck;
    for (int i = 0; i < STEADY; i++)
        steady[i] = other;
    /* A query puts this thread's new blocks into the table, where the mover counts. */
    CHECK(exo_carat_alloc_find(other, NULL) == 0);

    CHECK(exo_carat_mover_start(1000) == 0);
    double t0 = now_s();
    int rounds = 0;
    while (now_s() - t0 < 2.0) {
        /* The new block first, so that it is not the old one's chunk again (the mover
         * would take it for its pick still there). */
        char *b = malloc(1000);
        CHECK(b);
        void *last = few[0];   /* where the mover left it */
        for (int i = 0; i < FEW; i++)
            few[i] = b;
        CHECK(exo_carat_alloc_find(b, NULL) == 0);
        free(last);
        for (double t = now_s(); now_s() - t < 0.02;)
            usleep(1000);   /* cut short by each move's stop */
        rounds++;
    }
    exo_carat_mover_stop();
    free(few[0]);
    double secs = now_s() - t0;

    struct exo_carat_stats st;
    exo_carat_get_stats(&st);
    /* Mostly the stuck block's; a new block whose neighbour a stopped thread had just
     * freed (its address still in a register) is refused too, now and then. */
    uint64_t refusals = st.refused_by[EXO_CARAT_REFUSED_DERIVED];
    printf("move_refused_pick: %d rounds in %.1f s, %llu moves, %llu refused for a derived "
           "address\n", rounds, secs, (unsigned long long)st.moves,
           (unsigned long long)refusals);
    CHECK((uintptr_t)stuck - 200 == below);   /* never moved */
    CHECK(st.moves > 0);                      /* the others were */
    CHECK(refusals >= 1);                     /* it was tried */
    /* Once a second for the stuck block, not at every count (before: more than ten times
     * the rounds, as the table's choice when every pick had been refused, at each tick). */
    CHECK(refusals < (uint64_t)rounds / 4);
    free(stuck);
    free(other);
    return 0;
}
