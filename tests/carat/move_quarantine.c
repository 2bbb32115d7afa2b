/* The quarantine (EXOMEM_CARAT_QUARANTINE): a pointer a move cannot see (kept scrambled,
 * as a store the runtime never heard of would leave it) still leads to the old copy after
 * the move. That copy is kept and filled: a read through the pointer gets the fill, not the
 * data; a write through it is found at the next move and counted, and the block's real copy
 * is untouched. Run with EXOMEM_CARAT_QUARANTINE=2, and once more without (argument "off"):
 * then nothing is kept or counted. */
#include "carat_check.h"

#include <exomem/carat.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define SCRAMBLE 0x5a5a5a5a5a5a5a5aull

static void *volatile spacer;   /* volatile: the compiler may not drop its malloc and free */

int main(int argc, char **argv)
{
    bool off = argc > 1 && strcmp(argv[1], "off") == 0;
    /* b far from a: the stale pointer must not look like an address derived from b (a
     * move of b would be refused, rightly: docs/carat.md) */
    long *b = malloc(4096 * sizeof *b);   /* another size class, under any allocator */
    spacer = malloc(8192);
    long *a = malloc(8 * sizeof *a);
    CHECK(a && b && spacer);
    for (int i = 0; i < 8; i++) {
        a[i] = 100 + i;
        b[i] = 200 + i;
    }
    volatile uintptr_t hidden = (uintptr_t)a ^ SCRAMBLE;
    void *nb;
    CHECK(exo_carat_move(a, &nb, NULL) == 0);
    CHECK(a == nb && a[5] == 105);            /* the visible pointer followed the block */
    struct exo_carat_stats st;
    exo_carat_get_stats(&st);
    CHECK(st.stale_writes == 0);
    if (off) {                                /* the old copy is freed: not to be touched */
        CHECK(exo_carat_move(b, NULL, NULL) == 0);
        exo_carat_get_stats(&st);
        CHECK(st.moves == 2 && st.stale_writes == 0);
        free(a);
        free(b);
        free(spacer);
        puts("move_quarantine off: ok");
        return 0;
    }
    long *stale = (long *)(hidden ^ SCRAMBLE);
    CHECK(stale != a);
    CHECK((unsigned long)stale[3] == 0xcacacacacacacacaul);   /* the fill, not 103 */
    stale[2] = 42;                            /* the write a missed pointer makes */

    CHECK(exo_carat_move(b, NULL, NULL) == 0);   /* the next move looks at the kept copies */
    exo_carat_get_stats(&st);
    CHECK(st.stale_writes == 1);
    CHECK(a[2] == 102);                       /* the block itself is as it was */
    CHECK((unsigned long)stale[2] == 0xcacacacacacacacaul);   /* filled again: found once */
    CHECK(exo_carat_move(a, NULL, NULL) == 0);
    exo_carat_get_stats(&st);
    CHECK(st.stale_writes == 1);
    /* Two copies are kept: the third move pushed a's first old copy out (freed), so the
     * stale pointer is not read again here. */
    for (int i = 0; i < 8; i++)
        CHECK(a[i] == 100 + i && b[i] == 200 + i);
    free(a);
    free(b);
    free(spacer);
    puts("move_quarantine: ok");
    return 0;
}
