/* bench_rpcjmp: switching into a server's address space against local RPC (SpaceJMP,
 * Figure 7), with apps/rpcjmp.
 *
 * A store of 32 records (64 KiB values) in one segment at a 1 GiB-aligned base. One
 * exchange reads (or writes) a payload of 8 B .. 64 KiB of one record:
 *   switch         the client switches into the store's VAS (".ro" to read, ".rw" to write),
 *                  copies, and switches home: two vas_switch calls and one memcpy;
 *   switch+thread  the same while a second thread of the client process runs on the other
 *                  CPU (so that every page-table change must also flush that CPU's TLB);
 *   switch+client  the same while a second client process on the other CPU does the same
 *                  exchanges (readers share the segment's lock, writers take turns);
 *   switch-keep    "switch" on the keep engine: the store's segment stays mapped while the
 *                  client is home, so the two switches are the lock and unlock;
 *   pipe, stream, seqpacket, ring
 *                  a request to a server process and its response, over two pipes, a UNIX
 *                  stream socket pair, a UNIX SOCK_SEQPACKET pair, or two busy-polled
 *                  SPSC rings of 64-byte slots (3.5 KiB of payload per ring) in a shared
 *                  mapping; the server copies between the record and the channel;
 *   redis          the real program: a redis-server (started by this run, UNIX socket, no
 *                  persistence) holding the same values, GETRANGE to read and SET to write
 *                  through hiredis (skipped when redis-server is missing).
 * Placements: "same" (client and server both pinned to the first CPU) and "cross" (server on
 * the second; switch+thread and switch+client only here). Every exchange is timed on its own; each repeat
 * prints the median and the 99th percentile of its exchanges (unit us), each against the
 * pipe with the same op, payload and placement (the pipe is the one local RPC every
 * transport and placement has; the ring only makes sense across CPUs).
 * One JSON object per line on stdout; messages on stderr. Runs in a private registry.
 */
#include <exomem/exomem.h>
#include "bench_child.h"
#include "bench_util.h"
#include "redis_fixture.h"
#include "rpcjmp.h"

#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define STORE "fig7"
#define NRECORDS 32u
#define READ_KEYS 16u   /* reads use keys 0..15, writes 16..31: reads see 64 KiB values */

static const size_t payloads[] = { 8, 64, 512, 4096, 65536 };
#define NPAYLOADS (sizeof payloads / sizeof payloads[0])

enum { T_SWITCH, T_SWITCH_THREAD, T_SWITCH_CLIENT, T_SWITCH_KEEP, T_PIPE, T_STREAM,
       T_SEQPACKET, T_RING, T_REDIS, NTRANSPORTS };
static const char *const tname[NTRANSPORTS] = { "switch", "switch+thread", "switch+client",
                                                "switch-keep", "pipe", "stream", "seqpacket",
                                                "ring", "redis" };
#define FIRST_CHAN T_PIPE
#define LAST_CHAN T_RING
static const int chan_kind[NTRANSPORTS] = { [T_PIPE] = RPCJMP_PIPE, [T_STREAM] = RPCJMP_STREAM,
                                            [T_SEQPACKET] = RPCJMP_SEQPACKET,
                                            [T_RING] = RPCJMP_RING };

static struct {
    int repeats;
    int exchanges;  /* timed exchanges per (transport, op, payload) and repeat */
    int warmup;
} opt = { 5, 2000, 100 };

static int cpus[2] = { -1, -1 };
static uint8_t *wbuf, *rbuf;
static uint64_t *lat_ns;

static void pin_to(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        perror("bench_rpcjmp: sched_setaffinity");
        exit(1);
    }
}

/* ---- one exchange per transport ---- */

struct client {
    struct rpcjmp_jmp jmp;
    struct rpcjmp_chan *ch;
};

/* The redis peer: a server of this run and one connection to it. */
static struct redis_server redis;
static redisContext *redis_conn;

