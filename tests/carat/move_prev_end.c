/* Addresses in the 16 bytes before a block belong to it or to the block before it, and
 * no patch by value can tell which. glibc lends a chunk's first 8 bytes (the size of the
 * previous chunk) to the previous block while that is in use, so a 40-byte block's last 8
 * bytes lie there, and the address one past its end is the next chunk's size field; the
 * same addresses are the next block's base minus 16 and minus 8, where optimised loops
 * keep bases for 1-based walks. Patched as the next block's, the end of a 32-byte SQL
 * string in a 40-byte block pointed into the moved copy of the block after it (SQLite's
 * sqlite3_exec read a second statement from there: speedtest1 at 10,000 moves a second,
 * "near "T": syntax error"); left as they were, bzip2's sort kept a base 8 bytes before
 * its moved array, and its next range guard had a length of minus 10 MB. Here: while a
 * thread holds such an address, a move of the block after is refused and changes nothing,
 * and so is one of the block before while it holds that block's end (the next block's base
 * minus 8); once it holds none, both blocks move. The same for two blocks in mappings
 * of their own, whose header is 16 bytes. */
#include "carat_check.h"

#include <exomem/carat.h>
#include <malloc.h>
#include <string.h>

static char *volatile keep_a, *volatile keep_b;   /* escapes: both blocks are known */
static char *volatile keep_lower, *volatile keep_upper;

/* exo_carat_move(block) while this frame holds the address held; it must stay as it was
 * whatever the move did. In a frame of its own, gone after, so that no copy of held is
 * left in main's registers or stack to refuse the later moves. */
static __attribute__((noinline)) int move_while_held(char *block, char *held)
{
    char *volatile keep = held;
    int rc = exo_carat_move(block, NULL, NULL);
    CHECK(keep == held);
    return rc;
}

/* The same for two blocks in mappings of their own next to each other (glibc maps blocks
 * of 128 KiB and more, each new mapping below the last): the lower one's end is the upper
 * one's base minus 16, its 16-byte header. First, before any big block is freed: glibc
 * then serves blocks that size from its heap. */
static void mapped_neighbours(void)
{
    keep_upper = malloc(1 << 20);
    keep_lower = malloc(1 << 20);
    CHECK(keep_upper && keep_lower);
    if (keep_lower + malloc_usable_size(keep_lower) + 16 != keep_upper) {
        printf("move_prev_end: no two mapped blocks next to each other: not tested\n");
    } else {
        memset(keep_upper, 'u', 64);
        CHECK(move_while_held(keep_upper, keep_upper - 16) == -EXO_EAGAIN);
        CHECK(move_while_held(keep_lower, keep_upper - 16) == -EXO_EAGAIN);
        CHECK(move_while_held(keep_lower, keep_upper - 8) == -EXO_EAGAIN);
        void *moved;
        CHECK(exo_carat_move(keep_upper, &moved, NULL) == 0 && moved == keep_upper);
        CHECK(exo_carat_move(keep_lower, &moved, NULL) == 0 && moved == keep_lower);
        CHECK(keep_upper[63] == 'u');
    }
    free(keep_lower);
    free(keep_upper);
}

int main(void)
{
    mapped_neighbours();

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

    /* keep_a's last word, keep_a's end, and keep_b's 1-based base for 8-byte elements. */
    CHECK(move_while_held(keep_b, keep_a + 32) == -EXO_EAGAIN);
    CHECK(move_while_held(keep_b, keep_a + 40) == -EXO_EAGAIN);
    CHECK(move_while_held(keep_b, keep_b - 8) == -EXO_EAGAIN);
    CHECK(move_while_held(keep_a, keep_b - 8) == -EXO_EAGAIN);   /* keep_a's end too */
    CHECK(memcmp(keep_a + 32, "lastword", 8) == 0 && keep_b[0] == 'b');

    void *moved;
    CHECK(exo_carat_move(keep_b, &moved, NULL) == 0);
    CHECK(moved == keep_b && keep_b[0] == 'b');
    CHECK(exo_carat_move(keep_a, &moved, NULL) == 0);
    CHECK(moved == keep_a && memcmp(keep_a + 32, "lastword", 8) == 0 && keep_a[0] == 'a');

    for (int i = 0; i < n; i++) {
        free(tries[i][0]);
        free(tries[i][1]);
    }
    free(keep_a);
    free(keep_b);
    printf("move_prev_end: ok\n");
    return 0;
}
