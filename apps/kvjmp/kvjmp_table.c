/* The store's hash tables inside the segment, and how a change survives a killed writer.
 *
 * Every change goes through publish(): the new object is built completely where nobody can
 * see it, the intent record (struct kvj_log) is filled in and ARMED, then ONE aligned
 * pointer store makes the change visible, the record becomes PUBLISHED, what the change
 * made garbage is freed, and the record goes back to IDLE. A writer that finds the record
 * not IDLE (the previous writer died; its segment lock died with it) finishes the job:
 *   ARMED      *slot == after: the store happened: recount the table, free the garbage;
 *              else roll back: free the unpublished object.
 *   PUBLISHED  free the garbage.
 *   BUILDING   free the unpublished object.
 *   REHASH     put the entry that was being moved where it belongs, move the rest,
 *              publish the new bucket array, free the old one.
 * Freeing garbage may run twice (a writer killed inside seg_free): objects are freed
 * children first, each pointer cleared after its free; an entry of a dying hash is
 * unlinked before it is freed and the record holds it meanwhile (`freeing`), so a repair
 * walks only live objects, reads nothing of one freed already (seg_malloc_usable_size() is
 * 0 for it) and hands it to seg_free again, which refuses it (-EXO_EINVAL): nothing can
 * have reused the chunk, since every allocation is made by a writer after the repair.
 * What may leak: an allocation a writer was killed inside of (seg_malloc returned nothing
 * recorded yet), one at a time.
 *
 * The compiler must not reorder these stores across the steps: a killed process's stores
 * reach the shared memory in program order on x86-64, so a compiler barrier suffices.
 */
#include "kvjmp_int.h"

#include <exomem/alloc.h>
#include <exomem/error.h>

#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

static inline void order(void)
{
    atomic_signal_fence(memory_order_seq_cst);
}

void kvj_step(struct kvj_writer *w)
{
    order();
    struct kvjmp *c = w->client;
    if (c && c->crash_at && --c->crash_at == 0)
        kill(getpid(), SIGKILL);
}

uint64_t kvj_hash(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = UINT64_C(0x9ae16a3b2f90404f) ^ (n * UINT64_C(0xc2b2ae3d27d4eb4f));
    for (; n >= 8; b += 8, n -= 8) {
        uint64_t v;
        memcpy(&v, b, 8);
        h = (h ^ v) * UINT64_C(0x9fb21c651e98df25);
        h ^= h >> 32;
    }
    uint64_t tail = 0;
    for (size_t i = 0; i < n; i++)
        tail |= (uint64_t)b[i] << (8 * i);
    h = (h ^ tail) * UINT64_C(0x9fb21c651e98df25);
    h ^= h >> 29;
    h *= UINT64_C(0xbf58476d1ce4e5b9);
    return h ^ (h >> 32);
}

static inline struct kvj_entry **bucket(struct kvj_buckets *b, uint64_t h)
{
    return &b->slot[h & (b->n - 1)];
}

struct kvj_entry *kvj_lookup(const struct kvj_table *t, const void *key, size_t klen)
{
    if (!t->b)
        return NULL;
    uint64_t h = kvj_hash(key, klen);
    for (struct kvj_entry *e = *bucket(t->b, h); e; e = e->next)
        if (e->hash == h && e->klen == klen && memcmp(e->key, key, klen) == 0)
            return e;
    return NULL;
}

static void *alloc(struct kvj_writer *w, size_t n)
{
    void *p = seg_malloc(w->sid, n);
    if (!p)
        exomem_set_error(EXO_ENOMEM, "kvjmp: the store's segment has no room for %zu bytes", n);
    return p;
}

/* seg_free that tolerates a chunk freed already by a writer that died (see the top). */
static void release(void *p)
{
    if (p)
        (void)seg_free(p);
}

