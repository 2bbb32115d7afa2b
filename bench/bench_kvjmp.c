/* SpaceJMP Figure 10 redone: kvjmp (clients switch into the store's VAS per request) against
 * Debian's redis-server 7.0 over a UNIX socket, in one run, with the same client harness:
 * N client processes (1, 2, 4, 8), each in a loop of GET/SET on random keys of a preloaded
 * keyspace for a fixed time, timing every request. For kvjmp the loop calls the client
 * library (kvjmp_get/kvjmp_set); for redis-server it calls hiredis (redisCommandArgv).
 * Mixes of 0-100% SET (Figure 10c), values of 4 B, 64 B and 4 KiB. Prints throughput
 * (requests/s, all clients together) and latency median and p99 per configuration, each
 * kvjmp line with the redis-server line of the same configuration as its baseline.
 * Secondary rows: redis-benchmark (the real peer program, the same flags) against kvjmp's
 * RESP server and against redis-server.
 *
 * The client processes are forked once from a parent that has the store attached (a child
 * keeps the attachments: no second populate) and take jobs through pipes. redis-server is
 * started and stopped by the benchmark (tests/redis_fixture.c: killed at exit, also on
 * failure, and with the benchmark if it dies), persistence off.
 */
#include "bench_util.h"
#include "kvjmp.h"
#include "redis_fixture.h"

#include <errno.h>
#include <getopt.h>
#include <hiredis/hiredis.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_CLIENTS 8
#define HBUCKETS 512 /* latency histogram: 8 buckets per power of two of nanoseconds */
#define STORE_BASE UINT64_C(0x3c0000000000) /* 1 GiB-aligned, clear of the sanitizers' ranges */
#define MAX_VALUE 4096

/* kvjmp runs twice: on the default (park) switch engine, and on the keep engine, where the
 * store's segment stays mapped between requests and a request's two switches are its lock
 * and unlock (docs/spacejmp.md). */
enum system { SYS_KVJMP = 0, SYS_REDIS = 1, SYS_KVJMP_KEEP = 2, NSYS };
static const char *const sys_name[] = { "kvjmp", "redis-server", "kvjmp-keep" };

struct job {
    int system; /* -1: exit */
    int set_pct;
    int value_bytes;
    int keys;
    uint64_t ns;
    unsigned seed;
};

struct result {
    uint64_t ops, elapsed_ns, errors;
    uint64_t cpu_ns; /* CPU time of the clients (and, for redis, of redis-server) */
    uint32_t hist[HBUCKETS];
};

static struct {
    int quick, repeats, keys, thp;
    double seconds;
    uint64_t store_bytes;
    int nclients, clients[4];
    int nmixes, mixes[8];
    int nvalues, values[3];
} opt;

static struct kvjmp *kv;
static struct redis_server redis;
static char kvjmp_sock[300];
static pid_t server_pid;
static pid_t workers[MAX_CLIENTS];
static int job_fd[MAX_CLIENTS], result_fd[MAX_CLIENTS];

static unsigned hbucket(uint64_t ns)
{
    if (ns < 8)
        return (unsigned)ns;
    unsigned lg = 63u - (unsigned)__builtin_clzll(ns);
    unsigned b = lg * 8 + (unsigned)((ns >> (lg - 3)) & 7);
    return b < HBUCKETS ? b : HBUCKETS - 1;
}

/* The middle of bucket b, in ns. */
static double hvalue(unsigned b)
{
    if (b < 8)
        return b;
    unsigned lg = b / 8, sub = b % 8;
    return ldexp(1.0 + (sub + 0.5) / 8.0, (int)lg);
}

static double percentile(const uint32_t *h, double q)
{
    uint64_t total = 0, seen = 0;
    for (int b = 0; b < HBUCKETS; b++)
        total += h[b];
    for (int b = 0; b < HBUCKETS; b++) {
        seen += h[b];
        if (total && seen >= (uint64_t)ceil(q * (double)total))
            return hvalue((unsigned)b);
    }
    return 0;
}

/* redis-benchmark's own key names (-r: key:__rand_int__, 12 digits), so its GETs hit too. */
static size_t key_name(char *k, unsigned i)
{
    return (size_t)snprintf(k, 32, "key:%012u", i);
}

