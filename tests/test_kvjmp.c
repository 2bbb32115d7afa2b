/* kvjmp (apps/kvjmp), the key-value store clients jump into:
 *  - answers: one command sequence (missing keys, wrong types, INCR overflow and non-integers,
 *    MGET with missing keys, HSET new versus updated fields, DEL counts, binary values, arity
 *    errors, a table grown through several rehashes) run against redis-server 7.0 (the
 *    fixture), against the client library (kvjmp_exec) and through kvjmp's RESP server:
 *    the three RESP replies must be byte for byte the same;
 *  - crashes: a client killed with SIGKILL at every kind of step of SET, DEL and HSET (the
 *    test hook) and at random moments (kill -9 from outside) leaves a store whose invariants
 *    hold, where every key has its old or its new value, and whose heap leaked at most one
 *    allocation per kill;
 *  - concurrency: client processes doing INCR while others read: the final counts exact;
 *    while one client is inside the read-only VAS another can read but not write.
 * Client processes are fork()ed from a parent that has the store attached (a child keeps
 * the attachments and takes locks of its own). */
#include "harness.h"
#include "kvjmp.h"
#include "kvjmp_int.h" /* lock_modes() holds a switch open */
#include "redis_fixture.h"

#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MIB (UINT64_C(1) << 20)
#define MAXARGS 12

/* ---- the answers, compared ---- */

struct cmd {
    int argc;
    const char *argv[MAXARGS];
    size_t len[MAXARGS]; /* 0: strlen */
};

#define C(...) { .argc = sizeof((const char *[]){ __VA_ARGS__ }) / sizeof(const char *), \
                 .argv = { __VA_ARGS__ } }

static const struct cmd sequence[] = {
    C("GET", "a"), C("SET", "a", "1"), C("GET", "a"), C("SET", "a", ""), C("GET", "a"),
    C("EXISTS", "a", "nope", "a"), C("DEL", "a", "nope"), C("DEL", "a"), C("GET", "a"),
    C("INCR", "c"), C("incr", "c"), C("GET", "c"), C("SET", "c", "9223372036854775806"),
    C("INCR", "c"), C("INCR", "c"), C("GET", "c"), C("SET", "n", "abc"), C("INCR", "n"),
    C("SET", "n", " 1"), C("INCR", "n"), C("SET", "n", "010"), C("INCR", "n"),
    C("SET", "n", "-5"), C("INCR", "n"), C("SET", "n", "-0"), C("INCR", "n"),
    C("SET", "n", "-9223372036854775808"), C("INCR", "n"), C("SET", "n", "99999999999999999999"),
    C("INCR", "n"), C("SET", "n", "0"), C("INCR", "n"), C("GET", "n"),
    C("HSET", "h", "f", "v"), C("HSET", "h", "f", "v2"), C("HSET", "h", "g", "1", "k", "2", "g", "3"),
    C("HGET", "h", "f"), C("HGET", "h", "g"), C("HGET", "h", "missing"), C("HGET", "nokey", "f"),
    C("GET", "h"), C("INCR", "h"), C("SET", "s", "x"), C("HSET", "s", "f", "v"), C("HGET", "s", "f"),
    C("MGET", "s", "h", "missing", "c", "n"), C("EXISTS", "h", "s", "missing"),
    C("DEL", "h", "s", "missing", "c"), C("HGET", "h", "f"), C("SET", "h", "now a string"),
    C("GET", "h"), C("HSET", "h2", "a", "1"), C("SET", "h2", "over a hash"), C("GET", "h2"),
    C("GET"), C("SET", "a"), C("HSET", "h", "f"), C("HSET", "hh", "f", "v", "g"), C("INCR"),
    C("HGET", "h"), C("MGET"), C("FOO", "a", "b"), C("PING"), C("PING", "hello"), C("ECHO", "x"),
    C("SET", "a", "b", "c"), C("CONFIG", "GET", "save"), C("CONFIG", "GET", "appendonly"),
    C("DBSIZE"),
};

