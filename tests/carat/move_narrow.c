/* Stack slots and registers are patched conservatively, and compilers reuse them for
 * narrower data: a byte stored over the low byte of a stale pointer into the block leaves a
 * word that still points into it (SQLite's selectExpander keeps a bool flag in a spill slot
 * that held a pointer into the lookaside buffer before; the move turned its 0 into 0x20 and
 * the query planner followed a null pointer). Moves keep the block's address modulo 256,
 * so that patching such a word leaves its low byte, the flag, as it was. */
#include "carat_check.h"

#include <exomem/carat.h>
#include <exomem/error.h>
#include <stdint.h>

union spill {
    char *p;
    unsigned char flag;
};

int main(void)
{
    char *block = malloc(4096);
    CHECK(block);
    for (int i = 0; i < 4096; i++)
        block[i] = (char)i;
    int moved = 0;
    for (int round = 0; round < 16; round++) {
        volatile union spill s;
        s.p = block + 2048 + 8 * round;   /* a pointer spilled here once */
        s.flag = (unsigned char)(round & 1);   /* then a flag over its low byte */
        void *to;
        int rc = exo_carat_move(block, &to, NULL);
        if (rc) {
            fprintf(stderr, "move_narrow: %s\n", exomem_last_error());
            CHECK(rc == -EXO_EAGAIN);
            continue;
        }
        moved++;
        CHECK(s.flag == (unsigned char)(round & 1));
        CHECK((uintptr_t)to % 256 == (uintptr_t)block % 256);
        block = to;
        CHECK(block[4095] == (char)4095);
    }
    CHECK(moved >= 8);
    free(block);
    printf("move_narrow: ok (%d moves)\n", moved);
    return 0;
}