static struct kvj_buckets *new_buckets(struct kvj_writer *w, uint64_t n)
{
    struct kvj_buckets *b = alloc(w, sizeof *b + n * sizeof b->slot[0]);
    if (b) {
        memset(b->slot, 0, n * sizeof b->slot[0]);
        b->n = n;
    }
    return b;
}

struct kvj_val *kvj_new_str(struct kvj_writer *w, const void *p, size_t n)
{
    struct kvj_val *v = alloc(w, sizeof *v + n);
    if (v) {
        memset(v, 0, sizeof *v);
        v->type = KVJ_STR;
        v->len = n;
        memcpy(v->bytes, p, n);
    }
    return v;
}

struct kvj_val *kvj_new_int(struct kvj_writer *w, int64_t n)
{
    struct kvj_val *v = alloc(w, sizeof *v);
    if (v) {
        memset(v, 0, sizeof *v);
        v->type = KVJ_INT;
        v->num = n;
    }
    return v;
}

/* Free a value and what it holds, re-entrantly (see the top). A repair may meet an object
 * that the dead writer freed already: its fields are not read then (the heap reuses a free
 * chunk's first words for its lists), only the pointer is handed to seg_free again. */
static void free_val(struct kvj_writer *w, struct kvj_val *v);

static int freed_already(const struct kvj_writer *w, void *p)
{
    return w->recovering && seg_malloc_usable_size(p) == 0;
}

static void free_entry(struct kvj_writer *w, struct kvj_entry *e)
{
    if (!e || freed_already(w, e))
        return;
    free_val(w, e->val);
    e->val = NULL;
    kvj_step(w);
    release(e);
}

static void free_table(struct kvj_writer *w, struct kvj_table *t)
{
    if (freed_already(w, t))
        return;
    struct kvj_buckets *b = t->b;
    if (b && !freed_already(w, b)) {
        for (uint64_t i = 0; i < b->n; i++) {
            struct kvj_entry *e;
            while ((e = b->slot[i]) != NULL) { /* a linked entry is never freed yet */
                free_val(w, e->val);
                e->val = NULL;
                w->st->log.freeing = e; /* unlinked but not yet freed: the record holds it */
                order();
                b->slot[i] = e->next;
                kvj_step(w);
                release(e);
                order();
                w->st->log.freeing = NULL;
            }
        }
        release(b);
    }
    t->b = NULL;
    order();
    release(t);
}

static void free_val(struct kvj_writer *w, struct kvj_val *v)
{
    if (!v || freed_already(w, v))
        return;
    if (v->type == KVJ_HASH && v->hash) {
        free_table(w, v->hash);
        v->hash = NULL;
        order();
    }
    release(v);
}

static void free_obj(struct kvj_writer *w, void *p, uint32_t kind)
{
    if (kind == KVJ_OBJ_ENTRY)
        free_entry(w, p);
    else if (kind == KVJ_OBJ_VAL)
        free_val(w, p);
}

void kvj_drop_val(struct kvj_writer *w, struct kvj_val *v)
{
    free_val(w, v);
}

struct kvj_val *kvj_new_hash(struct kvj_writer *w)
{
    struct kvj_log *L = &w->st->log;
    struct kvj_val *v = alloc(w, sizeof *v);
    if (!v)
        return NULL;
    memset(v, 0, sizeof *v);
    v->type = KVJ_HASH;
    /* Until it is published, the record owns it (a death frees it). */
    L->fresh = v;
    L->fresh_kind = KVJ_OBJ_VAL;
    order();
    L->state = KVJ_BUILDING;
    order();
    struct kvj_table *t = alloc(w, sizeof *t);
    if (t) {
        t->b = NULL;
        t->count = 0;
        order();
        v->hash = t;
        order();
        t->b = new_buckets(w, KVJ_MIN_BUCKETS);
    }
    if (!t || !t->b) {
        free_val(w, v);
        L->state = KVJ_IDLE;
        return NULL;
    }
    return v;
}

