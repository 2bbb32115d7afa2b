/* A block that realloc resized in place keeps its address, so every pointer into it is
 * still right and the runtime must keep knowing them: a move after the realloc patches them.
 * (Once the realloc hook replaced the block's record, and its escapes with it.) */
#include "carat_check.h"

#include <exomem/carat.h>
#include <exomem/error.h>
#include <malloc.h>
#include <stdint.h>

static long *held[4];

/* realloc leaves its chunk's header address in dead stack words, where a move (refusing
 * derived addresses held in the C library) would find it while this thread waits in libc. */
__attribute__((noinline)) static void scrub_stack(void)
{
    volatile char buf[8192];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = 0;
}

int main(void)
{
    long *a = malloc(64 * sizeof *a);
    CHECK(a);
    for (int i = 0; i < 64; i++)
        a[i] = i;
    for (int i = 0; i < 4; i++)
        held[i] = a + i;
    struct exo_carat_alloc_info info;   /* (the query puts the escapes in the table) */
    CHECK(exo_carat_alloc_find(a, &info) == 0 && info.escapes >= 4);
    long *b = realloc(a, 32 * sizeof *a);   /* glibc shrinks in place */
    CHECK(b);
    if (b != a) {
        puts("move_realloc: skipped (realloc moved the block)");
        free(b);
        return 0;
    }
    CHECK(exo_carat_alloc_find(b, &info) == 0);
    CHECK(info.escapes >= 4 && info.size == malloc_usable_size(a));
    scrub_stack();
    void *to;
    int rc = exo_carat_move(b, &to, NULL);
    if (rc)
        fprintf(stderr, "move_realloc: %s\n", exomem_last_error());
    CHECK(rc == 0);
    for (int i = 0; i < 4; i++)
        CHECK(held[i] == (long *)to + i && *held[i] == i);
    free(to);
    puts("move_realloc: ok");
    return 0;
}
