/* Power-of-two size classes from 16 bytes to 64 KiB, carved from 1 MiB chunks mapped from
 * the kernel; bigger blocks are mappings of their own. Freed blocks go back to their
 * class, newest first (memory is reused, never returned: the tables of a tracked program
 * shrink rarely). A forked child gets a copy, as it does of the heap these tables describe
 * (fork.c); the pager's memory is not inherited, this is. */
#include "carat/carat_mem.h"
#include "os/os.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define MIN_SHIFT 4
#define MAX_SHIFT 16
#define CHUNK (1u << 20)

/* The first page of every mapping is left unused. The kernel may map the next one right
 * below it, and the program's mmap'd heap blocks (glibc's big chunks) end exactly where
 * their mapping does: the runtime's memory would then start at a block's address one past
 * its end, which a move takes for a pointer to the block. The plugin's inline code holds
 * addresses in the runtime's memory in registers (the thread's escape log), and a move
 * "patched" them: with the thread's record on a mapping of its own, xz's suite crashed
 * 13 runs in 300 at 100 moves a second, its escapes written past the moved block. */
#define LEAD 4096

static void *free_list[MAX_SHIFT + 1];
static char *chunk_next, *chunk_end;

/* Freed blocks are kept first in an array per class, not linked through their own first
 * word: taking one off a list reads the block, which was freed long ago and is a cache
 * miss the caller then waits for (8% of Lua's tracked time, nodes and escape sets freed
 * by a collection and reused); from the array it is written only, and a store miss does
 * not stall. The list is the fallback when there is no memory for a bigger array. */
static void **stack[MAX_SHIFT + 1];
static size_t depth[MAX_SHIFT + 1], room[MAX_SHIFT + 1];

static bool push_freed(unsigned s, void *p)
{
    if (depth[s] == room[s]) {
        size_t more = room[s] ? 2 * room[s] : 4096 / sizeof(void *);
        uint64_t addr;
        if (exo_os_map_anon_inherited(more * sizeof(void *), &addr))
            return false;
        void **bigger = (void **)(uintptr_t)addr;
        if (depth[s])
            memcpy(bigger, stack[s], depth[s] * sizeof(void *));
        if (room[s])
            exo_os_unmap((uint64_t)(uintptr_t)stack[s], room[s] * sizeof(void *));
        stack[s] = bigger;
        room[s] = more;
    }
    stack[s][depth[s]++] = p;
    return true;
}

static unsigned class_of(size_t n)
{
    unsigned s = MIN_SHIFT;
    while (((size_t)1 << s) < n)
        s++;
    return s;
}

void *exo_carat_mem_alloc(size_t n)
{
    unsigned s = class_of(n ? n : 1);
    if (s > MAX_SHIFT) {
        uint64_t addr;
        if (exo_os_map_anon_inherited(LEAD + ((n + 4095) & ~(size_t)4095), &addr))
            return NULL;
        return (void *)(uintptr_t)(addr + LEAD);   /* fresh anonymous memory is zero */
    }
    size_t bytes = (size_t)1 << s;
    void *p;
    if (depth[s]) {
        p = stack[s][--depth[s]];
        memset(p, 0, bytes);
        return p;
    }
    p = free_list[s];
    if (p) {
        free_list[s] = *(void **)p;
        memset(p, 0, bytes);
        return p;
    }
    /* Blocks of 64 bytes and more start on a cache line (table nodes are one line each). */
    uintptr_t line = bytes < 64 ? bytes : 64;
    uintptr_t at = ((uintptr_t)chunk_next + line - 1) & ~(line - 1);
    if (!chunk_next || at + bytes > (uintptr_t)chunk_end) {
        uint64_t addr;
        if (exo_os_map_anon_inherited(CHUNK, &addr))
            return NULL;
        chunk_next = (char *)(uintptr_t)(addr + LEAD);   /* the old chunk's tail is left unused */
        chunk_end = (char *)(uintptr_t)(addr + CHUNK);
    } else {
        chunk_next = (char *)at;
    }
    p = chunk_next;
    chunk_next += bytes;
    return p;
}

void exo_carat_mem_free(void *p, size_t n)
{
    if (!p)
        return;
    unsigned s = class_of(n ? n : 1);
    if (s > MAX_SHIFT) {
        exo_os_unmap((uint64_t)(uintptr_t)p - LEAD, LEAD + ((n + 4095) & ~(size_t)4095));
        return;
    }
    if (push_freed(s, p))
        return;
    *(void **)p = free_list[s];
    free_list[s] = p;
}
