/* vas_switch: segment locks, then page tables.
 *
 * Locks are taken in one global order (segment id) so two switching processes never
 * deadlock. A visible segment is always locked; a segment is unlocked only after it is
 * hidden or parked.
 *
 * Engines. remap: a switched-out segment is replaced by an inaccessible reservation and
 * mapped again (MAP_POPULATE) on switch-in. park: its page tables are moved with
 * mremap(MREMAP_FIXED|MREMAP_DONTUNMAP) to a parking slot whose address is congruent to the
 * base modulo 1 GiB (the kernel then moves whole page-table levels), and moved back on
 * switch-in. A segment at a 1 GiB-aligned base is mapped padded to whole GiBs (space.c)
 * so that every move is a whole page-table page: one TLB flush, not one per 2 MiB, whatever
 * its size. Neither the base nor the slot is ever a hole. hugetlb segments are never
 * mremapped (it hung a process on this kernel); they re-map, which is cheap since their
 * pages stay in the file. Every segment is file-backed, so hiding is always a safe
 * fallback: only its page tables are lost.
 *
 * keep: park, except that a segment leaving the current VAS stays at its base (PSEG_KEPT,
 * unlocked) when nothing the new VAS shows needs its range, and is parked only when a VAS
 * that does comes in. A switch between VASes that do not overlap then changes no page
 * table: it costs its locks, the way a tagged TLB lets translations survive a switch. The
 * price is isolation: a kept segment stays accessible, and write access is not taken
 * back, so a stray access does not fault. Locks, and so the data's consistency between
 * processes, are exactly as under park. */
#include "vas/space.h"
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PARK_MODULUS (UINT64_C(1) << 30)

/* The lock an attachment needs on one of its segments. */
static enum exo_lock_mode lock_for(int flags)
{
    return flags == SEG_RDONLY ? EXO_LOCK_SHARED : EXO_LOCK_EXCLUSIVE;
}

static const struct attach_seg *find_in(const struct attachment *a, const struct pseg *ps)
{
    if (!a)
        return NULL;
    for (unsigned i = 0; i < a->nsegs; i++)
        if (a->segs[i].ps == ps)
            return &a->segs[i];
    return NULL;
}

static int cmp_sid(const void *a, const void *b)
{
    const struct attach_seg *x = a, *y = b;
    return x->ps->sid < y->ps->sid ? -1 : x->ps->sid > y->ps->sid;
}

struct lock_step {
    struct pseg *ps;
    enum exo_lock_mode before;
};

/* Bring the locks of `to`'s segments to their modes, in segment-id order, keeping the
 * others, without waiting. On failure every lock is back as it was; on -EXO_EBUSY, *busy is
 * the segment another process holds and *busy_mode the mode it was wanted in. */
static int acquire(struct space *s, const struct attachment *to, struct pseg **busy,
                   enum exo_lock_mode *busy_mode)
{
    if (!to || !s->locking)
        return 0;
    struct attach_seg order[VAS_SEGS_MAX];
    struct lock_step done[VAS_SEGS_MAX];
    unsigned n = to->nsegs, ndone = 0;
    memcpy(order, to->segs, n * sizeof order[0]);
    qsort(order, n, sizeof order[0], cmp_sid);
    int rc = 0;
    for (unsigned i = 0; i < n && !rc; i++) {
        struct pseg *ps = order[i].ps;
        enum exo_lock_mode want = lock_for(order[i].flags);
        if (ps->lock == want)
            continue;
        if (ps->fd < 0) {
            rc = exo_fail(EXO_EIO, "segment '%s' could not be reopened after fork", ps->name);
            break;
        }
        rc = exo_os_lock(ps->fd, want, false);
        if (rc == 0) {
            done[ndone++] = (struct lock_step){ps, ps->lock};
            ps->lock = want;
        } else if (rc == -EXO_EBUSY) {
            *busy = ps;
            *busy_mode = want;
            rc = exo_fail(EXO_EBUSY, "segment '%s' is locked by another process", ps->name);
        } else {
            rc = exo_fail(-rc, "cannot lock segment '%s'", ps->name);
        }
    }
    if (rc) {
        while (ndone > 0) {
            struct lock_step *st = &done[--ndone];
            /* Going back to a weaker mode never waits. */
            exo_os_lock(st->ps->fd, st->before, false);
            st->ps->lock = st->before;
        }
    }
    return rc;
}

static void release_unless_in(struct space *s, const struct attachment *keep)
{
    for (size_t i = 0; i < s->npsegs; i++) {
        struct pseg *ps = s->psegs[i];
        if (ps->lock != EXO_LOCK_NONE && !find_in(keep, ps)) {
            exo_os_unlock(ps->fd);
            ps->lock = EXO_LOCK_NONE;
        }
    }
}