/* Binary keys, fields and values (NUL, CR, LF, 0xff). */
static const struct cmd binary[] = {
    { 3, { "SET", "b\0in", "a\0b\r\n\xff" }, { 3, 4, 6 } },
    { 2, { "GET", "b\0in" }, { 3, 4 } },
    { 2, { "GET", "b" }, { 3, 1 } },
    { 4, { "HSET", "hb", "f\0\n", "\r\n\0" }, { 4, 2, 3, 3 } },
    { 3, { "HGET", "hb", "f\0\n" }, { 4, 2, 3 } },
    { 3, { "MGET", "b\0in", "hb" }, { 4, 4, 2 } },
};

struct peers {
    int redis_fd;        /* -1: redis-server is not installed */
    struct kvjmp *direct;
    int server_fd;
};

static void lengths(const struct cmd *c, size_t *len)
{
    for (int i = 0; i < c->argc; i++)
        len[i] = c->len[i] ? c->len[i] : strlen(c->argv[i]);
}

static void show(const char *who, const struct kvjmp_buf *b)
{
    fprintf(stderr, "  %-8s ", who);
    for (size_t i = 0; i < b->len; i++)
        fprintf(stderr, (b->data[i] >= 32 && b->data[i] < 127) ? "%c" : "\\x%02x",
                (unsigned char)b->data[i]);
    fprintf(stderr, "\n");
}

/* Run one command on every peer; the replies must be identical. */
static void compare(struct peers *p, int argc, const char *const *argv, const size_t *len)
{
    static struct kvjmp_buf r, d, s;
    d.len = 0;
    CHECK_OK(kvjmp_exec(p->direct, argc, argv, len, &d));
    CHECK(kvjmp_resp_call(p->server_fd, argc, argv, len, &s) == 0);
    int same = s.len == d.len && memcmp(s.data, d.data, d.len) == 0;
    if (p->redis_fd >= 0) {
        CHECK(kvjmp_resp_call(p->redis_fd, argc, argv, len, &r) == 0);
        same = same && r.len == d.len && memcmp(r.data, d.data, d.len) == 0;
    }
    if (!same) {
        fprintf(stderr, "replies differ for:");
        for (int i = 0; i < argc; i++)
            fprintf(stderr, " %.*s", (int)len[i], argv[i]);
        fprintf(stderr, "\n");
        if (p->redis_fd >= 0)
            show("redis", &r);
        show("direct", &d);
        show("server", &s);
        exit(1);
    }
}

static void compare_cmd(struct peers *p, const struct cmd *c)
{
    size_t len[MAXARGS];
    lengths(c, len);
    compare(p, c->argc, c->argv, len);
}

