/* redis-server processes for test_pager_redis: started with fork/exec in a directory of the
 * test's registry (removed at exit with it), waited for by polling PING, and always
 * stopped: SIGKILL and waitpid at exit (also after a failed CHECK), and PR_SET_PDEATHSIG
 * kills them if the test itself dies. Admin commands go through hiredis directly, not
 * through the stores under test. */
#ifndef EXOMEM_TEST_REDIS_FIXTURE_H
#define EXOMEM_TEST_REDIS_FIXTURE_H

#include <hiredis/hiredis.h>
#include <sys/types.h>

struct redis_server {
    pid_t pid;          /* 0: not running */
    int port;           /* 0: UNIX socket only */
    char name[32];
    char dir[200];
    char sock[256];     /* UNIX socket path (port 0) */
    char addr[300];     /* as the stores take it: unix:/path or 127.0.0.1:port */
    char id[48];        /* cluster node id (redis_cluster_create) */
};

/* NULL when redis-server and redis-cli can be run, else why not. */
const char *redis_fixture_missing(void);

/* Start a server listening on dir/<name>.sock only (--port 0), without persistence, and
 * wait until it answers PING. Starting a stopped one again reuses its socket path. */
void redis_start_unix(struct redis_server *s, const char *dir, const char *name);

/* Start a cluster-enabled node on a free TCP port of 127.0.0.1 (its bus port, +10000, free
 * too), config file dir/<name>.conf. */
void redis_start_cluster_node(struct redis_server *s, const char *dir, const char *name);

/* SIGKILL and reap it (nothing if not running). */
void redis_stop(struct redis_server *s);

/* Make a cluster of n fresh nodes with redis-cli --cluster create (no replicas), wait for
 * cluster_state:ok on every node, and fill in each node's id. */
void redis_cluster_create(struct redis_server *nodes, int n);

/* An admin connection (exits on failure); free with redisFree. */
redisContext *redis_admin(const struct redis_server *s);

/* Run a command (printf-style, as redisCommand) and return its reply; exits on an I/O
 * failure, or on an error reply unless allow_error. Free with freeReplyObject. */
redisReply *redis_cmd(redisContext *c, int allow_error, const char *fmt, ...);

/* Keys in the server's database (DBSIZE). */
long long redis_dbsize(const struct redis_server *s);

#endif
