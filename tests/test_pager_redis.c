/* The Redis stores of the pager (exo_pager_store_redis, exo_pager_store_redis_cluster)
 * against redis-server processes this test starts and always stops (redis_fixture.c): one
 * server on a UNIX socket, and a three-node Redis Cluster on TCP ports of 127.0.0.1.
 *
 * What is checked: bad arguments give clear errors; the store calls themselves (ENOENT for
 * a unit never written, overwrite, discard, 2 MiB units, a value of the wrong size, usage
 * equal to the keys in the servers) from eight threads at once over the connection pool;
 * regions larger than their budget read back after eviction with both deliveries and with
 * several threads faulting; a store opened again sees what was written; connections killed
 * by the server are made again without an error; a killed server gives the faulting access
 * SIGBUS within seconds with the reason in exo_pager_last_failure(), dirty data stays
 * resident, and a restarted server takes it; a stopped (hung) server costs timeouts, not a
 * hang, and loses nothing. Cluster: the key slots agree with CLUSTER KEYSLOT, units spread
 * over all three nodes, resharding with redis-cli while the store is open (-MOVED), and a
 * slot migrated by hand (-ASK while MIGRATING/IMPORTING, -MOVED after SETSLOT NODE). The
 * test also prints the median fault latency of each store ("latency:" lines). */
#include "harness.h"
#include "pager_fixture.h"
#include "redis_fixture.h"
#include "pager/redis_conn.h"
#include "pager/store.h"

#include <exomem/pager.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define UNIT ((size_t)4 << 10)
#define MIB ((size_t)1 << 20)

static char dir[256];
static struct redis_server plain, nodes[3];

static sigjmp_buf escape;
static volatile sig_atomic_t bus_errors, expecting;

/* Installed before any region: the pager chains the faults it cannot serve to it. One not
 * expected fails the test, through exit() so that the servers are stopped. */
static void on_sigbus(int sig, siginfo_t *si, void *ctx)
{
    (void)sig, (void)ctx;
    if (!expecting) {
        fprintf(stderr, "unexpected SIGBUS at %p (a fault the pager could not serve)\n",
                si->si_addr);
        exit(1);
    }
    bus_errors++;
    siglongjmp(escape, 1);
}

