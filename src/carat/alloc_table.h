/* The allocation table: every tracked allocation, found by any address inside it, and for each the set
 * of memory slots known to hold a pointer into it (the paper's Allocation-to-Escape map).
 * Not thread-safe: the runtime's lock (carat_internal.h) guards it. */
#ifndef EXOMEM_CARAT_ALLOC_TABLE_H
#define EXOMEM_CARAT_ALLOC_TABLE_H

#include "exomem/carat.h"
#include "carat/addr_map.h"
#include "carat/page_index.h"
#include <stdbool.h>
#include <stdint.h>

/* A slot known to hold a pointer into the allocation, and the pointer it was last told to
 * hold (by an escape hook, a copy, or a move). 16 bytes, four to a cache line: Lua's and
 * jq's millions of small blocks have a handful of escapes each, and the set is a cache
 * miss on every escape applied to it. Read and write it through the functions below. */
struct escape_slot {
    uintptr_t slot;
    /* The value, and in its top bit (never set in a user-space pointer) whether the slot
     * lay in a tracked allocation then: once none holds it, it is freed memory (reused by
     * malloc's own links, or unmapped and mapped again for the runtime's tables) and no
     * longer a slot of the program's. */
    uintptr_t word;
};
#define ESCAPE_IN_ALLOC ((uintptr_t)1 << 63)

static inline struct escape_slot escape_slot_make(uintptr_t slot, uintptr_t value, bool in_alloc)
{
    uintptr_t tag = in_alloc ? ESCAPE_IN_ALLOC : 0;
    return (struct escape_slot){ slot, (value & ~ESCAPE_IN_ALLOC) | tag };
}
static inline uintptr_t escape_value(const struct escape_slot *e)
{
    return e->word & ~ESCAPE_IN_ALLOC;
}
static inline bool escape_in_alloc(const struct escape_slot *e)
{
    return (e->word & ESCAPE_IN_ALLOC) != 0;
}

/* A set of slots (open addressing on the slot address, slot 0 = empty). */
struct escape_set {
    struct escape_slot *slots;
    uint32_t cap;        /* power of two, or 0 */
    uint32_t count;
};

/* The header glibc's malloc keeps before every block (its chunk's size and the size of the
 * chunk before, whose block may use those 8 bytes while in use): addresses in it are the
 * block's for a move (move.c) and for the escape map (hooks.c), unless the block before
 * owns them. AddressSanitizer's allocator keeps a header of the same length. */
#define EXO_CARAT_CHUNK_HEADER 16

/* One cache line (64 bytes): a program with millions of small blocks walks and writes
 * these for every allocation, free and escape. */
struct alloc {
    uintptr_t base, size;
    const char *site;
    struct escape_set escapes;
    struct alloc *left, *right;
    uint32_t prio;           /* treap heap order: keeps the tree balanced on average */
    uint8_t align_shift;     /* alignment a move keeps (1 << it): the first address's, 16-4096 */
    uint8_t pinned;          /* its address left the program's sight (formatted as text): no
                              * move (exo_carat_hook_pin) */
    uint8_t kind;            /* EXO_CARAT_HEAP / GLOBAL / STACK */
    uint8_t index;           /* where a lookup by interior address finds it: INDEX_* */
};
_Static_assert(sizeof(struct alloc) == 64, "struct alloc is a cache line");
/* INDEX_PENDING: in no index yet, only named in its head word and listed in the thread
 * that allocated it (pending.c); its `left` is that thread's record. */
enum { INDEX_PAGES, INDEX_TREE, INDEX_ODD, INDEX_PENDING };

/* The allocation last found in each of a few pages (by a hash of the page): pointers into
 * a big block (a string being matched, an interpreter's stack) find it without the tree,
 * whose walk is a cache miss per level. A node's entries are cleared when it is freed,
 * resized or moved. */
#define ALLOC_TABLE_CACHE 1024

struct cache_entry {
    uintptr_t base, size;    /* the node's when cached: a lookup reads no node */
    struct alloc *node;      /* NULL: empty */
};

