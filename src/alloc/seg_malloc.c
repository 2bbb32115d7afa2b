/* The public per-segment heap calls (exomem/alloc.h): find the heap of a segment visible in
 * the current address space (src/vas/view.h) and run the in-region heap (heap.c) on it.
 *
 * Nothing is cached per segment: opening an already formatted heap only validates a few
 * header fields, and the view can change under us at any vas_switch(). */
#include "alloc/heap.h"
#include "internal.h"
#include "vas/view.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static _Thread_local int last_code;

/* Record a failed allocating call (rc is a negative code, errno already set). */
static void *alloc_failed(int rc)
{
    last_code = rc;
    return NULL;
}

/* The heap of visible segment sid. A writable segment is formatted on first use; a
 * read-only one that was never formatted gives *h = NULL. need_write refuses read-only. */
static int heap_of(segid_t sid, bool need_write, struct exo_heap **h, bool *writable)
{
    uint64_t base, size;
    bool w;
    int rc = exo_vas_visible(sid, &base, &size, &w);
    if (rc)
        return rc;
    if (!w && need_write)
        return exo_fail(EXO_EACCES, "segment %" PRIu64 " is attached read-only", sid);
    void *b = (void *)(uintptr_t)base;
    rc = w ? exo_heap_open(b, size, h) : exo_heap_open_ro(b, size, h);
    if (rc)
        return exo_fail(-rc, "segment %" PRIu64 ": %s", sid,
                        rc == -EXO_ECORRUPT ? "heap header is corrupt or from another layout"
                                            : "too small to hold a heap");
    if (writable)
        *writable = w;
    return 0;
}

/* The writable heap that handed out p. */
static int heap_at(const void *p, struct exo_heap **h)
{
    segid_t sid;
    uint64_t base, size;
    bool w;
    if (exo_vas_visible_at(p, &sid, &base, &size, &w))
        return exo_fail(EXO_EINVAL, "%p is in no visible segment", p);
    if (!w)
        return exo_fail(EXO_EACCES, "%p is in segment %" PRIu64 ", attached read-only", p, sid);
    int rc = exo_heap_open((void *)(uintptr_t)base, size, h);
    if (rc)
        return exo_fail(-rc, "segment %" PRIu64 ": heap header is corrupt", sid);
    if (!exo_heap_owns(*h, p))
        return exo_fail(EXO_EINVAL, "%p is in segment %" PRIu64 " but not in its heap", p, sid);
    return 0;
}

/* exo_fail() for a heap call that failed with code on the heap `what` names. */
static int heap_failed_in(const char *what, int code, size_t size)
{
    switch (-code) {
    case EXO_ENOMEM:
        return exo_fail(EXO_ENOMEM, "%s: no free space for %zu bytes", what, size);
    case EXO_EINVAL:
        return exo_fail(EXO_EINVAL, "%s: not an allocation of this heap (or already freed), "
                        "or a bad alignment", what);
    default:
        return exo_fail(-code, "%s: heap is corrupt", what);
    }
}

static int heap_failed(segid_t sid, int code, size_t size)
{
    char what[40];
    snprintf(what, sizeof what, "segment %" PRIu64, sid);
    return heap_failed_in(what, code, size);
}

EXO_API void *seg_malloc(segid_t sid, size_t size)
{
    struct exo_heap *h;
    int rc = heap_of(sid, true, &h, NULL);
    if (rc)
        return alloc_failed(rc);
    void *p = exo_heap_malloc(h, size, &rc);
    if (!p)
        return alloc_failed(heap_failed(sid, rc, size));
    return p;
}

EXO_API void *seg_calloc(segid_t sid, size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total))
        return alloc_failed(exo_fail(EXO_ENOMEM, "calloc of %zu x %zu bytes overflows", n,
                                     size));
    void *p = seg_malloc(sid, total);
    if (p)
        memset(p, 0, total);
    return p;
}

EXO_API void *seg_memalign(segid_t sid, size_t align, size_t size)
{
    if (align == 0 || (align & (align - 1)))
        return alloc_failed(exo_fail(EXO_EINVAL, "alignment %zu is not a power of two",
                                     align));
    struct exo_heap *h;
    int rc = heap_of(sid, true, &h, NULL);
    if (rc)
        return alloc_failed(rc);
    void *p = exo_heap_memalign(h, align, size, &rc);
    if (!p)
        return alloc_failed(heap_failed(sid, rc, size));
    return p;
}

EXO_API void *seg_realloc(void *p, size_t size)
{
    if (!p)
        return alloc_failed(exo_fail(EXO_EINVAL, "seg_realloc of NULL: use seg_malloc"));
    struct exo_heap *h;
    int rc = heap_at(p, &h);
    if (rc)
        return alloc_failed(rc);
    void *q = exo_heap_realloc(h, p, size, &rc);
    if (!q && rc)
        return alloc_failed(exo_fail(-rc, "seg_realloc(%p, %zu): %s", p, size,
                                     exomem_strerror(rc)));
    return q;
}

