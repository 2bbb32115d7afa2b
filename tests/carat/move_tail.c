/* A heap block is tracked with every byte malloc gave it, not only the size asked for:
 * programs use the rest, sized by malloc_usable_size (SQLite fits as many VDBE instructions
 * in an array as its usable size holds, and the last one's operand pointed into its
 * lookaside buffer). Two cases a move broke when the table knew only the size asked for:
 *  - a pointer into a block's tail (not one past the end) was no escape of the block;
 *  - a pointer stored in a block's tail was not carried over when realloc moved the block,
 *    and the next move of its target left the copy stale.
 * glibc gives malloc(8) a 24-byte block and malloc(20) one of 24 too; AddressSanitizer's
 * allocator gives exactly the size asked for, so the sanitizer build has no tail to test. */
#include "carat_check.h"

#include <exomem/carat.h>
#include <malloc.h>
#include <stdint.h>

static char *volatile into_tail;
static char *volatile spacer;   /* volatile: its malloc and free are not optimised away */

int main(void)
{
    /* target far from holder: a stale copy of holder's address, once realloc freed it,
     * would be an address derived from target, and its move refused (move_derived.c). */
    long *target = malloc(64);
    spacer = malloc(4096);
    char *block = malloc(20);
    void **holder = malloc(8);
    CHECK(target && spacer && block && holder);
    size_t block_usable = malloc_usable_size(block), holder_usable = malloc_usable_size(holder);
    if (block_usable < 23 || holder_usable < 24) {
        printf("move_tail: malloc gives no tail (usable %zu, %zu): nothing to test\n",
               block_usable, holder_usable);
        free(block);
        free(holder);
        free(target);
        free(spacer);
        return 0;
    }
    struct exo_carat_alloc_info info;
    CHECK(exo_carat_alloc_find(block + 22, &info) == 0 && info.base == (uintptr_t)block &&
          info.size == block_usable);

    /* A pointer into the tail follows the block. */
    block[22] = 'x';
    into_tail = block + 22;
    void *nb;
    CHECK(exo_carat_move(block, &nb, NULL) == 0);
    CHECK(into_tail == (char *)nb + 22 && *into_tail == 'x');

    /* A pointer in the tail survives realloc moving its block, then a move of its target.
     * Grown past glibc's mmap threshold, the block cannot grow in place. */
    target[0] = 42;
    *(long *volatile *)&holder[2] = target;   /* volatile: not moved past the realloc */
    uintptr_t holder_was = (uintptr_t)holder;
    void **grown = realloc(holder, 1 << 20);
    CHECK(grown && (uintptr_t)grown != holder_was);
    CHECK(grown[2] == target);
    CHECK(exo_carat_move(target, &nb, NULL) == 0);
    CHECK(grown[2] == nb && ((long *)grown[2])[0] == 42);
    free(grown);
    free(block);    /* both patched where they lie, in this frame */
    free(target);
    free(spacer);
    puts("move_tail: ok");
    return 0;
}