static int io_all(int fd, void *p, size_t n, int writing)
{
    for (size_t off = 0; off < n;) {
        ssize_t r = writing ? write(fd, (char *)p + off, n - off) : read(fd, (char *)p + off, n - off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        off += (size_t)r;
    }
    return 0;
}

static uint64_t cpu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CPU time a process has run, in ns (/proc/PID/schedstat), 0 if unknown. */
static uint64_t cpu_of(pid_t pid)
{
    char path[64];
    unsigned long long ns = 0;
    snprintf(path, sizeof path, "/proc/%d/schedstat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f) {
        if (fscanf(f, "%llu", &ns) != 1)
            ns = 0;
        fclose(f);
    }
    return ns;
}

/* ---- the client loop (one process per client) ---- */

static void run_job(const struct job *j, redisContext *rc, struct result *res)
{
    static char value[MAX_VALUE], got[MAX_VALUE];
    memset(value, 'v', sizeof value);
    memset(res, 0, sizeof *res);
    unsigned s = j->seed;
    uint64_t cpu0 = cpu_now_ns();
    uint64_t start = bench_now_ns(), end = start + j->ns, t = start;
    while (t < end) {
        s = s * 1103515245u + 12345u;
        unsigned r = s >> 4;
        char k[32];
        size_t kl = key_name(k, r % (unsigned)j->keys);
        int is_set = (int)((r >> 16) % 100) < j->set_pct;
        int ok;
        if (j->system != SYS_REDIS) {
            size_t n;
            ok = is_set ? kvjmp_set(kv, k, kl, value, (size_t)j->value_bytes) == 0
                        : kvjmp_get(kv, k, kl, got, sizeof got, &n) == 1;
        } else {
            const char *argv[3] = { is_set ? "SET" : "GET", k, value };
            size_t len[3] = { 3, kl, (size_t)j->value_bytes };
            redisReply *rep = redisCommandArgv(rc, is_set ? 3 : 2, argv, len);
            ok = rep && rep->type != REDIS_REPLY_ERROR && rep->type != REDIS_REPLY_NIL;
            if (rep)
                freeReplyObject(rep);
            else
                break;
        }
        uint64_t now = bench_now_ns();
        res->hist[hbucket(now - t)]++;
        res->ops++;
        res->errors += !ok;
        t = now;
    }
    res->elapsed_ns = t - start;
    res->cpu_ns = cpu_now_ns() - cpu0;
}

/* Put this client process on a switch engine (it is at home between requests), then
 * switch in and out once with a GET and a SET (both VASes), outside the timed loop: a
 * change of engine can leave the store to be mapped again. */
static void use_engine(int engine)
{
    int now = 0;
    TRY(vas_ctl(VAS_CTL_GET_ENGINE, 0, &now));
    if (now == engine)
        return;
    TRY(vas_ctl(VAS_CTL_SET_ENGINE, 0, &engine));
    char k[32], got[MAX_VALUE];
    size_t kl = key_name(k, 0), n;
    TRY(kvjmp_get(kv, k, kl, got, sizeof got, &n) < 0 ? -EXO_EIO : 0);
    TRY(kvjmp_set(kv, k, kl, got, n));
}

static void worker(int in, int out)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    redisContext *rc = NULL;
    struct job j;
    static struct result res;
    while (io_all(in, &j, sizeof j, 0) == 0 && j.system >= 0) {
        if (j.system == SYS_REDIS && !rc) {
            rc = redisConnectUnix(redis.sock);
            if (!rc || rc->err)
                _exit(3);
        }
        if (j.system != SYS_REDIS)
            use_engine(j.system == SYS_KVJMP_KEEP ? VAS_ENGINE_KEEP : VAS_ENGINE_PARK);
        run_job(&j, rc, &res);
        if (io_all(out, &res, sizeof res, 1) != 0)
            _exit(4);
    }
    _exit(0);
}

static void start_workers(void)
{
    for (int i = 0; i < MAX_CLIENTS; i++) {
        int a[2], b[2];
        if (pipe(a) || pipe(b))
            bench_die("pipe", -EXO_EIO);
        fflush(NULL);
        workers[i] = fork();
        if (workers[i] < 0)
            bench_die("fork", -EXO_ENOMEM);
        if (workers[i] == 0) {
            close(a[1]);
            close(b[0]);
            worker(a[0], b[1]);
        }
        close(a[0]);
        close(b[1]);
        job_fd[i] = a[1];
        result_fd[i] = b[0];
    }
}

static void stop_children(void)
{
    for (int i = 0; i < MAX_CLIENTS; i++)
        if (workers[i] > 0) {
            kill(workers[i], SIGKILL);
            waitpid(workers[i], NULL, 0);
            workers[i] = 0;
        }
    if (server_pid > 0) {
        kill(server_pid, SIGKILL);
        waitpid(server_pid, NULL, 0);
        server_pid = 0;
    }
}

