/* A move keeps what the program can see of its block through malloc: the usable size
 * (SQLite counts its memory in use with it, and carves its lookaside buffer by it), and
 * pointers one past the last usable byte (the end of a buffer so carved) follow the block.
 * Blocks at addresses aligned to 32 bytes or more keep that alignment, for which glibc may
 * only have chunks a few bytes bigger: those may grow, never shrink. */
#include "carat_check.h"

#include <exomem/carat.h>
#include <errno.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>

#define BLOCKS 64

static char *ends[BLOCKS];

int main(void)
{
    char *blocks[BLOCKS];
    size_t usable[BLOCKS];
    int moved = 0;
    for (int i = 0; i < BLOCKS; i++) {
        blocks[i] = malloc(40 + 16 * (i % 4));
        CHECK(blocks[i]);
        usable[i] = malloc_usable_size(blocks[i]);
        ends[i] = blocks[i] + usable[i];   /* one past the last usable byte */
        blocks[i][0] = (char)i;
    }
    for (int round = 0; round < 4; round++)
        for (int i = 0; i < BLOCKS; i++) {
            void *to;
            bool at_16 = (uintptr_t)blocks[i] % 32 == 16;
            int rc = exo_carat_move(blocks[i], &to, NULL);
            CHECK(rc == 0 || rc == -EXO_EAGAIN);
            if (rc)
                continue;
            moved++;
            blocks[i] = to;
            CHECK(malloc_usable_size(blocks[i]) >= usable[i]);
            CHECK(!at_16 || malloc_usable_size(blocks[i]) == usable[i]);
            CHECK(ends[i] == blocks[i] + usable[i]);
            CHECK(blocks[i][0] == (char)i);
        }
    CHECK(moved >= BLOCKS);
    for (int i = 0; i < BLOCKS; i++)
        free(blocks[i]);
    printf("move_usable: ok (%d moves)\n", moved);
    return 0;
}
