/* Connections, commands and replies shared by the Redis stores (redis_conn.h). */
#include "pager/redis_conn.h"
#include "internal.h"
#include "os/os.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

/* ---- addresses ---- */

static int parse_port(const char *s, int *port)
{
    if (!*s)
        return -EXO_EINVAL;
    long v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || (v = v * 10 + (*s - '0')) > 65535)
            return -EXO_EINVAL;
    }
    if (v == 0)
        return -EXO_EINVAL;
    *port = (int)v;
    return 0;
}

int exo_redis_addr_parse(const char *text, struct exo_redis_addr *out)
{
    memset(out, 0, sizeof *out);
    if (!text)
        return -EXO_EINVAL;
    if (!strncmp(text, "unix:", 5)) {
        size_t n = strlen(text + 5);
        if (n == 0 || n >= sizeof out->host)
            return -EXO_EINVAL;
        memcpy(out->host, text + 5, n + 1);
        return 0;
    }
    const char *host = text, *colon;
    size_t n;
    if (text[0] == '[') { /* [IPv6]:port */
        const char *close = strchr(text, ']');
        if (!close || close[1] != ':')
            return -EXO_EINVAL;
        host = text + 1;
        n = (size_t)(close - host);
        colon = close + 1;
    } else {
        colon = strrchr(text, ':');
        if (!colon || memchr(text, ':', (size_t)(colon - text)))
            return -EXO_EINVAL; /* no port, or a bare IPv6 address */
        n = (size_t)(colon - text);
    }
    if (n == 0 || n >= sizeof out->host || parse_port(colon + 1, &out->port) != 0)
        return -EXO_EINVAL;
    memcpy(out->host, host, n);
    out->host[n] = 0;
    return 0;
}

void exo_redis_addr_format(const struct exo_redis_addr *a, char *buf, size_t len)
{
    if (!a->port)
        snprintf(buf, len, "unix:%s", a->host);
    else if (strchr(a->host, ':'))
        snprintf(buf, len, "[%s]:%d", a->host, a->port);
    else
        snprintf(buf, len, "%s:%d", a->host, a->port);
}

bool exo_redis_addr_equal(const struct exo_redis_addr *a, const struct exo_redis_addr *b)
{
    return a->port == b->port && !strcmp(a->host, b->host);
}

/* ---- connections ---- */

void exo_redis_pool_init(struct exo_redis_pool *p, const struct exo_redis_addr *addr)
{
    memset(p, 0, sizeof *p);
    p->addr = *addr;
    for (int i = 0; i < EXO_REDIS_POOL; i++)
        pthread_mutex_init(&p->conn[i].lock, NULL);
}

void exo_redis_pool_fini(struct exo_redis_pool *p)
{
    for (int i = 0; i < EXO_REDIS_POOL; i++) {
        if (p->conn[i].ctx)
            redisFree(p->conn[i].ctx);
        p->conn[i].ctx = NULL;
        pthread_mutex_destroy(&p->conn[i].lock);
    }
}

/* Any free connection, else wait for the one the round robin points at. Returned locked. */
static struct exo_redis_conn *take(struct exo_redis_pool *p)
{
    unsigned start = atomic_fetch_add(&p->next, 1);
    for (unsigned i = 0; i < EXO_REDIS_POOL; i++) {
        struct exo_redis_conn *c = &p->conn[(start + i) % EXO_REDIS_POOL];
        if (pthread_mutex_trylock(&c->lock) == 0)
            return c;
    }
    struct exo_redis_conn *c = &p->conn[start % EXO_REDIS_POOL];
    pthread_mutex_lock(&c->lock);
    return c;
}

static void drop(struct exo_redis_conn *c)
{
    if (c->ctx)
        redisFree(c->ctx);
    c->ctx = NULL;
}