/* Run one configuration on n clients at once; merged result. */
static void run_clients(int n, struct job j, struct result *all)
{
    memset(all, 0, sizeof *all);
    uint64_t server0 = j.system == SYS_REDIS ? cpu_of(redis.pid) : 0;
    for (int i = 0; i < n; i++) {
        j.seed = j.seed * 7919u + (unsigned)i * 104729u + 1;
        if (io_all(job_fd[i], &j, sizeof j, 1) != 0)
            bench_die("send a job", -EXO_EIO);
    }
    double rate = 0;
    for (int i = 0; i < n; i++) {
        static struct result r;
        if (io_all(result_fd[i], &r, sizeof r, 0) != 0)
            bench_die("a client process died", -EXO_EIO);
        all->ops += r.ops;
        all->errors += r.errors;
        all->cpu_ns += r.cpu_ns;
        if (r.elapsed_ns)
            rate += (double)r.ops * 1e9 / (double)r.elapsed_ns;
        for (int b = 0; b < HBUCKETS; b++)
            all->hist[b] += r.hist[b];
    }
    if (j.system == SYS_REDIS)
        all->cpu_ns += cpu_of(redis.pid) - server0;
    all->elapsed_ns = rate > 0 ? (uint64_t)((double)all->ops * 1e9 / rate) : 0;
}

/* Fill both stores with `keys` keys of `bytes`-byte values. */
static void preload(int keys, int bytes)
{
    static char value[MAX_VALUE];
    memset(value, 'v', sizeof value);
    redisContext *rc = redis_admin(&redis);
    for (int i = 0; i < keys; i++) {
        char k[32];
        size_t kl = key_name(k, (unsigned)i);
        TRY(kvjmp_set(kv, k, kl, value, (size_t)bytes));
        const char *argv[3] = { "SET", k, value };
        size_t len[3] = { 3, kl, (size_t)bytes };
        redisAppendCommandArgv(rc, 3, argv, len);
    }
    for (int i = 0; i < keys; i++) {
        void *rep;
        if (redisGetReply(rc, &rep) != REDIS_OK)
            bench_die("preload redis-server", -EXO_EIO);
        freeReplyObject(rep);
    }
    redisFree(rc);
}

static void emit_config(int sys, int clients, int set_pct, int bytes, const struct result *r)
{
    char params[200], base[200];
    snprintf(params, sizeof params,
             "\"store\":\"%s\",\"clients\":%d,\"set_pct\":%d,\"value_bytes\":%d", sys_name[sys],
             clients, set_pct, bytes);
    snprintf(base, sizeof base,
             "\"store\":\"redis-server\",\"clients\":%d,\"set_pct\":%d,\"value_bytes\":%d",
             clients, set_pct, bytes);
    const char *b = sys != SYS_REDIS ? "kv_throughput" : NULL;
    double rate = r->elapsed_ns ? (double)r->ops * 1e9 / (double)r->elapsed_ns : 0;
    bench_emit_against("kv_throughput", "req/s", rate, params, b, base, NULL);
    bench_emit_against("kv_latency_p50", "us", percentile(r->hist, 0.5) / 1e3, params,
                       b ? "kv_latency_p50" : NULL, base, NULL);
    bench_emit_against("kv_latency_p99", "us", percentile(r->hist, 0.99) / 1e3, params,
                       b ? "kv_latency_p99" : NULL, base, NULL);
    if (r->ops)
        bench_emit_against("kv_cpu_per_request", "us", (double)r->cpu_ns / 1e3 / (double)r->ops,
                           params, b ? "kv_cpu_per_request" : NULL, base,
                           sys != SYS_REDIS ? "CPU time of the client processes per request"
                                            : "CPU time of the clients and redis-server per request");
    if (r->errors)
        fprintf(stderr, "bench_kvjmp: %s: %llu requests failed\n", sys_name[sys],
                (unsigned long long)r->errors);
}

/* ---- redis-benchmark against both servers ---- */

