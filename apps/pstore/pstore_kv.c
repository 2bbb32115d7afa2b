/* The persistent key-value table: a chained hash table whose buckets, entries, keys and
 * values all live in the store's heap and point at each other with plain pointers, valid
 * in every run because the store is always mapped at the same address. It doubles its
 * bucket array when it holds twice as many keys as buckets.
 */
#include "pstore_int.h"
#include <exomem/error.h>

#include <string.h>

#define KV_MAGIC UINT64_C(0x31424154564b5045) /* "EPKVTAB1" */
#define KV_INITIAL_BUCKETS 64

struct kv_entry {
    struct kv_entry *next;
    uint64_t hash;
    uint32_t klen, vlen;
    char data[]; /* key, then value */
};

struct kv_table {
    uint64_t magic;
    uint64_t nbuckets; /* a power of two */
    uint64_t count;
    struct kv_entry **buckets;
};

static uint64_t key_hash(const void *key, size_t klen)
{
    const unsigned char *b = key;
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < klen; i++)
        h = (h ^ b[i]) * UINT64_C(0x100000001b3);
    return h ^ (h >> 32);
}

static struct kv_table *table_of(struct pstore *p)
{
    struct kv_table *t = p->hdr->table;
    if (!t || !seg_heap_owns(p->heap, t) || t->magic != KV_MAGIC)
        return NULL;
    return t;
}

static struct kv_table *table_or_fail(struct pstore *p, int *rc)
{
    struct kv_table *t = table_of(p);
    *rc = t ? 0 : exomem_set_error(EXO_ECORRUPT, "pstore %s: no valid key-value table", p->path);
    return t;
}

int pstore_kv_init(struct pstore *p)
{
    int rc;
    struct kv_table *t = pstore_malloc(p, sizeof *t, &rc);
    struct kv_entry **b = t ? pstore_malloc(p, KV_INITIAL_BUCKETS * sizeof *b, &rc) : NULL;
    if (!b) {
        pstore_free(p, t);
        return exomem_set_error(rc ? rc : EXO_ENOMEM, "pstore: no room for the table");
    }
    memset(b, 0, KV_INITIAL_BUCKETS * sizeof *b);
    *t = (struct kv_table){.magic = KV_MAGIC, .nbuckets = KV_INITIAL_BUCKETS, .buckets = b};
    p->hdr->table = t;
    return 0;
}

static struct kv_entry **find_link(struct kv_table *t, const void *key, size_t klen,
                                   uint64_t h)
{
    struct kv_entry **link = &t->buckets[h & (t->nbuckets - 1)];
    for (; *link; link = &(*link)->next)
        if ((*link)->hash == h && (*link)->klen == klen && !memcmp((*link)->data, key, klen))
            return link;
    return link;
}

/* Double the buckets; on failure the table stays as it is (only slower). */
static void grow(struct pstore *p, struct kv_table *t)
{
    uint64_t n = t->nbuckets * 2;
    struct kv_entry **b = pstore_malloc(p, n * sizeof *b, NULL);
    if (!b)
        return;
    memset(b, 0, n * sizeof *b);
    for (uint64_t i = 0; i < t->nbuckets; i++)
        for (struct kv_entry *e = t->buckets[i], *next; e; e = next) {
            next = e->next;
            e->next = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
        }
    pstore_free(p, t->buckets);
    t->buckets = b;
    t->nbuckets = n;
}

int pstore_put(struct pstore *p, const void *key, size_t klen, const void *val, size_t vlen)
{
    int rc;
    struct kv_table *t = table_or_fail(p, &rc);
    if (!t)
        return rc;
    if (klen == 0 || klen > UINT32_MAX || vlen > UINT32_MAX)
        return exomem_set_error(EXO_EINVAL, "pstore: key of %zu or value of %zu bytes", klen, vlen);
    uint64_t h = key_hash(key, klen);
    struct kv_entry *e = pstore_malloc(p, sizeof *e + klen + vlen, &rc);
    if (!e)
        return exomem_set_error(rc ? rc : EXO_ENOMEM, "pstore: no room for a %zu-byte entry",
                        klen + vlen);
    e->hash = h, e->klen = (uint32_t)klen, e->vlen = (uint32_t)vlen;
    memcpy(e->data, key, klen);
    if (vlen)
        memcpy(e->data + klen, val, vlen);
    struct kv_entry **link = find_link(t, key, klen, h);
    struct kv_entry *old = *link;
    e->next = old ? old->next : NULL;
    *link = e;
    if (old)
        pstore_free(p, old);
    else if (++t->count > 2 * t->nbuckets)
        grow(p, t);
    return 0;
}

int pstore_get(struct pstore *p, const void *key, size_t klen, const void **val, size_t *vlen)
{
    int rc;
    struct kv_table *t = table_or_fail(p, &rc);
    if (!t)
        return rc;
    struct kv_entry *e = *find_link(t, key, klen, key_hash(key, klen));
    if (!e)
        return exomem_set_error(EXO_ENOENT, "pstore: no key '%.*s'", (int)(klen > 64 ? 64 : klen),
                        (const char *)key);
    *val = e->data + e->klen;
    *vlen = e->vlen;
    return 0;
}

int pstore_del(struct pstore *p, const void *key, size_t klen)
{
    int rc;
    struct kv_table *t = table_or_fail(p, &rc);
    if (!t)
        return rc;
    struct kv_entry **link = find_link(t, key, klen, key_hash(key, klen));
    struct kv_entry *e = *link;
    if (!e)
        return exomem_set_error(EXO_ENOENT, "pstore: no key '%.*s'", (int)(klen > 64 ? 64 : klen),
                        (const char *)key);
    *link = e->next;
    t->count--;
    return pstore_free(p, e);
}

size_t pstore_count(struct pstore *p)
{
    struct kv_table *t = table_of(p);
    return t ? t->count : 0;
}

int pstore_each(struct pstore *p,
                int (*fn)(const void *key, size_t klen, const void *val, size_t vlen, void *arg),
                void *arg)
{
    int rc;
    struct kv_table *t = table_or_fail(p, &rc);
    if (!t)
        return rc;
    for (uint64_t i = 0; i < t->nbuckets; i++)
        for (struct kv_entry *e = t->buckets[i]; e; e = e->next)
            if (fn(e->data, e->klen, e->data + e->klen, e->vlen, arg))
                return 0;
    return 0;
}

int pstore_kv_check(struct pstore *p)
{
    int rc;
    struct kv_table *t = table_or_fail(p, &rc);
    if (!t)
        return rc;
    if (!t->nbuckets || (t->nbuckets & (t->nbuckets - 1)) || !seg_heap_owns(p->heap, t->buckets))
        return exomem_set_error(EXO_ECORRUPT, "pstore %s: bad bucket array", p->path);
    uint64_t n = 0;
    for (uint64_t i = 0; i < t->nbuckets; i++)
        for (struct kv_entry *e = t->buckets[i]; e; e = e->next) {
            if (!seg_heap_owns(p->heap, e) || (e->hash & (t->nbuckets - 1)) != i ||
                e->hash != key_hash(e->data, e->klen) || ++n > t->count)
                return exomem_set_error(EXO_ECORRUPT, "pstore %s: bad entry in bucket %llu", p->path,
                                (unsigned long long)i);
        }
    if (n != t->count)
        return exomem_set_error(EXO_ECORRUPT, "pstore %s: %llu entries, %llu counted", p->path,
                        (unsigned long long)n, (unsigned long long)t->count);
    return 0;
}
