/* The memory store: each unit kept in this process's heap, compressed with lz4 or zstd (or
 * plain), in a hash table keyed by unit: Appel and Li's data-compression paging, where
 * evicted pages are compressed in memory instead of written to disk. A unit of zeros is
 * kept as a flag, no bytes. The units are found through the pager's own hash page table
 * (table_hash.c). One lock guards it; compression runs outside the lock, so several
 * threads compress at once. */
#include "pager/store.h"
#include "pager/table.h"
#include "internal.h"

#include <lz4.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#define ZSTD_LEVEL 1
#define ZEROS UINT64_C(1) /* the table entry of a unit of zeros (0 is "no entry") */

/* A unit as kept: its bytes follow the header. */
struct blob {
    uint32_t len;      /* bytes in data */
    uint32_t plain;    /* 1: kept as it is (did not compress) */
    char data[];
};

struct memory_store {
    exo_pager_store base;
    exo_pager_compression how;
    pthread_mutex_t lock;
    struct pager_table *units; /* unit -> struct blob * or ZEROS (the hash page table) */
    uint64_t bytes, count;
};

static void drop_entry(struct memory_store *m, uint64_t entry)
{
    if (entry > ZEROS) {
        struct blob *b = (struct blob *)(uintptr_t)entry;
        m->bytes -= b->len;
        free(b);
    }
    if (entry)
        m->count--;
}

static bool all_zero(const void *buf, size_t size)
{
    const uint64_t *w = buf;
    for (size_t i = 0; i < size / sizeof *w; i++)
        if (w[i])
            return false;
    return true;
}

/* Compress buf into a new blob (NULL when out of memory). */
static struct blob *pack(exo_pager_compression how, const void *buf, size_t size)
{
    size_t bound = how == EXO_PAGER_LZ4    ? (size_t)LZ4_compressBound((int)size)
                   : how == EXO_PAGER_ZSTD ? ZSTD_compressBound(size)
                                           : size;
    struct blob *out = malloc(sizeof *out + bound);
    if (!out)
        return NULL;
    size_t n = 0;
    if (how == EXO_PAGER_LZ4) {
        int r = LZ4_compress_default(buf, out->data, (int)size, (int)bound);
        n = r > 0 ? (size_t)r : 0;
    } else if (how == EXO_PAGER_ZSTD) {
        size_t r = ZSTD_compress(out->data, bound, buf, size, ZSTD_LEVEL);
        n = ZSTD_isError(r) ? 0 : r;
    }
    out->plain = n == 0 || n >= size;
    if (out->plain) {
        memcpy(out->data, buf, size);
        n = size;
    }
    out->len = (uint32_t)n;
    struct blob *fit = realloc(out, sizeof *out + n);
    return fit ? fit : out;
}

static int unpack(exo_pager_compression how, uint64_t entry, void *buf, size_t size)
{
    if (entry == ZEROS) {
        memset(buf, 0, size);
        return 0;
    }
    const struct blob *b = (const struct blob *)(uintptr_t)entry;
    if (b->plain) {
        memcpy(buf, b->data, size);
        return 0;
    }
    if (how == EXO_PAGER_LZ4)
        return LZ4_decompress_safe(b->data, buf, (int)b->len, (int)size) == (int)size
                   ? 0 : -EXO_ECORRUPT;
    size_t r = ZSTD_decompress(buf, size, b->data, b->len);
    return !ZSTD_isError(r) && r == size ? 0 : -EXO_ECORRUPT;
}

static int memory_read(exo_pager_store *s, uint64_t unit, size_t size, void *buf)
{
    struct memory_store *m = (struct memory_store *)s;
    pthread_mutex_lock(&m->lock);
    uint64_t *e = m->units->ops->find(m->units, unit);
    int rc = e ? unpack(m->how, *e, buf, size) : -EXO_ENOENT;
    pthread_mutex_unlock(&m->lock);
    return rc;
}

static int memory_write(exo_pager_store *s, uint64_t unit, size_t size, const void *buf)
{
    struct memory_store *m = (struct memory_store *)s;
    uint64_t fresh = ZEROS;
    if (!all_zero(buf, size)) {
        struct blob *b = pack(m->how, buf, size);
        if (!b)
            return -EXO_ENOMEM;
        fresh = (uint64_t)(uintptr_t)b;
    }
    pthread_mutex_lock(&m->lock);
    uint64_t *e = m->units->ops->insert(m->units, unit);
    int rc = 0;
    if (!e) {
        rc = -EXO_ENOMEM;
        if (fresh != ZEROS)
            free((void *)(uintptr_t)fresh);
    } else {
        drop_entry(m, *e);
        *e = fresh;
        m->count++;
        if (fresh != ZEROS)
            m->bytes += ((struct blob *)(uintptr_t)fresh)->len;
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

static int memory_discard(exo_pager_store *s, uint64_t unit, size_t size)
{
    (void)size;
    struct memory_store *m = (struct memory_store *)s;
    pthread_mutex_lock(&m->lock);
    uint64_t *e = m->units->ops->find(m->units, unit);
    if (e) {
        drop_entry(m, *e);
        m->units->ops->remove(m->units, unit);
    }
    pthread_mutex_unlock(&m->lock);
    return 0;
}

static void memory_usage(exo_pager_store *s, uint64_t *bytes, uint64_t *units)
{
    struct memory_store *m = (struct memory_store *)s;
    pthread_mutex_lock(&m->lock);
    *bytes = m->bytes;
    *units = m->count;
    pthread_mutex_unlock(&m->lock);
}

static int free_blob(uint64_t unit, uint64_t *entry, void *arg)
{
    (void)unit;
    drop_entry(arg, *entry);
    return 0;
}

static void memory_close(exo_pager_store *s)
{
    struct memory_store *m = (struct memory_store *)s;
    exo_pager_table_each(m->units, free_blob, m);
    m->units->ops->destroy(m->units);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

static const struct store_ops memory_ops = {memory_read, memory_write, memory_discard,
                                            memory_usage, memory_close};

EXO_API int exo_pager_store_memory(exo_pager_compression how, exo_pager_store **out)
{
    exo_clear_error();
    if (!out)
        return exo_fail(EXO_EINVAL, "exo_pager_store_memory: out is NULL");
    if (how != EXO_PAGER_PLAIN && how != EXO_PAGER_LZ4 && how != EXO_PAGER_ZSTD)
        return exo_fail(EXO_EINVAL, "memory store: unknown compression %d", (int)how);
    struct memory_store *m = calloc(1, sizeof *m);
    if (!m)
        return exo_fail(EXO_ENOMEM, "memory store: out of memory");
    if (!(m->units = exo_pager_hash_new(UINT64_MAX))) {
        free(m);
        return exo_fail(EXO_ENOMEM, "memory store: out of memory");
    }
    pthread_mutex_init(&m->lock, NULL);
    m->how = how;
    m->base.ops = &memory_ops;
    m->base.kind = how == EXO_PAGER_LZ4 ? "memory-lz4" : how == EXO_PAGER_ZSTD ? "memory-zstd"
                                                                            : "memory";
    *out = &m->base;
    return 0;
}
