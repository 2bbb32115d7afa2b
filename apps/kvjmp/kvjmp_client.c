/* The client library: making and attaching a store, switching in for each request (the
 * read-only VAS for reads, the read-write one for writes) and the typed commands. */
#include "kvjmp_int.h"

#include <exomem/alloc.h>
#include <exomem/error.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NAME_FMT_SEG "kvjmp.%s"
#define NAME_FMT_RO "kvjmp.%s.ro"
#define NAME_FMT_RW "kvjmp.%s.rw"

static int names(const char *name, char seg[], char ro[], char rw[])
{
    if (!name || strlen(name) + 9 > EXOMEM_NAME_MAX)
        return exomem_set_error(EXO_ENAMETOOLONG, "kvjmp: store name too long (or NULL)");
    snprintf(seg, EXOMEM_NAME_MAX + 1, NAME_FMT_SEG, name);
    snprintf(ro, EXOMEM_NAME_MAX + 1, NAME_FMT_RO, name);
    snprintf(rw, EXOMEM_NAME_MAX + 1, NAME_FMT_RW, name);
    return 0;
}

int kvjmp_create(const char *name, uint64_t base, uint64_t size)
{
    return kvjmp_create_ex(name, base, size, 0);
}

int kvjmp_create_ex(const char *name, uint64_t base, uint64_t size, unsigned flags)
{
    char seg[EXOMEM_NAME_MAX + 1], ro[EXOMEM_NAME_MAX + 1], rw[EXOMEM_NAME_MAX + 1];
    int rc = names(name, seg, ro, rw);
    if (rc)
        return rc;
    segid_t sid = 0;
    vasid_t vro = 0, vrw = 0;
    struct seg_opts opts = { .page_size = SEG_PAGE_4K,
                             .flags = (flags & KVJMP_THP) ? SEG_THP : 0 };
    if ((rc = seg_alloc_ex(seg, base, size, 0600, &opts, &sid)) != 0)
        return rc;
    if ((rc = vas_create(ro, 0600, &vro)) == 0 && (rc = vas_create(rw, 0600, &vrw)) == 0 &&
        (rc = seg_attach(vro, sid, SEG_RDONLY)) == 0 && (rc = seg_attach(vrw, sid, SEG_RDWR)) == 0)
        return 0;
    char why[256];
    snprintf(why, sizeof why, "%s", exomem_last_error());
    if (vrw)
        vas_delete(vrw);
    if (vro)
        vas_delete(vro);
    seg_delete(sid);
    return exomem_set_error(-rc, "kvjmp create %s: %s", name, why);
}

int kvjmp_destroy(const char *name)
{
    char seg[EXOMEM_NAME_MAX + 1], ro[EXOMEM_NAME_MAX + 1], rw[EXOMEM_NAME_MAX + 1];
    int rc = names(name, seg, ro, rw);
    if (rc)
        return rc;
    segid_t sid;
    vasid_t v;
    if ((rc = seg_find(seg, &sid)) != 0)
        return rc;
    if (vas_find(ro, &v) == 0 && (rc = vas_delete(v)) != 0)
        return rc;
    if (vas_find(rw, &v) == 0 && (rc = vas_delete(v)) != 0)
        return rc;
    return seg_delete(sid);
}

int kvjmp_open(const char *name, struct kvjmp **out)
{
    char seg[EXOMEM_NAME_MAX + 1], ro[EXOMEM_NAME_MAX + 1], rw[EXOMEM_NAME_MAX + 1];
    *out = NULL;
    int rc = names(name, seg, ro, rw);
    if (rc)
        return rc;
    struct kvjmp *c = calloc(1, sizeof *c);
    if (!c)
        return exomem_set_error(EXO_ENOMEM, "kvjmp: out of memory");
    c->ro = c->rw = -1;
    vasid_t vro, vrw;
    if ((rc = seg_find(seg, &c->sid)) != 0 || (rc = vas_find(ro, &vro)) != 0 ||
        (rc = vas_find(rw, &vrw)) != 0 || (rc = vas_attach(vro, &c->ro)) != 0 ||
        (rc = vas_attach(vrw, &c->rw)) != 0) {
        kvjmp_close(c);
        return rc;
    }
    *out = c;
    return 0;
}

int kvjmp_close(struct kvjmp *c)
{
    if (!c)
        return 0;
    int rc = 0;
    if (c->rw >= 0)
        rc = vas_detach(c->rw);
    if (c->ro >= 0) {
        int r2 = vas_detach(c->ro);
        rc = rc ? rc : r2;
    }
    free(c);
    return rc;
}

void kvjmp_crash_at(struct kvjmp *c, uint64_t n)
{
    c->crash_at = n;
}

/* ---- switching in and out ---- */

int kvjmp_leave(struct kvjmp *c)
{
    (void)c;
    return vas_switch(VAS_HOME);
}

