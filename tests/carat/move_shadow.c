/* Escapes kept in the shadow (EXOMEM_CARAT_PARTS=track,shadow): the cases the escape log
 * handles in its own way, checked for the shadow.
 * - A thread stopped between the shadow store and its own store (staged with stores the
 *   plugin does not see): the slot still holds its old value and is left alone, the shadow
 *   follows the block, and after the store the next move patches the slot.
 * - A slot that need not be on an 8-byte boundary (a packed struct's pointer): the scans
 *   of the shadow see aligned words only; the plugin calls the hook, and the escape sets
 *   have it.
 * - A copy that shifts pointers off their 8-byte boundary; copies out of the stack, whose
 *   own stores have no shadow (one of 37 words: the shadow taken four at a time, and the
 *   words that are no pointers left out of it); a realloc that moves the block.
 * - A word that only looks like a pointer (a tag byte over its low byte) is not changed.
 * - The escapes a query counts: live slots only (a freed block's are gone).
 * - A big block's shadow, full of pointers, is given back to the kernel at its free (its
 *   whole pages no longer in memory) and reads as zero, up to its last word.
 * Built with -I src (carat_abi.h: where the shadow is). */
#include "carat_move.h"
#include "carat/carat_abi.h"

#include <exomem/carat.h>
#include <exomem/error.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

static inline void raw_store(void *at, uintptr_t v)
{
    __asm__ volatile("movq %1, %0" : "=m"(*(uintptr_t *)at) : "r"(v) : "memory");
}

struct __attribute__((packed)) odd {
    char tag;
    char *p;   /* at offset 1 */
};

struct pair {
    char *a, *b;
};

#define FRAME_WORDS 37   /* nine groups of four and one more */

__attribute__((noinline)) static void put(char **slot, char *v) { *slot = v; }
__attribute__((noinline)) static void put_odd(struct odd *o, char *v) { o->p = v; }
__attribute__((noinline)) static void copy(void *dst, const void *src, size_t n)
{
    memcpy(dst, src, n);
}

/* An old address kept scrambled: a move patches registers and stack words that point into
 * the block, a plain copy of the old address too. */
#define SCRAMBLE(p) ((uintptr_t)(p) ^ 0x5a5a5a5a5a5aull)

static uint64_t escapes(const char *p)
{
    struct exo_carat_alloc_info info;
    CHECK(exo_carat_alloc_find(p, &info) == 0);
    return info.escapes;
}

static uintptr_t *shadow_of(void *p)
{
    return (uintptr_t *)((uintptr_t)p - EXO_CARAT_ABI_SHADOW_SUB);
}

/* How many of the pages [from, to) touches are in memory (*in), of how many (*all). */
static void pages_in_memory(uintptr_t from, uintptr_t to, size_t *in, size_t *all)
{
    uintptr_t lo = from & ~(uintptr_t)4095, hi = (to + 4095) & ~(uintptr_t)4095;
    *all = (hi - lo) / 4096;
    *in = 0;
    unsigned char *vec = malloc(*all);
    CHECK(vec && mincore((void *)lo, hi - lo, vec) == 0);
    for (size_t i = 0; i < *all; i++)
        *in += vec[i] & 1;
    free(vec);
}

static void big_block_freed(char *target)
{
    enum { WORDS = (1 << 20) / 8 };
    char **big = malloc(WORDS * sizeof *big);
    CHECK(big);
    for (int i = 0; i < WORDS; i++)
        put(&big[i], target);
    uintptr_t *first = shadow_of(&big[0]), *middle = shadow_of(&big[WORDS / 2]),
              *last = shadow_of(&big[WORDS - 1]);
    size_t in, all;
    pages_in_memory((uintptr_t)first, (uintptr_t)(last + 1), &in, &all);
    CHECK(in == all && all >= 256);
    CHECK(*first == (uintptr_t)target && *last == (uintptr_t)target);
    free(big);
    /* At most the two pages at its ends, which its neighbours' shadows share. */
    pages_in_memory((uintptr_t)first, (uintptr_t)(last + 1), &in, &all);
    CHECK(in <= 2);
    CHECK(*first == 0 && *middle == 0 && *last == 0);
}

