/* The public per-segment heap calls (exomem/alloc.h): find the heap of a segment visible in
 * the current address space (src/vas/view.h) and run the in-region heap (heap.c) on it.
 *
 * Each call runs inside exo_view_enter()/exo_view_leave(): the view it looked up holds until
 * it returns, so a vas_switch() in another thread waits for it rather than unmapping the heap
 * under it, and the lookup itself takes no lock in the common case. Opening an already
 * formatted heap only validates a few header fields. */
#include "alloc/heap.h"
#include "alloc/thread_cache.h"
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

/* The heap of segment sid in view v. A writable segment is formatted on first use; a
 * read-only one that was never formatted gives *h = NULL. need_write refuses read-only. */
static int heap_of(const struct exo_view *v, segid_t sid, bool need_write, struct exo_heap **h,
                   bool *writable)
{
    const struct exo_view_seg *vs;
    int rc = exo_view_find(v, sid, &vs);
    if (rc)
        return rc;
    if (!vs->writable && need_write)
        return exo_fail(EXO_EACCES, "segment %" PRIu64 " is attached read-only", sid);
    void *b = (void *)(uintptr_t)vs->base;
    rc = vs->writable ? exo_heap_open(b, vs->size, h) : exo_heap_open_ro(b, vs->size, h);
    if (rc)
        return exo_fail(-rc, "segment %" PRIu64 ": %s", sid,
                        rc == -EXO_ECORRUPT ? "heap header is corrupt or from another layout"
                                            : "too small to hold a heap");
    if (writable)
        *writable = vs->writable;
    return 0;
}

/* The writable heap in view v that handed out p, and its segment. */
static int heap_at(const struct exo_view *v, const void *p, struct exo_heap **h, segid_t *sid)
{
    const struct exo_view_seg *vs;
    if (exo_view_find_at(v, p, &vs))
        return exo_fail(EXO_EINVAL, "%p is in no visible segment", p);
    if (!vs->writable)
        return exo_fail(EXO_EACCES, "%p is in segment %" PRIu64 ", attached read-only", p,
                        vs->sid);
    int rc = exo_heap_open((void *)(uintptr_t)vs->base, vs->size, h);
    if (rc)
        return exo_fail(-rc, "segment %" PRIu64 ": heap header is corrupt", vs->sid);
    if (!exo_heap_owns(*h, p))
        return exo_fail(EXO_EINVAL, "%p is in segment %" PRIu64 " but not in its heap", p,
                        vs->sid);
    *sid = vs->sid;
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

/* seg_malloc() inside a view the caller entered. */
static void *malloc_in(const struct exo_view *v, segid_t sid, size_t size)
{
    struct exo_heap *h;
    int rc = heap_of(v, sid, true, &h, NULL);
    if (rc)
        return alloc_failed(rc);
    void *p = exo_tcache_malloc(v, h, sid, size, &rc);
    if (!p)
        return alloc_failed(heap_failed(sid, rc, size));
    return p;
}

/* The allocation for n*size zeroed bytes; sid 0 means the current VAS's heap. */
static void *calloc_in(segid_t sid, size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total))
        return alloc_failed(exo_fail(EXO_ENOMEM, "calloc of %zu x %zu bytes overflows", n,
                                     size));
    const struct exo_view *v = exo_view_enter();
    int rc = sid ? 0 : exo_view_heap(v, &sid);
    void *p = rc ? alloc_failed(rc) : malloc_in(v, sid, total);
    if (p)
        memset(p, 0, total);   /* inside the view: the segment cannot go meanwhile */
    exo_view_leave(v);
    return p;
}

EXO_API void *seg_malloc(segid_t sid, size_t size)
{
    const struct exo_view *v = exo_view_enter();
    void *p = malloc_in(v, sid, size);
    exo_view_leave(v);
    return p;
}

EXO_API void *seg_calloc(segid_t sid, size_t n, size_t size)
{
    if (!sid)
        return alloc_failed(exo_fail(EXO_ENOTMAPPED, "segment 0 is not visible in the "
                                     "current address space"));
    return calloc_in(sid, n, size);
}

EXO_API void *seg_memalign(segid_t sid, size_t align, size_t size)
{
    if (align == 0 || (align & (align - 1)))
        return alloc_failed(exo_fail(EXO_EINVAL, "alignment %zu is not a power of two",
                                     align));
    const struct exo_view *v = exo_view_enter();
    struct exo_heap *h;
    int rc = heap_of(v, sid, true, &h, NULL);
    void *p = NULL;
    if (rc)
        alloc_failed(rc);
    else if (!(p = exo_heap_memalign(h, align, size, &rc)))
        alloc_failed(heap_failed(sid, rc, size));
    exo_view_leave(v);
    return p;
}