static long redis_exchange(bool write, unsigned key, size_t len)
{
    redisReply *r = write ? redisCommand(redis_conn, "SET r%u %b", key, wbuf, len)
                          : redisCommand(redis_conn, "GETRANGE r%u 0 %lu", key,
                                         (unsigned long)(len - 1));
    long got = -EXO_EIO;
    if (r && write && r->type == REDIS_REPLY_STATUS)
        got = 0;
    else if (r && !write && r->type == REDIS_REPLY_STRING) {
        memcpy(rbuf, r->str, r->len < len ? r->len : len); /* as the others copy it out */
        got = (long)r->len;
    }
    if (got < 0)
        exomem_set_error(EXO_EIO, "redis: %s", r ? (r->type == REDIS_REPLY_ERROR ? r->str :
                         "unexpected reply") : redis_conn->errstr);
    freeReplyObject(r);
    return got;
}

static void redis_setup(void)
{
    const char *why = redis_fixture_missing();
    if (why) {
        printf("{\"name\":\"skip\",\"params\":{\"transport\":\"redis\"},\"reason\":"
               "\"%s\"}\n", why);
        return;
    }
    redis_start_unix(&redis, bench_root(), "peer"); /* stopped at exit by the fixture */
    if (!(redis_conn = redisConnectUnix(redis.sock)) || redis_conn->err) {
        fprintf(stderr, "bench_rpcjmp: cannot connect to redis-server at %s\n", redis.sock);
        exit(1);
    }
    for (unsigned k = 0; k < READ_KEYS; k++) {
        rpcjmp_fill(k, 1, rbuf, RPCJMP_PAYLOAD_MAX);
        redisReply *r = redisCommand(redis_conn, "SET r%u %b", k, rbuf,
                                     (size_t)RPCJMP_PAYLOAD_MAX);
        if (!r || r->type != REDIS_REPLY_STATUS)
            bench_die("redis SET", -EXO_EIO);
        freeReplyObject(r);
    }
}

static long exchange(struct client *c, int t, bool write, unsigned key, size_t len)
{
    if (t == T_REDIS)
        return redis_exchange(write, key, len);
    if (t <= T_SWITCH_KEEP)
        return write ? rpcjmp_jmp_write(&c->jmp, key, wbuf, len)
                     : rpcjmp_jmp_read(&c->jmp, key, rbuf, len);
    return write ? rpcjmp_call_write(c->ch, key, wbuf, len)
                 : rpcjmp_call_read(c->ch, key, rbuf, len);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* switch+client: a second client process on the other CPU doing the same exchanges until
 * *stop is set (a shared page). */
static _Atomic int *other_stop;

static pid_t start_other_client(struct client *c, bool write, size_t len)
{
    atomic_store(other_stop, 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        bench_die("fork", -1);
    if (pid == 0) { /* a fork starts at home with the parent's attachments */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        pin_to(cpus[1]);
        for (unsigned i = 0; !atomic_load(other_stop); i++)
            if (exchange(c, T_SWITCH, write, i % READ_KEYS + (write ? READ_KEYS : 0), len) < 0)
                _exit(1);
        _exit(0);
    }
    return pid;
}

static void stop_other_client(pid_t pid)
{
    atomic_store(other_stop, 1);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        ;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "bench_rpcjmp: the second client failed (status %#x)\n", status);
        exit(1);
    }
}

