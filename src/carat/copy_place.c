/* Where a moved block's copy goes (exo_carat_copy_place, for move.c), chosen before the
 * world stops, while malloc's locks are free. What the program may see of the block is
 * kept:
 *  - The low bits of its address: the block's own alignment, and at least the low byte,
 *    so that the move's offset leaves the low byte of every patched word as it was. Stack
 *    slots and registers are patched conservatively, and compilers reuse them for narrower
 *    data: a byte flag stored over the low byte of a stale pointer into the block leaves a
 *    word that still points into it (SQLite's selectExpander keeps a bool in a spill slot
 *    that held a pointer before, and setcc writes only a register's low byte); patched,
 *    the flag must still read the same. Blocks of KEEP_LOW2_FROM bytes or more are given
 *    the same address modulo 64 KiB if the heap allows (a 16-bit value over the low half
 *    of a stale pointer into such a block points into it too, most of the time).
 *  - Its usable size if glibc gives one, which programs read (SQLite counts its memory in
 *    use by it: copies a few bytes bigger left the count at -32 bytes at the end of its
 *    tests). A block malloc mapped on its own (usable size a number of pages less 16 bytes)
 *    is only matched by asking 8 bytes less; failing that, a bigger block will do.
 * Blocks that do not fit are kept aside while trying again, each followed by a spacer that
 * should put the next try at the right address (where malloc carves the next chunk from
 * the same free space); when none fits, one is cut to fit (cut_to_fit). */
#include "carat/carat_internal.h"

#include <malloc.h>
#include <stdlib.h>

/* For small blocks, which come from free lists in any order. The tries that do not fit
 * are held until the end, so each takes the next free block of the size: after many
 * moves, or frees of moved blocks, the mover thread's arena holds hundreds, and with 64
 * tries a C++ program whose exceptions left blocks live between moves had moves of a
 * 64-byte block refused at every try (tests/carat/cxx_exceptions.cpp). A try costs a
 * malloc and a free, before the world stops. */
#define COPY_TRIES 256
#define COPY_TRIES_BIG 16      /* for blocks of COPY_BIG bytes or more, carved one by one */
#define COPY_BIG (64u << 10)
#define KEEP_LOW EXO_CARAT_COPY_KEEP_LOW
#define KEEP_LOW2 65536
#define KEEP_LOW2_FROM 4096

/* How far past from the next address that has base's remainder modulo m lies, leaving room
 * for glibc's smallest chunk (32 bytes) in between: a spacer's or a front piece's. */
static uintptr_t gap_to(uintptr_t base, uintptr_t from, uintptr_t m)
{
    uintptr_t gap = (base - from) % m;
    return gap < 32 ? gap + m : gap;
}

/* When no try fits: a block cut out of a bigger one at the right place. x, malloc'd with
 * room for any gap, is shrunk in place twice by realloc (glibc splits off and frees the
 * rest of the chunk): first to end where a chunk of span usable bytes starting at the right
 * address would end, then to end where that chunk starts. The second cut frees exactly that
 * chunk, onto the thread's cache of its size if that has room, and the next malloc of span
 * returns it. The tries took from that cache first, but glibc fills it again from its free
 * lists when a try takes from those: then the chunk goes behind them, malloc hands out
 * another, and the cut fails (NULL; the move is refused). 600 blocks moved one by one
 * among live neighbours (tests/carat/move_fragmented.c) were refused from about the 100th
 * move without the cut, and all moved with it. *front gets x, to be freed with the tries. */
static void *cut_to_fit(uintptr_t base, uintptr_t span, void **front)
{
    unsigned char *x = malloc(span + KEEP_LOW + 64);   /* a rest of 48 bytes at least */
    if (!x)
        return NULL;
    uintptr_t at = (uintptr_t)x;
    uintptr_t gap = gap_to(base, at, KEEP_LOW);
    unsigned char *y = realloc(x, gap + span);
    if (!y) {
        free(x);
        return NULL;
    }
    unsigned char *z = (uintptr_t)y == at ? realloc(y, gap - 8) : NULL;
    if (!z) {
        free(y);
        return NULL;
    }
    void *b = (uintptr_t)z == at ? malloc(span) : NULL;
    if (b && ((uintptr_t)b != at + gap || malloc_usable_size(b) < span)) {
        free(b);
        b = NULL;
    }
    if (b)
        *front = z;
    else
        free(z);
    return b;
}

void *exo_carat_copy_place(uintptr_t base, uintptr_t align, uintptr_t span, bool *refused)
{
    void *kept[2 * COPY_TRIES + 1], *best = NULL;
    /* Under AddressSanitizer, whose allocator places blocks its own way (and which the
     * sanitizer build links), the address's low bits cannot be asked for: any block does. */
#if defined(__SANITIZE_ADDRESS__)
    int nkept = 0, best_score = -2;
#else
    int nkept = 0, best_score = -1;
#endif
    bool no_memory = false;
    uintptr_t modulo = exo_carat_copy_modulo(align);
    /* score: 2 for the same address modulo KEEP_LOW2 (when sought), 1 for the usable size */
    int want = span >= KEEP_LOW2_FROM ? 3 : 1;
    uintptr_t aim = want == 3 ? KEEP_LOW2 : KEEP_LOW;
    int tries = span < COPY_BIG ? COPY_TRIES : COPY_TRIES_BIG;
    for (int i = 0; best_score < want && i < tries; i++) {
        void *b = NULL;
        uintptr_t ask = i % 4 == 3 && span > 8 ? span - 8 : span;
        if (align <= KEEP_LOW)
            b = malloc(ask);
        else if (posix_memalign(&b, align, ask))
            b = NULL;
        if (!b) {
            no_memory = true;
            break;
        }
        size_t usable = malloc_usable_size(b);
        int score = -1;
        if (((uintptr_t)b - base) % modulo == 0 && usable >= span)
            score = (want == 3 && ((uintptr_t)b - base) % KEEP_LOW2 == 0 ? 2 : 0) +
                    (usable == span);
        if (score > best_score) {
            if (best)
                kept[nkept++] = best;
            best = b;
            best_score = score;
        } else {
            kept[nkept++] = b;
        }
        if (best_score >= want)
            break;
        uintptr_t next = (uintptr_t)b + usable + 8;   /* after b's chunk */
        void *spacer = malloc(gap_to(base, next, aim) - 8);
        if (spacer)
            kept[nkept++] = spacer;
    }
    if (!best && !no_memory && align <= KEEP_LOW && span < COPY_BIG) {
        best = cut_to_fit(base, span, &kept[nkept]);
        if (best)
            nkept++;
    }
    *refused = !best && !no_memory;
    while (nkept > 0)
        free(kept[--nkept]);
    return best;
}

