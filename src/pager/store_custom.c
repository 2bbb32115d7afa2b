/* A store the application writes (exo_pager_store_custom): the pager calls its callbacks
 * for reads, write-backs and discards. What it does with the bytes is its own business: a
 * database's pages, a network, or, in apps/swizzle, translating pointers on the way in and
 * out (Wilson's pointer swizzling at page-fault time). */
#include "pager/store.h"
#include "internal.h"

#include <stdlib.h>

struct custom_store {
    exo_pager_store base;
    exo_pager_store_callbacks cb;
    atomic_uint_fast64_t units, bytes;
};

static int custom_read(exo_pager_store *s, uint64_t unit, size_t size, void *buf)
{
    struct custom_store *c = (struct custom_store *)s;
    int rc = c->cb.read(c->cb.arg, unit, size, buf);
    return rc == 1 ? -EXO_ENOENT : rc > 0 ? -EXO_EIO : rc;
}

static int custom_write(exo_pager_store *s, uint64_t unit, size_t size, const void *buf)
{
    struct custom_store *c = (struct custom_store *)s;
    int rc = c->cb.write(c->cb.arg, unit, size, buf);
    if (rc == 0) {
        atomic_fetch_add(&c->units, 1);
        atomic_fetch_add(&c->bytes, size);
    }
    return rc > 0 ? -EXO_EIO : rc;
}

static int custom_discard(exo_pager_store *s, uint64_t unit, size_t size)
{
    struct custom_store *c = (struct custom_store *)s;
    return c->cb.discard ? c->cb.discard(c->cb.arg, unit, size) : 0;
}

static void custom_usage(exo_pager_store *s, uint64_t *bytes, uint64_t *units)
{
    struct custom_store *c = (struct custom_store *)s;
    *bytes = atomic_load(&c->bytes);
    *units = atomic_load(&c->units);
}

static void custom_close(exo_pager_store *s)
{
    free(s);
}

static const struct store_ops custom_ops = {custom_read, custom_write, custom_discard,
                                            custom_usage, custom_close};

EXO_API int exo_pager_store_custom(const exo_pager_store_callbacks *cb, exo_pager_store **out)
{
    exo_clear_error();
    if (!cb || !out || !cb->read || !cb->write)
        return exo_fail(EXO_EINVAL, "exo_pager_store_custom: callbacks (read and write "
                        "required) or out is NULL");
    struct custom_store *c = calloc(1, sizeof *c);
    if (!c)
        return exo_fail(EXO_ENOMEM, "custom store: out of memory");
    c->base.ops = &custom_ops;
    c->base.kind = "custom";
    c->cb = *cb;
    *out = &c->base;
    return 0;
}
