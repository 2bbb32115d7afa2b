/* The calling process's side of VASes: attach, detach, switch, local segments, vas_ctl. */
#include "internal.h"
#include "seg/vas_record.h"
#include "vas/space.h"
#include "vas/vas_internal.h"
#include "vas/view.h"

#include <stdlib.h>
#include <string.h>

static struct attachment *free_slot(struct space *s)
{
    for (size_t i = 0; i < VAS_ATTACH_MAX; i++)
        if (!s->att[i].handle)
            return &s->att[i];
    return NULL;
}

static void drop_segments(struct space *s, struct attachment *a)
{
    while (a->nsegs > 0)
        exo_pseg_put(s, a->segs[--a->nsegs].ps);
}

EXO_API int vas_attach(vasid_t vid, vhandle_t *vh)
{
    exo_clear_error();
    if (!vh)
        return exo_fail(EXO_EINVAL, "vas_attach: vh is NULL");
    struct exo_vas_rec rec;
    int rc = exo_vas_rec_load(vid, &rec);
    if (rc)
        return rc;
    struct space *s = exo_space();
    pthread_mutex_lock(&s->lock);
    struct attachment *a = free_slot(s);
    if (!a) {
        pthread_mutex_unlock(&s->lock);
        return exo_fail(EXO_ETOOMANY, "this process has %d VASes attached already",
                        VAS_ATTACH_MAX);
    }
    memset(a, 0, sizeof *a);
    for (uint32_t i = 0; i < rec.nsegs && !rc; i++) {
        struct pseg *ps;
        int access = exo_vas_rec_access(&rec.segs[i]);
        rc = exo_pseg_get(s, rec.segs[i].sid, access, &ps);
        if (!rc)
            a->segs[a->nsegs++] = (struct attach_seg){ps, access, false};
    }
    if (rc) {
        drop_segments(s, a);
    } else {
        a->handle = s->next_handle++;
        a->vid = vid;
        a->heap = rec.heap;
        memcpy(a->name, rec.name, sizeof a->name);
        *vh = a->handle;
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static struct attachment *attached(struct space *s, vhandle_t vh)
{
    struct attachment *a = exo_space_find(s, vh);
    if (!a)
        exo_fail(EXO_EDETACHED, "handle %d is not an attached VAS of this process", vh);
    return a;
}

EXO_API int vas_detach(vhandle_t vh)
{
    exo_clear_error();
    struct space *s = exo_space();
    pthread_mutex_lock(&s->lock);
    exo_view_change_begin();
    struct attachment *a = attached(s, vh);
    int rc = a ? 0 : -EXO_EDETACHED;
    if (a && s->current == a)
        rc = exo_space_switch(s, NULL, true);
    if (!rc) {
        drop_segments(s, a);
        a->handle = 0;
    }
    exo_view_change_end();
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static int do_switch(vhandle_t vh, bool wait)
{
    exo_clear_error();
    struct space *s = exo_space();
    pthread_mutex_lock(&s->lock);
    struct attachment *to = NULL;
    int rc = 0;
    if (vh != VAS_HOME && !(to = attached(s, vh)))
        rc = -EXO_EDETACHED;
    if (!rc) {
        exo_view_change_begin();
        rc = exo_space_switch(s, to, wait);
        exo_view_change_end();
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

EXO_API int vas_switch(vhandle_t vh)
{
    return do_switch(vh, true);
}

EXO_API int vas_try_switch(vhandle_t vh)
{
    return do_switch(vh, false);
}

EXO_API vhandle_t vas_current(void)
{
    struct space *s = exo_space();
    pthread_mutex_lock(&s->lock);
    vhandle_t vh = s->current ? s->current->handle : VAS_HOME;
    pthread_mutex_unlock(&s->lock);
    return vh;
}

static bool overlaps_any(const struct attachment *a, const struct pseg *ps)
{
    for (unsigned i = 0; i < a->nsegs; i++) {
        const struct pseg *o = a->segs[i].ps;
        if (o->base < ps->base + ps->size && ps->base < o->base + o->size)
            return true;
    }
    return false;
}

EXO_API int seg_attach_local(vhandle_t vh, segid_t sid, int flags)
{
    exo_clear_error();
    if (flags != SEG_RDWR && flags != SEG_RDONLY)
        return exo_fail(EXO_EINVAL, "seg_attach_local: flags %#x are neither SEG_RDONLY nor "
                        "SEG_RDWR", (unsigned)flags);
    struct space *s = exo_space();
    pthread_mutex_lock(&s->lock);
    struct attachment *a = attached(s, vh);
    int rc = a ? 0 : -EXO_EDETACHED;
    for (unsigned i = 0; !rc && i < a->nsegs; i++)
        if (a->segs[i].ps->sid == sid)
            rc = exo_fail(EXO_EEXIST, "VAS '%s' has segment %llu already", a->name,
                          (unsigned long long)sid);
    if (!rc && a->nsegs >= VAS_SEGS_MAX)
        rc = exo_fail(EXO_ETOOMANY, "VAS '%s' has %d segments already", a->name,
                      VAS_SEGS_MAX);
    struct pseg *ps = NULL;
    if (!rc)
        rc = exo_pseg_get(s, sid, flags, &ps);
    if (!rc && overlaps_any(a, ps)) {
        rc = exo_fail(EXO_EOVERLAP, "segment '%s' overlaps a segment of VAS '%s'", ps->name,
                      a->name);
        exo_pseg_put(s, ps);
    }
    bool shown = !rc && s->current == a;
    if (shown)
        exo_view_change_begin();
    if (shown) {
        /* The VAS is current, so the segment becomes visible at once, locked first as a
         * switch would. Not waiting for the lock keeps the global lock order safe. */
        enum exo_lock_mode want = flags == SEG_RDONLY ? EXO_LOCK_SHARED : EXO_LOCK_EXCLUSIVE;
        if (s->locking && ps->lock != want) {
            rc = exo_os_lock(ps->fd, want, false);
            if (rc)
                rc = exo_fail(-rc, "segment '%s': cannot lock it", ps->name);
            else
                ps->lock = want;
        }
        if (!rc && (rc = exo_space_show(s, ps, flags)) != 0) {
            exo_os_unlock(ps->fd);
            ps->lock = EXO_LOCK_NONE;
        }
        if (rc)
            exo_pseg_put(s, ps);
    }
    if (!rc)
        a->segs[a->nsegs++] = (struct attach_seg){ps, flags, true};
    if (shown)
        exo_view_change_end();
    pthread_mutex_unlock(&s->lock);
    return rc;
}

EXO_API int seg_detach_local(vhandle_t vh, segid_t sid)
{
    exo_clear_error();
    struct space *s = exo_space();
    pthread_mutex_lock(&s->lock);
    struct attachment *a = attached(s, vh);
    int rc = a ? 0 : -EXO_EDETACHED;
    unsigned i = 0;
    while (!rc && i < a->nsegs && a->segs[i].ps->sid != sid)
        i++;
    if (!rc && i == a->nsegs)
        rc = exo_fail(EXO_ENOENT, "VAS '%s' has no segment %llu", a->name,
                      (unsigned long long)sid);
    else if (!rc && !a->segs[i].local)
        rc = exo_fail(EXO_EINVAL, "segment %llu of VAS '%s' is listed in the VAS itself; use "
                      "seg_detach()", (unsigned long long)sid, a->name);
    if (!rc) {
        struct pseg *ps = a->segs[i].ps;
        exo_view_change_begin();
        memmove(&a->segs[i], &a->segs[i + 1], (a->nsegs - i - 1) * sizeof a->segs[0]);
        a->nsegs--;
        if (s->current == a)
            exo_space_hide(s, ps);
        exo_pseg_put(s, ps);
        exo_view_change_end();
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static int process_ctl(struct space *s, int cmd, void *arg)
{
    switch (cmd) {
    case VAS_CTL_SET_ENGINE: {
        int e = *(const int *)arg;
        if (e != VAS_ENGINE_PARK && e != VAS_ENGINE_REMAP && e != VAS_ENGINE_KEEP)
            return exo_fail(EXO_EINVAL, "unknown switch engine %d", e);
        if (s->current)
            return exo_fail(EXO_EINUSE, "the switch engine can change only at home");
        if (e != VAS_ENGINE_KEEP)
            exo_space_drop_kept(s);
        s->engine = e;
        return 0;
    }
    case VAS_CTL_GET_ENGINE:
        *(int *)arg = s->engine;
        return 0;
    case VAS_CTL_SET_PARK_LIMIT:
        s->park.limit_bytes = *(const uint64_t *)arg;
        exo_space_trim_park(s, s->current);
        return 0;
    case VAS_CTL_PARK_STATS:
        *(struct vas_park_stats *)arg = s->park;
        return 0;
    case VAS_CTL_SET_LOCKING: {
        int on = *(const int *)arg;
        if (on != 0 && on != 1)
            return exo_fail(EXO_EINVAL, "VAS_CTL_SET_LOCKING takes 0 or 1, not %d", on);
        /* At home no lock is held, so the switch code never sees a visible segment whose
         * lock disagrees with the setting. */
        if (s->current)
            return exo_fail(EXO_EINUSE, "locking can change only at home");
        s->locking = on;
        return 0;
    }
    default:
        return exo_fail(EXO_EINVAL, "vas_ctl: unknown command %d", cmd);
    }
}

EXO_API int vas_ctl(int cmd, vasid_t vid, void *arg)
{
    exo_clear_error();
    if (!arg)
        return exo_fail(EXO_EINVAL, "vas_ctl: arg is NULL");
    switch (cmd) {
    case VAS_CTL_INFO:
        return exo_vas_fill_info(vid, arg);
    case VAS_CTL_SET_MODE:
        return exo_vas_set_mode(vid, *(const mode_t *)arg);
    case VAS_CTL_SET_HEAP: {
        int rc = exo_vas_set_heap(vid, *(const segid_t *)arg);
        if (rc)
            return rc;
        /* This process's attachments of the VAS follow the new choice at once. */
        struct space *s = exo_space();
        pthread_mutex_lock(&s->lock);
        exo_view_change_begin();
        for (size_t i = 0; i < VAS_ATTACH_MAX; i++)
            if (s->att[i].handle && s->att[i].vid == vid)
                s->att[i].heap = *(const segid_t *)arg;
        exo_view_change_end();
        pthread_mutex_unlock(&s->lock);
        return 0;
    }
    default: {
        struct space *s = exo_space();
        pthread_mutex_lock(&s->lock);
        int rc = process_ctl(s, cmd, arg);
        pthread_mutex_unlock(&s->lock);
        return rc;
    }
    }
}
