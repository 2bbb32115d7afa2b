/* Stack objects whose address escapes: known to their own thread while their frame lives,
 * gone when it returns, and gone too when a longjmp skips their frames. */
#include "carat_check.h"

#include <exomem/carat.h>
#include <setjmp.h>
#include <stdint.h>

static jmp_buf back;
static volatile uintptr_t seen[4];   /* addresses of objects whose frames are gone */

__attribute__((noinline)) static void keep(long *p) { *(long *volatile *)&seen[3] = p; }

/* Not a local: it would be a stack object of its own, where the dead frames were. */
static struct exo_carat_alloc_info info;

static int kind_at(uintptr_t addr)
{
    return exo_carat_alloc_find((const void *)addr, &info) == 0 ? info.kind : -1;
}

__attribute__((noinline)) static void deepest(void)
{
    long a = 1, b = 2;
    keep(&a);
    keep(&b);
    seen[0] = (uintptr_t)&a;
    seen[1] = (uintptr_t)&b;
    CHECK(kind_at(seen[0]) == EXO_CARAT_STACK && kind_at(seen[1]) == EXO_CARAT_STACK);
    longjmp(back, 1);   /* skips middle's frame and its own */
}

__attribute__((noinline)) static void middle(void)
{
    long m = 3;
    keep(&m);
    seen[2] = (uintptr_t)&m;
    deepest();
}

__attribute__((noinline)) static long frame_with_three(void)
{
    long x = 4, y = 5, z = 6;
    keep(&x);
    keep(&y);
    keep(&z);
    CHECK(kind_at((uintptr_t)&x) == EXO_CARAT_STACK && kind_at((uintptr_t)&z) == EXO_CARAT_STACK);
    seen[0] = (uintptr_t)&y;
    return x + y + z;
}

int main(void)
{
    long outer = 7;
    keep(&outer);
    CHECK(kind_at((uintptr_t)&outer) == EXO_CARAT_STACK);

    /* All of a frame's objects go at its return, with one release. */
    CHECK(frame_with_three() == 15);
    CHECK(kind_at(seen[0]) == -1);
    CHECK(kind_at((uintptr_t)&outer) == EXO_CARAT_STACK);

    /* A longjmp skips two frames' releases: the next return below them drops theirs. */
    if (!setjmp(back))
        middle();
    CHECK(frame_with_three() == 15);
    for (int i = 0; i < 3; i++)
        CHECK(kind_at(seen[i]) == -1);
    CHECK(kind_at((uintptr_t)&outer) == EXO_CARAT_STACK);
    printf("stack_objects: ok\n");
    return 0;
}