/* Read one byte of p; 1 if the read raised SIGBUS. */
static int read_faults(volatile const char *p, char *out)
{
    expecting = 1;
    int faulted = sigsetjmp(escape, 1);
    if (!faulted)
        *out = *p;
    expecting = 0;
    return faulted != 0;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void fill_units(char *base, int first, int count)
{
    for (int u = first; u < first + count; u++)
        memset(base + (size_t)u * UNIT, 'A' + u, UNIT);
}

static void check_units(const char *base, int first, int count, int zero)
{
    for (int u = first; u < first + count; u++)
        for (size_t i = 0; i < UNIT; i += 512) {
            char want = zero ? 0 : (char)('A' + u);
            if (base[(size_t)u * UNIT + i] != want) {
                fprintf(stderr, "unit %d byte %zu: %d, expected %d\n", u, i,
                        base[(size_t)u * UNIT + i], want);
                exit(1);
            }
        }
}

/* Keys "<prefix>:*" in the servers (SCAN). */
static long long count_keys(const struct redis_server *servers, int n, const char *prefix)
{
    long long total = 0;
    for (int i = 0; i < n; i++) {
        redisContext *c = redis_admin(&servers[i]);
        char cursor[32] = "0";
        do {
            redisReply *r = redis_cmd(c, 0, "SCAN %s MATCH %s:* COUNT 1000", cursor, prefix);
            CHECK(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
            snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
            total += (long long)r->element[1]->elements;
            freeReplyObject(r);
        } while (strcmp(cursor, "0") != 0);
        redisFree(c);
    }
    return total;
}

static uint64_t usage_units(exo_pager_store *s)
{
    uint64_t bytes, units;
    CHECK_OK(exo_pager_store_usage(s, &bytes, &units));
    return units;
}

/* A store under a prefix no other store of this run used ("<what><n>"), so that a region
 * over it starts as zeros: the stores keep what regions before wrote. */
static exo_pager_store *fresh_store(int cluster_store, const char *what, char *prefix)
{
    static int n;
    char own[32];
    if (!prefix)
        prefix = own;
    snprintf(prefix, 32, "%s%d", what, ++n);
    exo_pager_store *s;
    const char *seeds[] = {nodes[0].addr, nodes[1].addr, nodes[2].addr};
    if (cluster_store)
        CHECK_OK(exo_pager_store_redis_cluster(seeds, 3, prefix, &s));
    else
        CHECK_OK(exo_pager_store_redis(plain.addr, prefix, &s));
    return s;
}

static void many_threads(int cluster_store, exo_pager_delivery d, exo_pager_policy policy)
{
    exo_pager_store *s = fresh_store(cluster_store, "threads", NULL);
    pager_many_threads(s, d, policy);
    CHECK_OK(exo_pager_store_close(s));
}

/* ---- bad arguments ---- */

static void bad_arguments(void)
{
    exo_pager_store *s = NULL;
    CHECK_ERR(exo_pager_store_redis(NULL, "p", &s), EXO_EINVAL);
    CHECK_ERR(exo_pager_store_redis(plain.addr, NULL, &s), EXO_EINVAL);
    CHECK_ERR(exo_pager_store_redis(plain.addr, "p", NULL), EXO_EINVAL);
    const char *bad[] = {"", "localhost", "localhost:", ":6379", "h:0", "h:65536", "h:12x",
                         "unix:", "::1:6379", "[::1]6379"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK_ERR(exo_pager_store_redis(bad[i], "p", &s), EXO_EINVAL);
        CHECK(strstr(exomem_last_error(), "bad address") != NULL);
    }
    CHECK_ERR(exo_pager_store_redis(plain.addr, "", &s), EXO_EINVAL);
    char prefix[260];
    memset(prefix, 'k', sizeof prefix - 1);
    prefix[sizeof prefix - 1] = 0;
    CHECK_ERR(exo_pager_store_redis(plain.addr, prefix, &s), EXO_EINVAL);
    CHECK(strstr(exomem_last_error(), "prefix") != NULL);
    char gone[300];
    snprintf(gone, sizeof gone, "unix:%s/nobody.sock", dir);
    CHECK_ERR(exo_pager_store_redis(gone, "p", &s), EXO_EIO);
    CHECK(strstr(exomem_last_error(), "No such file") != NULL);
    CHECK_ERR(exo_pager_store_redis("127.0.0.1:1", "p", &s), EXO_EIO);
    CHECK(strstr(exomem_last_error(), "Connection refused") != NULL);
    fprintf(stderr, "unreachable server: %s\n", exomem_last_error());

    const char *one[] = {plain.addr}, *null_seed[] = {NULL}, *bad_seed[] = {"nohost"};
    const char *unreachable[] = {"127.0.0.1:1", gone};
    CHECK_ERR(exo_pager_store_redis_cluster(NULL, 1, "p", &s), EXO_EINVAL);
    CHECK_ERR(exo_pager_store_redis_cluster(one, 0, "p", &s), EXO_EINVAL);
    CHECK_ERR(exo_pager_store_redis_cluster(one, 1, NULL, &s), EXO_EINVAL);
    CHECK_ERR(exo_pager_store_redis_cluster(one, 1, "p", NULL), EXO_EINVAL);
    CHECK_ERR(exo_pager_store_redis_cluster(null_seed, 1, "p", &s), EXO_EINVAL);
    CHECK_ERR(exo_pager_store_redis_cluster(bad_seed, 1, "p", &s), EXO_EINVAL);
    CHECK(strstr(exomem_last_error(), "bad seed address 'nohost'") != NULL);
    CHECK_ERR(exo_pager_store_redis_cluster(one, 1, "p", &s), EXO_EIO);
    CHECK(strstr(exomem_last_error(), "cluster support disabled") != NULL);
    fprintf(stderr, "not a cluster: %s\n", exomem_last_error());
    CHECK_ERR(exo_pager_store_redis_cluster(unreachable, 2, "p", &s), EXO_EIO);
    CHECK(strstr(exomem_last_error(), "no seed gave the slot map") != NULL);
    CHECK(s == NULL);
}

/* ---- the store calls, from many threads ---- */

struct hammer {
    exo_pager_store *s;
    int id, bad;
};

/* Each thread writes, reads back and now and then discards 16 units of its own. */
static void *hammer_main(void *arg)
{
    struct hammer *h = arg;
    uint64_t buf[UNIT / 8], got[UNIT / 8];
    for (int i = 0; i < 300; i++) {
        uint64_t u = (uint64_t)h->id * 1000 + (uint64_t)(i % 16);
        for (size_t w = 0; w < UNIT / 8; w++)
            buf[w] = pager_stamp(u * UNIT + w * 8, (uint64_t)i);
        h->bad += exo_pager_store_write(h->s, u, UNIT, buf) != 0;
        h->bad += exo_pager_store_read(h->s, u, UNIT, got) != 0 || memcmp(buf, got, UNIT) != 0;
        if (i % 7 == 6) {
            h->bad += exo_pager_store_discard(h->s, u, UNIT) != 0;
            h->bad += exo_pager_store_read(h->s, u, UNIT, got) != -EXO_ENOENT;
        }
    }
    return NULL;
}

static void store_calls(exo_pager_store *s, const struct redis_server *servers, int n,
                        const char *prefix)
{
    static uint64_t a[2 * MIB / 8], b[2 * MIB / 8];
    for (size_t w = 0; w < 2 * MIB / 8; w++)
        a[w] = pager_stamp(w, 3);
    CHECK_EQ(exo_pager_store_read(s, 5, UNIT, b), -EXO_ENOENT);
    CHECK_EQ(exo_pager_store_write(s, 5, UNIT, a), 0);
    CHECK_EQ(exo_pager_store_write(s, 5, UNIT, a + 1), 0); /* overwrite: still one unit */
    CHECK_EQ(exo_pager_store_read(s, 5, UNIT, b), 0);
    CHECK(memcmp(a + 1, b, UNIT) == 0);
    uint64_t bytes, units;
    CHECK_OK(exo_pager_store_usage(s, &bytes, &units));
    CHECK_EQ(units, 1);
    CHECK_EQ(bytes, UNIT);
    CHECK_EQ(count_keys(servers, n, prefix), 1);
    CHECK_EQ(exo_pager_store_discard(s, 5, UNIT), 0);
    CHECK_EQ(exo_pager_store_discard(s, 5, UNIT), 0); /* nothing there: no error */
    CHECK_EQ(exo_pager_store_read(s, 5, UNIT, b), -EXO_ENOENT);
    CHECK_EQ(usage_units(s), 0);
    CHECK_EQ(exo_pager_store_write(s, 7, 2 * MIB, a), 0); /* a 2 MiB unit */
    memset(b, 0, sizeof b);
    CHECK_EQ(exo_pager_store_read(s, 7, 2 * MIB, b), 0);
    CHECK(memcmp(a, b, 2 * MIB) == 0);
    CHECK_EQ(exo_pager_store_read(s, 7, UNIT, b), -EXO_ECORRUPT); /* not a 4 KiB unit */
    CHECK_EQ(exo_pager_store_discard(s, 7, 2 * MIB), 0);
    CHECK_EQ(usage_units(s), 0);

    enum { THREADS = 8 };
    struct hammer h[THREADS];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        h[i] = (struct hammer){s, i + 1, 0};
        CHECK_OK(pthread_create(&t[i], NULL, hammer_main, &h[i]));
    }
    for (int i = 0; i < THREADS; i++) {
        CHECK_OK(pthread_join(t[i], NULL));
        CHECK_EQ(h[i].bad, 0);
    }
    CHECK_EQ(count_keys(servers, n, prefix), (long long)usage_units(s));
    CHECK_EQ(usage_units(s), THREADS * 16 - THREADS * 2); /* units 6 and 13 end discarded */
}

/* ---- regions ---- */

/* Write every unit twice (the second time over evicted units) and read it back (CLOCK,
 * the radix table): pager_fixture.c's one configuration. */
static exo_pager_stats region_rounds(exo_pager_store *s, exo_pager_delivery d, size_t unit,
                                     size_t units, size_t frames)
{
    return pager_one_config(s, "redis", EXO_PAGER_CLOCK, EXO_PAGER_TABLE_RADIX, unit, d, units,
                            frames);
}

/* A region over a store opened again with the same prefix sees what was written. */
static void reopened(const char *addr, const char *prefix)
{
    exo_pager_store *s;
    CHECK_OK(exo_pager_store_redis(addr, prefix, &s));
    exo_pager_options o = {.size = 32 * UNIT, .budget = 4 * UNIT, .store = s};
    exo_pager *p;
    CHECK_OK(exo_pager_create(&o, &p));
    pager_write_all(exo_pager_base(p), o.size, UNIT, 7);
    CHECK_OK(exo_pager_destroy(p)); /* writes back what is still dirty */
    CHECK_OK(exo_pager_store_close(s));
    CHECK_OK(exo_pager_store_redis(addr, prefix, &s));
    o.store = s;
    CHECK_OK(exo_pager_create(&o, &p));
    pager_check_all(exo_pager_base(p), o.size, UNIT, 7);
    CHECK_OK(exo_pager_destroy(p));
    CHECK_OK(exo_pager_store_close(s));
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median and 90th percentile, in microseconds, of n times in seconds (sorts them). */
static void quantiles(double *t, int n, double *median, double *p90)
{
    qsort(t, (size_t)n, sizeof *t, by_value);
    *median = t[n / 2] * 1e6;
    *p90 = t[n * 9 / 10] * 1e6;
}

/* Fault latency as the faulting thread sees it: 2,000 reads of units not resident (one
 * store read each, clean victims), then 2,000 writes of units not resident (a store read,
 * and a write-back of the dirty victim). FIFO, 16 frames, 256 units visited with stride 37
 * so that every access misses. */
static void measure(exo_pager_store *s, const char *name, exo_pager_delivery d)
{
    enum { UNITS = 256, FRAMES = 16, N = 2000 };
    exo_pager_options o = {.size = UNITS * UNIT, .budget = FRAMES * UNIT, .delivery = d,
                           .store = s};
    exo_pager *p;
    CHECK_OK(exo_pager_create(&o, &p));
    uint64_t *base = exo_pager_base(p);
    pager_write_all(base, o.size, UNIT, 1);
    CHECK_OK(exo_pager_advise(p, base, o.size, EXO_PAGER_DONTNEED, 0));
    static double t[N];
    double read_med, read_p90, write_med, write_p90;
    for (int i = 0; i < N; i++) {
        size_t at = (size_t)(i * 37 % UNITS) * UNIT;
        double t0 = now_s();
        uint64_t v = ((volatile uint64_t *)base)[at / 8];
        t[i] = now_s() - t0;
        CHECK(v == pager_stamp(at, 1));
    }
    quantiles(t, N, &read_med, &read_p90);
    for (int i = 0; i < N; i++) {
        size_t at = (size_t)(i * 37 % UNITS) * UNIT;
        double t0 = now_s();
        ((volatile uint64_t *)base)[at / 8 + 1] = (uint64_t)i;
        t[i] = now_s() - t0;
    }
    quantiles(t, N, &write_med, &write_p90);
    exo_pager_stats st;
    CHECK_OK(exo_pager_get_stats(p, &st));
    CHECK(st.faults >= 2 * N);
    CHECK_OK(exo_pager_destroy(p));
    printf("latency: %-13s %-7s read fault median %6.1f us (p90 %6.1f), write fault with "
           "write-back median %6.1f us (p90 %6.1f)\n", name,
           d == EXO_PAGER_SIGBUS ? "sigbus" : "threads", read_med, read_p90, write_med,
           write_p90);
}

/* ---- a server that dies or hangs ---- */

/* Killed with acknowledged data in it: the next fill gives SIGBUS within seconds with the
 * reason; then, with dirty units filling the budget, a fault needing a frame gets SIGBUS,
 * the dirty data stays, and a restarted (empty) server takes it. */
/* A region of 16 units with a budget of 4 over a redis-server of its own (prefix name),
 * units 0-7 written and the alarm set: what the failing-server cases start from. */
struct failing {
    struct redis_server srv;
    exo_pager_store *s;
    exo_pager_options o;
    exo_pager *p;
    char *base;
};

static void failing_start(struct failing *f, const char *name, exo_pager_delivery d)
{
    memset(f, 0, sizeof *f);
    redis_start_unix(&f->srv, dir, name);
    CHECK_OK(exo_pager_store_redis(f->srv.addr, name, &f->s));
    f->o = (exo_pager_options){.size = 16 * UNIT, .budget = 4 * UNIT, .delivery = d,
                               .store = f->s};
    CHECK_OK(exo_pager_create(&f->o, &f->p));
    f->base = exo_pager_base(f->p);
    alarm(60);
    fill_units(f->base, 0, 8);
}

static void failing_end(struct failing *f)
{
    alarm(0);
    CHECK_OK(exo_pager_destroy(f->p));
    CHECK_OK(exo_pager_store_close(f->s));
    redis_stop(&f->srv);
}

static void killed_server(exo_pager_delivery d)
{
    struct failing f;
    failing_start(&f, "dying", d);
    struct redis_server *srv = &f.srv;
    exo_pager_options o = f.o;
    exo_pager *p = f.p;
    char *base = f.base, c;
    CHECK_OK(exo_pager_flush(p));
    CHECK_OK(exo_pager_advise(p, base, o.size, EXO_PAGER_DONTNEED, 0));
    check_units(base, 0, 8, 0); /* all acknowledged data back from the server */
    redis_stop(srv);
    double t0 = now_s();
    int before = bus_errors;
    CHECK(read_faults(base, &c));
    double took = now_s() - t0;
    CHECK_EQ(bus_errors, before + 1);
    CHECK(took < 5);
    CHECK(strstr(exo_pager_last_failure(p), "redis store read of unit 0 failed: input/output"));
    fprintf(stderr, "killed server, %s delivery: SIGBUS after %.1f ms: %s\n",
            d == EXO_PAGER_SIGBUS ? "sigbus" : "threads", took * 1e3,
            exo_pager_last_failure(p));
    CHECK(read_faults(base + UNIT, &c)); /* and again, no hang */

    /* Dirty units fill the budget: no frame can be had. */
    CHECK_OK(exo_pager_advise(p, base, o.size, EXO_PAGER_DONTNEED, 0)); /* clean: no I/O */
    redis_start_unix(srv, dir, "dying");
    fill_units(base, 8, 4); /* the fills need the server */
    redis_stop(srv);
    CHECK(read_faults(base + 13 * UNIT, &c));
    CHECK(strstr(exo_pager_last_failure(p), "store") != NULL);
    exo_pager_stats st;
    CHECK_OK(exo_pager_get_stats(p, &st));
    CHECK_EQ(st.dirty_bytes, 4 * UNIT);
    check_units(base, 8, 4, 0); /* resident, unchanged */
    CHECK_ERR(exo_pager_flush(p), EXO_EIO);
    redis_start_unix(srv, dir, "dying"); /* empty: no persistence */
    CHECK_OK(exo_pager_flush(p));         /* the store connects again */
    CHECK_OK(exo_pager_advise(p, base, o.size, EXO_PAGER_DONTNEED, 0));
    check_units(base, 8, 4, 0);           /* from the new server */
    CHECK_OK(exo_pager_advise(p, base, 8 * UNIT, EXO_PAGER_WILLNEED, 0)); /* unpoison */
    check_units(base, 0, 8, 1); /* what only the killed server held is gone: zeros */
    failing_end(&f);
}

/* Stopped (SIGSTOP): each store call waits for its timeout, so the fault gets SIGBUS after
 * about three of them, never hangs; once the server runs again nothing is lost. */
static void hung_server(exo_pager_delivery d)
{
    struct failing f;
    failing_start(&f, "hung", d);
    exo_pager *p = f.p;
    char *base = f.base, c;
    CHECK_OK(exo_pager_advise(p, base, f.o.size, EXO_PAGER_DONTNEED, 0));
    kill(f.srv.pid, SIGSTOP);
    double t0 = now_s();
    CHECK(read_faults(base, &c));
    double took = now_s() - t0;
    kill(f.srv.pid, SIGCONT);
    fprintf(stderr, "hung server, %s delivery: SIGBUS after %.1f s: %s\n",
            d == EXO_PAGER_SIGBUS ? "sigbus" : "threads", took, exo_pager_last_failure(p));
    CHECK(took >= EXO_REDIS_TIMEOUT_MS / 1000.0 && took < 15);
    CHECK(strstr(exo_pager_last_failure(p), "store read of unit 0") != NULL);
    CHECK_OK(exo_pager_advise(p, base, UNIT, EXO_PAGER_WILLNEED, 0));
    check_units(base, 0, 8, 0);
    failing_end(&f);
}

/* ---- one server ---- */

static void single_server(void)
{
    exo_pager_store *s;
    char prefix[32];
    s = fresh_store(0, "calls", prefix);
    store_calls(s, &plain, 1, prefix);
    redisContext *admin = redis_admin(&plain);
    redisReply *r = redis_cmd(admin, 0, "CLIENT LIST TYPE normal");
    int conns = 0; /* the store's: their last command was one of its own */
    const char *ours[] = {" cmd=get ", " cmd=set ", " cmd=exists ", " cmd=del ", " cmd=ping "};
    for (char *line = strtok(r->str, "\n"); line; line = strtok(NULL, "\n"))
        for (size_t i = 0; i < sizeof ours / sizeof *ours; i++)
            conns += strstr(line, ours[i]) != NULL;
    freeReplyObject(r);
    CHECK_EQ(conns, EXO_REDIS_POOL); /* every connection of the pool served */
    CHECK_OK(exo_pager_store_close(s));

    /* A store keeps units of one size: 2 MiB units get a prefix of their own. */
    exo_pager_store *big = fresh_store(0, "big", NULL);
    s = fresh_store(0, "region", NULL);
    for (int d = 0; d < 2; d++) {
        exo_pager_delivery del = d ? EXO_PAGER_SIGBUS : EXO_PAGER_THREADS;
        region_rounds(s, del, UNIT, 96, 16);
        region_rounds(big, del, 2 * MIB, 12, 3);
        many_threads(0, del, EXO_PAGER_FIFO);
        many_threads(0, del, EXO_PAGER_CLOCK);
    }
    CHECK_OK(exo_pager_store_close(big));
    /* The server drops every client connection: the store connects again, no error. */
    r = redis_cmd(admin, 0, "CLIENT KILL TYPE normal SKIPME yes");
    CHECK(r->integer >= 1);
    freeReplyObject(r);
    CHECK_EQ(region_rounds(s, EXO_PAGER_SIGBUS, UNIT, 96, 16).store_errors, 0);
    CHECK_OK(exo_pager_store_close(s));
    redisFree(admin);
    reopened(plain.addr, "again");
    fprintf(stderr, "one server: store calls, regions, threads, reconnection, reopening ok\n");
}

/* ---- the cluster ---- */

static long long keyslot(redisContext *c, const char *key)
{
    redisReply *r = redis_cmd(c, 0, "CLUSTER KEYSLOT %s", key);
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

static void slots_agree(void)
{
    CHECK_EQ(exo_redis_crc16("123456789", 9), 0x31C3); /* the spec's check value */
    redisContext *c = redis_admin(&nodes[0]);
    const char *tagged[] = {"{user1000}.following", "{user1000}.followers", "foo{}{bar}",
                            "foo{{bar}}zap", "foo{bar}{zap}", "{}", "{", "}{x}", "a{b"};
    for (size_t i = 0; i < sizeof tagged / sizeof *tagged; i++)
        CHECK_EQ(exo_redis_key_slot(tagged[i], strlen(tagged[i])), keyslot(c, tagged[i]));
    CHECK_EQ(exo_redis_key_slot("{user1000}.following", 20), exo_redis_key_slot("user1000", 8));
    for (int i = 0; i < 500; i++) {
        char key[64];
        snprintf(key, sizeof key, i % 2 ? "cl:%d" : "x{%d}y", i * 7919);
        CHECK_EQ(exo_redis_key_slot(key, strlen(key)), keyslot(c, key));
    }
    redisFree(c);
}

static void counters(exo_pager_store *s, uint64_t *moved, uint64_t *asked)
{
    uint64_t reloads;
    exo_redis_cluster_counters(s, moved, asked, &reloads);
}

/* Move 3,000 slots from node 0 to node 2 with redis-cli while the store is open: what was
 * written reads back, through -MOVED. */
static void reshard(void)
{
    exo_pager_store *s = fresh_store(1, "reshard", NULL);
    exo_pager_options o = {.size = 256 * UNIT, .budget = 16 * UNIT, .store = s};
    exo_pager *p;
    CHECK_OK(exo_pager_create(&o, &p));
    uint64_t *base = exo_pager_base(p), moved0, moved1, asked;
    pager_write_all(base, o.size, UNIT, 9);
    CHECK_OK(exo_pager_advise(p, base, o.size, EXO_PAGER_DONTNEED, 0));
    counters(s, &moved0, &asked);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "redis-cli --cluster reshard %s --cluster-from %s --cluster-to "
             "%s --cluster-slots 3000 --cluster-yes > %s/reshard.log 2>&1", nodes[0].addr,
             nodes[0].id, nodes[2].id, dir);
    CHECK_EQ(system(cmd), 0);
    pager_check_all(base, o.size, UNIT, 9);
    counters(s, &moved1, &asked);
    fprintf(stderr, "reshard: %llu -MOVED followed\n", (unsigned long long)(moved1 - moved0));
    CHECK(moved1 > moved0);
    CHECK_OK(exo_pager_destroy(p));
    CHECK_OK(exo_pager_store_close(s));
}

static int node_of_slot(unsigned slot)
{
    for (int i = 0; i < 3; i++) {
        redisContext *c = redis_admin(&nodes[i]);
        redisReply *r = redis_cmd(c, 0, "CLUSTER COUNTKEYSINSLOT %u", slot);
        long long n = r->integer;
        freeReplyObject(r);
        redisFree(c);
        if (n > 0)
            return i;
    }
    return -1;
}

static void setslot(int node, unsigned slot, const char *state, int other)
{
    redisContext *c = redis_admin(&nodes[node]);
    freeReplyObject(redis_cmd(c, 0, "CLUSTER SETSLOT %u %s %s", slot, state, nodes[other].id));
    redisFree(c);
}

/* Migrate one slot by hand. While it is MIGRATING, a unit new to it goes to the target
 * through -ASK, and so does one already moved by MIGRATE; after SETSLOT NODE the old
 * owner answers -MOVED, and the map then sends the slot's units straight to the new one. */
static void ask_then_moved(void)
{
    enum { WRITTEN = 64 };
    char prefix[32], fmt[48];
    exo_pager_store *s = fresh_store(1, "ask", prefix);
    snprintf(fmt, sizeof fmt, "%s:%%llu", prefix);
    exo_pager_options o = {.size = (size_t)1 << 30, .budget = 8 * UNIT, .store = s};
    exo_pager *p;
    CHECK_OK(exo_pager_create(&o, &p));
    char *base = exo_pager_base(p);
    pager_write_all((uint64_t *)base, WRITTEN * UNIT, UNIT, 11);
    CHECK_OK(exo_pager_advise(p, base, o.size, EXO_PAGER_DONTNEED, 0));
    /* A written unit, and one never written whose key falls in the same slot. */
    uint64_t old_u = 0, new_u = 0;
    unsigned slot = 0;
    char key[64];
    for (uint64_t u = 0; u < WRITTEN && !new_u; u++) {
        snprintf(key, sizeof key, fmt, (unsigned long long)u);
        slot = exo_redis_key_slot(key, strlen(key));
        old_u = u;
        for (uint64_t v = WRITTEN; v < o.size / UNIT && !new_u; v++) {
            snprintf(key, sizeof key, fmt, (unsigned long long)v);
            if (exo_redis_key_slot(key, strlen(key)) == slot)
                new_u = v;
        }
    }
    CHECK(new_u != 0);
    int from = node_of_slot(slot), to = (from + 1) % 3;
    CHECK(from >= 0);
    uint64_t moved0, asked0, moved, asked;
    counters(s, &moved0, &asked0);
    setslot(to, slot, "IMPORTING", from);
    setslot(from, slot, "MIGRATING", to);

    char *new_at = base + new_u * UNIT, *old_at = base + old_u * UNIT;
    memset(new_at, 'N', UNIT); /* filled (GET) and written back (SET) through -ASK */
    CHECK_OK(exo_pager_advise(p, new_at, UNIT, EXO_PAGER_DONTNEED, 0));
    counters(s, &moved, &asked);
    CHECK(asked >= asked0 + 2);
    redisContext *c = redis_admin(&nodes[to]);
    redisReply *r = redis_cmd(c, 0, "CLUSTER COUNTKEYSINSLOT %u", slot);
    CHECK_EQ(r->integer, 1); /* the new unit is on the target */
    freeReplyObject(r);
    redisFree(c);
    CHECK(old_at[0] == (char)pager_stamp(old_u * UNIT, 11)); /* still on the source */

    /* MIGRATE what the source holds in the slot; the slot is still MIGRATING. */
    c = redis_admin(&nodes[from]);
    r = redis_cmd(c, 0, "CLUSTER GETKEYSINSLOT %u 100", slot);
    CHECK(r->elements >= 1);
    for (size_t i = 0; i < r->elements; i++)
        freeReplyObject(redis_cmd(c, 0, "MIGRATE 127.0.0.1 %d %s 0 5000", nodes[to].port,
                                  r->element[i]->str));
    freeReplyObject(r);
    redisFree(c);
    CHECK_OK(exo_pager_advise(p, old_at, UNIT, EXO_PAGER_DONTNEED, 0));
    counters(s, &moved0, &asked0);
    CHECK(old_at[0] == (char)pager_stamp(old_u * UNIT, 11)); /* -ASK: on the target now */
    counters(s, &moved, &asked);
    CHECK(asked > asked0);

    /* The slot is the target's: the source answers -MOVED, once. */
    for (int i = 0; i < 3; i++)
        setslot(i == 0 ? to : i == 1 ? from : 3 - from - to, slot, "NODE", to);
    CHECK_OK(exo_pager_advise(p, base, o.size, EXO_PAGER_DONTNEED, 0));
    counters(s, &moved0, &asked0);
    CHECK(new_at[0] == 'N' && new_at[UNIT - 1] == 'N');
    counters(s, &moved, &asked);
    CHECK_EQ(moved, moved0 + 1);
    CHECK_OK(exo_pager_advise(p, base, o.size, EXO_PAGER_DONTNEED, 0));
    CHECK(old_at[0] == (char)pager_stamp(old_u * UNIT, 11));
    pager_check_all((uint64_t *)base, WRITTEN * UNIT, UNIT, 11);
    counters(s, &moved0, &asked0);
    CHECK_EQ(moved0, moved); /* the map knows */
    CHECK_EQ(asked0, asked);
    fprintf(stderr, "slot %u moved from node %d to %d by hand: -ASK and -MOVED followed\n",
            slot, from, to);
    CHECK_OK(exo_pager_destroy(p));
    CHECK_OK(exo_pager_store_close(s));
}

static void cluster(void)
{
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof name, "node%d", i + 1);
        redis_start_cluster_node(&nodes[i], dir, name);
    }
    redis_cluster_create(nodes, 3);
    slots_agree();
    const char *seeds[] = {"127.0.0.1:1", nodes[1].addr}; /* the first cannot be reached */
    exo_pager_store *s;
    CHECK_OK(exo_pager_store_redis_cluster(seeds, 2, "cl", &s));
    region_rounds(s, EXO_PAGER_THREADS, UNIT, 96, 16);
    region_rounds(s, EXO_PAGER_SIGBUS, UNIT, 96, 16);
    long long total = 0;
    for (int i = 0; i < 3; i++) {
        long long n = redis_dbsize(&nodes[i]);
        fprintf(stderr, "cluster node %d holds %lld of the region's 96 units\n", i + 1, n);
        CHECK(n > 0);
        total += n;
    }
    CHECK_EQ(total, 96);
    CHECK_EQ(usage_units(s), 96);
    CHECK_OK(exo_pager_store_close(s));
    many_threads(1, EXO_PAGER_THREADS, EXO_PAGER_FIFO);
    many_threads(1, EXO_PAGER_SIGBUS, EXO_PAGER_CLOCK);
    reshard();
    ask_then_moved();
    char prefix[32];
    s = fresh_store(1, "calls", prefix);
    store_calls(s, nodes, 3, prefix);
    CHECK_OK(exo_pager_store_close(s));
    fprintf(stderr, "cluster: slots, spread, threads, reshard, -ASK, -MOVED ok\n");
}

