/* A slot that once held a pointer into a block keeps most of its bits after a narrower
 * non-pointer store over part of it: a union whose pointer member overlaps a tag byte, as
 * Lua's UpVal (the open upvalue's back pointer, u.open.previous, under the closed value's
 * type tag, u.value.tt_). The word still points into the block; a move must leave it alone
 * (adding the move's distance to it corrupts the tag), and still patch the real pointers. */
#include "carat_check.h"

#include <exomem/carat.h>
#include <stdlib.h>

struct state { long pad[64]; struct upval *open; long rest[100]; };   /* open at +512 */
struct upval {
    long v;
    union {
        struct { struct upval *next; struct upval **previous; } open;
        struct { long value; unsigned char tt; } closed;
    } u;
};

__attribute__((noinline)) static void open_it(struct upval *uv, struct state *s)
{
    uv->u.open.next = NULL;
    uv->u.open.previous = &s->open;          /* an escape into s */
    s->open = uv;
}

__attribute__((noinline)) static void close_it(struct upval *uv)
{
    uv->u.closed.value = 42;                 /* 8 bytes over next */
    uv->u.closed.tt = 3;                     /* 1 byte over previous' low byte */
}

int main(void)
{
    struct state *s = malloc(sizeof *s);
    struct upval *uv = malloc(sizeof *uv), *other = malloc(sizeof *other);
    CHECK(s && uv && other);
    open_it(uv, s);
    close_it(uv);
    open_it(other, s);                       /* a real pointer into s, to be patched */
    void *moved;
    CHECK(exo_carat_move(s, &moved, NULL) == 0);
    CHECK(uv->u.closed.tt == 3 && uv->u.closed.value == 42);
    CHECK(other->u.open.previous == &((struct state *)moved)->open);
    CHECK(((struct state *)moved)->open == other);
    /* Freed, or LeakSanitizer reports them unless a stale copy happens to lie about (the
     * runtime's lookup cache, a global, kept them reachable until 2026-11-27) */
    free(other);
    free(uv);
    free(moved);
    return 0;
}
