/* Implementation of tests/redis_fixture.h. */
#include "redis_fixture.h"
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_SERVERS 16

static pid_t running[MAX_SERVERS]; /* every server started and not yet reaped */
static pid_t owner;                /* the process that started them */

static void stop_all(void)
{
    if (getpid() != owner)
        return; /* a child of fork() leaving: the servers are not its own */
    for (int i = 0; i < MAX_SERVERS; i++)
        if (running[i] > 0) {
            kill(running[i], SIGKILL);
            waitpid(running[i], NULL, 0);
            running[i] = 0;
        }
}

static void track(pid_t pid, pid_t forget)
{
    if (!owner) {
        owner = getpid();
        atexit(stop_all);
    }
    for (int i = 0; i < MAX_SERVERS; i++)
        if (running[i] == forget) {
            running[i] = pid;
            return;
        }
    fprintf(stderr, "redis_fixture: more than %d servers\n", MAX_SERVERS);
    exit(1);
}

static int on_path(const char *prog)
{
    const char *path = getenv("PATH");
    char dirs[4096], file[4200];
    snprintf(dirs, sizeof dirs, "%s", path ? path : "/usr/bin:/bin");
    for (char *save, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(file, sizeof file, "%s/%s", d, prog);
        if (access(file, X_OK) == 0)
            return 1;
    }
    return 0;
}

const char *redis_fixture_missing(void)
{
    if (!on_path("redis-server"))
        return "redis-server is not installed (Debian: apt-get install redis-server)";
    if (!on_path("redis-cli"))
        return "redis-cli is not installed (Debian: apt-get install redis-tools)";
    return NULL;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* fork/exec argv with stdout and stderr into log; the child dies with us. */
static pid_t spawn(char *const argv[], const char *log)
{
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        for (int fd = 3; fd < 4096; fd++) /* the stores' sockets, a region's userfaultfd */
            close(fd);
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execvp(argv[0], argv);
        _exit(127);
    }
    return pid;
}

static void print_log(const struct redis_server *s)
{
    char path[300], line[512];
    snprintf(path, sizeof path, "%s/%s.log", s->dir, s->name);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    fprintf(stderr, "---- %s ----\n", path);
    while (fgets(line, sizeof line, f))
        fputs(line, stderr);
    fclose(f);
}

static redisContext *connect_to(const struct redis_server *s)
{
    struct timeval tv = {2, 0};
    redisContext *c = s->port ? redisConnectWithTimeout("127.0.0.1", s->port, tv)
                              : redisConnectUnixWithTimeout(s->sock, tv);
    if (c && !c->err)
        redisSetTimeout(c, (struct timeval){10, 0});
    return c;
}

/* Poll PING every 10 ms for up to 10 s: 0, or -1 when the server exited (its log shown). */
static int wait_ready(struct redis_server *s)
{
    double until = now_s() + 10;
    while (now_s() < until) {
        int status;
        if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
            track(0, s->pid);
            s->pid = 0;
            print_log(s);
            fprintf(stderr, "redis-server %s exited at start (status %#x)\n", s->name, status);
            return -1;
        }
        redisContext *c = connect_to(s);
        if (c && !c->err) {
            redisReply *r = redisCommand(c, "PING");
            int ok = r && r->type == REDIS_REPLY_STATUS && !strcmp(r->str, "PONG");
            if (r)
                freeReplyObject(r);
            redisFree(c);
            if (ok)
                return 0;
        } else if (c) {
            redisFree(c);
        }
        usleep(10000);
    }
    print_log(s);
    fprintf(stderr, "redis-server %s did not answer PING within 10 s\n", s->name);
    exit(1);
}