void kvj_set_num(struct kvj_writer *w, struct kvj_val *v, int64_t n)
{
    kvj_step(w);
    v->num = n; /* one aligned store: a reader or a crash sees the old or the new count */
    kvj_step(w);
}

/* The one way a change becomes visible (see the top). */
static void publish(struct kvj_writer *w, struct kvj_table *t, void **slot, void *after,
                    void *fresh, uint32_t fresh_kind, void *garbage, uint32_t garbage_kind,
                    int delta)
{
    struct kvj_log *L = &w->st->log;
    L->table = t;
    L->slot = slot;
    L->before = *slot;
    L->after = after;
    L->fresh = fresh;
    L->fresh_kind = fresh_kind;
    L->garbage = garbage;
    L->garbage_kind = garbage_kind;
    order();
    L->state = KVJ_ARMED;
    kvj_step(w);
    *slot = after;
    kvj_step(w);
    t->count += (uint64_t)(int64_t)delta;
    order();
    L->state = KVJ_PUBLISHED;
    kvj_step(w);
    free_obj(w, garbage, garbage_kind);
    order();
    L->state = KVJ_IDLE;
    kvj_step(w);
}

/* Move t's entries into a bucket array of n slots, resuming a move a writer left. */
static int rehash(struct kvj_writer *w, struct kvj_table *t, uint64_t n)
{
    struct kvj_log *L = &w->st->log;
    if (L->state != KVJ_REHASH) {
        L->table = t;
        L->old_b = t->b;
        L->new_b = NULL;
        L->moving = NULL;
        order();
        L->state = KVJ_REHASH;
        kvj_step(w);
        struct kvj_buckets *nb = new_buckets(w, n);
        if (!nb) {
            L->state = KVJ_IDLE;
            return -EXO_ENOMEM;
        }
        L->new_b = nb;
        kvj_step(w);
    }
    struct kvj_buckets *ob = L->old_b, *nb = L->new_b;
    if (t->b != nb) {
        for (uint64_t i = 0; i < ob->n; i++) {
            struct kvj_entry *e;
            while ((e = ob->slot[i]) != NULL) {
                L->moving = e;
                kvj_step(w);
                ob->slot[i] = e->next;
                kvj_step(w);
                struct kvj_entry **to = bucket(nb, e->hash);
                e->next = *to;
                kvj_step(w);
                *to = e;
                kvj_step(w);
                L->moving = NULL;
                order();
            }
        }
        t->b = nb;
        kvj_step(w);
    }
    release(ob);
    kvj_step(w);
    L->state = KVJ_IDLE;
    order();
    return 0;
}

/* A writer died in the middle of moving entry `e`: put it where the move loop expects. */
static void fix_moving(struct kvj_log *L)
{
    struct kvj_entry *e = L->moving;
    if (!e || *bucket(L->old_b, e->hash) == e)
        return; /* not unlinked yet: the loop will move it */
    struct kvj_entry **to = bucket(L->new_b, e->hash);
    for (struct kvj_entry *x = *to; x; x = x->next)
        if (x == e)
            return; /* moved already */
    e->next = *to;
    order();
    *to = e;
    order();
    L->moving = NULL;
}

static uint64_t recount(const struct kvj_table *t)
{
    uint64_t n = 0;
    for (uint64_t i = 0; t->b && i < t->b->n; i++)
        for (struct kvj_entry *e = t->b->slot[i]; e; e = e->next)
            n++;
    return n;
}