/* Many keys: the table grows through several rehashes, then shrinks by DEL. */
static void compare_many(struct peers *p)
{
    char key[32], val[64];
    size_t len[3];
    for (int i = 0; i < 600; i++) {
        const char *argv[3] = { "SET", key, val };
        len[0] = 3;
        len[1] = (size_t)snprintf(key, sizeof key, "key:%d", i);
        len[2] = (size_t)snprintf(val, sizeof val, "value %d %.*s", i, i % 40, "................"
                                  "........................");
        compare(p, 3, argv, len);
    }
    for (int i = 0; i < 600; i += 3) {
        const char *argv[3] = { i % 2 ? "DEL" : "GET", key, "key:0" };
        len[0] = 3;
        len[1] = (size_t)snprintf(key, sizeof key, "key:%d", i);
        len[2] = 5;
        compare(p, 3, argv, len);
    }
    static char big[100000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (char)('a' + i % 26);
    const char *set[3] = { "SET", "big", big }, *get[2] = { "GET", "big" };
    compare(p, 3, set, (size_t[]){ 3, 3, sizeof big });
    compare(p, 2, get, (size_t[]){ 3, 3 });
    const char *dbsize[1] = { "DBSIZE" };
    compare(p, 1, dbsize, (size_t[]){ 6 });
}

static volatile int server_stop;
static pid_t server_pid;

static void on_term(int sig)
{
    (void)sig;
    server_stop = 1;
}

static void stop_server(void)
{
    if (server_pid > 0) {
        kill(server_pid, SIGKILL);
        waitpid(server_pid, NULL, 0);
        server_pid = 0;
    }
}

static void start_server(const char *name, const char *sock)
{
    fflush(NULL);
    pid_t parent = getpid();
    server_pid = fork();
    CHECK(server_pid >= 0);
    if (server_pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        signal(SIGTERM, on_term);
        signal(SIGPIPE, SIG_IGN);
        int rc = kvjmp_serve(name, sock, &server_stop);
        if (rc)
            fprintf(stderr, "kvjmp_serve: %s\n", exomem_last_error());
        _exit(rc ? 1 : 0);
    }
    atexit(stop_server);
}

static int connect_retry(const char *sock)
{
    for (int i = 0; i < 500; i++) {
        int fd = kvjmp_resp_connect(sock);
        if (fd >= 0)
            return fd;
        usleep(10000);
    }
    fprintf(stderr, "cannot connect to %s\n", sock);
    exit(1);
}

/* Redis's own tools against kvjmp's server: redis-cli's answers, and redis-benchmark runs
 * to the end (it asks CONFIG GET save/appendonly first, then pipelines GET and SET). */
static void redis_tools(const char *sock)
{
    char cmd[1600], out[256] = "";
    if (system("command -v redis-cli >/dev/null && command -v redis-benchmark >/dev/null") != 0) {
        fprintf(stderr, "NOTE: redis-cli or redis-benchmark missing: their run is left out\n");
        return;
    }
    snprintf(cmd, sizeof cmd, "redis-cli -s %s SET tool 'from redis-cli' && redis-cli -s %s GET tool"
             " && redis-cli -s %s INCR toolctr && redis-cli -s %s MGET tool nope", sock, sock,
             sock, sock);
    FILE *f = popen(cmd, "r");
    CHECK(f != NULL);
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = 0;
    CHECK_EQ(pclose(f), 0);
    if (strcmp(out, "OK\nfrom redis-cli\n1\nfrom redis-cli\n\n") != 0) {
        fprintf(stderr, "redis-cli printed:\n%s", out);
        exit(1);
    }
    snprintf(cmd, sizeof cmd, "redis-benchmark -s %s -t get,set -n 400 -c 4 -P 4 -r 50 --csv", sock);
    f = popen(cmd, "r");
    CHECK(f != NULL);
    int rows = 0;
    char line[256];
    while (fgets(line, sizeof line, f))
        rows += strncmp(line, "\"SET\"", 5) == 0 || strncmp(line, "\"GET\"", 5) == 0;
    CHECK_EQ(pclose(f), 0);
    CHECK_EQ(rows, 2);
}

static void answers(const char *root)
{
    struct peers p = { .redis_fd = -1 };
    char dir[300], sock[340];
    snprintf(dir, sizeof dir, "%s/redis", root);
    CHECK(mkdir(dir, 0700) == 0);
    static struct redis_server redis;
    const char *why = redis_fixture_missing();
    if (why) {
        const char *ci = getenv("CI");
        if (ci && !strcmp(ci, "true")) {
            fprintf(stderr, "CI must run this test, but %s\n", why);
            exit(1);
        }
        fprintf(stderr, "NOTE: %s: comparing kvjmp's two paths with each other only\n", why);
    } else {
        redis_start_unix(&redis, dir, "peer");
        p.redis_fd = connect_retry(redis.sock);
    }
    CHECK_OK(kvjmp_create("cmp", test_base(0), 32 * MIB));
    CHECK_OK(kvjmp_open("cmp", &p.direct));
    /* The server has a store of its own: each peer runs the whole sequence on its data. */
    CHECK_OK(kvjmp_create("cmpsrv", test_base(3), 32 * MIB));
    snprintf(sock, sizeof sock, "%s/kvjmp.sock", dir);
    start_server("cmpsrv", sock);
    p.server_fd = connect_retry(sock);

    for (size_t i = 0; i < sizeof sequence / sizeof sequence[0]; i++)
        compare_cmd(&p, &sequence[i]);
    for (size_t i = 0; i < sizeof binary / sizeof binary[0]; i++)
        compare_cmd(&p, &binary[i]);
    compare_many(&p);
    struct kvjmp_check_stats st;
    CHECK_OK(kvjmp_check(p.direct, &st));
    CHECK_EQ(st.heap_allocs, st.objects); /* nothing leaked without a crash */

    /* The typed calls agree with what was stored. */
    char buf[64];
    size_t n = 0;
    CHECK_EQ(kvjmp_get(p.direct, "key:1", 5, buf, sizeof buf, &n), 1);
    CHECK(n == 9 && memcmp(buf, "value 1 .", 9) == 0);
    CHECK_EQ(kvjmp_get(p.direct, "nope", 4, buf, sizeof buf, &n), 0);
    CHECK_EQ(kvjmp_get(p.direct, "hb", 2, buf, sizeof buf, &n), -KVJMP_WRONGTYPE);
    CHECK_EQ(kvjmp_hset(p.direct, "hb", 2, "x", 1, "y", 1), 1);
    CHECK_EQ(kvjmp_hset(p.direct, "hb", 2, "x", 1, "z", 1), 0);
    CHECK_EQ(kvjmp_hget(p.direct, "hb", 2, "x", 1, buf, sizeof buf, &n), 1);
    CHECK(n == 1 && buf[0] == 'z');
    CHECK_EQ(kvjmp_exists(p.direct, "hb", 2), 1);
    CHECK_EQ(kvjmp_del(p.direct, "hb", 2), 1);
    CHECK_EQ(kvjmp_del(p.direct, "hb", 2), 0);

    redis_tools(sock);
    close(p.server_fd);
    server_stop = 1;
    kill(server_pid, SIGTERM);
    int status;
    CHECK(waitpid(server_pid, &status, 0) == server_pid);
    server_pid = 0;
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (p.redis_fd >= 0) {
        close(p.redis_fd);
        redis_stop(&redis);
    }
    CHECK_OK(kvjmp_close(p.direct));
    CHECK_OK(kvjmp_destroy("cmp"));
    CHECK_OK(kvjmp_destroy("cmpsrv"));
}

/* ---- crashes ---- */

#define NKEYS 64

static char model[NKEYS][48]; /* the value of key k<i>; "" when absent */

static size_t key_of(int i, char *k)
{
    return (size_t)sprintf(k, "k%d", i);
}

static unsigned rnd(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (*s >> 8) & 0xffffff;
}

/* Does key i hold `want` ("" absent)? */
static int holds(struct kvjmp *c, int i, const char *want)
{
    char k[16], buf[64];
    size_t n = 0;
    int rc = kvjmp_get(c, k, key_of(i, k), buf, sizeof buf, &n);
    CHECK(rc == 0 || rc == 1);
    if (!*want)
        return rc == 0;
    return rc == 1 && n == strlen(want) && memcmp(buf, want, n) == 0;
}

/* Invariants, the model, and the heap: `may_leak` allocations may be unreachable (a kill
 * from outside can land inside seg_malloc; the hook's steps never leak). */
static void check_all(struct kvjmp *c, uint64_t may_leak)
{
    uint64_t kills = may_leak;
    struct kvjmp_check_stats st;
    CHECK_OK(kvjmp_check(c, &st));
    if (st.heap_allocs - st.objects > kills) {
        fprintf(stderr, "%llu allocations leaked (%llu allowed)\n",
                (unsigned long long)(st.heap_allocs - st.objects), (unsigned long long)kills);
        exit(1);
    }
    for (int i = 0; i < NKEYS; i++)
        if (!holds(c, i, model[i])) {
            fprintf(stderr, "key k%d lost its value '%s'\n", i, model[i]);
            exit(1);
        }
}

/* The hook: a child runs one SET (or DEL) and is killed at step `step` of it (or not, if
 * the operation has fewer steps). The key then holds the old or the new value. */
static uint64_t crash_at_steps(struct kvjmp *c, int rounds)
{
    unsigned seed = 12345;
    uint64_t kills = 0;
    for (int r = 0; r < rounds; r++) {
        int i = (int)(rnd(&seed) % NKEYS);
        char val[48] = "";
        int del = rnd(&seed) % 5 == 0;
        if (!del)
            snprintf(val, sizeof val, "v%d-%.*s", r, (int)(rnd(&seed) % 30), "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
        /* Mostly the first steps of one change; sometimes far in, into a rehash. */
        uint64_t step = 1 + rnd(&seed) % (r % 4 == 0 ? 400 : 5);
        fflush(NULL);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            kvjmp_crash_at(c, step);
            char k[16];
            size_t kl = key_of(i, k);
            int rc = del ? kvjmp_del(c, k, kl) : kvjmp_set(c, k, kl, val, strlen(val));
            _exit(rc < 0 ? 3 : 0);
        }
        int status;
        CHECK(waitpid(pid, &status, 0) == pid);
        if (WIFSIGNALED(status)) {
            CHECK_EQ(WTERMSIG(status), SIGKILL);
            kills++;
            if (holds(c, i, val))
                snprintf(model[i], sizeof model[i], "%s", val);
            else if (!holds(c, i, model[i])) {
                fprintf(stderr, "round %d: k%d holds neither '%s' nor '%s'\n", r, i, model[i], val);
                exit(1);
            }
        } else {
            CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
            snprintf(model[i], sizeof model[i], "%s", val);
        }
        if (r % 16 == 15)
            check_all(c, 0);
    }
    check_all(c, 0);
    return kills;
}

/* kill -9 from outside at a random moment of a child writing every key once. */
static uint64_t crash_at_random(struct kvjmp *c, int rounds, uint64_t kills)
{
    unsigned seed = 777;
    uint64_t outside = 0;
    for (int r = 0; r < rounds; r++) {
        fflush(NULL);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            for (int i = 0; i < NKEYS; i++) {
                char k[16], v[48];
                int vl = snprintf(v, sizeof v, "r%d-%d%.*s", r, i, i % 20, "yyyyyyyyyyyyyyyyyyyy");
                kvjmp_set(c, k, key_of(i, k), v, (size_t)vl);
            }
            _exit(0);
        }
        usleep(rnd(&seed) % 3000);
        kill(pid, SIGKILL);
        int status;
        CHECK(waitpid(pid, &status, 0) == pid);
        kills += WIFSIGNALED(status);
        outside += WIFSIGNALED(status);
        for (int i = 0; i < NKEYS; i++) {
            char v[48];
            snprintf(v, sizeof v, "r%d-%d%.*s", r, i, i % 20, "yyyyyyyyyyyyyyyyyyyy");
            if (holds(c, i, v))
                snprintf(model[i], sizeof model[i], "%s", v);
        }
        check_all(c, outside);
    }
    return kills;
}