int main(void)
{
    char *block = malloc(64);
    /* Tracked memory right after the block: the stale addresses of the blocks freed below
     * are then not near it (a stopped thread holding one would refuse the move). */
    char *pad = malloc(1024);
    char **slots = malloc(4 * sizeof *slots);
    struct odd *odd = malloc(sizeof *odd + 8);
    char *shifted = malloc(64);
    CHECK(block && pad && slots && odd && shifted);
    __asm__ volatile("" : : "r"(pad) : "memory");   /* kept: not optimised away */
    memset(block, 'b', 64);
    memset(slots, 0, 4 * sizeof *slots);

    /* In flight: the shadow says slots[0] is about to hold block + 8; it still holds 0. */
    uintptr_t *shadow = (uintptr_t *)((uintptr_t)&slots[0] - EXO_CARAT_ABI_SHADOW_SUB);
    raw_store(shadow, (uintptr_t)(block + 8));
    volatile uintptr_t was = SCRAMBLE(block);   /* kept scrambled in memory */
    block = carat_must_move(block);
    CHECK(SCRAMBLE(block) != was);
    CHECK(slots[0] == NULL);
    CHECK(*shadow == (uintptr_t)(block + 8));     /* followed the block */
    raw_store(&slots[0], (uintptr_t)(block + 8)); /* the store, from the patched register */

    put(&slots[1], block);
    put_odd(odd, block + 16);
    odd->tag = 7;
    struct pair pr = { block + 24, block + 32 };  /* on the stack: no shadow of its own */
    copy(&slots[2], &pr, sizeof pr);
    /* Shifted by 4 bytes: the pointers land off their 8-byte boundaries. */
    copy(shifted + 4, &slots[1], sizeof(char *));
    CHECK(escapes(block) == 6);   /* slots[0..3] in the shadow; odd->p, shifted + 4 in the sets */

    /* A longer copy out of the stack, taken four words at a time where the processor has
     * AVX2: pointers at every place in a group of four and in the tail, numbers between. */
    uintptr_t frame[FRAME_WORDS];
    for (int i = 0; i < FRAME_WORDS; i++)
        frame[i] = i % 3 == 0 ? (uintptr_t)(block + 8 * (i % 5)) : (uintptr_t)i * 1000003u;
    uintptr_t *many = malloc(sizeof frame);
    CHECK(many);
    copy(many, frame, sizeof frame);
    for (int i = 0; i < FRAME_WORDS; i++) {
        uintptr_t known = *(uintptr_t *)((uintptr_t)&many[i] - EXO_CARAT_ABI_SHADOW_SUB);
        CHECK(known == (i % 3 == 0 ? frame[i] : 0));
    }

    /* A tag byte over the low byte of a pointer to the block: data now, left alone. */
    put(&slots[3], block + 40);
    ((unsigned char *)&slots[3])[0] ^= 0x01;
    volatile uintptr_t tagged = SCRAMBLE(slots[3]);

    was = SCRAMBLE(block);
    block = carat_must_move(block);
    CHECK(SCRAMBLE(block) != was);
    CHECK(slots[0] == block + 8 && slots[1] == block && odd->p == block + 16);
    CHECK(slots[2] == block + 24 && slots[3] != block + 40);
    CHECK(SCRAMBLE(slots[3]) == tagged);
    char *got;
    memcpy(&got, shifted + 4, sizeof got);
    CHECK(got == block);
    for (int i = 0; i < FRAME_WORDS; i++)
        CHECK(many[i] == (i % 3 == 0 ? (uintptr_t)(block + 8 * (i % 5)) : (uintptr_t)i * 1000003u));
    free(many);

    /* realloc moving the array: its pointers go with it. */
    slots[3] = NULL;
    char **grown = realloc(slots, 4096 * sizeof *slots);
    CHECK(grown);
    slots = grown;
    block = carat_must_move(block);
    CHECK(slots[0] == block + 8 && slots[1] == block && slots[2] == block + 24);
    CHECK(odd->p == block + 16);

    /* Freed slots are no escapes any more. */
    uint64_t before = escapes(block);
    free(slots);
    CHECK(escapes(block) == before - 3);
    block = carat_must_move(block);
    CHECK(odd->p == block + 16);
    memcpy(&got, shifted + 4, sizeof got);
    CHECK(got == block);
    big_block_freed(block);
    free(odd);
    free(shifted);
    free(block);
    free(pad);
    puts("move_shadow: ok");
    return 0;
}
