/* Addresses just below a block's base, stored in memory: a base for 1-based indexing
 * (`a - 1`), kept in a heap object and in a global. They lie in the block's own malloc
 * chunk header, where no other block is, and a move patches them as it patches pointers
 * into the block. Before 2026-11-27 only pointers into a block or one past its end were
 * recorded: such a slot kept the old address after a move, and the program read freed
 * memory through it. The slot's value is also checked to stay exact: the same offset below
 * the copy's base. */
#include "carat_move.h"

#include <exomem/carat.h>
#include <stdint.h>

#define N 100

struct holder {
    int *ints_from_1;      /* a - 1: 4 bytes below the block */
    double *doubles_from_1; /* d - 1: 8 bytes below */
    double *doubles_from_2; /* d - 2: 16 bytes below, the chunk's first field */
};

/* Not static, so that the compiler reads them again after each move instead of keeping
 * the values it stored in registers (which a move patches as well: the slots would not be
 * tested). */
int *global_ints_from_1;
struct holder *holder;

/* An old address kept where no move sees it (a stack word holding it would be patched) */
#define SCRAMBLE(p) ((uintptr_t)(p) ^ 0x5a5a5a5a5a5aull)

int main(void)
{
    struct holder *h = holder = malloc(sizeof *h);
    int *a = malloc(N * sizeof *a);
    /* d's chunk follows one freed before the stores: no tracked block owns its header, not
     * even the 8 bytes glibc lends to the block before while that one is in use. */
    char *before = malloc(40);
    double *d = malloc(N * sizeof *d);
    CHECK(h && a && before && d);
    free(before);
    for (int i = 0; i < N; i++) {
        a[i] = i;
        d[i] = i / 2.0;
    }
    h->ints_from_1 = a - 1;
    h->doubles_from_1 = d - 1;
    h->doubles_from_2 = d - 2;
    global_ints_from_1 = a - 1;

    for (int round = 0; round < 3; round++) {
        volatile uintptr_t old_a = SCRAMBLE(a);
        a = carat_move_retrying(a, 100);
        CHECK(a != NULL);
        CHECK(SCRAMBLE(a) != old_a);
        CHECK(h->ints_from_1 == a - 1);
        CHECK(global_ints_from_1 == a - 1);
        CHECK(h->ints_from_1[1] == 0 && h->ints_from_1[N] == N - 1);
        volatile uintptr_t old_d = SCRAMBLE(d);
        d = carat_move_retrying(d, 100);
        CHECK(d != NULL);
        CHECK(SCRAMBLE(d) != old_d);
        CHECK(h->doubles_from_1 == d - 1 && h->doubles_from_2 == d - 2);
        CHECK(h->doubles_from_1[N] == (N - 1) / 2.0 && h->doubles_from_2[2] == 0.0);
    }
    free(d);
    free(a);
    free(h);
    holder = NULL;
    printf("move_below_base: ok\n");
    return 0;
}
