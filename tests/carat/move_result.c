/* The address exo_carat_move hands back is the block's address when the caller gets it,
 * though the mover runs its own moves in between: the caller's move and the mover's
 * worst-case moves run on one thread, and the result waits there (runtime memory, which
 * no move patches) until the caller wakes and reads it. A worst-case move taken in that
 * gap moved the block again and the caller got the address of the freed copy
 * (move_pinned failed so now and then with the mover on). Here the block is the worst
 * case, so the mover takes it at every tick, and the caller moves it too, many times. */
#include "carat_check.h"

#include <exomem/carat.h>
#include <string.h>
#include <unistd.h>

static char *volatile keep[16];   /* escapes: the block is the mover's worst case */

int main(void)
{
    char *hot = malloc(64);
    CHECK(hot);
    strcpy(hot, "hot");
    for (int i = 0; i < 16; i++)
        keep[i] = hot;
    CHECK(exo_carat_mover_start(10000) == 0);
    int explicit = 0;
    for (int i = 0; i < 2000; i++) {
        void *moved = NULL;
        int rc = exo_carat_move(keep[0], &moved, NULL);
        CHECK(rc == 0 || rc == -EXO_EAGAIN);
        if (rc)
            continue;
        explicit++;
        /* A later move may take the block before these reads (the world stops, and keep[]
         * and moved are patched together); never one before exo_carat_move returned. */
        CHECK(moved == keep[0]);
        CHECK(strcmp(moved, "hot") == 0);
        if (i >= 1000)   /* time for the mover's ticks; the first half back to back */
            usleep(200);
    }
    exo_carat_mover_stop();
    struct exo_carat_stats st;
    exo_carat_get_stats(&st);
    CHECK(explicit > 0);
    CHECK(st.moves > (uint64_t)explicit);   /* the mover's own moves ran in between */
    for (int i = 0; i < 16; i++)
        CHECK(keep[i] == keep[0]);
    free(keep[0]);
    printf("move_result: ok (%d explicit moves, %llu in all)\n", explicit,
           (unsigned long long)st.moves);
    return 0;
}
