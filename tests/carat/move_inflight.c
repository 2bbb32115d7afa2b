/* A move that stops a thread half-way through the plugin's inline escape append (no call,
 * no "in the runtime" bracket): the thread has written the entry's value, or its value and
 * slot, and not yet counted it, and has not done the store the entry announces. Staged here
 * exactly, by writing the thread's log as the inline append does (with asm stores, which the
 * plugin does not instrument), then moving the block:
 * - a whole entry must be taken as logged: the move knows the slot, and after the store
 *   the next move patches it;
 * - a lone value is the pointer about to be stored, and must be patched like a register:
 *   the entry, completed after the move, then names the new block.
 * Without exo_carat_claim_inflight both slots keep an old address after the second move.
 * Built with -I src: it reads the runtime's thread-local state (carat_internal.h). */
#include "carat_move.h"
#include "carat/carat_internal.h"

#include <exomem/carat.h>
#include <exomem/error.h>
#include <stdint.h>
#include <string.h>

/* Stores the plugin does not see (it instruments IR stores, not asm). */
static inline void raw_store(void *at, uintptr_t v)
{
    __asm__ volatile("movq %1, %0" : "=m"(*(uintptr_t *)at) : "r"(v) : "memory");
}
static inline void raw_store32(void *at, uint32_t v)
{
    __asm__ volatile("movl %1, %0" : "=m"(*(uint32_t *)at) : "r"(v) : "memory");
}

__attribute__((noinline)) static void put(char **slot, char *v) { *slot = v; }

int main(void)
{
    char *block = malloc(64);
    char **slots = malloc(4 * sizeof *slots);
    CHECK(block && slots);
    memset(block, 'b', 64);
    put(&slots[0], block);   /* the thread's log record, made by its first escape */
    struct exo_carat_alloc_info info;
    CHECK(exo_carat_alloc_find(block, &info) == 0);   /* applies (and empties) the log */
    struct carat_thread *t = exo_carat_tls.thread;
    CHECK(t && t->n == 0);

    /* A whole entry at log[0], not counted: slots[1] is about to hold block + 8. */
    raw_store(&t->log[0].value, (uintptr_t)(block + 8));
    raw_store(&t->log[0].slot, (uintptr_t)&slots[1]);
    block = carat_must_move(block);
    /* The thread goes on: the store (its value register was patched), then the count. */
    raw_store(&slots[1], (uintptr_t)(block + 8));
    raw_store32(&t->n, 1);
    block = carat_must_move(block);
    CHECK(slots[0] == block);
    CHECK(slots[1] == block + 8);

    /* A lone value at log[n]: the pointer about to be stored in slots[2]. */
    uint32_t n = t->n;
    CHECK(n < CARAT_LOG_CAP && t->log[n].slot == 0);
    raw_store(&t->log[n].value, (uintptr_t)(block + 16));
    block = carat_must_move(block);
    CHECK(t->log[n].value == (uintptr_t)(block + 16));   /* patched like a register */
    raw_store(&t->log[n].slot, (uintptr_t)&slots[2]);
    raw_store32(&t->n, n + 1);
    raw_store(&slots[2], (uintptr_t)(block + 16));
    block = carat_must_move(block);
    CHECK(slots[0] == block && slots[1] == block + 8 && slots[2] == block + 16);
    CHECK(block[0] == 'b' && block[63] == 'b');
    printf("move_inflight: ok\n");
    return 0;
}