/* Switch into the read-write VAS and make the store ready (made, or repaired). */
int kvjmp_enter_write(struct kvjmp *c, struct kvj_writer *w)
{
    int rc = vas_switch(c->rw);
    if (rc)
        return rc;
    w->sid = c->sid;
    w->st = c->st;
    w->client = c;
    w->recovering = 0;
    if ((rc = kvj_prepare(w)) != 0) {
        kvjmp_leave(c);
        return rc;
    }
    c->st = w->st;
    return 0;
}

/* Switch into the read-only VAS. *st is NULL for a store no writer has made yet. A store
 * a writer died in leaves an unfinished intent: repair it under the write lock first. */
int kvjmp_enter_read(struct kvjmp *c, const struct kvj_store **st)
{
    for (;;) {
        int rc = vas_switch(c->ro);
        if (rc)
            return rc;
        if (!c->st) {
            void *root = NULL;
            if ((rc = seg_get_root(c->sid, &root)) != 0) {
                kvjmp_leave(c);
                return rc;
            }
            c->st = root;
        }
        if (!c->st || c->st->log.state == KVJ_IDLE) {
            *st = c->st;
            return 0;
        }
        if ((rc = kvjmp_leave(c)) != 0)
            return rc;
        struct kvj_writer w;
        if ((rc = kvjmp_enter_write(c, &w)) != 0 || (rc = kvjmp_leave(c)) != 0)
            return rc;
    }
}

/* ---- reads ---- */

/* The string form of a value (a counter printed into num, 21 bytes); -KVJMP_WRONGTYPE
 * for a hash. */
int kvj_string_of(const struct kvj_val *v, char num[24], const char **p, size_t *n)
{
    if (v->type == KVJ_STR) {
        *p = v->bytes;
        *n = v->len;
        return 0;
    }
    if (v->type == KVJ_INT) {
        *n = (size_t)snprintf(num, 24, "%lld", (long long)v->num);
        *p = num;
        return 0;
    }
    return -KVJMP_WRONGTYPE;
}

static int copy_out(const char *p, size_t n, void *buf, size_t cap, size_t *vlen)
{
    memcpy(buf, p, n < cap ? n : cap);
    if (vlen)
        *vlen = n;
    return 1;
}

int kvjmp_get(struct kvjmp *c, const void *key, size_t klen, void *buf, size_t cap,
              size_t *vlen)
{
    const struct kvj_store *st;
    int rc = kvjmp_enter_read(c, &st);
    if (rc)
        return rc;
    const struct kvj_entry *e = st ? kvj_lookup(&st->keys, key, klen) : NULL;
    char num[24];
    const char *p;
    size_t n;
    if (e && (rc = kvj_string_of(e->val, num, &p, &n)) == 0)
        rc = copy_out(p, n, buf, cap, vlen);
    int r2 = kvjmp_leave(c);
    return rc ? rc : r2;
}

int kvjmp_exists(struct kvjmp *c, const void *key, size_t klen)
{
    const struct kvj_store *st;
    int rc = kvjmp_enter_read(c, &st);
    if (rc)
        return rc;
    int found = st && kvj_lookup(&st->keys, key, klen) != NULL;
    rc = kvjmp_leave(c);
    return rc ? rc : found;
}

/* The string value of field f of hash e (NULL if absent); -KVJMP_WRONGTYPE. */
int kvj_hash_field(const struct kvj_entry *e, const void *f, size_t flen,
                   const struct kvj_val **out)
{
    *out = NULL;
    if (!e)
        return 0;
    if (e->val->type != KVJ_HASH)
        return -KVJMP_WRONGTYPE;
    const struct kvj_entry *fe = kvj_lookup(e->val->hash, f, flen);
    *out = fe ? fe->val : NULL;
    return 0;
}

int kvjmp_hget(struct kvjmp *c, const void *key, size_t klen, const void *field, size_t flen,
               void *buf, size_t cap, size_t *vlen)
{
    const struct kvj_store *st;
    int rc = kvjmp_enter_read(c, &st);
    if (rc)
        return rc;
    const struct kvj_val *v = NULL;
    if (st && (rc = kvj_hash_field(kvj_lookup(&st->keys, key, klen), field, flen, &v)) == 0 && v)
        rc = copy_out(v->bytes, v->len, buf, cap, vlen);
    int r2 = kvjmp_leave(c);
    return rc ? rc : r2;
}

/* ---- writes (switched in read-write) ---- */

int kvj_do_set(struct kvj_writer *w, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct kvj_val *v = kvj_new_str(w, val, vlen);
    if (!v)
        return -EXO_ENOMEM;
    int rc = kvj_put(w, &w->st->keys, key, klen, v);
    return rc < 0 ? rc : 0;
}

