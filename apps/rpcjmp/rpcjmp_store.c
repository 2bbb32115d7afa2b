/* rpcjmp's records, its store in the registry, and the clients that reach it by switching.
 * See rpcjmp.h. */
#include "rpcjmp.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define PAGE 4096u

/* One version of a value. The header takes a cache line of its own so that the data starts
 * aligned. */
struct version {
    uint64_t seq;           /* the commit count it was written for */
    uint64_t len;
    uint8_t pad[48];
    uint8_t data[RPCJMP_PAYLOAD_MAX];
};

/* A record: the commit word says which version is current (seq & 1) and how many commits
 * there have been. Only a writer holding the exclusive lock changes it, and it fills the
 * other version before publishing, so the current one is never being written. */
struct record {
    _Atomic uint64_t committed;
    uint8_t pad[56];
    struct version v[2];
};

size_t rpcjmp_record_stride(void)
{
    return (sizeof(struct record) + PAGE - 1) / PAGE * PAGE;
}

static struct record *record_at(const void *base, unsigned key)
{
    return (struct record *)((uintptr_t)base + (uintptr_t)key * rpcjmp_record_stride());
}

size_t rpcjmp_record_read(const void *base, unsigned key, void *buf, size_t cap)
{
    struct record *r = record_at(base, key);
    uint64_t seq = atomic_load_explicit(&r->committed, memory_order_acquire);
    const struct version *v = &r->v[seq & 1];
    size_t n = v->len < cap ? (size_t)v->len : cap;
    memcpy(buf, v->data, n);
    return n;
}

void *rpcjmp_record_begin(void *base, unsigned key)
{
    struct record *r = record_at(base, key);
    uint64_t seq = atomic_load_explicit(&r->committed, memory_order_relaxed);
    return r->v[(seq + 1) & 1].data;
}

void rpcjmp_record_commit(void *base, unsigned key, size_t len)
{
    if (len > RPCJMP_PAYLOAD_MAX)
        return;
    struct record *r = record_at(base, key);
    uint64_t seq = atomic_load_explicit(&r->committed, memory_order_relaxed) + 1;
    struct version *v = &r->v[seq & 1];
    v->len = len;
    v->seq = seq;
    /* Release: the data and the header are in place before anyone can see the new word. */
    atomic_store_explicit(&r->committed, seq, memory_order_release);
}

void rpcjmp_record_write(void *base, unsigned key, const void *buf, size_t len)
{
    if (len > RPCJMP_PAYLOAD_MAX)
        return;
    memcpy(rpcjmp_record_begin(base, key), buf, len);
    rpcjmp_record_commit(base, key, len);
}

int rpcjmp_record_peek(const void *base, unsigned key, struct rpcjmp_record_view *view)
{
    struct record *r = record_at(base, key);
    uint64_t seq = atomic_load_explicit(&r->committed, memory_order_acquire);
    const struct version *v = &r->v[seq & 1];
    if (v->seq != seq)
        return exomem_set_error(EXO_ECORRUPT, "rpcjmp: record %u: committed %llu but its "
                                "version says %llu", key, (unsigned long long)seq,
                                (unsigned long long)v->seq);
    if (v->len > RPCJMP_PAYLOAD_MAX)
        return exomem_set_error(EXO_ECORRUPT, "rpcjmp: record %u: length %llu", key,
                                (unsigned long long)v->len);
    view->seq = seq;
    view->len = (size_t)v->len;
    view->data = v->data;
    return 0;
}

void rpcjmp_fill(unsigned key, uint64_t seq, void *buf, size_t len)
{
    /* xorshift64 seeded by (key, seq): every byte depends on both. */
    uint64_t x = ((uint64_t)key << 32 ^ seq) * UINT64_C(0x9e3779b97f4a7c15) | 1;
    uint8_t *p = buf;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(p + i, &x, 8);
    }
    for (; i < len; i++)
        p[i] = (uint8_t)(x >> (8 * (i & 7)));
}

/* ---- the store ---- */

/* "<name><suffix>" into out; -EXO_ENAMETOOLONG / -EXO_EINVAL. */
static int object_name(const char *name, const char *suffix, char out[EXOMEM_NAME_MAX + 1])
{
    if (!name)
        return exomem_set_error(EXO_EINVAL, "rpcjmp: no store name");
    if (strlen(name) > RPCJMP_NAME_MAX)
        return exomem_set_error(EXO_ENAMETOOLONG, "rpcjmp: store name '%s' is longer than "
                                "%d characters", name, RPCJMP_NAME_MAX);
    snprintf(out, EXOMEM_NAME_MAX + 1, "%s%s", name, suffix);
    return 0;
}

/* The first value of every record: RPCJMP_PAYLOAD_MAX bytes of rpcjmp_fill(key, 1). */
static void fill_records(uint8_t *base, unsigned nrecords)
{
    for (unsigned k = 0; k < nrecords; k++) {
        rpcjmp_fill(k, 1, rpcjmp_record_begin(base, k), RPCJMP_PAYLOAD_MAX);
        rpcjmp_record_commit(base, k, RPCJMP_PAYLOAD_MAX);
    }
}

