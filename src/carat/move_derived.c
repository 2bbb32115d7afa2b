/* Optimised code also keeps addresses derived from a block but outside it: a base 8 bytes
 * before an array for 1-based indexing, a loop bound just past its end (LLVM's loop
 * strength reduction makes them freely, more so around guards' range checks), and programs
 * store one-past-the-end pointers. Those that fall in the block's own malloc chunk (its
 * 16-byte header, and its unused tail up to malloc_usable_size) are the block's, and are
 * patched like pointers into it, except in a thread stopped inside the C library, whose
 * malloc holds chunk addresses of its own, and where a neighbour could own the same
 * address (the block before's last word or end in the header; the block after's base
 * minus 8 or 16 at the end): the move is refused then. Any other address within
 * DERIVED_REACH bytes of the block and outside every other tracked allocation cannot be
 * told from a pointer to the neighbouring memory: a move first looks for them in every
 * stopped thread and is refused (nothing changed) when it finds one; the mover tries
 * again at its next tick. So is a
 * move while a thread stopped inside the C library holds an edge of the block's chunk, or
 * the next chunk's address (the block's last usable word): those are malloc's.
 *
 * Called with the runtime's lock held and the world stopped (move.c). */
#include "carat/carat_internal.h"
#include "carat/move_patch.h"
#include "os/os.h"

#include <malloc.h>
#include <stdlib.h>

/* The C library's code (exo_carat_find_libc). */
static uintptr_t libc_lo, libc_hi;

void exo_carat_find_libc(void)
{
    static bool done;
    if (done)
        return;
    done = true;
    if (exo_os_code_segment((const void *)malloc, &libc_lo, &libc_hi) != 0)
        libc_lo = libc_hi = 0;
}

bool exo_carat_in_libc_code(uintptr_t pc)
{
    return pc - libc_lo < libc_hi - libc_lo;
}

/* Is v, in the block's 16-byte chunk header, an address in the tracked block before it or
 * one past that one's end? glibc lends a chunk's first 8 bytes (the size of the previous
 * chunk) to the previous block while that is in use, so a block whose usable size ends
 * there has its last word there, and the address one past its end is the next 8 bytes'.
 * Those stay as they are. Patched as the moved block's, the end of a 32-byte SQL string in
 * a 40-byte block pointed into the copy of the block after it, and SQLite's sqlite3_exec
 * read a second statement from there (speedtest1 at 10,000 moves a second, "near "T":
 * syntax error", one run in 200). A header address no tracked block owns is patched as
 * before: the block's own header (AddressSanitizer's allocator keeps its own there), or
 * memory of a block the plugin never saw, which cannot be told apart. Lock held. */
bool exo_carat_owned_by_block_before(const struct patch *p, uintptr_t v)
{
    if (v >= p->base)
        return false;
    const struct alloc *a = exo_carat_alloc_table_find(&exo_carat.table, v);
    if (!a)
        a = exo_carat_alloc_table_find(&exo_carat.table, v - 1);
    return a && a->base != p->base;
}

/* Is v one past the block's usable end, and does a tracked block start right after the
 * next chunk's header there? In glibc's heaps that header is 8 bytes (the size field: the
 * block's last 8 bytes are the next chunk's first), in a mapping of its own 16, so v is
 * also that block's base minus 8 or minus 16, where loops over 8- or 16-byte elements from
 * 1 keep their base (and LLVM's loop strength reduction puts one, bzip2's sort among
 * them). (The block's last word, the next block's base minus 16 in a heap, is left the
 * block's own: pointers to a block's last word are many, and SQLite's keep them.) Lock
 * held. */
static bool next_block_base_minus(const struct patch *p, uintptr_t v)
{
    if (v != p->base + p->size)
        return false;
    for (uintptr_t header = 8; header <= 16; header += 8) {
        const struct alloc *a = exo_carat_alloc_table_find(&exo_carat.table, v + header);
        if (a && a->base == v + header)
            return true;
    }
    return false;
}

/* Is v, outside the block, an address derived from it? Near it, and neither inside nor one
 * past the end of another tracked allocation. Memory of the C library's right after the
 * block looks the same (a thread's DTV, which its TLS points into): a false alarm, the
 * move is only refused. In the block's own chunk, an address the block before also owns
 * (its last word, or one past its end), or the next block's base minus 8 or 16, is no
 * one's for certain: the move is refused too. Left to the block before, a base 8 bytes
 * before bzip2's sorting array, hoisted out of its loop, kept the old address after the
 * move, and its next range guard had a length of minus 10 MB (one run in 20 at 100 moves a
 * second). Called with the runtime's lock held. */
bool exo_carat_derived_from_block(const struct patch *p, uintptr_t v)
{
    /* In the block's chunk: patched, unless in malloc or not the block's alone. */
    if (exo_carat_in_own_chunk(p, v))
        return p->in_libc || exo_carat_owned_by_block_before(p, v) || next_block_base_minus(p, v);
    if (v + DERIVED_REACH - p->base >= p->size + 2 * DERIVED_REACH)
        return false;                    /* far from the block (or v < DERIVED_REACH) */
    if (exo_carat_alloc_table_find(&exo_carat.table, v))
        return false;
    const struct alloc *before = exo_carat_alloc_table_find(&exo_carat.table, v - 1);
    return !before || before->base == p->base;
}

/* Is v, inside the block, the address of the next malloc chunk as the C library's malloc
 * holds it? A block's last 8 usable bytes are the next chunk's size-of-previous field, so
 * that chunk's address (the heap's top, or a free neighbour, as _int_malloc and _int_free
 * keep it in registers and on the stack) is base + size - 8, inside the block by its usable
 * size. Patched, it pointed the arena's top into the copy, and malloc carved new blocks out
 * of memory the copy and the other arena owned (SQLite's fuzzcheck at 10,000 moves a
 * second). In a thread stopped inside the C library the move is refused; elsewhere the
 * address is the program's pointer to the block's last word. */
bool exo_carat_next_chunk_in_libc(const struct patch *p, uintptr_t v)
{
    return p->in_libc && v - p->base >= p->size - 8 && v - p->base < p->size;
}

/* A call-clobbered register of a thread stopped in the C library that points into the
 * block's chunk (0: none). The library's memory functions (memcpy under fread, memset,
 * memcmp) keep their state there, and beside such a pointer perhaps the distance between
 * their two ends, which no move can patch: the copy went on from the wrong place (bzip2 -d
 * under 100 moves a second, "data integrity error"). The move is refused. Callee-saved
 * registers hold the caller's values, kept for it, and are patched as before. */
#if defined(__x86_64__)
uintptr_t exo_carat_libc_register_in_block(const struct patch *p, const greg_t *g)
{
    static const int clobbered[] = { REG_RAX, REG_RCX, REG_RDX, REG_RSI, REG_RDI, REG_R8,
                                     REG_R9, REG_R10, REG_R11 };
    if (!p->in_libc)
        return 0;
    for (size_t i = 0; i < sizeof clobbered / sizeof clobbered[0]; i++)
        if (exo_carat_in_own_chunk(p, (uintptr_t)g[clobbered[i]]))
            return (uintptr_t)g[clobbered[i]];
    return 0;
}
#endif