/* Time opt.exchanges exchanges and print their median and 99th percentile. */
static void measure(struct client *c, int t, bool write, size_t len, const char *cpus_name)
{
    pid_t other = t == T_SWITCH_CLIENT ? start_other_client(c, write, len) : 0;
    for (int i = 0; i < opt.warmup + opt.exchanges; i++) {
        unsigned key = (unsigned)i % READ_KEYS + (write ? READ_KEYS : 0);
        uint64_t t0 = bench_now_ns();
        long rc = exchange(c, t, write, key, len);
        uint64_t t1 = bench_now_ns();
        if (rc < 0)
            bench_die(tname[t], (int)rc);
        if (!write && (size_t)rc != len) {
            fprintf(stderr, "bench_rpcjmp: %s read %ld bytes, not %zu\n", tname[t], rc, len);
            exit(1);
        }
        if (i >= opt.warmup)
            lat_ns[i - opt.warmup] = t1 - t0;
    }
    if (other)
        stop_other_client(other);
    qsort(lat_ns, (size_t)opt.exchanges, sizeof *lat_ns, cmp_u64);
    double p50 = lat_ns[opt.exchanges / 2] / 1e3;
    double p99 = lat_ns[(size_t)((opt.exchanges - 1) * 0.99)] / 1e3;
    char params[256], base_params[256];
    const char *fmt = "\"transport\":\"%s\",\"op\":\"%s\",\"payload\":%zu,\"cpus\":\"%s\","
                      "\"exchanges\":%d";
    snprintf(params, sizeof params, fmt, tname[t], write ? "write" : "read", len, cpus_name,
             opt.exchanges);
    snprintf(base_params, sizeof base_params, fmt, "pipe", write ? "write" : "read", len,
             cpus_name, opt.exchanges);
    bool base = t == T_PIPE;
    bench_emit_against("rpc_p50", "us", p50, params, base ? NULL : "rpc_p50",
                       base ? NULL : base_params, NULL);
    bench_emit_against("rpc_p99", "us", p99, params, base ? NULL : "rpc_p99",
                       base ? NULL : base_params, NULL);
}

static void measure_all(struct client *c, int t, const char *cpus_name)
{
    for (int w = 0; w < 2; w++)
        for (size_t p = 0; p < NPAYLOADS; p++)
            measure(c, t, w, payloads[p], cpus_name);
}

/* ---- the other thread of switch+thread ---- */

static atomic_bool spin_stop;

static void *spinner(void *arg)
{
    pin_to(*(int *)arg);
    volatile uint64_t work = 0;
    while (!atomic_load_explicit(&spin_stop, memory_order_relaxed))
        work++;
    return NULL;
}

/* ---- one placement: a server process and every transport ---- */

static void serve_all(int cpu, struct rpcjmp_chan *server_ends)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the measuring process */
    pin_to(cpu);
    struct rpcjmp_server s;
    int rc = rpcjmp_server_open(STORE, &s);
    for (int t = FIRST_CHAN; rc == 0 && t <= LAST_CHAN; t++)
        rc = rpcjmp_server_serve(&s, &server_ends[t]);
    if (rc)
        fprintf(stderr, "bench_rpcjmp: server: %s\n", exomem_last_error());
    rpcjmp_server_close(&s);
    _exit(rc ? 1 : 0); /* not exit(): the atexit teardown belongs to the measuring process */
}

/* The client's switch engine; it is at home between exchanges. */
static void use_engine(int engine)
{
    TRY(vas_ctl(VAS_CTL_SET_ENGINE, 0, &engine));
}