static bool parkable(const struct space *s, const struct pseg *ps)
{
    return (s->engine == VAS_ENGINE_PARK || s->engine == VAS_ENGINE_KEEP) &&
           ps->page_size == SEG_PAGE_4K && !ps->paged;
}

/* Whether a segment of attachment `to` other than ps overlaps ps's range. */
static bool in_the_way_of(const struct attachment *to, const struct pseg *ps)
{
    if (!to)
        return false;
    for (unsigned i = 0; i < to->nsegs; i++) {
        const struct pseg *o = to->segs[i].ps;
        if (o != ps && ranges_meet(o->base, o->span, ps->base, ps->span))
            return true;
    }
    return false;
}

/* Whether a switch to `to` takes ps off its base: a visible segment `to` does not list,
 * unless the keep engine may leave it there; a kept one whose range `to` needs. */
static bool leaves_base(const struct space *s, const struct pseg *ps,
                        const struct attachment *to)
{
    if (!pseg_at_base(ps) || find_in(to, ps))
        return false;
    bool keepable = s->engine == VAS_ENGINE_KEEP && !ps->paged;
    return !keepable || in_the_way_of(to, ps);
}

/* Whether a change of a mapped segment's access to `access` needs an mprotect: the keep
 * engine leaves write access in place. */
static bool needs_protect(const struct space *s, const struct pseg *ps, int access)
{
    return ps->prot != access && !(s->engine == VAS_ENGINE_KEEP && ps->prot == EXO_ACCESS_RW);
}

/* Change a visible segment's access, counting the time in the switch's breakdown. */
static int protect_timed(struct space *s, const struct pseg *ps, int access)
{
    uint64_t t0 = exo_os_now_ns();
    int rc = exo_os_protect(ps->base, ps->span, access);
    s->steps.protect_ns += exo_os_now_ns() - t0;
    return rc;
}

/* Take a segment off its base: park its page tables, or drop them. */
static void switch_out(struct space *s, struct pseg *ps)
{
    if (ps->paged) { /* written back, then its region goes (paged_switch.c) */
        exo_paged_hide(ps);
        ps->where = PSEG_HIDDEN;
        return;
    }
    if (parkable(s, ps) && ps->park_addr &&
        exo_os_move(ps->base, ps->park_addr, ps->span, &s->steps) == 0) {
        ps->where = PSEG_PARKED;
        s->park.parked_bytes += ps->size;
        s->park.moves++;
        return;
    }
    exo_os_hide(ps->base, ps->span);
    ps->where = PSEG_HIDDEN;
}

/* The segment is now visible at its base with `access`, its mapping with `prot`. */
static void now_visible(struct pseg *ps, int access, int prot)
{
    ps->where = PSEG_VISIBLE;
    ps->access = access;
    ps->prot = prot;
}

/* Take kept segments whose range ps needs off their bases. A switch has parked them already
 * (into slots it reserved); this is for a segment shown outside a switch
 * (seg_attach_local() on the current VAS), where a kept one without a slot is hidden. */
static void clear_kept_for(struct space *s, const struct pseg *ps)
{
    for (size_t i = 0; i < s->npsegs; i++) {
        struct pseg *o = s->psegs[i];
        if (o != ps && o->where == PSEG_KEPT && ranges_meet(o->base, o->span, ps->base, ps->span))
            switch_out(s, o);
    }
}

/* Put a segment on its base with the given access (EXO_ACCESS_READ or EXO_ACCESS_RW). */
int exo_space_show(struct space *s, struct pseg *ps, int access)
{
    if (!pseg_at_base(ps))
        clear_kept_for(s, ps);
    if (pseg_at_base(ps)) {
        if (needs_protect(s, ps, access)) {
            /* A paged segment going read-only writes back first: its lock may go next. */
            int rc = ps->paged && access != EXO_ACCESS_RW ? exo_paged_flush(ps) : 0;
            if (!rc)
                rc = protect_timed(s, ps, access);
            if (rc)
                return rc;
            ps->prot = access;
        }
        now_visible(ps, access, ps->prot);
        return 0;
    }
    if (ps->paged) {
        int rc = exo_paged_show(ps, access);
        if (rc)
            return rc;
        s->park.maps++;
        now_visible(ps, access, access);
        return 0;
    }
    if (ps->where == PSEG_PARKED) {
        s->park.parked_bytes -= ps->size;
        ps->where = PSEG_HIDDEN;
        /* The moved mapping keeps the access it had when parked (ps->prot). */
        bool change = needs_protect(s, ps, access);
        if (exo_os_move(ps->park_addr, ps->base, ps->span, &s->steps) == 0 &&
            (!change || protect_timed(s, ps, access) == 0)) {
            s->park.moves++;
            now_visible(ps, access, change ? access : ps->prot);
            return 0;
        }
        exo_os_hide(ps->park_addr, ps->span); /* the data is safe in the file */
    }
    int rc = exo_os_map_file_fixed(ps->fd, ps->base, ps->span, access == EXO_ACCESS_RW, true,
                                   ps->thp);
    if (rc) {
        exo_os_hide(ps->base, ps->span);
        return exo_fail(-rc, "segment '%s': cannot map at %#llx", ps->name,
                        (unsigned long long)ps->base);
    }
    s->park.maps++;
    now_visible(ps, access, access);
    return 0;
}