struct alloc_table {
    uintptr_t lo, hi;        /* every allocation lies in [lo, hi): a cheap first filter (also
                              * read without the lock by the escape hook, and by the plugin's
                              * inline code: first, and stored atomically) */
    /* By interior address: small blocks in page bitmaps (page_index.h), big ones (and small
     * ones without memory for bitmaps) in a treap, small unaligned ones in an array. */
    struct page_index pages;
    struct alloc *root;
    /* Small blocks not on an 8-byte boundary (globals: strings, chars, ints), sorted by
     * base: a lookup that fails everywhere else searches one array, not a tree walk of a
     * cache miss a level (oniguruma registers hundreds of them, and its scans of copied
     * stacks fail lookups millions of times). */
    struct odd_block {
        uintptr_t base, size;
        struct alloc *node;
    } *odd;
    uint32_t nodd, odd_cap;
    uintptr_t odd_end;       /* no block of the array ends above this */
    struct cache_entry cache[ALLOC_TABLE_CACHE];
    /* Every node again, hashed by base (linear probing, at most half full): most pointers
     * a program stores point at the start of a block, and this finds those with one probe
     * where the tree takes a cache miss per level. */
    struct addr_map by_base;
    /* With the shadow (shadow.h), small heap blocks are kept out of the hash by base: a
     * block's node is named in the shadow word of its malloc chunk's size field (base - 8,
     * which no store of the program's reaches), and listed in `heads` for walks (its index
     * in the node's prio, which only tree nodes use). An insert and a free then touch the
     * shadow next to the block's own instead of a hash entry on a line of its own (a
     * third of Lua's time with the shadow went on those cache misses). */
    bool by_head;
    struct alloc **heads;
    uint32_t nheads, heads_cap;
    /* Those nodes come from an arena of their own (alloc_table.c): a tagged word in the
     * shadow is read as a node only if it points there. Freed ones are kept in `spare`. */
    uintptr_t arena_lo, arena_next, arena_end;
    struct alloc **spare;
    uint32_t nspare, spare_cap;
    uint64_t count;
    uint64_t bytes;          /* memory of nodes and escape sets (see alloc_table_bytes) */
    uint64_t peak_bytes;     /* the most exo_carat_alloc_table_bytes has been */
    /* The heap allocation with the most escapes, kept as escapes are added, so that a mover
     * asking 10,000 times a second does not walk the table each time. Recomputed by a walk
     * only after it is freed (worst_stale); its count going down is not followed, so it is
     * "a" worst case, as of when it was last overtaken. */
    struct alloc *worst;
    bool worst_stale;
    /* Allocations freed so far by their escape count then (EXO_CARAT_ESCAPE_BUCKETS). */
    uint64_t escape_hist[EXO_CARAT_ESCAPE_BUCKETS];
};

/* The memory the table uses: nodes, escape sets, the hash by base, the page bitmaps. */
uint64_t exo_carat_alloc_table_bytes(const struct alloc_table *t);
/* Record exo_carat_alloc_table_bytes as the peak if it is the largest yet (after growth). */
void exo_carat_alloc_table_note_peak(struct alloc_table *t);
/* An escape was added to a's set: a may be the new worst case. */
void exo_carat_alloc_table_consider(struct alloc_table *t, struct alloc *a);
/* a may no longer be moved (pinned): if it is the worst case, the next ask looks again. */
void exo_carat_alloc_table_unconsider(struct alloc_table *t, struct alloc *a);
/* The heap allocation with the most escapes (see `worst`), or NULL if none is tracked. */
struct alloc *exo_carat_alloc_table_worst(struct alloc_table *t);

/* The histogram bucket of an allocation with n escapes: 0 for none, else 1 + log2(n). */
unsigned exo_carat_escape_bucket(uint64_t n);

/* Name small heap blocks in the shadow words of their chunk headers from now on (the shadow
 * is reserved): reserves the nodes' arena. 0, or a -EXO_ code (nothing changed). */
int exo_carat_alloc_table_use_heads(struct alloc_table *t);

/* ---- nodes not yet in the table (pending.c): allocated, named in their head words, and
 * indexed later in a batch. Those that need no lock say so; the rest need it. ---- */

/* A head word holds its node's address with this bit set (no user-space pointer has it). */
#define ALLOC_HEAD_TAG ((uintptr_t)1 << 63)

/* The word a head holds for node n (no lock). */
static inline uintptr_t exo_carat_alloc_table_head_word(const struct alloc *n)
{
    return (uintptr_t)n | ALLOC_HEAD_TAG;
}

/* The address of the head word that names a node for a heap block at base, or NULL if
 * such a block has none (heads off, or base not on a 16-byte boundary). No lock. */
uintptr_t *exo_carat_alloc_table_head(const struct alloc_table *t, uintptr_t base);
/* The node a head word names, if it is a pending one with that base; else NULL. Without
 * the lock: a node's memory stays a node's, and only the drain under the lock recycles a
 * pending one. */
struct alloc *exo_carat_alloc_table_pending_at(const struct alloc_table *t, uintptr_t base);
/* A zeroed node for a pending block (lock held), or NULL. */
struct alloc *exo_carat_alloc_table_node_new(struct alloc_table *t);
/* [lo, hi) now covers [base, end) too; without the lock (a bound only ever widens). */
void exo_carat_alloc_table_widen(struct alloc_table *t, uintptr_t base, uintptr_t end);
/* Give back a node no index holds (a pending one that was freed, or spare), with its
 * escape set; counted in the histogram by its escapes if counted is set (lock held). */