EXO_API int seg_free(void *p)
{
    if (!p)
        return 0;
    struct exo_heap *h;
    int rc = heap_at(p, &h);
    if (rc)
        return rc;
    rc = exo_heap_free(h, p);
    if (rc == -EXO_EINVAL)
        return exo_fail(EXO_EINVAL, "seg_free(%p): not a live allocation (double free?)", p);
    if (rc)
        return exo_fail(-rc, "seg_free(%p): the heap around it is corrupt", p);
    return 0;
}

EXO_API size_t seg_malloc_usable_size(void *p)
{
    segid_t sid;
    uint64_t base, size;
    bool w;
    struct exo_heap *h = NULL;
    if (!p || exo_vas_visible_at(p, &sid, &base, &size, &w) != 0)
        return 0;
    const void *b = (const void *)(uintptr_t)base;
    if (exo_heap_open_ro(b, size, &h) != 0 || !h || !exo_heap_owns(h, p))
        return 0;
    return exo_heap_usable_size(h, p);
}

EXO_API int seg_set_root(segid_t sid, void *root)
{
    struct exo_heap *h;
    int rc = heap_of(sid, true, &h, NULL);
    return rc ? rc : exo_heap_set_root(h, root);
}

EXO_API int seg_get_root(segid_t sid, void **root)
{
    if (!root)
        return exo_fail(EXO_EINVAL, "seg_get_root: root is NULL");
    struct exo_heap *h;
    int rc = heap_of(sid, false, &h, NULL);
    if (rc)
        return rc;
    *root = h ? exo_heap_get_root(h) : NULL;
    return 0;
}

EXO_API int seg_heap_stats(segid_t sid, struct seg_heap_stats *st)
{
    if (!st)
        return exo_fail(EXO_EINVAL, "seg_heap_stats: st is NULL");
    struct exo_heap *h;
    bool writable = false;
    int rc = heap_of(sid, false, &h, &writable);
    if (rc)
        return rc;
    memset(st, 0, sizeof *st);
    if (!h)
        return 0;   /* read-only and never formatted: an empty heap */
    rc = writable ? exo_heap_check(h, st) : exo_heap_check_nolock(h, st);
    if (rc)
        return exo_fail(-rc, "segment %" PRIu64 ": heap is corrupt", sid);
    return 0;
}

EXO_API void *vas_malloc(size_t size)
{
    segid_t sid;
    int rc = exo_vas_current_heap(&sid);
    return rc ? alloc_failed(rc) : seg_malloc(sid, size);
}

EXO_API void *vas_calloc(size_t n, size_t size)
{
    segid_t sid;
    int rc = exo_vas_current_heap(&sid);
    return rc ? alloc_failed(rc) : seg_calloc(sid, n, size);
}

EXO_API int seg_heap_last_code(void)
{
    return last_code;
}

/* ---- a heap in memory the caller maps itself ---- */

EXO_API int seg_heap_open(void *base, size_t size, seg_heap **heap)
{
    exo_clear_error();
    if (!base || !heap)
        return exo_fail(EXO_EINVAL, "seg_heap_open: base or heap is NULL");
    int rc = exo_heap_open(base, size, heap);
    if (rc == -EXO_ECORRUPT)
        return exo_fail(EXO_ECORRUPT, "heap at %p: its header is not a heap's of %zu bytes",
                        base, size);
    if (rc)
        return exo_fail(-rc, "heap at %p: %zu bytes cannot hold a heap", base, size);
    return 0;
}

EXO_API void *seg_heap_malloc(seg_heap *heap, size_t size)
{
    if (!heap)
        return alloc_failed(exo_fail(EXO_EINVAL, "seg_heap_malloc: heap is NULL"));
    int rc;
    void *p = exo_heap_malloc(heap, size, &rc);
    if (!p) {
        char what[48];
        snprintf(what, sizeof what, "heap at %p", (void *)heap);
        return alloc_failed(heap_failed_in(what, rc, size));
    }
    return p;
}

EXO_API int seg_heap_free(seg_heap *heap, void *p)
{
    if (!p)
        return 0;
    if (!heap)
        return exo_fail(EXO_EINVAL, "seg_heap_free: heap is NULL");
    int rc = exo_heap_free(heap, p);
    if (rc == -EXO_EINVAL)
        return exo_fail(EXO_EINVAL, "seg_heap_free(%p): not a live allocation of the heap at "
                        "%p (double free?)", p, (void *)heap);
    if (rc)
        return exo_fail(-rc, "seg_heap_free(%p): the heap at %p is corrupt", p, (void *)heap);
    return 0;
}

EXO_API int seg_heap_owns(seg_heap *heap, const void *p)
{
    return heap && p && exo_heap_owns(heap, p);
}

EXO_API int seg_heap_check(seg_heap *heap, struct seg_heap_stats *st)
{
    exo_clear_error();
    if (!heap)
        return exo_fail(EXO_EINVAL, "seg_heap_check: heap is NULL");
    int rc = exo_heap_check(heap, st);
    if (rc)
        return exo_fail(-rc, "heap at %p is corrupt", (void *)heap);
    return 0;
}