static void start_kvjmp_server(void)
{
    snprintf(kvjmp_sock, sizeof kvjmp_sock, "%s/redis/kvjmp.sock", bench_root());
    fflush(NULL);
    server_pid = fork();
    if (server_pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        static volatile int never;
        signal(SIGPIPE, SIG_IGN);
        _exit(kvjmp_serve("fig10", kvjmp_sock, &never) ? 1 : 0);
    }
    for (int i = 0; i < 500; i++) {
        int fd = kvjmp_resp_connect(kvjmp_sock);
        if (fd >= 0) {
            close(fd);
            return;
        }
        usleep(10000);
    }
    bench_die("kvjmp's RESP server did not start", -EXO_EIO);
}

static void redis_benchmark(const char *who, const char *sock, int clients, int n)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "redis-benchmark -s %s -t get,set -n %d -c %d -d 4 -r %d --csv 2>/dev/null",
             sock, n, clients, opt.keys);
    FILE *p = popen(cmd, "r");
    if (!p)
        bench_die("popen redis-benchmark", -EXO_EIO);
    char line[512];
    while (fgets(line, sizeof line, p)) {
        char test[16];
        double rps, avg, mn, p50, p95, p99;
        if (sscanf(line, "\"%15[A-Z]\",\"%lf\",\"%lf\",\"%lf\",\"%lf\",\"%lf\",\"%lf\"", test, &rps,
                   &avg, &mn, &p50, &p95, &p99) != 7)
            continue;
        char params[160], base[160];
        snprintf(params, sizeof params, "\"server\":\"%s\",\"test\":\"%s\",\"clients\":%d", who,
                 test, clients);
        snprintf(base, sizeof base, "\"server\":\"redis-server\",\"test\":\"%s\",\"clients\":%d",
                 test, clients);
        int ours = strcmp(who, "redis-server") != 0;
        bench_emit_against("redis_benchmark_rps", "req/s", rps, params,
                           ours ? "redis_benchmark_rps" : NULL, base, NULL);
        bench_emit_against("redis_benchmark_p99", "us", p99 * 1e3, params,
                           ours ? "redis_benchmark_p99" : NULL, base, NULL);
    }
    pclose(p);
}

static int body(void)
{
    char dir[300];
    snprintf(dir, sizeof dir, "%s/redis", bench_root());
    if (mkdir(dir, 0700) != 0)
        bench_die("mkdir", -EXO_EIO);
    atexit(stop_children); /* runs before the fixture's own redis-server stop */
    uint64_t t0 = bench_now_ns();
    /* THP when the system has it: see KVJMP_THP (clients that mix GET and SET). */
    int rc = kvjmp_create_ex("fig10", STORE_BASE, opt.store_bytes, opt.thp ? KVJMP_THP : 0);
    if (rc == -EXO_ENOHUGE) {
        fprintf(stderr, "bench_kvjmp: no transparent huge pages here (%s): 4 KiB pages\n",
                exomem_last_error());
        opt.thp = 0;
        rc = kvjmp_create_ex("fig10", STORE_BASE, opt.store_bytes, 0);
    }
    if (rc)
        bench_die("kvjmp_create_ex", rc);
    TRY(kvjmp_open("fig10", &kv));
    char k[32];
    TRY(kvjmp_set(kv, k, key_name(k, 0), "", 0)); /* makes the table; maps it */
    size_t n;
    if (kvjmp_get(kv, k, key_name(k, 0), k, sizeof k, &n) != 1) /* maps the read-only VAS */
        bench_die("kvjmp_get", -EXO_EIO);
    fprintf(stderr, "bench_kvjmp: store of %llu MiB (%s) attached in %.2f s\n",
            (unsigned long long)(opt.store_bytes >> 20), opt.thp ? "THP" : "4 KiB pages",
            (double)(bench_now_ns() - t0) / 1e9);
    redis_start_unix(&redis, dir, "fig10");
    start_workers();
    struct job j = { .keys = opt.keys, .ns = (uint64_t)(opt.seconds * 1e9), .seed = 42 };
    for (int v = 0; v < opt.nvalues; v++) {
        preload(opt.keys, opt.values[v]);
        j.value_bytes = opt.values[v];
        for (int sys = 0; sys < NSYS; sys++) { /* warm-up, not shown: faults, connections */
            struct result r;
            j.system = sys;
            j.set_pct = 0;
            uint64_t ns = j.ns;
            j.ns = 100000000;
            run_clients(MAX_CLIENTS, j, &r);
            j.ns = ns;
        }
        for (int m = 0; m < opt.nmixes; m++)
            for (int c = 0; c < opt.nclients; c++)
                for (int rep = 0; rep < opt.repeats; rep++)
                    for (int sys = 0; sys < NSYS; sys++) { /* side by side, alternating */
                        j.system = sys;
                        j.set_pct = opt.mixes[m];
                        struct result r;
                        run_clients(opt.clients[c], j, &r);
                        emit_config(sys, opt.clients[c], j.set_pct, j.value_bytes, &r);
                    }
    }
    for (int i = 0; i < MAX_CLIENTS; i++) {
        struct job stop = { .system = -1 };
        io_all(job_fd[i], &stop, sizeof stop, 1);
        waitpid(workers[i], NULL, 0);
        workers[i] = 0;
    }
    if (system("command -v redis-benchmark >/dev/null 2>&1") == 0) {
        start_kvjmp_server();
        int n = opt.quick ? 5000 : 10000;
        for (int rep = 0; rep < opt.repeats; rep++)
            for (int c = 1; c <= MAX_CLIENTS; c *= 8) {
                redis_benchmark("kvjmp-server", kvjmp_sock, c, n);
                redis_benchmark("redis-server", redis.sock, c, n);
            }
    } else {
        fprintf(stderr, "bench_kvjmp: redis-benchmark is not installed: its rows left out\n");
    }
    stop_children();
    redis_stop(&redis);
    TRY(kvjmp_close(kv));
    TRY(kvjmp_destroy("fig10"));
    return 0;
}

