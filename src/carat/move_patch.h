/* What a move does with each pointer-holding word it visits (move.c), and the rules, in
 * move_derived.c, that tell an address derived from the moved block from one that is the
 * C library's or a neighbour's. Internal; called with the runtime's lock held and the
 * world stopped. */
#ifndef EXOMEM_CARAT_MOVE_PATCH_H
#define EXOMEM_CARAT_MOVE_PATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#if defined(__x86_64__)
#include <ucontext.h>
#endif

/* How far outside a block an address still counts as derived from it. */
#define DERIVED_REACH 512

/* One pass over pointer-holding words: with check set, count the derived addresses
 * (move_derived.c) instead of patching. */
struct patch {
    uintptr_t base, size;
    intptr_t delta;
    uint64_t patched;
    uintptr_t own_lo, own_hi;  /* the block's malloc chunk: header, block, unused tail, end */
    bool in_libc;              /* the words being visited are a thread's stopped in libc */
    pid_t requester;           /* the thread waiting in exo_carat_move for this move, or 0 */
    uintptr_t requester_floor; /* its stack pointer in exo_carat_move (0: not known) */
    bool check;
    uint64_t derived;          /* check: words that refuse the move (derived, malloc's) */
    uintptr_t derived_value;   /* the first of them, for the error message */
    bool stack_unknown;        /* a thread on an alternate stack, its own not known: refused */
    uintptr_t libc_busy;       /* check: a register of a thread in the C library that points
                                * into the block (the first found), refusing the move too */
};

/* Is v in the block's own malloc chunk (one past its usable end included)? Those are
 * patched, unless the block before owns them (exo_carat_owned_by_block_before). */
static inline bool exo_carat_in_own_chunk(const struct patch *p, uintptr_t v)
{
    return v - p->own_lo < p->own_hi - p->own_lo;
}

/* Find the C library's code, once, before the first stop (dl_iterate_phdr takes the
 * loader's lock, which a stopped thread may hold). */
void exo_carat_find_libc(void);

/* Is pc in the C library's code (false if exo_carat_find_libc could not tell)? */
bool exo_carat_in_libc_code(uintptr_t pc);

/* Is v, in the block's chunk header, an address in the tracked block before it or one past
 * that one's end? Such words are left as they are. */
bool exo_carat_owned_by_block_before(const struct patch *p, uintptr_t v);

/* Is v, outside the block or in its chunk's edges, an address the move cannot patch for
 * certain (derived from the block, or a neighbour's too)? The move is refused then. */
bool exo_carat_derived_from_block(const struct patch *p, uintptr_t v);

/* Is v, inside the block, the next malloc chunk's address as a thread stopped in the C
 * library holds it? The move is refused then. */
bool exo_carat_next_chunk_in_libc(const struct patch *p, uintptr_t v);

#if defined(__x86_64__)
/* A call-clobbered register of a thread stopped in the C library that points into the
 * block's chunk (0: none); the move is refused then. */
uintptr_t exo_carat_libc_register_in_block(const struct patch *p, const greg_t *g);
#endif

#endif
