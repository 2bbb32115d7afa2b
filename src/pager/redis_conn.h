/* What the two Redis stores share (store_redis.c: one server; store_redis_cluster.c: a
 * Redis Cluster): server addresses, a small pool of hiredis connections per server, the
 * commands behind each store call and what their replies mean, and the usage counters.
 *
 * A pool holds EXO_REDIS_POOL connections, each with its own mutex, opened when first
 * needed. A call takes any free one (trylock round robin) or else waits for one. Connecting
 * and every command are bounded by EXO_REDIS_TIMEOUT_MS (redisConnectWithTimeout,
 * redisSetTimeout). A connection found broken (the server closed it, or reset it) is opened
 * again once and the commands sent again (they are idempotent); one that timed out is
 * dropped and the call fails, so a server that hangs costs one timeout per call, and one
 * that died costs a refused connect. Nothing here aborts or prints; failures are -EXO_EIO
 * (the server, the network, a timeout) or -EXO_ENOMEM. Calls allocate (hiredis), so the
 * stores are not async-signal-safe: like the memory store, they serve SIGBUS delivery as long
 * as the faulting access was not inside malloc (store.h). SIGPIPE is held off while a
 * connection writes. */
#ifndef EXOMEM_PAGER_REDIS_CONN_H
#define EXOMEM_PAGER_REDIS_CONN_H

#include <exomem/pager.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EXO_REDIS_POOL 4              /* connections per server */
#define EXO_REDIS_TIMEOUT_MS 2000     /* connect, and each command */
#define EXO_REDIS_PREFIX_MAX 200      /* bytes of a key prefix */
#define EXO_REDIS_KEY_MAX (EXO_REDIS_PREFIX_MAX + 24) /* "<prefix>:<unit>" and its NUL */

/* A server: host and TCP port, or a UNIX socket path (port 0). */
struct exo_redis_addr {
    char host[108];
    int port;
};

/* Parse "unix:/path/to/socket" or "host:port" ("[v6 address]:port" too). 0, or -EXO_EINVAL
 * for anything else (empty host or path, a port outside 1-65535, a path too long). */
int exo_redis_addr_parse(const char *text, struct exo_redis_addr *out);
/* The address as text ("unix:/p" or "host:port"), for messages. */
void exo_redis_addr_format(const struct exo_redis_addr *a, char *buf, size_t len);
bool exo_redis_addr_equal(const struct exo_redis_addr *a, const struct exo_redis_addr *b);

struct exo_redis_conn {
    pthread_mutex_t lock;
    redisContext *ctx;   /* NULL: not connected (yet, or any more) */
};

struct exo_redis_pool {
    struct exo_redis_addr addr;
    atomic_uint next;    /* where the next call starts looking for a free connection */
    struct exo_redis_conn conn[EXO_REDIS_POOL];
};

void exo_redis_pool_init(struct exo_redis_pool *p, const struct exo_redis_addr *addr);
/* Close every connection (no call may be running). */
void exo_redis_pool_fini(struct exo_redis_pool *p);

/* Connect one connection now and PING, to find out at open time whether the server is
 * there. 0, or -EXO_EIO / -EXO_ENOMEM with hiredis's or the server's reason in why. */
int exo_redis_pool_check(struct exo_redis_pool *p, char *why, size_t why_len);

/* One command: up to 3 arguments, binary-safe. */
struct exo_redis_cmd {
    int argc;
    const char *argv[3];
    size_t len[3];
};

/* Send n commands (n <= 2) as one pipeline on one of the pool's connections, each preceded
 * by ASKING when `asking` (a Redis Cluster -ASK redirection), and read their replies into
 * replies[0..n) (free them with exo_redis_free_replies). An error reply is a reply, not a
 * failure. 0, -EXO_EIO (cannot connect, connection lost twice, timeout, protocol error),
 * -EXO_ENOMEM; on failure replies[] are all NULL. Blocks for the server, at most about
 * 2 x (connect + command) timeouts. */
int exo_redis_pool_exec(struct exo_redis_pool *p, const struct exo_redis_cmd *cmds, int n,
                        bool asking, redisReply **replies);
void exo_redis_free_replies(redisReply **replies, int n);

/* ---- the store calls, as commands ---- */

/* What both stores keep per store: the key prefix and usage (units, and their bytes,
 * whose keys this store's writes made and its discards have not removed). */
struct exo_redis_keys {
    char prefix[EXO_REDIS_PREFIX_MAX + 1];
    atomic_uint_fast64_t units, bytes;
};

/* 0, or -EXO_EINVAL (NULL, empty or longer than EXO_REDIS_PREFIX_MAX). */
int exo_redis_keys_init(struct exo_redis_keys *k, const char *prefix);
void exo_redis_keys_usage(struct exo_redis_keys *k, uint64_t *bytes, uint64_t *units);

enum exo_redis_op { EXO_REDIS_READ, EXO_REDIS_WRITE, EXO_REDIS_DISCARD };

/* One store call as commands: read is GET key; write is EXISTS key then SET key value (the
 * EXISTS tells the usage counters whether the key is new); discard is DEL key. */
struct exo_redis_request {
    enum exo_redis_op op;
    char key[EXO_REDIS_KEY_MAX];
    size_t key_len;
    size_t size;               /* the unit's bytes */
    void *buf;                 /* read: where the unit goes */
    int n;                     /* commands */
    struct exo_redis_cmd cmds[2];
};

void exo_redis_request_init(struct exo_redis_request *r, const struct exo_redis_keys *k,
                            enum exo_redis_op op, uint64_t unit, size_t size, const void *buf);

/* Interpret the replies of r's commands (and free them): 0; -EXO_ENOENT (read of a key the
 * server does not have); -EXO_ECORRUPT (a value that is not `size` bytes); -EXO_ENOMEM
 * (the server's -OOM); -EXO_EIO (any other error reply, or a reply of the wrong type). */
int exo_redis_request_finish(struct exo_redis_request *r, struct exo_redis_keys *k,
                             redisReply **replies);

/* ---- Redis Cluster (store_redis_cluster.c), exposed for the tests ---- */

#define EXO_REDIS_SLOTS 16384

/* CRC16/XMODEM (polynomial 0x1021, initial value 0, no reflection), as the Redis Cluster
 * specification defines it: crc16("123456789") is 0x31C3. */
uint16_t exo_redis_crc16(const void *data, size_t len);
/* The hash slot of a key: crc16 of the key, or of its {hash tag} (the bytes between the
 * first '{' and the first '}' after it, when there is at least one), modulo 16384. */
unsigned exo_redis_key_slot(const char *key, size_t len);

/* A cluster store's redirection counters: -MOVED replies followed (the slot map updated),
 * -ASK replies followed (ASKING sent), full slot-map reloads (CLUSTER SLOTS). */
void exo_redis_cluster_counters(exo_pager_store *s, uint64_t *moved, uint64_t *asked,
                                uint64_t *reloads);

#endif
