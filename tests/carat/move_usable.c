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

/* The table holds each block with its usable size (read from malloc's chunk header when
 * malloc is glibc's): checked for blocks from the thread's cache, the heap, aligned ones,
 * grown by realloc, and mapped on their own. */
static void check_extents(void)
{
    static const size_t sizes[] = { 1, 8, 24, 25, 40, 100, 1000, 4000, 70000, 300000,
                                    3u << 20 };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char *p = malloc(sizes[i]);
        char *q = aligned_alloc(64, (sizes[i] + 63) / 64 * 64);
        char *r = realloc(malloc(16), sizes[i] + 16);
        CHECK(p && q && r);
        char *all[] = { p, q, r };
        for (int k = 0; k < 3; k++) {
            struct exo_carat_alloc_info info;
            CHECK(exo_carat_alloc_find(all[k], &info) == 0);
            CHECK(info.base == (uintptr_t)all[k]);
            CHECK(info.size == malloc_usable_size(all[k]));
        }
        free(r);
        free(q);
        free(p);
    }
}

int main(void)
{
    check_extents();
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
