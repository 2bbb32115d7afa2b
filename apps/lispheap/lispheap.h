/* A small Lisp-like object heap, shared by the two collectors of issue 5 (apps/baker: Baker's
 * concurrent copying collector; apps/gengc: a generational collector). What lives here is the
 * part both need: the value encoding, object headers, the root stack, and the mutator
 * (binary trees, bintrees.c) written against a heap interface so both collectors run exactly
 * the same program.
 *
 * Values are 64-bit words, told apart by their low bits:
 *   ...000   a pointer to an object (its header word); 0 is nil
 *   ......1  a fixnum (63-bit integer)
 *   .....10  an object header: (nfields << 8) | (type << 2) | 2
 * Every field of every object is a value (no raw words), so a collector can scan any range of
 * whole objects word by word: headers and fixnums are never mistaken for pointers. A
 * forwarding pointer replaces a copied object's header (a pointer where a header belongs).
 * Objects never cross a page boundary (at most LH_MAX_FIELDS fields), so a page can be scanned
 * on its own: the collectors pad the rest of a page with a pad header (LH_PAD) or zeros.
 */
#ifndef EXOMEM_LISPHEAP_H
#define EXOMEM_LISPHEAP_H

#include <stddef.h>
#include <stdint.h>

typedef uint64_t lh_val;

#define LH_NIL ((lh_val)0)
#define LH_PAGE 4096u
#define LH_MAX_FIELDS 255u /* an object is at most 2 KiB, so it always fits a fresh page */

/* Object types. */
enum { LH_T_PAD = 0, LH_T_NODE = 1, LH_T_VEC = 2, LH_T_CONS = 3, LH_T_MAX = 3 };

/* A pad header: nothing more on this page (the rest of it is unused). */
#define LH_PAD ((lh_val)2)

static inline int lh_is_ptr(lh_val v) { return v != 0 && (v & 7) == 0; }
static inline int lh_is_header(lh_val v) { return (v & 3) == 2; }
static inline lh_val lh_fix(int64_t n) { return ((uint64_t)n << 1) | 1; }
static inline int64_t lh_fixval(lh_val v) { return (int64_t)v >> 1; }
static inline lh_val lh_header(unsigned type, unsigned nfields)
{
    return ((lh_val)nfields << 8) | ((lh_val)type << 2) | 2;
}
static inline unsigned lh_hdr_type(lh_val h) { return (unsigned)(h >> 2) & 63; }
static inline unsigned lh_hdr_nfields(lh_val h) { return (unsigned)(h >> 8); }
/* Bytes an object with this header occupies (header included). */
static inline size_t lh_hdr_bytes(lh_val h) { return 8 * (1 + (size_t)lh_hdr_nfields(h)); }
static inline lh_val *lh_obj(lh_val v) { return (lh_val *)(uintptr_t)v; }
/* Field i of an object (a plain load: the collectors need no read barrier in software). */
static inline lh_val lh_field(lh_val obj, unsigned i) { return lh_obj(obj)[1 + i]; }
/* Is this a header a well-formed object header (for verifiers)? */
static inline int lh_header_valid(lh_val h)
{
    return lh_is_header(h) && lh_hdr_type(h) >= LH_T_NODE && lh_hdr_type(h) <= LH_T_MAX &&
           lh_hdr_nfields(h) <= LH_MAX_FIELDS;
}

/* The mutator's roots: a stack of slots the collectors update when objects move. */
#define LH_ROOTS_MAX 4096
struct lh_roots {
    lh_val slot[LH_ROOTS_MAX];
    size_t n;
};

/* Push v, returning its slot index (aborts past LH_ROOTS_MAX: a mutator bug). */
size_t lh_root_push(struct lh_roots *r, lh_val v);

/* Pop the top k slots. */
void lh_root_pop(struct lh_roots *r, size_t k);

/* Monotonic clock in nanoseconds, for the collectors' pause and phase times. */
uint64_t lh_now_ns(void);

/* Unrecoverable collector state (heap corrupt or exhausted mid-copy): write "<who>: <msg>"
 * to stderr with write(2), which is safe in a fault handler, then abort. */
_Noreturn void lh_fatal(const char *who, const char *msg);

/* A heap interface's store (struct lh_heap_if) for a heap that needs no write barrier:
 * field i of obj becomes v. */
void lh_store_plain(void *heap, lh_val obj, unsigned i, lh_val v);

/* Where to put `bytes` in a bump region growing up from *top, such that the object does not
 * cross a page: if it would, the rest of the page is given up. Returns the address and moves
 * *top past the object, or NULL (top unchanged) if the object would pass `limit`. When
 * `pad_start` is non-NULL it receives where the given-up tail begins (or NULL if none). */
char *lh_bump_up(char **top, char *limit, size_t bytes, char **pad_start);

/* Same, for a region growing down from *top (objects below it), no lower than `floor`. */
char *lh_bump_down(char **top, char *floor, size_t bytes);

/* What a mutator needs from a heap. */
struct lh_heap_if {
    void *heap;
    /* A new object with nfields fields, all nil; may collect (so every pointer the caller
     * keeps across it must be in `roots`). LH_NIL when the heap is exhausted. */
    lh_val (*alloc)(void *heap, unsigned type, unsigned nfields);
    /* obj.field[i] = v, with whatever write barrier the heap needs. */
    void (*store)(void *heap, lh_val obj, unsigned i, lh_val v);
    struct lh_roots *roots;
};

/* The binary-trees mutator (bintrees.c): like the classic benchmark, it builds many
 * short-lived trees of depths min_depth..max_depth and checks each; a long-lived tree of
 * long_depth stays alive throughout; in addition a ring of ring_slots recent trees (held by
 * vectors of LH_RING_VEC slots, at a random slot) keeps a working set alive for a while, and every
 * mutate_every trees a small subtree deep in the long-lived tree is replaced by a freshly
 * built equal one (a pointer store into an old object). */
#define LH_RING_VEC 128
struct lh_bintrees_params {
    int min_depth, max_depth, long_depth;
    int ring_slots;    /* 0 for none; at most LH_RING_VEC * LH_MAX_FIELDS */
    int mutate_every;  /* 0 for never */
    int scale;         /* iterations per depth = 2^(max_depth - depth + min_depth) * scale / 16 */
    uint64_t seed;
    int ring_max_depth; /* only trees up to this depth go into the ring (0: all) */
};

struct lh_bintrees_result {
    uint64_t trees;         /* short-lived trees built and checked */
    uint64_t nodes;         /* nodes allocated */
    uint64_t bad_checks;    /* trees whose checksum or node count was wrong: must be 0 */
    uint64_t digest;        /* a digest of every check, equal across correct collectors */
};

/* Run the mutator on heap `h` (whose roots must be empty). Returns 0, or -1 when the heap ran
 * out of memory. Checks every short-lived tree when built, and every ring slot and the
 * long-lived tree at the end. */
int lh_bintrees_run(const struct lh_heap_if *h, const struct lh_bintrees_params *p,
                    struct lh_bintrees_result *out);

/* Checksum and node count of the tree lh_bintrees would build from (item, depth), computed
 * without a heap (what a tree's contents are checked against). */
uint64_t lh_tree_expect(uint64_t item, int depth);

/* Checksum of a tree in the heap; adds its node count to *nodes; returns 0 (with *bad set)
 * if something is not a node. */
uint64_t lh_tree_check(lh_val tree, uint64_t *nodes, int *bad);

#endif
