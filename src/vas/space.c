/* The process's space (space.h): its state, the segments it has open and the address
 * ranges they reserve (opening a VAS's segments, giving them back), and fork handling. */
#include "vas/space.h"
#include "internal.h"
#include "seg/claims.h"
#include "seg/vas_record.h"
#include "vas/view.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct space the_space;
static pthread_once_t space_once = PTHREAD_ONCE_INIT;

static void before_fork(void)
{
    pthread_mutex_lock(&the_space.lock);
}

static void after_fork_parent(void)
{
    pthread_mutex_unlock(&the_space.lock);
}

/* A child shares its parent's open file descriptions, and so its OFD locks: using them
 * would let the child pass locks the parent holds. The child therefore gets its own
 * descriptions and starts at home, holding no lock; it keeps the parent's attachments. */
static void after_fork_child(void)
{
    struct space *s = &the_space;
    for (size_t i = 0; i < s->npsegs; i++) {
        struct pseg *ps = s->psegs[i];
        if (ps->paged)
            exo_paged_forget(ps);
        if (pseg_at_base(ps)) {
            exo_os_hide(ps->base, ps->span);
            ps->where = PSEG_HIDDEN;
        }
        ps->lock = EXO_LOCK_NONE;
        /* Through /proc/self/fd, a link by design: O_NOFOLLOW would refuse it (ELOOP). */
        int old = ps->fd;
        ps->fd = exo_os_reopen(old, ps->fd_writable);
        if (ps->fd < 0)
            ps->fd = -1;
        exo_os_close(old);
    }
    s->current = NULL;
    exo_view_after_fork_child();
    pthread_mutex_init(&s->lock, NULL);
}

