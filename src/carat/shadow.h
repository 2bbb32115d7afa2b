/* The lazy escape map (EXOMEM_CARAT_PARTS=track,shadow): instead of logging each pointer
 * store and keeping a set of slots per allocation, the plugin's code writes the stored
 * pointer into a shadow word at a fixed distance below the slot (carat_abi.h), and a move
 * finds the slots that point into its block by scanning the shadow of the memory that can
 * hold slots. Per store: one instruction; per move: a scan of the resident shadow. A slot
 * is patched only while the memory still holds exactly what its shadow says, as with the
 * escape sets (a narrower store over part of a pointer leaves data that must not change).
 * Not thread-safe unless said otherwise: the runtime's lock guards the scans. */
#ifndef EXOMEM_CARAT_SHADOW_H
#define EXOMEM_CARAT_SHADOW_H

#include "carat/carat_abi.h"

#include <stdbool.h>
#include <stdint.h>

/* Set (once, before main) when a module built with the shadow asks for it. */
extern bool exo_carat_shadow_on;

/* The shadow word of the slot at a, or NULL if a has none (outside the shadowed window). */
static inline uintptr_t *exo_carat_shadow_word(uintptr_t a)
{
    if (a - EXO_CARAT_ABI_SHADOW_USER_LO >=
        EXO_CARAT_ABI_SHADOW_USER_HI - EXO_CARAT_ABI_SHADOW_USER_LO - 8)
        return 0;
    return (uintptr_t *)(a - EXO_CARAT_ABI_SHADOW_SUB);
}

/* Reserve the shadow (idempotent, thread-safe). 0, or -EXO_EOVERLAP when something else is
 * mapped where it must go, or another -EXO_ code. */
int exo_carat_shadow_reserve(void);
/* [addr, addr + len) holds no known pointer any more (freed; uninitialised). Lock-free:
 * only the block's owner writes its shadow. */
void exo_carat_shadow_clear(uintptr_t addr, uint64_t len);
/* memmove's bytes from src are about to be (or were) copied to dst: so are their shadow
 * words (the known pointers among them, with the value each was stored with). Lock-free. */
void exo_carat_shadow_copy(uintptr_t dst, uintptr_t src, uint64_t len);
/* The words of [src, src + len) that lie in [lo, hi) become dst's known pointers, whatever
 * wrote them (memory whose stores the runtime never saw: a stack, qsort's output). */
void exo_carat_shadow_take(uintptr_t dst, uintptr_t src, uint64_t len, uintptr_t lo,
                           uintptr_t hi);

/* The escape hook's part (slot about to hold value): into the shadow if slot has one and is
 * on an 8-byte boundary, else into the escape sets at once, counted (the scans of the
 * shadow see aligned words only). Returns true. Thread-safe (takes the lock for the sets). */
bool exo_carat_shadow_escape(uintptr_t slot, uintptr_t value);
/* The copy hook's part: the shadow words of [src, src + len) go with the bytes to dst
 * (before the copy, as the hook comes first: a move in between makes both follow the
 * block). unknown: src is memory whose stores the shadow may not have seen (the calling
 * thread's stack, whose stores into its own frames have none; memory outside every tracked
 * allocation): every word that may be a pointer is taken. A copy whose words are not on
 * 8-byte boundaries at both ends puts its known pointers into the escape sets instead.
 * Thread-safe. */
void exo_carat_shadow_copy_hook(uintptr_t dst, uintptr_t src, uint64_t len, bool unknown);

/* Called for every 8-byte aligned slot in the writable ranges (sorted [lo, hi) pairs)
 * whose shadow word holds a value in [vlo, vhi] (one past the end of a block included). */
typedef void (*exo_carat_shadow_fn)(uintptr_t slot, uintptr_t *shadow, void *arg);
/* Visit those slots; only shadow pages in memory are read (mincore). Never fails, as a
 * move cannot stop halfway through its patching: where the kernel does not say which pages
 * are in memory, all of them are read (the reservation is mapped whole, and pages never
 * written read as zero). Lock held. */
void exo_carat_shadow_visit(const uintptr_t *ranges, int n, uintptr_t vlo, uintptr_t vhi,
                            exo_carat_shadow_fn fn, void *arg);

/* Slots outside [skip_lo, skip_hi) (the caller's stack) that hold a pointer into [base,
 * base + size] and still hold what their shadow says: the allocation's live escapes in the
 * shadow (read through the kernel: other threads run). Lock held. */
uint64_t exo_carat_shadow_count(uintptr_t base, uintptr_t size, uintptr_t skip_lo,
                                uintptr_t skip_hi);
/* The base of a heap allocation with the most shadow words pointing into it, counted over
 * the whole shadow (without reading the slots), or 0. Lock held. */
uintptr_t exo_carat_shadow_worst(void);

/* The allocation the mover moves: the worst case counted at most a second ago, followed
 * across moves (exo_carat_shadow_moved), or the next one after a refused move
 * (exo_carat_shadow_refused); 0 if none is left. Lock held. */
uintptr_t exo_carat_shadow_pick(void);
/* A move took the allocation at from to to. Lock held. */
void exo_carat_shadow_moved(uintptr_t from, uintptr_t to);
/* A move of the allocation at base was refused (in either escape form): the next pick is
 * another, and counts in the next second leave it out. Lock held. */
void exo_carat_shadow_refused(uintptr_t base);
/* Was a move of the allocation at base refused within the last second? The mover then
 * leaves it be, with the shadow (the table's choice when no pick is left is the same
 * block at every tick). Lock held. */
bool exo_carat_shadow_refused_lately(uintptr_t base);

#endif