/* A hash of 16 fields grows its table at the 17th: a child is killed at every step of
 * that HSET, the rehash included; every field must survive, the 17th old or new. */
static uint64_t crash_in_rehash(struct kvjmp *c, uint64_t kills)
{
    for (int r = 0; r < 90; r++) {
        char h[16], f[16];
        int hl = sprintf(h, "hr%d", r);
        for (int i = 0; i < 16; i++) {
            int fl = sprintf(f, "f%d", i);
            CHECK_EQ(kvjmp_hset(c, h, (size_t)hl, f, (size_t)fl, f, (size_t)fl), 1);
        }
        fflush(NULL);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            kvjmp_crash_at(c, (uint64_t)r + 1);
            _exit(kvjmp_hset(c, h, (size_t)hl, "f16", 3, "f16", 3) == 1 ? 0 : 3);
        }
        int status;
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 0));
        kills += WIFSIGNALED(status);
        for (int i = 0; i <= 16; i++) {
            char buf[16];
            size_t n = 0;
            int fl = sprintf(f, "f%d", i);
            int rc = kvjmp_hget(c, h, (size_t)hl, f, (size_t)fl, buf, sizeof buf, &n);
            if (i == 16 && WIFSIGNALED(status) && rc == 0)
                continue; /* killed before the new field was published */
            if (rc != 1 || n != (size_t)fl || memcmp(buf, f, n) != 0) {
                fprintf(stderr, "killed at step %d of a rehashing HSET: field %s lost\n", r + 1, f);
                exit(1);
            }
        }
        /* DEL of the hash, killed somewhere in freeing its 17 fields: gone, or whole. */
        fflush(NULL);
        pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            kvjmp_crash_at(c, (uint64_t)(r % 45) + 1);
            _exit(kvjmp_del(c, h, (size_t)hl) == 1 ? 0 : 3);
        }
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 0));
        kills += WIFSIGNALED(status);
        if (kvjmp_exists(c, h, (size_t)hl) == 1) {
            CHECK(WIFSIGNALED(status));
            CHECK_EQ(kvjmp_hget(c, h, (size_t)hl, "f7", 2, f, sizeof f, NULL), 1);
            CHECK_EQ(kvjmp_del(c, h, (size_t)hl), 1);
        }
        if (r % 10 == 9)
            check_all(c, 0);
    }
    check_all(c, 0);
    return kills;
}