static void space_init(void)
{
    struct space *s = &the_space;
    pthread_mutex_init(&s->lock, NULL);
    s->next_handle = 1;
    s->engine = exo_config()->engine;
    s->locking = true;
    s->park.limit_bytes = exo_config()->park_limit;
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

struct space *exo_space(void)
{
    pthread_once(&space_once, space_init);
    return &the_space;
}

struct attachment *exo_space_find(struct space *s, vhandle_t vh)
{
    if (vh <= 0)
        return NULL;
    for (size_t i = 0; i < VAS_ATTACH_MAX; i++)
        if (s->att[i].handle == vh)
            return &s->att[i];
    return NULL;
}

struct pseg *exo_space_pseg(struct space *s, segid_t sid)
{
    for (size_t i = 0; i < s->npsegs; i++)
        if (s->psegs[i]->sid == sid)
            return s->psegs[i];
    return NULL;
}

/* --- address ranges ---
 * The base ranges (spans) of attached segments may overlap (segments of different VASes
 * may share addresses). A range piece is reserved while any attached segment covers it. */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

struct piece_cover {
    bool any;       /* some other attached segment covers it */
    bool visible;   /* a visible segment covers it */
};

/* Split [lo, hi) at the boundaries of the other segments and call fn for each piece. */
static int for_each_piece(struct space *s, uint64_t lo, uint64_t hi, const struct pseg *self,
                          int (*fn)(uint64_t a, uint64_t b, struct piece_cover c, void *arg),
                          void *arg)
{
    size_t n = 0;
    uint64_t *cuts = malloc((2 * s->npsegs + 2) * sizeof *cuts);
    if (!cuts)
        return -EXO_ENOMEM;
    cuts[n++] = lo;
    cuts[n++] = hi;
    for (size_t i = 0; i < s->npsegs; i++) {
        const struct pseg *o = s->psegs[i];
        if (o == self)
            continue;
        if (o->base > lo && o->base < hi)
            cuts[n++] = o->base;
        if (o->base + o->span > lo && o->base + o->span < hi)
            cuts[n++] = o->base + o->span;
    }
    qsort(cuts, n, sizeof *cuts, cmp_u64);
    int rc = 0;
    for (size_t k = 0; k + 1 < n && !rc; k++) {
        uint64_t a = cuts[k], b = cuts[k + 1];
        if (a == b)
            continue;
        struct piece_cover c = {false, false};
        for (size_t i = 0; i < s->npsegs; i++) {
            const struct pseg *o = s->psegs[i];
            if (o == self || o->base > a || o->base + o->span < b)
                continue;
            c.any = true;
            if (pseg_at_base(o))
                c.visible = true;
        }
        rc = fn(a, b, c, arg);
    }
    free(cuts);
    return rc;
}

struct reserve_state {
    uint64_t failed_lo, failed_hi; /* the piece that could not be reserved */
};

static int reserve_piece(uint64_t a, uint64_t b, struct piece_cover c, void *arg)
{
    struct reserve_state *st = arg;
    int rc = c.any ? 0 : exo_os_reserve_fixed(a, b - a);
    if (rc) {
        st->failed_lo = a;
        st->failed_hi = b;
    }
    return rc;
}

/* Give back the pieces reserved before the one that failed (pieces go in address order). */
static int unreserve_piece(uint64_t a, uint64_t b, struct piece_cover c, void *arg)
{
    const struct reserve_state *st = arg;
    if (!c.any && b <= st->failed_lo)
        exo_os_unmap(a, b - a);
    return 0;
}

static int release_piece(uint64_t a, uint64_t b, struct piece_cover c, void *arg)
{
    (void)arg;
    if (!c.any)
        return exo_os_unmap(a, b - a);
    if (!c.visible)
        return exo_os_hide(a, b - a); /* drop our stale mapping, keep the reservation */
    return 0;
}

/* --- padding ---
 * mremap moves a whole page-table page (one TLB flush) only where the moved range covers
 * the 1 GiB it maps; anything less is moved 2 MiB at a time, each with its own flush,
 * which is an IPI to every CPU running another thread of the process. So a 4K segment
 * whose base is 1 GiB aligned is mapped over its size rounded up to whole GiBs: one
 * mapping of its file, the part past the file's end faulting (SIGBUS). Its switches then
 * cost what a 1 GiB segment's do, whatever its size. The padding also reserves that
 * address range, so it is only made where nothing else is, and only while no attached
 * segment with another base reaches into it: segments with the same base (of different
 * VASes, never visible together) may share a padded range. A base that is not 1 GiB
 * aligned is not padded: the file's data starts at offset 0, so one mapping cannot start
 * below the base. */
#define PAD_UNIT (UINT64_C(1) << 30)

/* The span ps would have padded, or its size when it cannot be padded. */
static uint64_t padded_span(const struct space *s, const struct pseg *ps)
{
    bool moves = s->engine == VAS_ENGINE_PARK || s->engine == VAS_ENGINE_KEEP;
    if (!moves || ps->page_size != SEG_PAGE_4K || ps->paged ||
        ps->base % PAD_UNIT != 0 || ps->size > UINT64_MAX - PAD_UNIT)
        return ps->size;
    uint64_t span = (ps->size + PAD_UNIT - 1) / PAD_UNIT * PAD_UNIT;
    for (size_t i = 0; i < s->npsegs; i++) {
        const struct pseg *o = s->psegs[i];
        if (o->base != ps->base && ranges_meet(o->base, o->span, ps->base, span))
            return ps->size;
    }
    return span;
}

/* Take x's padding away (another segment is coming into it): the padding becomes a plain
 * reservation, and the pieces no other segment covers are given back. The newcomer then
 * reserves its own pieces with MAP_FIXED_NOREPLACE: should another thread's mmap take one
 * in between, the attach fails with EXO_EOVERLAP; nothing is ever replaced. */
static void unpad(struct space *s, struct pseg *x)
{
    uint64_t lo = x->base + x->size, hi = x->base + x->span;
    if (pseg_at_base(x))
        exo_os_hide(lo, hi - lo);
    else if (x->where == PSEG_PARKED)
        exo_os_hide(x->park_addr + x->size, hi - lo);
    exo_claims_remove(x->base, hi);
    (void)exo_claims_add(x->base, lo); /* the slot just freed: cannot fail */
    x->span = x->size;
    for_each_piece(s, lo, hi, x, release_piece, NULL);
}

/* Unpad every segment with another base whose padding ps's span reaches into. */
static void unpad_around(struct space *s, const struct pseg *ps)
{
    for (size_t i = 0; i < s->npsegs; i++) {
        struct pseg *x = s->psegs[i];
        if (x->span > x->size && x->base != ps->base &&
            ranges_meet(x->base + x->size, x->span - x->size, ps->base, ps->span))
            unpad(s, x);
    }
}

/* Reserve the pieces of ps's span no other segment covers and claim the span. */
static int reserve_span(struct space *s, struct pseg *ps)
{
    struct reserve_state st = {0, 0};
    int rc = for_each_piece(s, ps->base, ps->base + ps->span, ps, reserve_piece, &st);
    if (!rc && (rc = exo_claims_add(ps->base, ps->base + ps->span)) != 0)
        st.failed_lo = ps->base + ps->span;
    if (!rc)
        return 0;
    char desc[256] = "";
    if (st.failed_hi)
        exo_os_range_mapped(st.failed_lo, st.failed_hi - st.failed_lo, desc, sizeof desc);
    for_each_piece(s, ps->base, ps->base + ps->span, ps, unreserve_piece, &st);
    if (rc == -EXO_EOVERLAP)
        return exo_fail(EXO_EOVERLAP, "segment '%s': [%#llx, %#llx) overlaps mapping %s",
                        ps->name, (unsigned long long)ps->base,
                        (unsigned long long)(ps->base + ps->span), desc);
    return exo_fail(-rc, "segment '%s': cannot reserve its address range", ps->name);
}

int exo_pseg_get(struct space *s, segid_t sid, int flags, struct pseg **out)
{
    struct pseg *ps = exo_space_pseg(s, sid);
    if (ps) {
        if (flags == SEG_RDWR && !ps->fd_writable)
            return exo_fail(EXO_EACCES, "segment '%s': no write permission for a read-write "
                            "attachment", ps->name);
        ps->refs++;
        *out = ps;
        return 0;
    }
    struct exo_seg_rec rec;
    int rc = exo_seg_load(sid, &rec);
    if (rc)
        return rc;
    int fd;
    bool writable;
    if ((rc = exo_seg_open_data(&rec, &fd, &writable)) != 0)
        return rc;
    if (flags == SEG_RDWR && !writable) {
        exo_os_close(fd);
        return exo_fail(EXO_EACCES, "segment '%s': no write permission for a read-write "
                        "attachment", rec.name);
    }
    if (s->npsegs == s->cappsegs) {
        size_t cap = s->cappsegs ? s->cappsegs * 2 : 16;
        struct pseg **grown = realloc(s->psegs, cap * sizeof *grown);
        if (!grown) {
            exo_os_close(fd);
            return exo_fail(EXO_ENOMEM, "attaching segment '%s'", rec.name);
        }
        s->psegs = grown;
        s->cappsegs = cap;
    }
    ps = calloc(1, sizeof *ps);
    if (!ps) {
        exo_os_close(fd);
        return exo_fail(EXO_ENOMEM, "attaching segment '%s'", rec.name);
    }
    *ps = (struct pseg){.sid = sid, .base = rec.base, .size = rec.size,
                        .page_size = rec.page_size, .thp = (rec.flags & EXO_SEG_REC_THP) != 0,
                        .fd = fd, .fd_writable = writable,
                        .refs = 1, .where = PSEG_HIDDEN,
                        .paged = (rec.flags & EXO_SEG_REC_PAGED) != 0};
    if (ps->paged && (rc = exo_paged_load(&rec, &ps->paged_rec)) != 0) {
        exo_os_close(fd);
        free(ps);
        return rc;
    }
    memcpy(ps->name, rec.name, sizeof ps->name);
    ps->span = padded_span(s, ps);
    unpad_around(s, ps);
    rc = reserve_span(s, ps);
    if (rc == -EXO_EOVERLAP && ps->span != ps->size) {
        /* Something else is mapped in the padding: do without it. */
        exo_clear_error();
        ps->span = ps->size;
        rc = reserve_span(s, ps);
    }
    if (rc) {
        exo_os_close(fd);
        free(ps);
        return rc;
    }
    s->psegs[s->npsegs++] = ps;
    *out = ps;
    return 0;
}

void exo_pseg_put(struct space *s, struct pseg *ps)
{
    if (--ps->refs > 0)
        return;
    if (ps->park_addr) {
        exo_os_unmap(ps->park_addr, ps->park_len);
        if (ps->where == PSEG_PARKED)
            s->park.parked_bytes -= ps->size;
    }
    if (ps->where == PSEG_KEPT) /* its range becomes a reservation like any hidden one's */
        exo_os_hide(ps->base, ps->span);
    if (ps->lock != EXO_LOCK_NONE && ps->fd >= 0)
        exo_os_unlock(ps->fd);
    for (size_t i = 0; i < s->npsegs; i++) {
        if (s->psegs[i] == ps) {
            s->psegs[i] = s->psegs[--s->npsegs];
            break;
        }
    }
    exo_claims_remove(ps->base, ps->base + ps->span);
    ps->where = PSEG_HIDDEN;
    for_each_piece(s, ps->base, ps->base + ps->span, ps, release_piece, NULL);
    exo_os_close(ps->fd);
    free(ps);
}