void exo_carat_alloc_table_node_recycle(struct alloc_table *t, struct alloc *n, bool counted);
/* Index the pending node n, as exo_carat_alloc_table_insert would have (lock held). Its
 * head word must still name it. -EXO_ENOMEM: n was recycled, and the block is not tracked. */
int exo_carat_alloc_table_adopt(struct alloc_table *t, struct alloc *n);

/* The alignment a move keeps for a block first seen at base (struct alloc's align_shift):
 * judged once, at the first address, so that moves do not ratchet it up. */
static inline uint8_t exo_carat_align_shift(uintptr_t base)
{
    uintptr_t high = base & ~(uintptr_t)15;   /* its lowest set bit from the fifth up */
    unsigned tz = high ? (unsigned)__builtin_ctzll(high) : 12;
    return (uint8_t)(tz > 12 ? 12 : tz);
}

/* Add [base, base+size). Allocations it overlaps are dropped: the allocator handed this
 * memory out again, so they were freed where we could not see it (an uninstrumented
 * library). -EXO_ENOMEM. */
int exo_carat_alloc_table_insert(struct alloc_table *t, uintptr_t base, uintptr_t size, int kind,
                       const char *site);
/* The allocation at base now has size bytes (realloc in place): it keeps its escapes, as the
 * pointers to it stay good. Inserted if none is at base. -EXO_ENOMEM. */
int exo_carat_alloc_table_resize(struct alloc_table *t, uintptr_t base, uintptr_t size, int kind,
                                 const char *site);
/* Remove the allocation starting at base; returns its size, 0 if none starts there. */
uintptr_t exo_carat_alloc_table_remove(struct alloc_table *t, uintptr_t base);
/* The allocation containing addr, or NULL. */
struct alloc *exo_carat_alloc_table_find(struct alloc_table *t, uintptr_t addr);
/* The allocation starting at base, or NULL: one probe (its head word, or the hash by base),
 * where a failed exo_carat_alloc_table_find searches every index. Not a pending one. */
struct alloc *exo_carat_alloc_table_at(const struct alloc_table *t, uintptr_t base);
/* Does an allocation contain addr? exo_carat_alloc_table_find(t, addr) != NULL, cheaper
 * for an 8-byte aligned addr in a small block: no node is read. */
bool exo_carat_alloc_table_holds(struct alloc_table *t, uintptr_t addr);
/* Start loading the entry of s where slot would be (a hint: applying an escape log starts
 * the loads of a group of escapes before adding any). */
void exo_carat_escape_set_prefetch(const struct escape_set *s, uintptr_t slot);
/* Change the base of a, and its size to new_size (after a move: the copy may have more usable
 * bytes than the old block); keeps the order (the caller made sure the new range overlaps no
 * other allocation). */
void exo_carat_alloc_table_rebase(struct alloc_table *t, struct alloc *a, uintptr_t new_base,
                                  uintptr_t new_size);
/* Call fn for every allocation, in no particular order, until it returns true. fn must not
 * change the table. */
void exo_carat_alloc_table_each(struct alloc_table *t, bool (*fn)(struct alloc *, void *), void *arg);

/* Escape sets. */
/* Add slot, or give it its new value if it is there. in_alloc: slot lies in a tracked
 * allocation (struct escape_slot). may_purge: a set that must grow is first purged
 * (exo_carat_escape_set_purge), and grows only if that freed less than a quarter of it;
 * only when every slot in the set has been written. -EXO_ENOMEM. */
int exo_carat_escape_set_add(struct alloc_table *t, struct escape_set *s, uintptr_t slot,
                             uintptr_t value, bool in_alloc, bool may_purge);
void exo_carat_escape_set_remove(struct escape_set *s, uintptr_t slot);
/* Is slot in the set, last told to hold exactly value? */
bool exo_carat_escape_set_holds(const struct escape_set *s, uintptr_t slot, uintptr_t value);
/* Drop the slots that no longer hold the value they were told of (a pointer overwritten
 * with one into another allocation: the old entry would never be patched), as far as they
 * can be read safely (inside a live tracked allocation); others are kept. Without this a
 * slot stays in the set of every allocation it ever pointed into. Not during a move: it
 * reads the program's memory, and a stopped thread may be between an escape's hook and its
 * store. Returns the number dropped. */
uint32_t exo_carat_escape_set_purge(struct alloc_table *t, struct escape_set *s);
/* Move every slot in [lo, lo + len) by delta (the slots inside a block that moved), in one
 * pass over a new array; -EXO_ENOMEM leaves s as it was. */
int exo_carat_escape_set_rekey(struct escape_set *s, uintptr_t lo, uintptr_t len,
                               intptr_t delta);
void exo_carat_escape_set_free(struct alloc_table *t, struct escape_set *s);

#endif