static int recover(struct kvj_writer *w)
{
    struct kvj_log *L = &w->st->log;
    w->st->recoveries++;
    w->recovering = 1;
    if (L->freeing) { /* nothing allocated since: a second seg_free is refused, harmless */
        release(L->freeing);
        order();
        L->freeing = NULL;
    }
    switch (L->state) {
    case KVJ_ARMED:
        if (*L->slot == L->after) {
            L->table->count = recount(L->table);
            order();
            L->state = KVJ_PUBLISHED;
            order();
        } else {
            free_obj(w, L->fresh, L->fresh_kind);
            break;
        }
        /* fall through */
    case KVJ_PUBLISHED:
        free_obj(w, L->garbage, L->garbage_kind);
        break;
    case KVJ_BUILDING:
        free_obj(w, L->fresh, L->fresh_kind);
        break;
    case KVJ_REHASH:
        if (!L->new_b)
            break;
        fix_moving(L);
        return rehash(w, L->table, L->new_b->n);
    default:
        return exomem_set_error(EXO_ECORRUPT, "kvjmp: intent record in unknown state %llu",
                                (unsigned long long)L->state);
    }
    order();
    L->state = KVJ_IDLE;
    order();
    return 0;
}

int kvj_prepare(struct kvj_writer *w)
{
    if (!w->st) {
        void *root = NULL;
        int rc = seg_get_root(w->sid, &root);
        if (rc)
            return rc;
        if (!root) {
            struct kvj_store *st = alloc(w, sizeof *st);
            if (!st)
                return -EXO_ENOMEM;
            memset(st, 0, sizeof *st);
            w->st = st;
            st->keys.b = new_buckets(w, KVJ_MIN_BUCKETS);
            if (!st->keys.b) {
                release(st);
                w->st = NULL;
                return -EXO_ENOMEM;
            }
            st->magic = KVJ_MAGIC;
            order();
            if ((rc = seg_set_root(w->sid, st)) != 0)
                return rc; /* a death here leaks the new store: its segment is new anyway */
            root = st;
        }
        w->st = root;
        if (w->st->magic != KVJ_MAGIC)
            return exomem_set_error(EXO_ECORRUPT, "kvjmp: the segment's root is not a store");
    }
    if (w->st->log.state == KVJ_IDLE)
        return 0;
    int rc = recover(w);
    w->recovering = 0;
    return rc;
}

/* Insert entry e (key not present) or replace its value; may grow the table. */
int kvj_put(struct kvj_writer *w, struct kvj_table *t, const void *key, size_t klen,
            struct kvj_val *v)
{
    struct kvj_entry *e = kvj_lookup(t, key, klen);
    if (e) {
        publish(w, t, (void **)&e->val, v, v, KVJ_OBJ_VAL, e->val, KVJ_OBJ_VAL, 0);
        return 0;
    }
    e = alloc(w, sizeof *e + klen);
    if (!e) {
        kvj_drop_val(w, v);
        w->st->log.state = KVJ_IDLE; /* a BUILDING hash is dropped with it */
        return -EXO_ENOMEM;
    }
    e->hash = kvj_hash(key, klen);
    e->klen = klen;
    memcpy(e->key, key, klen);
    e->val = v;
    struct kvj_entry **head = bucket(t->b, e->hash);
    e->next = *head;
    publish(w, t, (void **)head, e, e, KVJ_OBJ_ENTRY, NULL, KVJ_OBJ_NONE, 1);
    if (t->count > t->b->n)
        (void)rehash(w, t, t->b->n * 2); /* out of room to grow: the chains get longer */
    return 1;
}

int kvj_remove(struct kvj_writer *w, struct kvj_table *t, const void *key, size_t klen)
{
    if (!t->b)
        return 0;
    uint64_t h = kvj_hash(key, klen);
    for (struct kvj_entry **p = bucket(t->b, h); *p; p = &(*p)->next) {
        struct kvj_entry *e = *p;
        if (e->hash == h && e->klen == klen && memcmp(e->key, key, klen) == 0) {
            publish(w, t, (void **)p, e->next, NULL, KVJ_OBJ_NONE, e, KVJ_OBJ_ENTRY, -1);
            return 1;
        }
    }
    return 0;
}

int kvj_clear(struct kvj_writer *w)
{
    struct kvj_table *t = &w->st->keys;
    for (uint64_t i = 0; i < t->b->n; i++)
        while (t->b->slot[i])
            publish(w, t, (void **)&t->b->slot[i], t->b->slot[i]->next, NULL, KVJ_OBJ_NONE,
                    t->b->slot[i], KVJ_OBJ_ENTRY, -1);
    return 0;
}