/* Open a connection with both timeouts set: 0, or a code with the reason in why. */
static int dial(const struct exo_redis_addr *a, redisContext **out, char *why, size_t why_len)
{
    struct timeval tv = {EXO_REDIS_TIMEOUT_MS / 1000, (EXO_REDIS_TIMEOUT_MS % 1000) * 1000};
    redisContext *c = a->port ? redisConnectWithTimeout(a->host, a->port, tv)
                              : redisConnectUnixWithTimeout(a->host, tv);
    if (!c) {
        snprintf(why, why_len, "out of memory");
        return -EXO_ENOMEM;
    }
    if (!c->err)
        redisSetTimeout(c, tv); /* sets c->err when it fails */
    if (c->err) {
        int rc = c->err == REDIS_ERR_OOM ? -EXO_ENOMEM : -EXO_EIO;
        snprintf(why, why_len, "%s", c->errstr);
        redisFree(c);
        return rc;
    }
    *out = c;
    return 0;
}

enum run_outcome { RUN_OK, RUN_BROKEN, RUN_FAILED };

/* Send the commands and read their replies on c. RUN_BROKEN: the server closed or reset
 * the connection (worth one more try on a new one); RUN_FAILED: timeout, protocol error
 * or no memory, with the code in *code. Either way c is unusable afterwards. */
static enum run_outcome run(redisContext *c, const struct exo_redis_cmd *cmds, int n,
                            bool asking, redisReply **replies, int *code)
{
    for (int i = 0; i < n; i++) {
        const char *argv[3] = {cmds[i].argv[0], cmds[i].argv[1], cmds[i].argv[2]};
        if ((asking && redisAppendCommand(c, "ASKING") != REDIS_OK) ||
            redisAppendCommandArgv(c, cmds[i].argc, argv, cmds[i].len) != REDIS_OK) {
            *code = c->err == REDIS_ERR_OOM ? -EXO_ENOMEM : -EXO_EIO;
            return RUN_FAILED;
        }
    }
    exo_os_sigpipe_hold hold;
    exo_os_sigpipe_hold_start(&hold);
    int err = 0;
    for (int i = 0; i < n && !err; i++) {
        void *r = NULL;
        if (asking) { /* ASKING's +OK; an error there shows in the command's own reply */
            if (redisGetReply(c, &r) != REDIS_OK)
                err = errno ? errno : EIO;
            if (r)
                freeReplyObject(r);
            r = NULL;
        }
        if (!err && redisGetReply(c, &r) != REDIS_OK)
            err = errno ? errno : EIO;
        replies[i] = r;
    }
    exo_os_sigpipe_hold_end(&hold);
    if (!err)
        return RUN_OK;
    exo_redis_free_replies(replies, n);
    *code = c->err == REDIS_ERR_OOM ? -EXO_ENOMEM : -EXO_EIO;
    if (c->err == REDIS_ERR_EOF)
        return RUN_BROKEN;
    if (c->err == REDIS_ERR_IO && err != EAGAIN && err != EWOULDBLOCK)
        return RUN_BROKEN; /* EPIPE, ECONNRESET: not a timeout */
    return RUN_FAILED;
}