static void crashes(void)
{
    CHECK_OK(kvjmp_create("crash", test_base(1), 16 * MIB));
    struct kvjmp *c;
    CHECK_OK(kvjmp_open("crash", &c));
    for (int i = 0; i < NKEYS; i += 2) {
        char k[16];
        snprintf(model[i], sizeof model[i], "initial-%d", i);
        CHECK_OK(kvjmp_set(c, k, key_of(i, k), model[i], strlen(model[i])));
    }
    uint64_t kills = crash_at_steps(c, 240);
    fprintf(stderr, "crash hook: %llu of 240 clients killed\n", (unsigned long long)kills);
    CHECK(kills > 100); /* the hook really killed */
    kills = crash_in_rehash(c, kills);
    kills = crash_at_random(c, 40, kills);
    struct kvjmp_check_stats st;
    CHECK_OK(kvjmp_check(c, &st));
    CHECK(st.recoveries > 50);
    fprintf(stderr, "crashes: %llu kills, %llu recoveries, %llu allocations leaked\n",
            (unsigned long long)kills, (unsigned long long)st.recoveries,
            (unsigned long long)(st.heap_allocs - st.objects));
    CHECK_OK(kvjmp_close(c));
    CHECK_OK(kvjmp_destroy("crash"));
}

/* ---- concurrent clients ---- */

