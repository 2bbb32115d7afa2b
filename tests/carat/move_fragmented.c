/* A move where the heap the copy comes from is full of free blocks of the block's size, at
 * the wrong addresses: the copy must keep the block's address modulo 256
 * (src/carat/copy_place.c), and malloc hands those free blocks out first. Moves make their
 * copies in the thread that runs them, and each move's tries that did not fit go back to
 * that thread's arena: 600 blocks of one size moved one by one, with live neighbours of
 * eight sizes, left no fitting block in 256 tries from about the 100th move on, before a
 * copy could be cut out of a bigger block. Every move must succeed, and keep the address
 * modulo 256; then the blocks are freed and one more is moved fifty times. */
#include "carat_move.h"

#include <exomem/carat.h>
#include <exomem/error.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define BLOCKS 600
#define MOVES 50

static long *blocks[BLOCKS], *stay[BLOCKS];
static long **holder;

/* Each phase in a function of its own: a register of the caller's that still held a freed
 * block's address, or a dead slot of its frame, would refuse a later move of a block near
 * it (src/carat/move_patch.h, DERIVED_REACH), and such a freed block is what this test makes. */
static __attribute__((noinline)) void move_blocks(void)
{
    for (int i = 0; i < BLOCKS; i++) {
        blocks[i] = malloc(64);
        stay[i] = malloc(64 + 16 * (i % 8));   /* live neighbours of several sizes */
        CHECK(blocks[i] && stay[i]);
        blocks[i][0] = i;
        carat_must_move(blocks[i]);   /* the global slot follows */
        CHECK(blocks[i][0] == i);
    }
}

static __attribute__((noinline)) void free_blocks(void)
{
    for (int i = 0; i < BLOCKS; i++) {
        free(blocks[i]);
        blocks[i] = NULL;
    }
}

/* The stack below main's frame, where the phases' frames were, cleared. */
static __attribute__((noinline)) void wipe_stack(void)
{
    char dead[16384];
    memset(dead, 0, sizeof dead);
    __asm__ volatile("" : : "r"(dead) : "memory");
}

static __attribute__((noinline)) void move_one_again(void)
{
    holder = malloc(sizeof *holder);
    CHECK(holder);
    *holder = malloc(64);
    CHECK(*holder);
    (*holder)[7] = 77;
    for (int k = 0; k < MOVES; k++) {
        uintptr_t was = (uintptr_t)*holder;
        void *to = carat_must_move(*holder);
        CHECK((uintptr_t)to % 256 == was % 256);
        CHECK(*holder == to && (*holder)[7] == 77);
    }
    free(*holder);
    free(holder);
}

int main(void)
{
    move_blocks();
    free_blocks();
    wipe_stack();
    move_one_again();
    for (int i = 0; i < BLOCKS; i++)
        free(stay[i]);
    printf("move_fragmented: ok\n");
    return 0;
}
