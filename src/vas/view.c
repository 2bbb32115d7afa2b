/* What the allocator needs to know about the current view (src/vas/view.h). */
#include "vas/view.h"
#include "internal.h"
#include "vas/space.h"

static void describe(const struct pseg *ps, uint64_t *base, uint64_t *size, bool *writable)
{
    if (base)
        *base = ps->base;
    if (size)
        *size = ps->size;
    if (writable)
        *writable = ps->access == EXO_ACCESS_RW;
}

int exo_vas_visible(segid_t sid, uint64_t *base, uint64_t *size, bool *writable)
{
    struct space *s = exo_space();
    pthread_mutex_lock(&s->lock);
    struct pseg *ps = exo_space_pseg(s, sid);
    bool shown = ps && ps->where == PSEG_VISIBLE;
    if (shown)
        describe(ps, base, size, writable);
    pthread_mutex_unlock(&s->lock);
    if (!shown)
        return exo_fail(EXO_ENOTMAPPED, "segment %llu is not visible in the current address "
                        "space", (unsigned long long)sid);
    return 0;
}

int exo_vas_visible_at(const void *p, segid_t *sid, uint64_t *base, uint64_t *size,
                       bool *writable)
{
    uint64_t addr = (uint64_t)p;
    struct space *s = exo_space();
    pthread_mutex_lock(&s->lock);
    struct pseg *found = NULL;
    for (size_t i = 0; i < s->npsegs && !found; i++) {
        struct pseg *ps = s->psegs[i];
        if (ps->where == PSEG_VISIBLE && addr >= ps->base && addr - ps->base < ps->size)
            found = ps;
    }
    if (found) {
        if (sid)
            *sid = found->sid;
        describe(found, base, size, writable);
    }
    pthread_mutex_unlock(&s->lock);
    if (!found)
        return exo_fail(EXO_ENOTMAPPED, "address %p is in no visible segment", p);
    return 0;
}

int exo_vas_current_heap(segid_t *sid)
{
    struct space *s = exo_space();
    pthread_mutex_lock(&s->lock);
    const struct attachment *a = s->current;
    int rc = 0;
    if (!a) {
        rc = exo_fail(EXO_ENOTMAPPED, "vas_malloc at home: switch into a VAS first");
    } else if (a->heap) {
        *sid = a->heap;
    } else {
        rc = -EXO_ENOHEAP;
        for (unsigned i = 0; i < a->nsegs && rc; i++) {
            if (a->segs[i].flags == SEG_RDWR) {
                *sid = a->segs[i].ps->sid;
                rc = 0;
            }
        }
        if (rc)
            rc = exo_fail(EXO_ENOHEAP, "VAS '%s' has no read-write segment for a heap",
                          a->name);
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}