void exo_space_hide(struct space *s, struct pseg *ps)
{
    (void)s;
    if (pseg_at_base(ps)) {
        if (ps->paged)
            exo_paged_hide(ps);
        else
            exo_os_hide(ps->base, ps->span);
        ps->where = PSEG_HIDDEN;
    }
    if (ps->lock != EXO_LOCK_NONE && ps->fd >= 0) {
        exo_os_unlock(ps->fd);
        ps->lock = EXO_LOCK_NONE;
    }
}

/* Give every segment that the switch to `to` will park a slot before anything moves, so
 * that running out of address space fails the switch cleanly. A slot made here is marked
 * (slot_new), so that a switch that fails (or finds a lock busy) gives exactly those back. */
static int reserve_slots(struct space *s, const struct attachment *to)
{
    for (size_t i = 0; i < s->npsegs; i++) {
        struct pseg *ps = s->psegs[i];
        ps->slot_new = false;
        if (!leaves_base(s, ps, to) || !parkable(s, ps) || ps->park_addr)
            continue;
        int rc = exo_os_reserve_congruent(ps->span, ps->base, PARK_MODULUS, &ps->park_addr);
        if (rc)
            return exo_fail(-rc, "segment '%s': no address space left to park it", ps->name);
        ps->park_len = ps->span;
        ps->slot_new = true;
    }
    return 0;
}

/* Give back the slots reserve_slots() made, for a switch that ends where it began. */
static void unreserve_slots(struct space *s)
{
    for (size_t i = 0; i < s->npsegs; i++) {
        struct pseg *ps = s->psegs[i];
        if (ps->slot_new && ps->where != PSEG_PARKED) {
            exo_os_unmap(ps->park_addr, ps->park_len);
            ps->park_addr = 0;
        }
        ps->slot_new = false;
    }
}

/* Take off their bases the segments `to` does not keep there (the keep engine leaves the
 * others, as PSEG_KEPT), then show `to`'s. */
static int remap_all(struct space *s, struct attachment *to)
{
    for (size_t i = 0; i < s->npsegs; i++) {
        struct pseg *ps = s->psegs[i];
        ps->slot_new = false;
        if (leaves_base(s, ps, to))
            switch_out(s, ps);
        else if (ps->where == PSEG_VISIBLE && !find_in(to, ps))
            ps->where = PSEG_KEPT;
    }
    int rc = 0;
    if (to)
        for (unsigned i = 0; i < to->nsegs && !rc; i++)
            rc = exo_space_show(s, to->segs[i].ps, to->segs[i].flags);
    return rc;
}

static void stamp(struct space *s, struct attachment *a)
{
    if (a)
        a->last_used = ++s->clock;
}

/* End at home holding no lock: every visible segment parked, hidden or kept. */
static void go_home(struct space *s)
{
    remap_all(s, NULL); /* showing nothing cannot fail */
    release_unless_in(s, NULL);
    stamp(s, s->current);
    s->current = NULL;
}

/* Wait until segment ps's lock could be had in mode `want`, WITHOUT the process's mutex, so
 * that the process's other threads go on allocating, asking vas_current() and switching
 * while this one waits for another process. The wait is on a second open file description
 * of the segment's file (OFD locks belong to descriptions, so it cannot disturb the locks
 * the process holds), closed as soon as the lock is had: the caller then tries again. */
static int wait_for_lock(struct space *s, struct pseg *ps, enum exo_lock_mode want)
{
    char name[EXOMEM_NAME_MAX + 1];
    snprintf(name, sizeof name, "%s", ps->name); /* ps may be gone once the mutex is free */
    int probe = exo_os_reopen(ps->fd, want == EXO_LOCK_EXCLUSIVE);
    if (probe < 0)
        return exo_fail(-probe, "segment '%s': cannot open it to wait for its lock", name);
    pthread_mutex_unlock(&s->lock);
    int rc = exo_os_lock(probe, want, true);
    exo_os_close(probe); /* drops the probe's lock */
    pthread_mutex_lock(&s->lock);
    if (rc)
        return exo_fail(-rc, "cannot lock segment '%s'", name);
    return 0;
}

/* Write back the paged segments that `from` shows and `to` does not (or shows read-only),
 * before anything changes: a store that fails then fails the switch, which leaves
 * everything as it was, dirty data included. */
