/* The Redis Cluster store: the keys of the Redis store ("<prefix>:<u>", the unit's bytes),
 * spread over the nodes of a Redis Cluster by the cluster's own rule. Each key's hash slot
 * is crc16(key) mod 16384 (or of its {hash tag}); a map from slot to node, loaded with
 * CLUSTER SLOTS from a seed, says where to send it. A node that no longer owns the slot
 * answers -MOVED <slot> <host:port>: the map is corrected for that slot and the command
 * sent again there. A slot being migrated answers -ASK <slot> <host:port> for keys already
 * moved: the command goes once to that node, preceded by ASKING, and the map is left as it
 * is. A node that cannot be reached makes the map be loaded again once (a failover moves
 * its slots). Every node has its own pool of connections (redis_conn.h). */
#include "pager/redis_conn.h"
#include "pager/store.h"
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_REDIRECTS 5   /* -MOVED/-ASK followed for one call before it fails */
#define MAX_NODES 1024

struct node {
    struct exo_redis_pool pool; /* pool.addr is the node's address */
};

struct cluster_store {
    exo_pager_store base;
    struct exo_redis_keys keys;
    pthread_rwlock_t lock;          /* guards slot, nodes, nnodes, cap */
    uint16_t slot[EXO_REDIS_SLOTS]; /* the slot's node: index in nodes + 1; 0 for none */
    struct node **nodes;            /* seeds first; a node is never removed until close */
    size_t nnodes, cap;
    pthread_mutex_t reload_lock;    /* one map reload at a time */
    atomic_uint_fast64_t moved, asked, reloads;
};

/* ---- hash slots (the Redis Cluster specification, "Keys distribution model") ---- */

uint16_t exo_redis_crc16(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)(p[i] << 8);
        for (int bit = 0; bit < 8; bit++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

unsigned exo_redis_key_slot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len);
    if (open) {
        size_t start = (size_t)(open - key) + 1;
        const char *close = memchr(key + start, '}', len - start);
        if (close && close > key + start) /* a non-empty tag: only it is hashed */
            return exo_redis_crc16(key + start, (size_t)(close - key) - start) % EXO_REDIS_SLOTS;
    }
    return exo_redis_crc16(key, len) % EXO_REDIS_SLOTS;
}

/* ---- the slot map ---- */

/* The index of the node at addr, added if new. Write lock held. -EXO_ENOMEM, or -EXO_EIO
 * when the cluster names more than MAX_NODES nodes. */
static int node_index_locked(struct cluster_store *c, const struct exo_redis_addr *addr)
{
    for (size_t i = 0; i < c->nnodes; i++)
        if (exo_redis_addr_equal(&c->nodes[i]->pool.addr, addr))
            return (int)i;
    if (c->nnodes == MAX_NODES)
        return -EXO_EIO;
    if (c->nnodes == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 8;
        struct node **grown = realloc(c->nodes, cap * sizeof *grown);
        if (!grown)
            return -EXO_ENOMEM;
        c->nodes = grown;
        c->cap = cap;
    }
    struct node *n = malloc(sizeof *n);
    if (!n)
        return -EXO_ENOMEM;
    exo_redis_pool_init(&n->pool, addr);
    c->nodes[c->nnodes] = n;
    return (int)c->nnodes++;
}

static struct node *node_at(struct cluster_store *c, const struct exo_redis_addr *addr,
                            int move_slot)
{
    pthread_rwlock_wrlock(&c->lock);
    int i = node_index_locked(c, addr);
    struct node *n = i >= 0 ? c->nodes[i] : NULL;
    if (n && move_slot >= 0)
        c->slot[move_slot] = (uint16_t)(i + 1);
    pthread_rwlock_unlock(&c->lock);
    return n;
}

static struct node *owner(struct cluster_store *c, unsigned slot)
{
    pthread_rwlock_rdlock(&c->lock);
    uint16_t i = c->slot[slot];
    struct node *n = i ? c->nodes[i - 1] : NULL;
    pthread_rwlock_unlock(&c->lock);
    return n;
}