int rpcjmp_store_create(const char *name, uint64_t base, unsigned nrecords)
{
    char seg_name[EXOMEM_NAME_MAX + 1], rw_name[EXOMEM_NAME_MAX + 1],
        ro_name[EXOMEM_NAME_MAX + 1];
    int rc;
    if ((rc = object_name(name, ".data", seg_name)) || (rc = object_name(name, ".rw", rw_name))
        || (rc = object_name(name, ".ro", ro_name)))
        return rc;
    if (nrecords == 0)
        return exomem_set_error(EXO_EINVAL, "rpcjmp: store '%s' needs at least one record",
                                name);
    if (!base)
        base = RPCJMP_BASE_DEFAULT;
    segid_t sid = 0;
    vasid_t rw = 0, ro = 0;
    vhandle_t vh = -1;
    if ((rc = seg_alloc(seg_name, base, (uint64_t)nrecords * rpcjmp_record_stride(), 0600,
                        &sid)))
        return rc;
    if ((rc = vas_create(rw_name, 0600, &rw)) || (rc = seg_attach(rw, sid, SEG_RDWR)) ||
        (rc = vas_create(ro_name, 0600, &ro)) || (rc = seg_attach(ro, sid, SEG_RDONLY)) ||
        (rc = vas_attach(rw, &vh)) || (rc = vas_switch(vh)))
        goto undo;
    fill_records((uint8_t *)(uintptr_t)base, nrecords);
    if ((rc = vas_switch(VAS_HOME)) || (rc = vas_detach(vh)))
        goto undo;
    return 0;
undo:;
    /* Keep the first failure's message and code; undo what was made. */
    char msg[256];
    snprintf(msg, sizeof msg, "%s", exomem_last_error());
    if (vh >= 0)
        vas_detach(vh);
    if (ro)
        vas_delete(ro);
    if (rw)
        vas_delete(rw);
    seg_delete(sid);
    return exomem_set_error(rc, "%s", msg);
}

/* Delete VAS (is_seg false) or segment "<name><suffix>". */
static int delete_object(const char *name, const char *suffix, bool is_seg)
{
    char full[EXOMEM_NAME_MAX + 1];
    uint64_t id;
    int rc = object_name(name, suffix, full);
    if (rc == 0)
        rc = is_seg ? seg_find(full, &id) : vas_find(full, &id);
    if (rc == 0)
        rc = is_seg ? seg_delete(id) : vas_delete(id);
    return rc;
}

int rpcjmp_store_delete(const char *name)
{
    /* The VASes first: a segment listed in a VAS cannot be deleted. Go on past a failure,
     * report the first. */
    int ro = delete_object(name, ".ro", false), rw = delete_object(name, ".rw", false);
    int seg = delete_object(name, ".data", true);
    return ro ? ro : rw ? rw : seg;
}

/* ---- clients that switch ---- */

/* Attach "<name><suffix>" and learn the store's base and record count. */
static int attach_store(const char *name, const char *suffix, vhandle_t *vh, uint8_t **base,
                        unsigned *nrecords)
{
    char vas_name[EXOMEM_NAME_MAX + 1];
    int rc;
    vasid_t vid;
    struct vas_info info;
    struct seg_info si;
    if ((rc = object_name(name, suffix, vas_name)) || (rc = vas_find(vas_name, &vid)) ||
        (rc = vas_ctl(VAS_CTL_INFO, vid, &info)))
        return rc;
    if (info.nsegs != 1)
        return exomem_set_error(EXO_EINVAL, "rpcjmp: VAS '%s' has %u segments, not 1",
                                vas_name, info.nsegs);
    if ((rc = seg_ctl(info.segs[0].sid, SEG_CTL_INFO, &si)))
        return rc;
    if ((rc = vas_attach(vid, vh)))
        return rc;
    *base = (uint8_t *)(uintptr_t)si.base;
    *nrecords = (unsigned)(si.size / rpcjmp_record_stride());
    return 0;
}

int rpcjmp_jmp_open(const char *name, struct rpcjmp_jmp *j)
{
    if (!j)
        return exomem_set_error(EXO_EINVAL, "rpcjmp: no client");
    int rc = attach_store(name, ".ro", &j->ro, &j->base, &j->nrecords);
    if (rc)
        return rc;
    if ((rc = attach_store(name, ".rw", &j->rw, &j->base, &j->nrecords))) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", exomem_last_error());
        vas_detach(j->ro);
        return exomem_set_error(rc, "%s", msg);
    }
    return 0;
}

long rpcjmp_jmp_read(struct rpcjmp_jmp *j, unsigned key, void *buf, size_t cap)
{
    if (key >= j->nrecords)
        return exomem_set_error(EXO_EINVAL, "rpcjmp: key %u past the store's %u records", key,
                                j->nrecords);
    int rc = vas_switch(j->ro);
    if (rc)
        return rc;
    size_t n = rpcjmp_record_read(j->base, key, buf, cap);
    rc = vas_switch(VAS_HOME);
    return rc ? rc : (long)n;
}

int rpcjmp_jmp_write(struct rpcjmp_jmp *j, unsigned key, const void *buf, size_t len)
{
    if (key >= j->nrecords || len > RPCJMP_PAYLOAD_MAX)
        return exomem_set_error(EXO_EINVAL, "rpcjmp: key %u (of %u records) or length %zu "
                                "out of range", key, j->nrecords, len);
    int rc = vas_switch(j->rw);
    if (rc)
        return rc;
    rpcjmp_record_write(j->base, key, buf, len);
    return vas_switch(VAS_HOME);
}

void rpcjmp_jmp_close(struct rpcjmp_jmp *j)
{
    vas_detach(j->ro);
    vas_detach(j->rw);
}

/* ---- the server's attachment ---- */

int rpcjmp_server_open(const char *name, struct rpcjmp_server *s)
{
    if (!s)
        return exomem_set_error(EXO_EINVAL, "rpcjmp: no server");
    memset(s, 0, sizeof *s);
    return attach_store(name, ".rw", &s->rw, &s->base, &s->nrecords);
}

void rpcjmp_server_close(struct rpcjmp_server *s)
{
    vas_detach(s->rw); /* goes home first when current */
    s->in = false;
}
