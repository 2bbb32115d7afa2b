/* Words that only look like pointers into a block must come through its move unchanged.
 * Lua keeps a value as 8 bytes and a one-byte type tag, and writes the tag over the low byte
 * of whatever its padding held before: often the rest of an old pointer, so the word reads
 * as an address inside some live block. Lua's arrays of values grow by realloc and are
 * copied with memcpy; the runtime must carry over the pointers it knows the array held
 * (stored by the program, told to it by the plugin) and no word that merely lands inside a
 * tracked block, or a move of that block adds its distance to the tag word. */
#include "carat_check.h"

#include <exomem/carat.h>
#include <stdint.h>
#include <string.h>

#define CELLS 8
#define TAG 3   /* Lua's integer tag */

union cell {
    struct {
        long value;
        unsigned char tag;   /* then 7 bytes of padding */
    } tv;
    void *word[2];
};

/* The padding first holds a pointer (the cell's earlier life), then the tag goes over its
 * low byte. Not inlined: the two stores stay as the program wrote them. */
__attribute__((noinline)) static void set_cell(union cell *c, char *target, char *stale)
{
    c->word[0] = target;
    c->word[1] = stale;
    c->tv.tag = TAG;
}

/* The tag words as written, complemented and kept in memory: no copy of them in a register
 * or on the stack looks like an address (the stacks are scanned conservatively). */
static volatile uintptr_t tag_words[CELLS];

int main(void)
{
    char *block = malloc(4096);
    CHECK(block);
    memset(block, 7, 4096);
    union cell *cells = malloc(CELLS * sizeof *cells);
    CHECK(cells);
    for (int i = 0; i < CELLS; i++) {
        set_cell(&cells[i], block + 64 * i, block + 512 + 64 * i);
        uintptr_t w;
        memcpy(&w, &cells[i].word[1], sizeof w);
        CHECK(w - (uintptr_t)block < 4096);   /* the tag word lands inside the block */
        CHECK((w & 0xff) == TAG);
        tag_words[i] = ~w;
    }

    uintptr_t old_cells = (uintptr_t)cells;
    cells = realloc(cells, 1 << 20);   /* more than the heap's top has: a new, mapped block */
    CHECK(cells && (uintptr_t)cells != old_cells);
    union cell *copy = malloc(CELLS * sizeof *copy);
    CHECK(copy);
    volatile size_t len = CELLS * sizeof *copy;   /* a call to memcpy, not inline moves */
    memcpy(copy, cells, len);

    void *moved;
    CHECK(exo_carat_move(block, &moved, NULL) == 0);
    for (int i = 0; i < CELLS; i++) {
        /* The pointers the program stored follow the block... */
        CHECK(cells[i].word[0] == (char *)moved + 64 * i);
        CHECK(copy[i].word[0] == (char *)moved + 64 * i);
        /* ...and the tag words are data: left alone. */
        uintptr_t w;
        memcpy(&w, &cells[i].word[1], sizeof w);
        CHECK(w == ~tag_words[i]);
        memcpy(&w, &copy[i].word[1], sizeof w);
        CHECK(w == ~tag_words[i]);
        CHECK(cells[i].tv.tag == TAG && copy[i].tv.tag == TAG);
    }
    CHECK(((char *)moved)[4095] == 7);

    free(copy);
    free(cells);
    free(moved);
    puts("move_tagged: ok");
    return 0;
}
