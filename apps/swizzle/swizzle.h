/* Extending addressability by pointer swizzling at page-fault time (Appel and Li's
 * application 7; Wilson's scheme): a persistent store larger than the address-space window
 * it is used through.
 *
 * The store is a file of 4 KiB pages holding 64-bit words. A word with its top bit set is a
 * persistent pointer: SWZ_TAG | page << 12 | offset. Every other word is data and must not
 * have the top bit set (nor, while the store is open, a value inside the window's range).
 *
 * A session (swz_open) maps a window of window_bytes, much smaller than the store if it
 * likes, as a pager region (docs/pager.md) whose store is this module: a window page is
 * filled by reading its persistent page and swizzling every persistent pointer in it into
 * a window address, reserving a window page for each page pointed to (not reading it: that
 * waits for the first access, which faults). A dirty page is unswizzled on its way back to
 * the file. So the program follows plain C pointers through a structure whose total size
 * is limited by the file, not by the window; only the pages a session reaches, and the
 * pages they point to, take window space. When the window is full the next page cannot be
 * reserved: swz_window_free() tells how much is left, and closing and reopening starts a
 * new session with an empty window (what Wilson's scheme does between program runs).
 *
 * Calls return 0 or a negative exomem error code (errno set, exomem_last_error() says why).
 * A session's window may be read and written by any thread; its calls are not thread-safe
 * against each other.
 */
#ifndef EXOMEM_SWIZZLE_H
#define EXOMEM_SWIZZLE_H

#include <stdint.h>

#define SWZ_PAGE 4096u
#define SWZ_TAG (UINT64_C(1) << 63)

/* The persistent pointer to `offset` bytes into persistent page `page`. */
static inline uint64_t swz_pptr(uint64_t page, uint64_t offset)
{
    return SWZ_TAG | page << 12 | offset;
}

typedef struct swz swz;

struct swz_stats {
    uint64_t window_pages;   /* window size in pages */
    uint64_t reserved;       /* window pages assigned to persistent pages this session */
    uint64_t faults;         /* persistent pages read in (and swizzled) */
    uint64_t swizzled;       /* pointers swizzled on the way in */
    uint64_t written_back;   /* pages unswizzled and written to the file */
};

/* Open a session on store file `path` (an existing file of whole pages) through a window
 * of window_bytes (a multiple of 4 KiB, at least 2 pages) of which budget bytes may be
 * resident. -EXO_EINVAL, -EXO_ENOENT (no file), -EXO_ENOTSUP (no userfaultfd), -EXO_ENOMEM. */
int swz_open(const char *path, uint64_t window_bytes, uint64_t budget, swz **out);

/* The window address of persistent page 0, offset 0: the store's root. */
void *swz_root(swz *s);

/* Window pages not yet assigned this session. */
uint64_t swz_window_free(const swz *s);

/* Fill *out. */
void swz_get_stats(const swz *s, struct swz_stats *out);

/* Why the last fault the session could not serve failed ("" if none). */
const char *swz_last_failure(const swz *s);

/* Write every dirty page back (unswizzled) and end the session. NULL is a no-op. -EXO_EIO
 * when a page could not be written. */
int swz_close(swz *s);

/* ---- a persistent binary search tree, the demonstration's structure ---- */

/* A node: 64 bytes, 64 to a page. left/right are pointers (persistent in the file,
 * swizzled in the window); key and value are data (below 2^62). */
struct swz_node {
    uint64_t key, value;
    struct swz_node *left, *right;
    uint64_t pad[4];
};

/* Write a complete search tree of `nodes` nodes (keys 0, 2, 4, ...; value = key * 3) to a
 * new file `path`, breadth first from page 0 (so the root is the store's root). */
int swz_build_tree(const char *path, uint64_t nodes);

/* The node with `key` under root, or NULL. */
struct swz_node *swz_tree_find(struct swz_node *root, uint64_t key);

#endif