/* ---- the invariants ---- */

static int live(const void *p, size_t need)
{
    return p && seg_malloc_usable_size((void *)p) >= need;
}

static int check_table(const struct kvj_table *t, int nested, struct kvjmp_check_stats *cs);

static int check_val(const struct kvj_val *v, int nested, struct kvjmp_check_stats *cs)
{
    if (!live(v, sizeof *v))
        return exomem_set_error(EXO_ECORRUPT, "kvjmp: a value %p is not a live allocation",
                                (const void *)v);
    cs->objects++;
    switch (v->type) {
    case KVJ_STR:
        if (!live(v, sizeof *v + v->len))
            return exomem_set_error(EXO_ECORRUPT, "kvjmp: string %p of %llu bytes overruns "
                                    "its allocation", (const void *)v,
                                    (unsigned long long)v->len);
        return 0;
    case KVJ_INT:
        return nested ? exomem_set_error(EXO_ECORRUPT, "kvjmp: a counter inside a hash") : 0;
    case KVJ_HASH:
        if (nested)
            return exomem_set_error(EXO_ECORRUPT, "kvjmp: a hash inside a hash");
        if (!live(v->hash, sizeof *v->hash))
            return exomem_set_error(EXO_ECORRUPT, "kvjmp: hash %p has no table", (const void *)v);
        cs->objects++;
        if (v->hash->count == 0)
            return exomem_set_error(EXO_ECORRUPT, "kvjmp: an empty hash is stored");
        return check_table(v->hash, 1, cs);
    default:
        return exomem_set_error(EXO_ECORRUPT, "kvjmp: value %p has type %u", (const void *)v,
                                v->type);
    }
}

static int check_table(const struct kvj_table *t, int nested, struct kvjmp_check_stats *cs)
{
    const struct kvj_buckets *b = t->b;
    if (!live(b, sizeof *b) || b->n < KVJ_MIN_BUCKETS || (b->n & (b->n - 1)) ||
        !live(b, sizeof *b + b->n * sizeof b->slot[0]))
        return exomem_set_error(EXO_ECORRUPT, "kvjmp: bucket array %p is broken", (const void *)b);
    cs->objects++;
    uint64_t n = 0;
    for (uint64_t i = 0; i < b->n; i++) {
        for (const struct kvj_entry *e = b->slot[i]; e; e = e->next) {
            if (!live(e, sizeof *e) || !live(e, sizeof *e + e->klen))
                return exomem_set_error(EXO_ECORRUPT, "kvjmp: entry %p is not a live allocation",
                                        (const void *)e);
            if (e->hash != kvj_hash(e->key, e->klen) || (e->hash & (b->n - 1)) != i)
                return exomem_set_error(EXO_ECORRUPT, "kvjmp: entry %p is in the wrong bucket",
                                        (const void *)e);
            if (++n > t->count + 1000000)
                return exomem_set_error(EXO_ECORRUPT, "kvjmp: a chain loops");
            cs->objects++;
            int rc = check_val(e->val, nested, cs);
            if (rc)
                return rc;
        }
    }
    if (n != t->count)
        return exomem_set_error(EXO_ECORRUPT, "kvjmp: a table counts %llu keys but holds %llu",
                                (unsigned long long)t->count, (unsigned long long)n);
    return 0;
}

int kvj_check_store(struct kvj_store *st, struct kvjmp_check_stats *cs)
{
    memset(cs, 0, sizeof *cs);
    if (!st)
        return 0;
    if (st->magic != KVJ_MAGIC || st->log.state != KVJ_IDLE)
        return exomem_set_error(EXO_ECORRUPT, "kvjmp: bad store magic or unfinished intent");
    cs->objects = 1;
    cs->keys = st->keys.count;
    cs->recoveries = st->recoveries;
    return check_table(&st->keys, 0, cs);
}