/* Put the map of a CLUSTER SLOTS reply (from the node at `from`) in place: 0, or a code
 * with the reason in why. Each entry is [first, last, [host, port, ...], replicas...]; an
 * empty host (or "?") means the host we asked. */
static int install_map(struct cluster_store *c, const redisReply *r,
                       const struct exo_redis_addr *from, char *why, size_t why_len)
{
    if (r->type != REDIS_REPLY_ARRAY) {
        snprintf(why, why_len, "CLUSTER SLOTS: %.*s", (int)(r->str ? r->len : 0),
                 r->str ? r->str : "an unexpected reply");
        return -EXO_EIO;
    }
    uint16_t *map = calloc(EXO_REDIS_SLOTS, sizeof *map); /* not on a signal stack */
    if (!map)
        return -EXO_ENOMEM;
    int rc = 0;
    size_t owned = 0;
    pthread_rwlock_wrlock(&c->lock);
    for (size_t e = 0; e < r->elements && rc == 0; e++) {
        const redisReply *range = r->element[e];
        if (range->type != REDIS_REPLY_ARRAY || range->elements < 3 ||
            range->element[0]->type != REDIS_REPLY_INTEGER ||
            range->element[1]->type != REDIS_REPLY_INTEGER ||
            range->element[2]->type != REDIS_REPLY_ARRAY || range->element[2]->elements < 2)
            continue;
        long long first = range->element[0]->integer, last = range->element[1]->integer;
        const redisReply *host = range->element[2]->element[0];
        const redisReply *port = range->element[2]->element[1];
        if (first < 0 || last >= EXO_REDIS_SLOTS || first > last ||
            host->type != REDIS_REPLY_STRING || port->type != REDIS_REPLY_INTEGER ||
            port->integer <= 0 || port->integer > 65535)
            continue;
        struct exo_redis_addr a = {.port = (int)port->integer};
        if (host->len == 0 || (host->len == 1 && host->str[0] == '?')) {
            if (!from->port)
                continue; /* asked over a UNIX socket: no host to go by */
            memcpy(a.host, from->host, sizeof a.host);
        } else if (host->len < sizeof a.host) {
            memcpy(a.host, host->str, host->len);
        } else {
            continue;
        }
        int i = node_index_locked(c, &a);
        if (i < 0) {
            rc = i;
            snprintf(why, why_len, "%s", rc == -EXO_ENOMEM ? "out of memory" : "too many nodes");
            break;
        }
        for (long long s = first; s <= last; s++)
            map[s] = (uint16_t)(i + 1);
        owned += (size_t)(last - first + 1);
    }
    if (rc == 0 && owned == 0) {
        snprintf(why, why_len, "CLUSTER SLOTS: no slot is served by any node");
        rc = -EXO_EIO;
    }
    if (rc == 0)
        memcpy(c->slot, map, sizeof c->slot);
    pthread_rwlock_unlock(&c->lock);
    free(map);
    if (rc == 0)
        atomic_fetch_add(&c->reloads, 1);
    return rc;
}

/* Load the map from the first node (seeds first) that gives one: 0, or the last failure's
 * code with its reason in why (when why is not NULL: it costs one more connect per node
 * that failed, so only exo_pager_store_redis_cluster asks). */
static int reload(struct cluster_store *c, char *why, size_t why_len)
{
    pthread_mutex_lock(&c->reload_lock);
    int rc = -EXO_EIO;
    for (size_t i = 0;; i++) {
        pthread_rwlock_rdlock(&c->lock);
        struct node *n = i < c->nnodes ? c->nodes[i] : NULL;
        pthread_rwlock_unlock(&c->lock);
        if (!n)
            break;
        struct exo_redis_cmd slots = {2, {"CLUSTER", "SLOTS"}, {7, 5}};
        redisReply *r;
        char reason[160] = "no answer";
        rc = exo_redis_pool_exec(&n->pool, &slots, 1, false, &r);
        if (rc == 0) {
            rc = install_map(c, r, &n->pool.addr, reason, sizeof reason);
            freeReplyObject(r);
            if (rc == 0)
                break;
        } else if (why) {
            exo_redis_pool_check(&n->pool, reason, sizeof reason);
        }
        if (why) {
            char addr[160];
            exo_redis_addr_format(&n->pool.addr, addr, sizeof addr);
            snprintf(why, why_len, "%s: %s", addr, reason);
        }
    }
    pthread_mutex_unlock(&c->reload_lock);
    return rc;
}

