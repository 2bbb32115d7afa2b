/* A tracked block freed by code the plugin did not see stays in the allocation table, and
 * glibc may have unmapped it (a big block is a mapping of its own). Its slots still sit in
 * other allocations' escape sets; when such a set is cleaned up before growing, the slots
 * are read: through the kernel, so an unmapped one is dropped, not a crash. */
#include "carat_check.h"

#include <exomem/carat.h>
#include <stdint.h>

/* clang says "address_sanitizer" where gcc defines __SANITIZE_ADDRESS__. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

/* free() through a pointer the compiler cannot see through: not reported to the runtime. */
static void (*volatile unseen_free)(void *) = free;

int main(void)
{
    char *target = malloc(64);
    char **big = malloc(1 << 20);   /* over glibc's mmap threshold: its own mapping */
    CHECK(target && big);
    for (int i = 0; i < 12; i++)
        big[i * 512] = target;      /* 12 escapes, on 12 pages */
    struct exo_carat_alloc_info info;
    CHECK(exo_carat_alloc_find(target, &info) == 0 && info.escapes == 12);
    unseen_free(big);               /* munmap'd; the table does not know */
    char **other = malloc(4096);
    CHECK(other);
    *(char *volatile *)&other[0] = target;   /* the 13th: the set cleans up before growing */
    CHECK(exo_carat_alloc_find(target, &info) == 0);
#ifndef UNDER_ASAN
    CHECK(info.escapes == 1);       /* the unmapped slots were dropped, no crash */
#else
    CHECK(info.escapes >= 1);       /* ASan's allocator keeps freed blocks mapped a while */
#endif
    free(other);
    free(target);
    puts("purge_unmapped: ok");
    return 0;
}
