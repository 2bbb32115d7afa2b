/* Stores of integer lanes the escape tracking must not take for pointers (test_carat.sh
 * checks the plugin's copy_sites): swap_elems's loop is vectorised into <4 x i32> loads and
 * stores whose type-based alias tag is "int", and no lane of them can hold a pointer. Built
 * with -fno-strict-aliasing (no tags) its stores are hooked as copies of unknown data, and
 * with -DWORDS the same loop over uintptr_t ("long", which may hold a pointer) is too. */
#include "carat_check.h"

#include <stdint.h>
#include <stdlib.h>

#ifdef WORDS
typedef uintptr_t elem;
#else
typedef int elem;
#endif

__attribute__((noinline)) void swap_elems(elem *restrict a, elem *restrict b, int n)
{
    for (int i = 0; i < n; i++) {
        elem t = a[i];
        a[i] = b[i];
        b[i] = t;
    }
}

int main(void)
{
    enum { N = 1000 };
    elem *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    CHECK(a && b);
    for (int i = 0; i < N; i++) {
        a[i] = (elem)i;
        b[i] = (elem)(N - i);
    }
    swap_elems(a, b, N);
    for (int i = 0; i < N; i++)
        CHECK(a[i] == (elem)(N - i) && b[i] == (elem)i);
    free(a);
    free(b);
    return 0;
}