/* -MOVED / -ASK: "MOVED 3999 127.0.0.1:6381". 1 for MOVED, 2 for ASK, 0 for any other
 * reply; the slot and the node's address (an empty host is `from`'s) go to *slot, *to. */
static int redirection(const redisReply *r, const struct exo_redis_addr *from, unsigned *slot,
                       struct exo_redis_addr *to)
{
    if (r->type != REDIS_REPLY_ERROR || !r->str)
        return 0;
    int kind = !strncmp(r->str, "MOVED ", 6) ? 1 : !strncmp(r->str, "ASK ", 4) ? 2 : 0;
    if (!kind)
        return 0;
    const char *p = r->str + (kind == 1 ? 6 : 4);
    char *end;
    unsigned long s = strtoul(p, &end, 10);
    const char *colon = strrchr(end, ':');
    if (end == p || *end != ' ' || s >= EXO_REDIS_SLOTS || !colon)
        return 0;
    const char *host = end + 1;
    size_t hlen = (size_t)(colon - host);
    long port = strtol(colon + 1, &end, 10);
    if (*end || port <= 0 || port > 65535 || hlen >= sizeof to->host)
        return 0;
    memset(to, 0, sizeof *to);
    if (hlen == 0) {
        if (!from->port)
            return 0;
        memcpy(to->host, from->host, sizeof to->host);
    } else {
        memcpy(to->host, host, hlen);
    }
    to->port = (int)port;
    *slot = (unsigned)s;
    return kind;
}

static int cluster_call(exo_pager_store *s, enum exo_redis_op op, uint64_t unit, size_t size,
                        const void *buf)
{
    struct cluster_store *c = (struct cluster_store *)s;
    struct exo_redis_request req;
    exo_redis_request_init(&req, &c->keys, op, unit, size, buf);
    unsigned slot = exo_redis_key_slot(req.key, req.key_len);
    struct node *n = owner(c, slot);
    bool reloaded = false, asking = false;
    if (!n) {
        reloaded = true;
        if (reload(c, NULL, 0) != 0 || !(n = owner(c, slot)))
            return -EXO_EIO;
    }
    for (int hops = 0;; hops++) {
        redisReply *replies[2];
        int rc = exo_redis_pool_exec(&n->pool, req.cmds, req.n, asking, replies);
        if (rc) {
            /* A node that cannot be reached may have lost its slots to another (failover):
             * load the map again, once, and go to the slot's new owner if it has one. */
            if (rc != -EXO_EIO || reloaded || asking)
                return rc;
            reloaded = true;
            struct node *next = reload(c, NULL, 0) == 0 ? owner(c, slot) : NULL;
            if (!next || next == n)
                return rc;
            n = next;
            continue;
        }
        unsigned to_slot = 0;
        struct exo_redis_addr to;
        int kind = 0;
        for (int i = 0; i < req.n && !kind; i++)
            kind = redirection(replies[i], &n->pool.addr, &to_slot, &to);
        if (!kind)
            return exo_redis_request_finish(&req, &c->keys, replies);
        exo_redis_free_replies(replies, req.n);
        if (hops == MAX_REDIRECTS)
            return -EXO_EIO;
        if (kind == 1) { /* MOVED: the slot lives there now */
            atomic_fetch_add(&c->moved, 1);
            n = node_at(c, &to, (int)to_slot);
            asking = false;
        } else {         /* ASK: this key only, this time only */
            atomic_fetch_add(&c->asked, 1);
            n = node_at(c, &to, -1);
            asking = true;
        }
        if (!n)
            return -EXO_ENOMEM;
    }
}