static int start(struct redis_server *s, char **extra)
{
    char port[16], log[300], *argv[32];
    int n = 0;
    snprintf(port, sizeof port, "%d", s->port);
    snprintf(log, sizeof log, "%s/%s.log", s->dir, s->name);
    argv[n++] = "redis-server";
    argv[n++] = "--port";
    argv[n++] = port;
    argv[n++] = "--save";
    argv[n++] = "";
    argv[n++] = "--appendonly";
    argv[n++] = "no";
    argv[n++] = "--daemonize";
    argv[n++] = "no";
    argv[n++] = "--dir";
    argv[n++] = s->dir;
    for (; *extra; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;
    s->pid = spawn(argv, log);
    track(s->pid, 0);
    return wait_ready(s);
}

void redis_start_unix(struct redis_server *s, const char *dir, const char *name)
{
    CHECK(s->pid == 0);
    snprintf(s->name, sizeof s->name, "%s", name);
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    snprintf(s->sock, sizeof s->sock, "%s/%s.sock", dir, name);
    snprintf(s->addr, sizeof s->addr, "unix:%s", s->sock);
    s->port = 0;
    char *extra[] = {"--unixsocket", s->sock, NULL};
    CHECK(start(s, extra) == 0);
}

/* Can this TCP port of 127.0.0.1 be listened on now? */
static int port_free(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

/* A port of 127.0.0.1 whose bus port (+10000) is free too, and not given out before. */
static int free_port(void)
{
    static unsigned seed;
    static int taken[64], ntaken;
    if (!seed)
        seed = (unsigned)getpid() * 2654435761u;
    for (int tries = 0; tries < 1000 && ntaken < 64; tries++) {
        seed = seed * 1103515245u + 12345u;
        int p = 20000 + (int)((seed >> 8) % 10000);
        int clash = 0;
        for (int i = 0; i < ntaken; i++)
            clash |= taken[i] == p;
        if (!clash && port_free(p) && port_free(p + 10000))
            return taken[ntaken++] = p;
    }
    fprintf(stderr, "redis_fixture: no free TCP port pair found\n");
    exit(1);
}

void redis_start_cluster_node(struct redis_server *s, const char *dir, const char *name)
{
    CHECK(s->pid == 0);
    snprintf(s->name, sizeof s->name, "%s", name);
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    s->sock[0] = 0;
    char conf[300];
    snprintf(conf, sizeof conf, "%s/%s.conf", dir, name);
    /* Another process may take the port between the check and the server's bind: then
     * the server exits at start, and another port is tried. */
    for (int tries = 0; tries < 3; tries++) {
        s->port = free_port();
        snprintf(s->addr, sizeof s->addr, "127.0.0.1:%d", s->port);
        char *extra[] = {"--bind", "127.0.0.1", "--cluster-enabled", "yes",
                         "--cluster-config-file", conf, "--cluster-node-timeout", "5000", NULL};
        if (start(s, extra) == 0)
            return;
        unlink(conf);
    }
    fprintf(stderr, "redis_fixture: cluster node %s did not start\n", name);
    exit(1);
}

void redis_stop(struct redis_server *s)
{
    if (s->pid <= 0)
        return;
    kill(s->pid, SIGKILL);
    CHECK_EQ(waitpid(s->pid, NULL, 0), s->pid);
    track(0, s->pid);
    s->pid = 0;
}

redisContext *redis_admin(const struct redis_server *s)
{
    redisContext *c = connect_to(s);
    if (!c || c->err) {
        fprintf(stderr, "cannot connect to redis-server %s (%s): %s\n", s->name, s->addr,
                c ? c->errstr : "out of memory");
        exit(1);
    }
    return c;
}

redisReply *redis_cmd(redisContext *c, int allow_error, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    if (!r) {
        fprintf(stderr, "redis command '%s' failed: %s\n", fmt, c->errstr);
        exit(1);
    }
    if (r->type == REDIS_REPLY_ERROR && !allow_error) {
        fprintf(stderr, "redis command '%s': %s\n", fmt, r->str);
        exit(1);
    }
    return r;
}

long long redis_dbsize(const struct redis_server *s)
{
    redisContext *c = redis_admin(s);
    redisReply *r = redis_cmd(c, 0, "DBSIZE");
    long long n = r->integer;
    freeReplyObject(r);
    redisFree(c);
    return n;
}

void redis_cluster_create(struct redis_server *nodes, int n)
{
    char *argv[16], log[300];
    int k = 0;
    argv[k++] = "redis-cli";
    argv[k++] = "--cluster";
    argv[k++] = "create";
    for (int i = 0; i < n; i++)
        argv[k++] = nodes[i].addr;
    argv[k++] = "--cluster-replicas";
    argv[k++] = "0";
    argv[k++] = "--cluster-yes";
    argv[k] = NULL;
    snprintf(log, sizeof log, "%s/cluster-create.log", nodes[0].dir);
    pid_t pid = spawn(argv, log);
    int status;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        struct redis_server l = {.pid = 0};
        snprintf(l.dir, sizeof l.dir, "%s", nodes[0].dir);
        snprintf(l.name, sizeof l.name, "cluster-create");
        print_log(&l);
        fprintf(stderr, "redis-cli --cluster create failed (status %#x)\n", status);
        exit(1);
    }
    /* Every node must see the whole cluster before the stores are let at it. */
    double until = now_s() + 30;
    for (int i = 0; i < n; i++) {
        redisContext *c = redis_admin(&nodes[i]);
        for (;;) {
            redisReply *r = redis_cmd(c, 0, "CLUSTER INFO");
            char known[40];
            snprintf(known, sizeof known, "cluster_known_nodes:%d", n);
            int ok = strstr(r->str, "cluster_state:ok") && strstr(r->str, known);
            freeReplyObject(r);
            if (ok)
                break;
            if (now_s() > until) {
                fprintf(stderr, "cluster node %s never reached cluster_state:ok\n",
                        nodes[i].name);
                exit(1);
            }
            usleep(20000);
        }
        redisReply *r = redis_cmd(c, 0, "CLUSTER MYID");
        snprintf(nodes[i].id, sizeof nodes[i].id, "%s", r->str);
        freeReplyObject(r);
        redisFree(c);
    }
}