static int flush_leaving(const struct attachment *from, const struct attachment *to)
{
    if (!from)
        return 0;
    for (unsigned i = 0; i < from->nsegs; i++) {
        struct pseg *ps = from->segs[i].ps;
        const struct attach_seg *next = find_in(to, ps);
        if (!ps->paged || ps->where != PSEG_VISIBLE || (next && next->flags == SEG_RDWR))
            continue;
        int rc = exo_paged_flush(ps);
        if (rc)
            return rc;
    }
    return 0;
}

/* Add one switch to the breakdown in the park statistics (vas_park_stats). */
static void count_switch(struct space *s, uint64_t total_ns, uint64_t lock_ns)
{
    uint64_t known = lock_ns + s->steps.remap_ns + s->steps.protect_ns;
    s->park.switches++;
    s->park.remap_ns += s->steps.remap_ns;
    s->park.protect_ns += s->steps.protect_ns;
    s->park.lock_ns += lock_ns;
    s->park.other_ns += total_ns > known ? total_ns - known : 0;
}

/* One attempt at the switch that never waits for a lock; -EXO_EBUSY with *busy set when
 * another process holds one, everything then as it was. */
static int switch_now(struct space *s, struct attachment *to, struct pseg **busy,
                      enum exo_lock_mode *busy_mode)
{
    struct attachment *from = s->current;
    if (from == to)
        return 0;
    uint64_t t_start = exo_os_now_ns(), lock_ns = 0;
    s->steps = (struct exo_os_move_steps){0, 0};
    int rc = flush_leaving(from, to);
    if (!rc)
        rc = reserve_slots(s, to);
    if (!rc) {
        uint64_t t0 = exo_os_now_ns();
        rc = acquire(s, to, busy, busy_mode);
        lock_ns += exo_os_now_ns() - t0;
    }
    if (rc) {
        /* Nothing moved and no lock was taken: leave the address space as it was. */
        unreserve_slots(s);
        return rc;
    }
    rc = remap_all(s, to);
    if (rc) {
        go_home(s); /* mapping failed (out of memory): end at home, holding nothing */
        return rc;
    }
    uint64_t t0 = exo_os_now_ns();
    release_unless_in(s, to);
    uint64_t t_end = exo_os_now_ns();
    lock_ns += t_end - t0;
    stamp(s, from);
    stamp(s, to);
    s->current = to;
    exo_space_trim_park(s, to);
    count_switch(s, t_end - t_start, lock_ns);
    return 0;
}

int exo_space_switch(struct space *s, struct attachment *to, bool wait)
{
    vhandle_t handle = to ? to->handle : VAS_HOME;
    for (;;) {
        struct pseg *busy = NULL;
        enum exo_lock_mode busy_mode = EXO_LOCK_NONE;
        int rc = switch_now(s, to, &busy, &busy_mode);
        if (rc != -EXO_EBUSY || !wait)
            return rc;
        /* Holding locks while waiting for others could deadlock against a process that
         * waits in the other order: go home first, drop everything, wait for the lock that
         * was busy, then try the whole switch again. */
        go_home(s);
        if ((rc = wait_for_lock(s, busy, busy_mode)) != 0)
            return rc;
        if (to && to->handle != handle)
            return exo_fail(EXO_EDETACHED, "VAS handle %d was detached by another thread while "
                            "this one waited for its lock", handle);
    }
}

void exo_space_drop_kept(struct space *s)
{
    for (size_t i = 0; i < s->npsegs; i++) {
        struct pseg *ps = s->psegs[i];
        if (ps->where == PSEG_KEPT) {
            exo_os_hide(ps->base, ps->span);
            ps->where = PSEG_HIDDEN;
        }
    }
}

static uint64_t parked_bytes_of(const struct attachment *a, const struct attachment *keep)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < a->nsegs; i++)
        if (a->segs[i].ps->where == PSEG_PARKED && !find_in(keep, a->segs[i].ps))
            n += a->segs[i].ps->size;
    return n;
}

void exo_space_trim_park(struct space *s, const struct attachment *keep)
{
    while (s->park.parked_bytes > s->park.limit_bytes) {
        struct attachment *victim = NULL;
        for (size_t i = 0; i < VAS_ATTACH_MAX; i++) {
            struct attachment *a = &s->att[i];
            if (!a->handle || a == keep || parked_bytes_of(a, keep) == 0)
                continue;
            if (!victim || a->last_used < victim->last_used)
                victim = a;
        }
        if (!victim)
            return;
        for (unsigned i = 0; i < victim->nsegs; i++) {
            struct pseg *ps = victim->segs[i].ps;
            if (ps->where != PSEG_PARKED || find_in(keep, ps))
                continue;
            exo_os_hide(ps->park_addr, ps->span);
            ps->where = PSEG_HIDDEN;
            s->park.parked_bytes -= ps->size;
        }
        s->park.evictions++;
    }
}
