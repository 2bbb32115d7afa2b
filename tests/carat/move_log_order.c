/* A slot told twice: first by a pointer store (which goes to the thread's escape log, applied
 * to the table later, in batches), then by a copy over it (whose hook scans the copied words
 * into the table at once). The log is older and must not win: applied after the copy, or
 * after a move's scan of the new block, it would put the slot's first value back, and the
 * next move would find the slot holding another value than the one it was told, and leave
 * it unpatched. SQLite's lookaside slots are stored to, freed, and copied into again all
 * the time: a freed Expr's field, stored once, was the stale pointer a later move left in a
 * reused slot (join.test). */
#include "carat_move.h"

#include <exomem/carat.h>
#include <exomem/error.h>
#include <stdint.h>
#include <string.h>

struct holder {
    char *p;
    long pad[7];
};

__attribute__((noinline)) static void put(struct holder *h, char *v) { h->p = v; }

static volatile size_t copy_len = sizeof(struct holder);

__attribute__((noinline)) static void copy(struct holder *dst, const struct holder *src)
{
    memcpy(dst, src, copy_len);
}

int main(void)
{
    char *block = malloc(128);
    struct holder *h = malloc(sizeof *h), *src = malloc(sizeof *src);
    CHECK(block && h && src);
    memset(block, 0, 128);
    block[64] = 'x';

    put(h, block);                   /* logged: h->p = block */
    memset(src, 0, sizeof *src);
    put(src, block + 64);
    copy(h, src);                    /* scanned at once: h->p = block + 64 */
    put(src, NULL);
    /* A query applies the thread's log to the table: it must not undo the copy. */
    struct exo_carat_alloc_info info;
    CHECK(exo_carat_alloc_find(block, &info) == 0 && info.escapes >= 1);

    block = carat_must_move(block);
    CHECK(h->p == block + 64 && *h->p == 'x');
    block = carat_must_move(block);             /* the slot must still be known to hold block + 64 */
    CHECK(h->p == block + 64 && *h->p == 'x');

    free(src);
    free(h);
    free(block);
    puts("move_log_order: ok");
    return 0;
}
