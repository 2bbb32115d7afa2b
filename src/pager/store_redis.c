/* The Redis store: unit u of a region kept in one redis-server as the string key
 * "<prefix>:<u>" holding exactly the unit's bytes. Read is GET (no key: never written),
 * write is SET, discard is DEL, over a small pool of connections (redis_conn.h), so
 * handler threads and SIGBUS handlers of faulting threads are served at once. */
#include "pager/redis_conn.h"
#include "pager/store.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

struct redis_store {
    exo_pager_store base;
    struct exo_redis_keys keys;
    struct exo_redis_pool pool;
};

static int redis_call(exo_pager_store *s, enum exo_redis_op op, uint64_t unit, size_t size,
                      const void *buf)
{
    struct redis_store *r = (struct redis_store *)s;
    struct exo_redis_request req;
    exo_redis_request_init(&req, &r->keys, op, unit, size, buf);
    redisReply *replies[2];
    int rc = exo_redis_pool_exec(&r->pool, req.cmds, req.n, false, replies);
    return rc ? rc : exo_redis_request_finish(&req, &r->keys, replies);
}

static int redis_read(exo_pager_store *s, uint64_t unit, size_t size, void *buf)
{
    return redis_call(s, EXO_REDIS_READ, unit, size, buf);
}

static int redis_write(exo_pager_store *s, uint64_t unit, size_t size, const void *buf)
{
    return redis_call(s, EXO_REDIS_WRITE, unit, size, buf);
}

static int redis_discard(exo_pager_store *s, uint64_t unit, size_t size)
{
    return redis_call(s, EXO_REDIS_DISCARD, unit, size, NULL);
}

static void redis_usage(exo_pager_store *s, uint64_t *bytes, uint64_t *units)
{
    exo_redis_keys_usage(&((struct redis_store *)s)->keys, bytes, units);
}

static void redis_close(exo_pager_store *s)
{
    struct redis_store *r = (struct redis_store *)s;
    exo_redis_pool_fini(&r->pool);
    free(r);
}

static const struct store_ops redis_ops = {redis_read, redis_write, redis_discard, redis_usage,
                                           redis_close};

EXO_API int exo_pager_store_redis(const char *address, const char *key_prefix,
                                  exo_pager_store **out)
{
    exo_clear_error();
    if (!address || !key_prefix || !out)
        return exo_fail(EXO_EINVAL, "exo_pager_store_redis: address, key_prefix or out is NULL");
    struct exo_redis_addr addr;
    if (exo_redis_addr_parse(address, &addr) != 0)
        return exo_fail(EXO_EINVAL, "redis store: bad address '%s' (expected unix:/path or "
                        "host:port)", address);
    struct redis_store *r = calloc(1, sizeof *r);
    if (!r)
        return exo_fail(EXO_ENOMEM, "redis store %s: out of memory", address);
    if (exo_redis_keys_init(&r->keys, key_prefix) != 0) {
        free(r);
        return exo_fail(EXO_EINVAL, "redis store %s: key prefix must be 1 to %d bytes",
                        address, EXO_REDIS_PREFIX_MAX);
    }
    exo_redis_pool_init(&r->pool, &addr);
    char why[160] = "";
    int rc = exo_redis_pool_check(&r->pool, why, sizeof why);
    if (rc) {
        exo_redis_pool_fini(&r->pool);
        free(r);
        return exo_fail(-rc, "redis store %s: cannot reach the server: %s", address, why);
    }
    r->base.ops = &redis_ops;
    r->base.kind = "redis";
    *out = &r->base;
    return 0;
}