/* Redis's rule for an integer: optional '-', no leading zeros or spaces, fits 64 bits. */
static int parse_int(const char *p, size_t n, int64_t *out)
{
    if (n == 0 || n > 20)
        return -1;
    size_t i = 0;
    int neg = p[0] == '-';
    if (neg && ++i == n)
        return -1;
    if (p[i] == '0')
        return (n == 1) ? (*out = 0, 0) : -1;
    uint64_t v = 0;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        unsigned d = (unsigned)(p[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX)
        return -1;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

int kvj_do_incr(struct kvj_writer *w, const void *key, size_t klen, int64_t *out)
{
    struct kvj_entry *e = kvj_lookup(&w->st->keys, key, klen);
    int64_t cur = 0;
    if (e) {
        struct kvj_val *v = e->val;
        if (v->type == KVJ_HASH)
            return -KVJMP_WRONGTYPE;
        if (v->type == KVJ_INT) {
            if (v->num == INT64_MAX)
                return -KVJMP_OVERFLOW;
            kvj_set_num(w, v, v->num + 1);
            *out = v->num;
            return 0;
        }
        if (parse_int(v->bytes, v->len, &cur) != 0)
            return -KVJMP_NOTINT;
        if (cur == INT64_MAX)
            return -KVJMP_OVERFLOW;
    }
    struct kvj_val *v = kvj_new_int(w, cur + 1);
    if (!v)
        return -EXO_ENOMEM;
    int rc = kvj_put(w, &w->st->keys, key, klen, v);
    *out = cur + 1;
    return rc < 0 ? rc : 0;
}

/* HSET of one field: 1 new, 0 updated. */
int kvj_do_hset(struct kvj_writer *w, const void *key, size_t klen, const void *f, size_t flen,
                const void *val, size_t vlen)
{
    struct kvj_entry *e = kvj_lookup(&w->st->keys, key, klen);
    if (e && e->val->type != KVJ_HASH)
        return -KVJMP_WRONGTYPE;
    struct kvj_val *fv = kvj_new_str(w, val, vlen);
    if (!fv)
        return -EXO_ENOMEM;
    if (e)
        return kvj_put(w, e->val->hash, f, flen, fv);
    /* A new key: build its hash with this field where nobody sees it, then publish. */
    struct kvj_val *h = kvj_new_hash(w);
    if (!h) {
        kvj_drop_val(w, fv);
        return -EXO_ENOMEM;
    }
    struct kvj_entry *fe = seg_malloc(w->sid, sizeof *fe + flen);
    if (!fe) {
        kvj_drop_val(w, fv);
        kvj_drop_val(w, h);
        w->st->log.state = KVJ_IDLE;
        return -EXO_ENOMEM;
    }
    fe->hash = kvj_hash(f, flen);
    fe->klen = flen;
    memcpy(fe->key, f, flen);
    fe->val = fv;
    fe->next = NULL;
    h->hash->b->slot[fe->hash & (h->hash->b->n - 1)] = fe;
    h->hash->count = 1;
    int rc = kvj_put(w, &w->st->keys, key, klen, h);
    return rc < 0 ? rc : 1;
}

static int write_done(struct kvjmp *c, int rc)
{
    int r2 = kvjmp_leave(c);
    return rc ? rc : r2;
}

int kvjmp_set(struct kvjmp *c, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct kvj_writer w;
    int rc = kvjmp_enter_write(c, &w);
    return rc ? rc : write_done(c, kvj_do_set(&w, key, klen, val, vlen));
}

int kvjmp_del(struct kvjmp *c, const void *key, size_t klen)
{
    struct kvj_writer w;
    int rc = kvjmp_enter_write(c, &w);
    if (rc)
        return rc;
    int n = kvj_remove(&w, &w.st->keys, key, klen);
    rc = kvjmp_leave(c);
    return rc ? rc : n;
}

int kvjmp_incr(struct kvjmp *c, const void *key, size_t klen, int64_t *out)
{
    struct kvj_writer w;
    int rc = kvjmp_enter_write(c, &w);
    return rc ? rc : write_done(c, kvj_do_incr(&w, key, klen, out));
}

int kvjmp_hset(struct kvjmp *c, const void *key, size_t klen, const void *field, size_t flen,
               const void *val, size_t vlen)
{
    struct kvj_writer w;
    int rc = kvjmp_enter_write(c, &w);
    if (rc)
        return rc;
    int n = kvj_do_hset(&w, key, klen, field, flen, val, vlen);
    rc = kvjmp_leave(c);
    return n < 0 ? n : rc ? rc : n;
}

int kvjmp_check(struct kvjmp *c, struct kvjmp_check_stats *cs)
{
    struct kvjmp_check_stats local;
    if (!cs)
        cs = &local;
    struct kvj_writer w;
    int rc = kvjmp_enter_write(c, &w);
    if (rc)
        return rc;
    rc = kvj_check_store(w.st, cs);
    struct seg_heap_stats hs;
    int hrc = seg_heap_stats(c->sid, &hs);
    if (rc == 0 && hrc != 0)
        rc = hrc;
    cs->heap_allocs = hrc == 0 ? hs.allocations : 0;
    if (rc == 0 && cs->heap_allocs < cs->objects)
        rc = exomem_set_error(EXO_ECORRUPT, "kvjmp: %llu objects reachable but only %llu "
                              "allocations live", (unsigned long long)cs->objects,
                              (unsigned long long)cs->heap_allocs);
    return write_done(c, rc);
}