/* ---- latency ---- */

static void latencies(const char *root)
{
    char path[512];
    snprintf(path, sizeof path, "%s/latency-store", root);
    exo_pager_store *s;
    for (int d = 0; d < 2; d++) {
        exo_pager_delivery del = d ? EXO_PAGER_SIGBUS : EXO_PAGER_THREADS;
        unlink(path);
        CHECK_OK(exo_pager_store_file(path, &s));
        measure(s, "file (tmpfs)", del);
        CHECK_OK(exo_pager_store_close(s));
        CHECK_OK(exo_pager_store_redis(plain.addr, "latency", &s));
        measure(s, "redis (unix)", del);
        CHECK_OK(exo_pager_store_close(s));
        const char *seeds[] = {nodes[0].addr};
        CHECK_OK(exo_pager_store_redis_cluster(seeds, 1, "latency", &s));
        measure(s, "redis-cluster", del);
        CHECK_OK(exo_pager_store_close(s));
    }
    unlink(path);
}

int main(void)
{
    const char *root = test_root_setup();
    const char *why = NULL;
    if (exo_vm_engine_supported(EXO_VM_ENGINE_UFFD, 0, &why) != 0)
        SKIP("userfaultfd is not usable here: %s", why ? why : "?");
    if ((why = redis_fixture_missing()) != NULL) {
        const char *ci = getenv("CI");
        if (ci && !strcmp(ci, "true")) {
            fprintf(stderr, "CI must run this test, but %s\n", why);
            return 1;
        }
        SKIP("%s", why);
    }
    snprintf(dir, sizeof dir, "%s/redis", root);
    CHECK(mkdir(dir, 0700) == 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    CHECK_OK(sigaction(SIGBUS, &sa, NULL));

    redis_start_unix(&plain, dir, "plain");
    bad_arguments();
    single_server();
    for (int d = 0; d < 2; d++)
        killed_server(d ? EXO_PAGER_SIGBUS : EXO_PAGER_THREADS);
    hung_server(EXO_PAGER_SIGBUS);
    hung_server(EXO_PAGER_THREADS);
    cluster();
    latencies(root);
    printf("test_pager_redis: ok (%d SIGBUS seen)\n", (int)bus_errors);
    return 0;
}