int exo_redis_pool_exec(struct exo_redis_pool *p, const struct exo_redis_cmd *cmds, int n,
                        bool asking, redisReply **replies)
{
    for (int i = 0; i < n; i++)
        replies[i] = NULL;
    struct exo_redis_conn *c = take(p);
    int rc = 0;
    for (int attempt = 0;; attempt++) {
        bool fresh = !c->ctx;
        char why[128];
        if (fresh && (rc = dial(&p->addr, &c->ctx, why, sizeof why)) != 0)
            break;
        errno = 0;
        enum run_outcome how = run(c->ctx, cmds, n, asking, replies, &rc);
        if (how == RUN_OK) {
            rc = 0;
            break;
        }
        drop(c);
        /* Only a connection that had been idle in the pool is worth opening again: one
         * just opened that breaks means the server is going away. */
        if (how != RUN_BROKEN || fresh || attempt > 0)
            break;
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

int exo_redis_pool_check(struct exo_redis_pool *p, char *why, size_t why_len)
{
    struct exo_redis_conn *c = take(p);
    int rc = c->ctx ? 0 : dial(&p->addr, &c->ctx, why, why_len);
    if (rc == 0) {
        redisReply *r = NULL;
        struct exo_redis_cmd ping = {1, {"PING"}, {4}};
        errno = 0;
        if (run(c->ctx, &ping, 1, false, &r, &rc) != RUN_OK) {
            snprintf(why, why_len, "PING: %s", c->ctx->errstr);
            drop(c);
        } else if (r->type != REDIS_REPLY_STATUS) {
            snprintf(why, why_len, "PING: %.*s", (int)(r->type == REDIS_REPLY_ERROR ? r->len : 0),
                     r->str ? r->str : "");
            rc = -EXO_EIO;
        }
        if (r)
            freeReplyObject(r);
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

void exo_redis_free_replies(redisReply **replies, int n)
{
    for (int i = 0; i < n; i++) {
        if (replies[i])
            freeReplyObject(replies[i]);
        replies[i] = NULL;
    }
}

/* ---- the store calls ---- */

int exo_redis_keys_init(struct exo_redis_keys *k, const char *prefix)
{
    memset(k, 0, sizeof *k);
    size_t n = prefix ? strlen(prefix) : 0;
    if (n == 0 || n > EXO_REDIS_PREFIX_MAX)
        return -EXO_EINVAL;
    memcpy(k->prefix, prefix, n + 1);
    return 0;
}

void exo_redis_keys_usage(struct exo_redis_keys *k, uint64_t *bytes, uint64_t *units)
{
    *bytes = atomic_load(&k->bytes);
    *units = atomic_load(&k->units);
}

/* Take v from *c, but never below 0 (a discard may remove a key written before this store
 * was opened, which the counters never had). */
static void sub_floor(atomic_uint_fast64_t *c, uint64_t v)
{
    uint_fast64_t old = atomic_load(c);
    while (!atomic_compare_exchange_weak(c, &old, old > v ? old - v : 0))
        ;
}

void exo_redis_request_init(struct exo_redis_request *r, const struct exo_redis_keys *k,
                            enum exo_redis_op op, uint64_t unit, size_t size, const void *buf)
{
    r->op = op;
    r->key_len = (size_t)snprintf(r->key, sizeof r->key, "%s:%llu", k->prefix,
                                  (unsigned long long)unit);
    r->size = size;
    r->buf = (void *)(uintptr_t)buf;
    static const char *verbs[] = {"GET", "SET", "DEL"};
    struct exo_redis_cmd *c = r->cmds;
    r->n = 1;
    if (op == EXO_REDIS_WRITE) {
        *c++ = (struct exo_redis_cmd){2, {"EXISTS", r->key}, {6, r->key_len}};
        r->n = 2;
    }
    *c = (struct exo_redis_cmd){2, {verbs[op], r->key}, {3, r->key_len}};
    if (op == EXO_REDIS_WRITE) {
        c->argc = 3;
        c->argv[2] = buf;
        c->len[2] = size;
    }
}

static int error_code(const redisReply *r)
{
    return r->len >= 3 && !strncmp(r->str, "OOM", 3) ? -EXO_ENOMEM : -EXO_EIO;
}

int exo_redis_request_finish(struct exo_redis_request *r, struct exo_redis_keys *k,
                             redisReply **replies)
{
    const redisReply *last = replies[r->n - 1];
    int rc = -EXO_EIO;
    if (last->type == REDIS_REPLY_ERROR) {
        rc = error_code(last);
    } else if (r->op == EXO_REDIS_READ) {
        if (last->type == REDIS_REPLY_NIL) {
            rc = -EXO_ENOENT;
        } else if (last->type == REDIS_REPLY_STRING) {
            rc = last->len == r->size ? 0 : -EXO_ECORRUPT;
            if (rc == 0)
                memcpy(r->buf, last->str, r->size);
        }
    } else if (r->op == EXO_REDIS_WRITE) {
        if (last->type == REDIS_REPLY_STATUS) {
            rc = 0;
            if (replies[0]->type == REDIS_REPLY_INTEGER && replies[0]->integer == 0) {
                atomic_fetch_add(&k->units, 1);
                atomic_fetch_add(&k->bytes, r->size);
            }
        }
    } else if (last->type == REDIS_REPLY_INTEGER) {
        rc = 0;
        if (last->integer > 0) {
            sub_floor(&k->units, 1);
            sub_floor(&k->bytes, r->size);
        }
    }
    exo_redis_free_replies(replies, r->n);
    return rc;
}