static int cluster_read(exo_pager_store *s, uint64_t unit, size_t size, void *buf)
{
    return cluster_call(s, EXO_REDIS_READ, unit, size, buf);
}

static int cluster_write(exo_pager_store *s, uint64_t unit, size_t size, const void *buf)
{
    return cluster_call(s, EXO_REDIS_WRITE, unit, size, buf);
}

static int cluster_discard(exo_pager_store *s, uint64_t unit, size_t size)
{
    return cluster_call(s, EXO_REDIS_DISCARD, unit, size, NULL);
}

static void cluster_usage(exo_pager_store *s, uint64_t *bytes, uint64_t *units)
{
    exo_redis_keys_usage(&((struct cluster_store *)s)->keys, bytes, units);
}

static void cluster_close(exo_pager_store *s)
{
    struct cluster_store *c = (struct cluster_store *)s;
    for (size_t i = 0; i < c->nnodes; i++) {
        exo_redis_pool_fini(&c->nodes[i]->pool);
        free(c->nodes[i]);
    }
    free(c->nodes);
    pthread_rwlock_destroy(&c->lock);
    pthread_mutex_destroy(&c->reload_lock);
    free(c);
}

static const struct store_ops cluster_ops = {cluster_read, cluster_write, cluster_discard,
                                             cluster_usage, cluster_close};

void exo_redis_cluster_counters(exo_pager_store *s, uint64_t *moved, uint64_t *asked,
                                uint64_t *reloads)
{
    struct cluster_store *c = (struct cluster_store *)s;
    bool ours = s && s->ops == &cluster_ops;
    *moved = ours ? atomic_load(&c->moved) : 0;
    *asked = ours ? atomic_load(&c->asked) : 0;
    *reloads = ours ? atomic_load(&c->reloads) : 0;
}

EXO_API int exo_pager_store_redis_cluster(const char *const *seeds, size_t nseeds,
                                          const char *key_prefix, exo_pager_store **out)
{
    exo_clear_error();
    if (!seeds || !nseeds || !key_prefix || !out)
        return exo_fail(EXO_EINVAL, "exo_pager_store_redis_cluster: seeds, key_prefix or out "
                        "is NULL, or nseeds is 0");
    if (nseeds > MAX_NODES)
        return exo_fail(EXO_EINVAL, "redis cluster store: %zu seeds, at most %d", nseeds,
                        MAX_NODES);
    struct exo_redis_addr addr[1];
    for (size_t i = 0; i < nseeds; i++)
        if (exo_redis_addr_parse(seeds[i], addr) != 0)
            return exo_fail(EXO_EINVAL, "redis cluster store: bad seed address '%s' (expected "
                            "host:port)", seeds[i] ? seeds[i] : "(NULL)");
    struct cluster_store *c = calloc(1, sizeof *c);
    if (!c)
        return exo_fail(EXO_ENOMEM, "redis cluster store: out of memory");
    pthread_rwlock_init(&c->lock, NULL);
    pthread_mutex_init(&c->reload_lock, NULL);
    c->base.ops = &cluster_ops;
    c->base.kind = "redis-cluster";
    if (exo_redis_keys_init(&c->keys, key_prefix) != 0) {
        cluster_close(&c->base);
        return exo_fail(EXO_EINVAL, "redis cluster store: key prefix must be 1 to %d bytes",
                        EXO_REDIS_PREFIX_MAX);
    }
    for (size_t i = 0; i < nseeds; i++) {
        exo_redis_addr_parse(seeds[i], addr);
        if (!node_at(c, addr, -1)) {
            cluster_close(&c->base);
            return exo_fail(EXO_ENOMEM, "redis cluster store: out of memory");
        }
    }
    char why[400] = "";
    int rc = reload(c, why, sizeof why);
    if (rc) {
        cluster_close(&c->base);
        return exo_fail(-rc, "redis cluster store: no seed gave the slot map (%s)", why);
    }
    *out = &c->base;
    return 0;
}