static int parse_list(const char *s, int *out, int max, int lo, int hi)
{
    int n = 0;
    for (char *end; *s && n < max; s = *end ? end + 1 : end) {
        long v = strtol(s, &end, 10);
        if (end == s || v < lo || v > hi || (*end && *end != ','))
            return -1;
        out[n++] = (int)v;
    }
    return n;
}

int main(int argc, char **argv)
{
    opt.quick = bench_has_flag(argc, argv, "--quick");
    opt.repeats = opt.quick ? 2 : 3;
    opt.seconds = opt.quick ? 0.2 : 0.5;
    opt.keys = 10000;
    opt.thp = 1;
    opt.store_bytes = UINT64_C(1) << 30;
    opt.nclients = parse_list("1,2,4,8", opt.clients, 4, 1, MAX_CLIENTS);
    opt.nmixes = parse_list(opt.quick ? "0,10,50,100" : "0,10,50,90,100", opt.mixes, 8, 0, 100);
    opt.nvalues = parse_list(opt.quick ? "4" : "4,64,4096", opt.values, 3, 1, MAX_VALUE);
    static const struct option longopts[] = {
        { "repeats", required_argument, NULL, 'r' }, { "seconds", required_argument, NULL, 's' },
        { "clients", required_argument, NULL, 'c' }, { "mixes", required_argument, NULL, 'm' },
        { "values", required_argument, NULL, 'v' }, { "keys", required_argument, NULL, 'k' },
        { "store-mib", required_argument, NULL, 'S' }, { "no-thp", no_argument, NULL, 'T' },
        BENCH_COMMON_LONGOPTS
    };
    const char *usage = "usage: bench_kvjmp [--quick] [--repeats N] [--seconds S] [--clients 1,2,4,8]\n"
                        "       [--mixes 0,10,50,90,100] [--values 4,64,4096] [--keys N] [--store-mib N]\n"
                        "       [--no-thp]\n";
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'q': break;
        case 'r': opt.repeats = (int)bench_positive(optarg); break;
        case 's': opt.seconds = atof(optarg); bad = !(opt.seconds > 0 && opt.seconds < 60); break;
        case 'c': bad = (opt.nclients = parse_list(optarg, opt.clients, 4, 1, MAX_CLIENTS)) <= 0; break;
        case 'm': bad = (opt.nmixes = parse_list(optarg, opt.mixes, 8, 0, 100)) <= 0; break;
        case 'v': bad = (opt.nvalues = parse_list(optarg, opt.values, 3, 1, MAX_VALUE)) <= 0; break;
        case 'k': opt.keys = (int)bench_positive(optarg); break;
        case 'T': opt.thp = 0; break;
        case 'S': opt.store_bytes = (uint64_t)bench_positive(optarg) << 20; break;
        case 'h': fputs(usage, stdout); return 0;
        default: bad = 1;
        }
        if (bad) {
            fputs(usage, stderr);
            return 2;
        }
    }
    if (optind != argc) {
        fputs(usage, stderr);
        return 2;
    }
    if (redis_fixture_missing()) {
        fprintf(stderr, "bench_kvjmp: %s\n", redis_fixture_missing());
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    return bench_run_in_private_registry(body);
}
