/* Escape sets keep slots in memory freed since (nothing tells the runtime a slot stopped
 * holding a pointer), and a move patches a slot only if it still holds the very pointer it
 * was given. glibc reuses freed memory for its own links between free chunks, and those
 * hold chunk addresses, which lie in the last 8 bytes of the block before each chunk:
 * SQLite's fuzzcheck had a stale slot in a freed block become a large free chunk's
 * bk_nextsize holding exactly such an address, and the move's patch corrupted malloc's
 * lists ("corrupted double-linked list"). So outside every live tracked allocation (freed
 * memory, or memory the program did not get from an instrumented malloc: a mapping here) a
 * slot holding the address of the block's last 8 bytes is left alone, while one holding
 * any other address in the block is patched. */
#include "carat_check.h"

#include <exomem/carat.h>
#include <exomem/error.h>
#include <malloc.h>
#include <stdint.h>
#include <sys/mman.h>

int main(void)
{
    char *x = malloc(40);
    CHECK(x);
    size_t usable = malloc_usable_size(x);
    char **outside = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                          -1, 0);
    CHECK(outside != MAP_FAILED);
    outside[0] = x + usable - 8;   /* what a free chunk's link would hold */
    outside[1] = x + 8;
    /* (scrambled: a register or stack word holding it would be patched, rightly) */
    volatile uintptr_t link = (uintptr_t)outside[0] ^ 0x5a5a5a5a5a5a5a5aull;
    void *to;
    int rc = exo_carat_move(x, &to, NULL);
    if (rc)
        fprintf(stderr, "move_freed: %s\n", exomem_last_error());
    CHECK(rc == 0);
    CHECK(((uintptr_t)outside[0] ^ 0x5a5a5a5a5a5a5a5aull) == link);   /* left alone */
    CHECK(outside[1] == (char *)to + 8);  /* patched */
    munmap(outside, 4096);
    free(to);
    puts("move_freed: ok");
    return 0;
}