#define WRITERS 4
#define INCRS 400

static void concurrent_incr(void)
{
    CHECK_OK(kvjmp_create("conc", test_base(2), 16 * MIB));
    struct kvjmp *c;
    CHECK_OK(kvjmp_open("conc", &c));
    CHECK_OK(kvjmp_hset(c, "h", 1, "f", 1, "v", 1) == 1 ? 0 : -1);
    pid_t pids[WRITERS + 2];
    fflush(NULL);
    for (int p = 0; p < WRITERS + 2; p++) {
        pids[p] = fork();
        CHECK(pids[p] >= 0);
        if (pids[p] != 0)
            continue;
        alarm(60);
        if (p < WRITERS) {
            for (int i = 0; i < INCRS; i++) {
                int64_t v;
                char k[8];
                int kl = sprintf(k, "ctr%d", i % 3);
                if (kvjmp_incr(c, k, (size_t)kl, &v) != 0)
                    _exit(2);
            }
        } else { /* readers: a counter never goes back; a hash is never seen half made */
            int64_t last = 0;
            for (int i = 0; i < 1500; i++) {
                char buf[32];
                size_t n = 0;
                int rc = kvjmp_get(c, "ctr0", 4, buf, sizeof buf - 1, &n);
                if (rc < 0)
                    _exit(3);
                buf[rc ? n : 0] = 0;
                int64_t v = rc ? strtoll(buf, NULL, 10) : 0;
                if (v < last)
                    _exit(4);
                last = v;
                if (kvjmp_hget(c, "h", 1, "f", 1, buf, sizeof buf, &n) != 1)
                    _exit(5);
            }
        }
        _exit(0);
    }
    for (int p = 0; p < WRITERS + 2; p++) {
        int status;
        CHECK(waitpid(pids[p], &status, 0) == pids[p]);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "client %d ended with status %#x\n", p, status);
            exit(1);
        }
    }
    int total = 0;
    for (int k = 0; k < 3; k++) {
        char key[8], buf[32];
        size_t n = 0;
        int kl = sprintf(key, "ctr%d", k);
        CHECK_EQ(kvjmp_get(c, key, (size_t)kl, buf, sizeof buf - 1, &n), 1);
        buf[n] = 0;
        int want = WRITERS * ((INCRS - k + 2) / 3);
        CHECK_EQ(atoi(buf), want);
        total += atoi(buf);
    }
    CHECK_EQ(total, WRITERS * INCRS);
    CHECK_OK(kvjmp_check(c, NULL));
    CHECK_OK(kvjmp_close(c));
    CHECK_OK(kvjmp_destroy("conc"));
}

