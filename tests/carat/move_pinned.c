/* A pointer printed as text (%p) can come back as a pointer (sscanf, strtoull) long after
 * any move, and no move can patch the text: SQLite's testfixture hands each prepared
 * statement to Tcl as "0x..." and finalized an old copy once a move had taken the
 * statement. The plugin pins the allocation before the printing call: it is never moved
 * again, by exo_carat_move or by the mover, while blocks never printed still move. */
#include "carat_check.h"

#include <exomem/carat.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

static char *volatile keep[8];   /* escapes of the printed block: the worst case */

int main(void)
{
    char *printed = malloc(64), *other = malloc(64);
    CHECK(printed && other);
    strcpy(printed, "printed");
    strcpy(other, "other");
    for (int i = 0; i < 8; i++)
        keep[i] = printed;

    char text[32];
    snprintf(text, sizeof text, "%p", (void *)printed);
    struct exo_carat_stats st;
    exo_carat_get_stats(&st);
    CHECK(st.pinned == 1);
    CHECK(exo_carat_move(printed, NULL, NULL) == -EXO_EINUSE);
    void *back = NULL;
    CHECK(sscanf(text, "%p", &back) == 1);
    CHECK(back == printed && strcmp(back, "printed") == 0);

    /* Run a second time with the mover on (EXOMEM_CARAT_MOVES): its worst case is the
     * block with the most escapes that may move, never the printed one. */
    if (getenv("EXOMEM_CARAT_MOVES")) {
        for (int i = 0; i < 5000; i++) {
            exo_carat_get_stats(&st);
            if (st.moves >= 20)
                break;
            usleep(1000);
        }
        CHECK(st.moves >= 20);
        for (int i = 0; i < 8; i++)
            CHECK(keep[i] == printed && keep[i] == back);
    }

    /* Printing a pointer with another conversion, or a block never printed: moves. */
    snprintf(text, sizeof text, "%s %lu", other, (unsigned long)strlen(other));
    void *moved;
    CHECK(exo_carat_move(other, &moved, NULL) == 0);
    other = moved;
    CHECK(strcmp(other, "other") == 0);
    exo_carat_get_stats(&st);
    CHECK(st.pinned == 1);

    free(printed);
    free(other);
    printf("move_pinned: ok\n");
    return 0;
}
