/* Pointers rearranged by uninstrumented code: qsort (the C library's) swaps the pointers of
 * an array between its slots, so each slot ends up holding a pointer the runtime never
 * heard stored there. The plugin tells the runtime the array's new contents after the
 * call; a move of the block they point into must then patch every slot. */
#include "carat_check.h"

#include <exomem/carat.h>
#include <stdint.h>

static char *ptrs[16];

static int by_address(const void *a, const void *b)
{
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    return x < y ? -1 : x > y;
}

int main(void)
{
    char *buf = malloc(16 * 8);
    CHECK(buf);
    for (int i = 0; i < 16; i++) {
        buf[i * 8] = (char)('a' + i);
        ptrs[i] = buf + ((i * 7) % 16) * 8;   /* a permutation of the 16 cells */
    }
    qsort(ptrs, 16, sizeof ptrs[0], by_address);
    for (int i = 0; i < 16; i++)
        CHECK(ptrs[i] == buf + i * 8);
    volatile uintptr_t scrambled = (uintptr_t)buf ^ 0x5a5a5a5a5a5a5a5aull;
    void *nb;
    CHECK(exo_carat_move(buf, &nb, NULL) == 0);
    CHECK((uintptr_t)nb != (scrambled ^ 0x5a5a5a5a5a5a5a5aull));
    for (int i = 0; i < 16; i++) {
        CHECK(ptrs[i] == (char *)nb + i * 8);
        CHECK(*ptrs[i] == (char)('a' + i));
    }
    free(nb);
    printf("move_qsort: ok\n");
    return 0;
}
