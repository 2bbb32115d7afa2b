/* guardheap: heap-overflow detection with a guard page (Appel and Li, "Virtual memory
 * primitives for user programs", application 6).
 *
 * A bump allocator with size-class free lists over a reserved address range of max_bytes.
 * Only the first `committed` bytes are accessible; the pages after them are protected
 * (EXO_VM_NOACCESS): together they are the guard. Two ways to notice that the heap must grow:
 *
 *   GH_GUARD  the allocator bumps its pointer and writes the object's header without looking
 *             at any bound. When the header (or any later store into the object) lands in the
 *             guard, the fault handler commits more pages (one exo_vm_protect call), moves the
 *             guard and resumes the store. A store past max_bytes is declined by the handler,
 *             so the program dies of SIGSEGV as with any wild write: a real heap overflow.
 *   GH_CHECK  the usual way: compare the bump pointer with the committed end on every
 *             allocation and commit more before writing; returns NULL past max_bytes.
 *
 * Both commit in the same steps with the same call, so for the same sequence of calls they
 * return the same addresses (relative to the heap base) and end with the same committed size.
 * Small objects (<= GH_SMALL_MAX bytes) come from 16-byte size classes; larger ones are
 * bump-allocated with an explicit bound check in both modes (a large object could jump over
 * the guard) and are never reused. One thread per heap: the fault handler updates the heap
 * without locks, which is safe because only the allocating thread can fault on its guard.
 */
#ifndef EXOMEM_GUARDHEAP_H
#define EXOMEM_GUARDHEAP_H

#include <exomem/error.h>
#include <exomem/vm.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GH_SMALL_MAX 1024u  /* largest size served from a size class */
#define GH_HEADER 16u       /* bytes before each object: its size class */
#define GH_CLASSES (GH_SMALL_MAX / 16u + 1u)

typedef enum gh_mode {
    GH_GUARD = 0, /* grow from the fault handler; no bound check when allocating */
    GH_CHECK = 1, /* check the bound on every allocation */
} gh_mode;

/* How a heap is made. Zero-initialise; zero sizes take the defaults. */
typedef struct gh_options {
    size_t max_bytes;     /* the heap never grows past this (default 64 MiB) */
    size_t initial_bytes; /* committed at creation (default one growth step) */
    size_t grow_bytes;    /* committed per growth step (default one page) */
    gh_mode mode;
    exo_vm_engine engine; /* EXO_VM_ENGINE_AUTO means signal (the guard must trap writes of
                             never-touched pages; uffd also works, read-only guard) */
} gh_options;

/* Counters, read with gh_stats(). */
typedef struct gh_stats {
    unsigned long faults;   /* guard faults the handler resolved */
    unsigned long grows;    /* growth steps (faults or failed checks) */
    size_t committed;       /* accessible bytes */
    size_t used;            /* bytes handed out by the bump pointer, headers included */
} gh_stats;

struct gh_free_obj { struct gh_free_obj *next; };

/* A heap. The fields are public only so that the fast paths below can be inlined. */
typedef struct guardheap {
    char *top;              /* next free byte (bump pointer) */
    char *limit;            /* end of the committed part: the guard starts here */
    char *base;
    size_t max_bytes, grow_bytes, map_bytes, initial_bytes;
    gh_mode mode;
    int guard_access;       /* EXO_VM_NOACCESS, or EXO_VM_READONLY with uffd */
    exo_vm_region *region;
    unsigned long faults, grows;
    struct gh_free_obj *free_list[GH_CLASSES];
} guardheap;

/* Reserve and set up a heap; 0 or a negative exomem error code (EXO_EINVAL for bad sizes,
 * EXO_ENOMEM, or the region's error, e.g. EXO_ENOTSUP for a missing engine). */
int gh_create(const gh_options *opt, guardheap **out);

/* Free every object at once: the bump pointer goes back to the base and the heap shrinks to
 * its initial size (the rest becomes guard again; the pages keep their memory). */
int gh_reset(guardheap *h);

/* Unmap the heap and free it; every pointer it gave out dies with it. */
int gh_destroy(guardheap *h);

/* Commit the heap up to at least `end` (within max_bytes), in growth steps; 0 or a negative
 * exomem error code (EXO_ENOMEM past max_bytes). Async-signal-safe: the fault handler uses it. */
int gh_commit_to(guardheap *h, const char *end);

/* The slow path for objects larger than GH_SMALL_MAX (checked in both modes); NULL when the
 * heap is full. */
void *gh_alloc_large(guardheap *h, size_t size);

/* Counters and sizes. */
gh_stats gh_get_stats(const guardheap *h);

/* The size class of a small request: its size in 16-byte units (0 bytes counts as 16). */
static inline size_t gh_class_of(size_t size) { return size ? (size + 15u) >> 4 : 1u; }

/* A freed small object of class `cls` to reuse, or NULL when that free list is empty. */
static inline void *gh_pop_free(guardheap *h, size_t cls)
{
    struct gh_free_obj *f = h->free_list[cls];
    if (f)
        h->free_list[cls] = f->next;
    return f;
}

/* Both allocation paths: a large object, a reused one of the request's size class, or a
 * bump of h->top. With `bound_check` (a constant wherever this is inlined) the bump is
 * compared with the committed end first and NULL comes back when the heap is full; without,
 * the header store may trap into the guard, which commits more. */
static inline void *gh_alloc_path(guardheap *h, size_t size, bool bound_check)
{
    if (size > GH_SMALL_MAX)
        return gh_alloc_large(h, size);
    size_t cls = gh_class_of(size);
    void *reused = gh_pop_free(h, cls);
    if (reused)
        return reused;
    char *p = h->top;
    char *end = p + GH_HEADER + (cls << 4);
    if (bound_check && __builtin_expect(end > h->limit, 0) && gh_commit_to(h, end) != 0)
        return NULL;
    h->top = end;
    *(volatile uint64_t *)p = cls; /* GH_GUARD: the store that meets the guard */
    return p + GH_HEADER;
}

/* GH_GUARD allocation: no bound check; the header store may trap into the guard. */
static inline void *gh_alloc_guard(guardheap *h, size_t size)
{
    return gh_alloc_path(h, size, false);
}

/* GH_CHECK allocation: compare with the committed end first; NULL when the heap is full. */
static inline void *gh_alloc_check(guardheap *h, size_t size)
{
    return gh_alloc_path(h, size, true);
}

/* Allocate `size` bytes (16-byte aligned) the way the heap's mode says. */
static inline void *gh_alloc(guardheap *h, size_t size)
{
    return h->mode == GH_GUARD ? gh_alloc_guard(h, size) : gh_alloc_check(h, size);
}

/* Give a small object back to its size class (large objects are not reused); NULL is a no-op. */
static inline void gh_free(guardheap *h, void *ptr)
{
    if (!ptr)
        return;
    uint64_t cls = *(uint64_t *)((char *)ptr - GH_HEADER);
    if (cls == 0 || cls >= GH_CLASSES)
        return; /* large */
    struct gh_free_obj *f = ptr;
    f->next = h->free_list[cls];
    h->free_list[cls] = f;
}

#endif