/* Readers share the store, a writer has it alone: while one process is switched into the
 * read-only VAS, another can read, and cannot get into the read-write VAS. */
static void lock_modes(void)
{
    CHECK_OK(kvjmp_create("locks", test_base(4), 16 * MIB));
    struct kvjmp *c;
    CHECK_OK(kvjmp_open("locks", &c));
    CHECK_OK(kvjmp_set(c, "k", 1, "v", 1));
    int go[2], done[2];
    CHECK(pipe(go) == 0 && pipe(done) == 0);
    fflush(NULL);
    pid_t reader = fork();
    CHECK(reader >= 0);
    if (reader == 0) { /* inside the read-only VAS until told to leave */
        alarm(20);
        const struct kvj_store *st;
        char b = 1;
        if (kvjmp_enter_read(c, &st) != 0 || write(go[1], &b, 1) != 1 || read(done[0], &b, 1) != 1)
            _exit(2);
        _exit(kvjmp_leave(c) == 0 ? 0 : 3);
    }
    char b;
    CHECK_EQ(read(go[0], &b, 1), 1);
    char buf[8];
    size_t n = 0;
    CHECK_EQ(kvjmp_get(c, "k", 1, buf, sizeof buf, &n), 1);    /* a second reader gets in */
    CHECK_ERR(vas_try_switch(c->rw), EXO_EBUSY);                /* a writer does not */
    CHECK_EQ(vas_current(), VAS_HOME);
    CHECK_EQ(write(done[1], &b, 1), 1);
    int status;
    CHECK(waitpid(reader, &status, 0) == reader);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_OK(kvjmp_set(c, "k", 1, "w", 1));                     /* now the writer does */
    close(go[0]), close(go[1]), close(done[0]), close(done[1]);
    CHECK_OK(kvjmp_close(c));
    CHECK_OK(kvjmp_destroy("locks"));
}

int main(void)
{
    const char *root = test_root_setup();
    signal(SIGPIPE, SIG_IGN);
    answers(root);
    crashes();
    concurrent_incr();
    lock_modes();
    return 0;
}
