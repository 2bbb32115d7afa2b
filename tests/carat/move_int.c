/* Moves of heap allocations whose address was stored as an integer that came from another
 * function: a uintptr_t argument (st.c's st_data_t, as oniguruma's hash tables use it), an
 * integer returned by a call, and a by-value struct with a pointer-or-double union (jq's
 * jv), which the x86-64 ABI passes as two integers. */
#include "carat_move.h"

#include <exomem/carat.h>
#include <stdint.h>
#include <string.h>

struct entry {
    uintptr_t key, record;
};

__attribute__((noinline)) static struct entry *insert(uintptr_t key, uintptr_t record)
{
    struct entry *e = malloc(sizeof *e);
    CHECK(e);
    e->key = key;   /* a store of an integer argument */
    e->record = record;
    return e;
}

static void *registry[4];
__attribute__((noinline)) static uintptr_t lookup(int i) { return (uintptr_t)registry[i]; }

struct value {
    unsigned char kind;
    int size;
    union {
        long *ptr;
        double number;
    } u;
};

__attribute__((noinline)) static void put(struct value *slot, struct value v) { *slot = v; }

int main(void)
{
    long *a = malloc(32 * sizeof *a), *b = malloc(32 * sizeof *b), *c = malloc(32 * sizeof *c);
    CHECK(a && b && c);
    a[0] = 1, b[0] = 2, c[0] = 3;

    struct entry *e = insert((uintptr_t)a, (uintptr_t)b);
    carat_must_move(a);
    carat_must_move(b);
    CHECK(e->key == (uintptr_t)a && e->record == (uintptr_t)b);
    CHECK(((long *)e->key)[0] == 1 && ((long *)e->record)[0] == 2);

    uintptr_t *held = malloc(sizeof *held);
    CHECK(held);
    registry[2] = c;
    *held = lookup(2);   /* a store of a call's integer result */
    carat_must_move(c);
    CHECK(*held == (uintptr_t)c && ((long *)*held)[0] == 3);

    struct value *vs = malloc(4 * sizeof *vs);
    CHECK(vs);
    put(&vs[1], (struct value){ .kind = 1, .size = 1, .u.ptr = a });
    carat_must_move(a);
    CHECK(vs[1].u.ptr == a && vs[1].u.ptr[0] == 1);

    free(vs);
    free(held);
    free(e);
    free(a);
    free(b);
    free(c);
    puts("move_int: ok");
    return 0;
}