EXO_API void *seg_realloc(void *p, size_t size)
{
    if (!p)
        return alloc_failed(exo_fail(EXO_EINVAL, "seg_realloc of NULL: use seg_malloc"));
    const struct exo_view *v = exo_view_enter();
    struct exo_heap *h = NULL;
    segid_t sid = 0;   /* set by heap_at() when it returns 0 (-O3 cannot see that) */
    int rc = heap_at(v, p, &h, &sid);
    void *q = NULL;
    if (rc) {
        alloc_failed(rc);
    } else {
        q = exo_heap_realloc(h, p, size, &rc);
        if (!q && rc)
            alloc_failed(exo_fail(-rc, "seg_realloc(%p, %zu): %s", p, size,
                                  exomem_strerror(rc)));
    }
    exo_view_leave(v);
    return q;
}

EXO_API int seg_free(void *p)
{
    if (!p)
        return 0;
    const struct exo_view *v = exo_view_enter();
    struct exo_heap *h = NULL;
    segid_t sid = 0;   /* set by heap_at() when it returns 0 (-O3 cannot see that) */
    int rc = heap_at(v, p, &h, &sid);
    if (!rc) {
        rc = exo_tcache_free(v, h, sid, p);
        if (rc == -EXO_EINVAL)
            rc = exo_fail(EXO_EINVAL, "seg_free(%p): not a live allocation (double free?)", p);
        else if (rc)
            rc = exo_fail(-rc, "seg_free(%p): the heap around it is corrupt", p);
    }
    exo_view_leave(v);
    return rc;
}

EXO_API size_t seg_malloc_usable_size(void *p)
{
    if (!p)
        return 0;
    const struct exo_view *v = exo_view_enter();
    const struct exo_view_seg *vs;
    struct exo_heap *h = NULL;
    size_t n = 0;
    if (exo_view_find_at(v, p, &vs) == 0 &&
        exo_heap_open_ro((const void *)(uintptr_t)vs->base, vs->size, &h) == 0 && h &&
        exo_heap_owns(h, p))
        n = exo_heap_usable_size(h, p);
    exo_view_leave(v);
    return n;
}

EXO_API int seg_set_root(segid_t sid, void *root)
{
    const struct exo_view *v = exo_view_enter();
    struct exo_heap *h;
    int rc = heap_of(v, sid, true, &h, NULL);
    if (!rc)
        rc = exo_heap_set_root(h, root);
    exo_view_leave(v);
    return rc;
}

EXO_API int seg_get_root(segid_t sid, void **root)
{
    if (!root)
        return exo_fail(EXO_EINVAL, "seg_get_root: root is NULL");
    const struct exo_view *v = exo_view_enter();
    struct exo_heap *h;
    int rc = heap_of(v, sid, false, &h, NULL);
    if (!rc)
        *root = h ? exo_heap_get_root(h) : NULL;
    exo_view_leave(v);
    return rc;
}

EXO_API int seg_heap_stats(segid_t sid, struct seg_heap_stats *st)
{
    if (!st)
        return exo_fail(EXO_EINVAL, "seg_heap_stats: st is NULL");
    const struct exo_view *v = exo_view_enter();
    struct exo_heap *h;
    bool writable = false;
    int rc = heap_of(v, sid, false, &h, &writable);
    if (!rc) {
        memset(st, 0, sizeof *st);
        if (h && writable)
            exo_tcache_flush(h, sid);   /* this thread's cached chunks count as free anyway */
        if (h)   /* else read-only and never formatted: an empty heap */
            rc = writable ? exo_heap_check(h, st) : exo_heap_check_nolock(h, st);
        if (rc)
            rc = exo_fail(-rc, "segment %" PRIu64 ": heap is corrupt", sid);
    }
    exo_view_leave(v);
    return rc;
}

EXO_API void *vas_malloc(size_t size)
{
    const struct exo_view *v = exo_view_enter();
    segid_t sid;
    int rc = exo_view_heap(v, &sid);
    void *p = rc ? alloc_failed(rc) : malloc_in(v, sid, size);
    exo_view_leave(v);
    return p;
}

EXO_API void *vas_calloc(size_t n, size_t size)
{
    return calloc_in(0, n, size);
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
