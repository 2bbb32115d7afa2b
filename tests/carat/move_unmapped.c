/* A move of a block one of whose escapes lies in a tracked block that code the plugin did
 * not see has freed, and glibc has unmapped (a big block is a mapping of its own): the
 * table still counts that block as live. The move reads its slots through the kernel, so
 * the unmapped one is left alone instead of killing the process, and every other escape is
 * patched as usual. */
#include "carat_check.h"

#include <exomem/carat.h>
#include <exomem/error.h>
#include <stdint.h>

/* free() through a pointer the compiler cannot see through: not reported to the runtime. */
static void (*volatile unseen_free)(void *) = free;

int main(void)
{
    /* A first move starts the mover thread (and its malloc arena): their mappings, made
     * later, could fill the hole the big block leaves. */
    long *first = malloc(64);
    CHECK(first && exo_carat_move(first, NULL, NULL) == 0);
    long *target = malloc(64);
    char **big = malloc(1 << 20);   /* over glibc's mmap threshold: its own mapping */
    char **other = malloc(256);
    CHECK(target && big && other);
    target[0] = 7;
    /* volatile: stores into blocks that have not escaped yet may be moved past a call */
    *(char *volatile *)&big[100] = (char *)target;   /* an escape in the block about to go */
    *(char *volatile *)&other[3] = (char *)target;   /* and one that stays */
    struct exo_carat_alloc_info info;
    CHECK(exo_carat_alloc_find(target, &info) == 0 && info.escapes == 2);
    unseen_free(big);               /* munmap'd; the table does not know */
    void *nb;
    /* A refusal (a stopped thread holding an address near the block) changes nothing: try
     * again. In the sanitizer build the first try is refused (a stale word 265 bytes past
     * the block in the waiting thread's frame, since the shadow's changes to the runtime;
     * why is not known). */
    int rc = -EXO_EAGAIN;
    for (int tries = 0; tries < 10 && rc == -EXO_EAGAIN; tries++)
        rc = exo_carat_move(target, &nb, NULL);   /* read directly, this was a SIGSEGV */
    CHECK(rc == 0);
    CHECK(other[3] == nb && target == nb && target[0] == 7);
    free(other);
    free(target);
    free(first);
    puts("move_unmapped: ok");
    return 0;
}