static void placement(struct client *c, int server_cpu, const char *cpus_name)
{
    struct rpcjmp_chan client_ends[NTRANSPORTS], server_ends[NTRANSPORTS];
    for (int t = FIRST_CHAN; t <= LAST_CHAN; t++)
        TRY(rpcjmp_chan_pair(chan_kind[t], &client_ends[t], &server_ends[t]));
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        bench_die("fork", -1);
    if (pid == 0)
        serve_all(server_cpu, server_ends);
    for (int t = FIRST_CHAN; t <= LAST_CHAN; t++)
        rpcjmp_chan_close(&server_ends[t]);

    measure_all(c, T_SWITCH, cpus_name);
    use_engine(VAS_ENGINE_KEEP); /* the client keeps the store mapped between exchanges */
    measure_all(c, T_SWITCH_KEEP, cpus_name);
    use_engine(VAS_ENGINE_PARK);
    if (server_cpu != cpus[0]) {
        pthread_t th;
        atomic_store(&spin_stop, false);
        if (pthread_create(&th, NULL, spinner, &cpus[1]) != 0)
            bench_die("pthread_create", -1);
        measure_all(c, T_SWITCH_THREAD, cpus_name);
        atomic_store(&spin_stop, true);
        pthread_join(th, NULL);
        measure_all(c, T_SWITCH_CLIENT, cpus_name);
    }
    for (int t = FIRST_CHAN; t <= LAST_CHAN; t++) {
        c->ch = &client_ends[t];
        measure_all(c, t, cpus_name);
        TRY(rpcjmp_call_close(c->ch));
        rpcjmp_chan_close(c->ch);
    }
    if (redis_conn) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(server_cpu, &set);
        if (sched_setaffinity(redis.pid, sizeof set, &set) != 0)
            bench_die("sched_setaffinity(redis-server)", -1);
        measure_all(c, T_REDIS, cpus_name);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        ;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "bench_rpcjmp: the server process failed (status %#x)\n", status);
        exit(1);
    }
}

static int bench_main(void)
{
    signal(SIGPIPE, SIG_IGN);
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        bench_die("sched_getaffinity", -1);
    for (int c = 0, n = 0; c < CPU_SETSIZE && n < 2; c++)
        if (CPU_ISSET(c, &allowed))
            cpus[n++] = c;
    wbuf = malloc(RPCJMP_PAYLOAD_MAX);
    rbuf = malloc(RPCJMP_PAYLOAD_MAX);
    lat_ns = malloc(sizeof *lat_ns * (size_t)opt.exchanges);
    if (!wbuf || !rbuf || !lat_ns)
        bench_die("malloc", -EXO_ENOMEM);
    rpcjmp_fill(0, 7, wbuf, RPCJMP_PAYLOAD_MAX);
    other_stop = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (other_stop == MAP_FAILED)
        bench_die("mmap", -EXO_ENOMEM);
    redis_setup();
    TRY(rpcjmp_store_create(STORE, 0, NRECORDS));
    struct client c = { 0 };
    TRY(rpcjmp_jmp_open(STORE, &c.jmp));
    pin_to(cpus[0]);
    for (int r = 0; r < opt.repeats && !bench_stop; r++) {
        placement(&c, cpus[0], "same");
        if (cpus[1] >= 0)
            placement(&c, cpus[1], "cross");
        else if (r == 0)
            printf("{\"name\":\"skip\",\"params\":{\"cpus\":\"cross\"},\"reason\":"
                   "\"only one CPU available\"}\n");
    }
    rpcjmp_jmp_close(&c.jmp);
    TRY(rpcjmp_store_delete(STORE));
    if (redis_conn)
        redisFree(redis_conn);
    redis_stop(&redis);
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_rpcjmp [--repeats N] [--exchanges N] [--quick]\n"
               "Every transport, op and payload: N timed exchanges (default 2000) per repeat "
               "(default 5);\n--quick: 2 repeats of 300.\n");
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "repeats", required_argument, NULL, 'r' },
        { "exchanges", required_argument, NULL, 'n' },
        BENCH_COMMON_LONGOPTS,
    };
    if (bench_has_flag(argc, argv, "--quick")) { /* first, so explicit options override it */
        opt.repeats = 2;
        opt.exchanges = 300;
        opt.warmup = 30;
    }
    int ch;
    while ((ch = getopt_long(argc, argv, "r:n:qh", longopts, NULL)) != -1) {
        switch (ch) {
        case 'r': opt.repeats = (int)bench_positive(optarg); break;
        case 'n': opt.exchanges = (int)bench_positive(optarg); break;
        case 'q': break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        usage(stderr);
        return 2;
    }
    return bench_run_in_private_registry(bench_main);
}
