/* Addresses in the 16 bytes before a block belong to the block before it. glibc lends a
 * chunk's first 8 bytes (the size of the previous chunk) to the previous block while that
 * is in use, so a 40-byte block's last 8 bytes lie there, and the address one past its end
 * is the next chunk's size field. Moves patched both as the next block's: the end of a
 * 32-byte SQL string in a 40-byte block then pointed into the moved copy of the block after
 * it, and SQLite's sqlite3_exec read a second statement from there (speedtest1 at 10,000
 * moves a second, "near "T": syntax error"). Here: the address of a block's last word and
 * one past its end, held on the stack, stay as they are when the block after it moves, and
 * follow their own block when it moves. */
#include "carat_check.h"

#include <exomem/carat.h>
#include <malloc.h>
#include <string.h>

static char *volatile keep_a, *volatile keep_b;   /* escapes: both blocks are known */

int main(void)
{
    /* Two blocks next to each other; pairs that are not are kept, so that malloc hands out
     * another place. */
    static char *tries[64][2];
    int n = 0;
    for (; n < 64; n++) {
        tries[n][0] = malloc(40);
        tries[n][1] = malloc(64);
        CHECK(tries[n][0] && tries[n][1]);
        if (malloc_usable_size(tries[n][0]) == 40 && tries[n][1] == tries[n][0] + 48)
            break;
    }
    if (n == 64) {
        printf("move_prev_end: malloc gives no two blocks next to each other: nothing to test\n");
        return 0;
    }
    keep_a = tries[n][0];
    keep_b = tries[n][1];
    memset(keep_a, 'a', 32);
    memcpy(keep_a + 32, "lastword", 8);
    memset(keep_b, 'b', 64);

    char *volatile last_word = keep_a + 32;    /* keep_b - 16 */
    char *volatile past_end = keep_a + 40;     /* keep_b - 8 */
    void *moved;
    CHECK(exo_carat_move(keep_b, &moved, NULL) == 0);
    CHECK(moved == keep_b && keep_b[0] == 'b');
    CHECK(last_word == keep_a + 32 && past_end == keep_a + 40);
    CHECK(memcmp(last_word, "lastword", 8) == 0);

    CHECK(exo_carat_move(keep_a, &moved, NULL) == 0);
    CHECK(moved == keep_a);
    CHECK(last_word == keep_a + 32 && past_end == keep_a + 40);
    CHECK(memcmp(last_word, "lastword", 8) == 0 && keep_a[0] == 'a');

    for (int i = 0; i < n; i++) {
        free(tries[i][0]);
        free(tries[i][1]);
    }
    free(keep_a);
    free(keep_b);
    printf("move_prev_end: ok\n");
    return 0;
}
