/* The store calls the pager makes, and the public store calls that every kind shares. */
#include "pager/store.h"
#include "internal.h"

/* The test hook (exo_pager_store_fail): true while calls are set to fail. */
static bool failing(exo_pager_store *s)
{
    unsigned n = atomic_load(&s->fail_next);
    while (n > 0 && !atomic_compare_exchange_weak(&s->fail_next, &n, n - 1))
        ;
    return n > 0;
}

int exo_pager_store_read(exo_pager_store *s, uint64_t unit, size_t size, void *buf)
{
    return failing(s) ? -EXO_EIO : s->ops->read(s, unit, size, buf);
}

int exo_pager_store_write(exo_pager_store *s, uint64_t unit, size_t size, const void *buf)
{
    return failing(s) ? -EXO_EIO : s->ops->write(s, unit, size, buf);
}

int exo_pager_store_discard(exo_pager_store *s, uint64_t unit, size_t size)
{
    return s->ops->discard(s, unit, size);
}

EXO_API int exo_pager_store_usage(exo_pager_store *s, uint64_t *bytes, uint64_t *units)
{
    exo_clear_error();
    if (!s)
        return exo_fail(EXO_EINVAL, "exo_pager_store_usage: store is NULL");
    uint64_t b = 0, u = 0;
    s->ops->usage(s, &b, &u);
    if (bytes)
        *bytes = b;
    if (units)
        *units = u;
    return 0;
}

EXO_API int exo_pager_store_close(exo_pager_store *s)
{
    exo_clear_error();
    if (!s)
        return 0;
    if (atomic_load(&s->users) != 0)
        return exo_fail(EXO_EBUSY, "the %s store still serves a pager region: destroy it first",
                        s->kind);
    s->ops->close(s);
    return 0;
}

EXO_API int exo_pager_store_fail(exo_pager_store *s, unsigned count)
{
    exo_clear_error();
    if (!s)
        return exo_fail(EXO_EINVAL, "exo_pager_store_fail: store is NULL");
    atomic_store(&s->fail_next, count);
    return 0;
}
