/* bench_pager_store: the pager's two file stores under one workload: the plain one
 * (exo_pager_store_file, pread/pwrite) and the io_uring one (exo_pager_store_file_uring).
 *
 *   pager_store_fault_median   fault service time, median (us), and
 *   pager_store_fault_p99      its 99th percentile (us): from the difference of
 *                              exo_pager_get_stats' latency histograms across the timed
 *                              run, interpolated inside the power-of-two bucket it falls in
 *   pager_store_accesses       accesses per second, all threads together: each access
 *                              increments one word of a random 4 KiB unit of a 64 MiB region
 *                              with a 32 MiB budget (FIFO), so about half the accesses
 *                              fault, and each fault writes a dirty victim back to the store
 *                              and reads the unit from it (every unit is in the store)
 *   pager_store_faults         faults per second in that run
 *   store_read_ns, store_write_ns
 *                              one store call (4 KiB, a random unit of a 64 MiB file written
 *                              before), called directly without a region, so threads call
 *                              at the same time: ns per call as each thread sees it.
 *                              cache=warm: the file is in the page cache; cache=cold (reads,
 *                              not on tmpfs): its pages were dropped (fdatasync and
 *                              POSIX_FADV_DONTNEED) and each thread reads 2,000 distinct
 *                              units, so every read goes to the disk
 *   store_calls                reads per second of all threads together
 * Params: store (file, file-uring), fs (the file system of the store's file: tmpfs is the
 * registry under /dev/shm, the other a directory under /tmp), cache (warm: the file is in
 * the page cache, as it stays on a machine with memory to spare; cold, not on tmpfs: the
 * file's pages are dropped before the run, so fills read from the disk; cold region runs
 * make a fifth of the accesses), threads (1 or 4 faulting or calling threads), delivery
 * (threads: one handler thread; sigbus). The io_uring rows name the plain store's row as
 * their baseline. Both regions of a configuration live at once and their repeats alternate,
 * so drift hits both alike. --quick: fewer accesses and calls, one repeat, tmpfs only.
 */
#include "bench_util.h"
#include "pager/store.h"
#include "pager/store_file.h"

#include <exomem/pager.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)
#define UNIT ((size_t)4 << 10)
#define BUDGET (32 * MIB)
#define REGION (2 * BUDGET)
#define STORE_FILE (64 * MIB)
#define MAX_THREADS 4

enum { PLAIN, URING, KINDS };
static const char *const kind_name[KINDS] = {"file", "file-uring"};

static struct {
    int repeats;
    bool quick;
    long accesses; /* per timed run, all threads together */
    long calls;    /* per thread, per direct store run */
} opt = {3, false, 100000, 40000};

static char tmp_dir[64];

static void remove_tmp_dir(void)
{
    if (tmp_dir[0])
        bench_remove_tree(tmp_dir);
}

/* The kind of file system dir is on, for the params. */
static const char *fs_name(const char *dir)
{
    struct statfs st;
    if (statfs(dir, &st) != 0)
        return "unknown";
    switch ((unsigned long)st.f_type) {
    case 0x01021994UL: return "tmpfs";
    case 0xEF53UL: return "ext4";
    case 0x58465342UL: return "xfs";
    case 0x9123683EUL: return "btrfs";
    default: return "other";
    }
}

static exo_pager_store *open_store(int kind, const char *path, const char *params)
{
    exo_pager_store *s = NULL;
    unlink(path);
    int rc = kind == URING ? exo_pager_store_file_uring(path, 0, &s)
                           : exo_pager_store_file(path, &s);
    if (rc != 0) {
        printf("{\"name\":\"skip\",\"params\":{%s,\"store\":\"%s\"},\"reason\":\"%s\"}\n",
               params, kind_name[kind], exomem_last_error());
        return NULL;
    }
    return s;
}

static uint64_t next(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* Run body(i) on `threads` threads at once; returns the wall time in ns. */
struct team {
    pthread_barrier_t start;
    void *(*body)(void *);
    void *args[MAX_THREADS];
};

static void *team_member(void *arg)
{
    void **a = arg;
    struct team *t = a[0];
    pthread_barrier_wait(&t->start);
    return t->body(a[1]);
}

static uint64_t run_team(void *(*body)(void *), void **args, int threads)
{
    struct team t = {.body = body};
    pthread_barrier_init(&t.start, NULL, (unsigned)threads + 1);
    pthread_t tid[MAX_THREADS];
    void *pair[MAX_THREADS][2];
    for (int i = 0; i < threads; i++) {
        pair[i][0] = &t;
        pair[i][1] = args[i];
        if (pthread_create(&tid[i], NULL, team_member, pair[i]) != 0)
            bench_die("pthread_create", -EXO_ENOMEM);
    }
    pthread_barrier_wait(&t.start);
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < threads; i++)
        pthread_join(tid[i], NULL);
    uint64_t ns = bench_now_ns() - t0;
    pthread_barrier_destroy(&t.start);
    return ns;
}

/* Write the file's dirty pages and drop all of its pages from the page cache, so that the
 * next reads go to the disk. */
static void drop_cache(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0 || fdatasync(fd) != 0 || posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0)
        bench_die("dropping the store file's page cache", -EXO_EIO);
    close(fd);
}

/* A row's params for store kind k (into p), and for io_uring the plain store's row to
 * compare it with (into base_p, returned; NULL for the plain store's own rows). */
#define PARAMS_LEN 256
static const char *row_params(char *p, char *base_p, const char *params, const char *cache,
                              int threads, int k)
{
    snprintf(p, PARAMS_LEN, "%s,\"cache\":\"%s\",\"threads\":%d,\"store\":\"%s\"", params,
             cache, threads, kind_name[k]);
    snprintf(base_p, PARAMS_LEN, "%s,\"cache\":\"%s\",\"threads\":%d,\"store\":\"file\"",
             params, cache, threads);
    return k == URING ? base_p : NULL;
}

/* One measurement line, compared with the same measurement of base_p when not NULL. */
static void emit(const char *name, const char *unit, double value, const char *p,
                 const char *base_p, const char *note)
{
    bench_emit_against(name, unit, value, p, base_p ? name : NULL, base_p, note);
}

/* ---- a region over each store ---- */

struct walker {
    uint64_t *base;
    long accesses;
    uint64_t seed;
};

static void *walk(void *arg)
{
    struct walker *w = arg;
    size_t per_unit = UNIT / 8;
    for (long i = 0; i < w->accesses; i++) {
        uint64_t x = next(&w->seed);
        w->base[(size_t)(x % (REGION / UNIT)) * per_unit + (size_t)(x >> 40) % per_unit] += 1;
    }
    return NULL;
}

/* q-quantile of the latency histogram h (n counts): ns, interpolated inside its bucket. */
static double quantile_ns(const uint64_t *h, uint64_t n, double q)
{
    double want = q * (double)n, seen = 0;
    for (int b = 0; b < EXO_PAGER_LATENCY_BUCKETS; b++) {
        if (h[b] && seen + (double)h[b] >= want) {
            double lo = (double)(UINT64_C(1) << b);
            return lo + lo * (want - seen) / (double)h[b];
        }
        seen += (double)h[b];
    }
    return 0;
}

struct region_run {
    exo_pager *pager;
    exo_pager_store *store;
    double accesses_per_s, faults_per_s, median_us, p99_us;
};

static void timed_walk(struct region_run *r, int threads, long accesses, uint64_t seed)
{
    struct walker w[MAX_THREADS];
    void *args[MAX_THREADS];
    for (int i = 0; i < threads; i++) {
        w[i] = (struct walker){exo_pager_base(r->pager), accesses / threads,
                               seed * 7919 + (uint64_t)i * 104729 + 1};
        args[i] = &w[i];
    }
    exo_pager_stats a, b;
    TRY(exo_pager_get_stats(r->pager, &a));
    uint64_t ns = run_team(walk, args, threads);
    TRY(exo_pager_get_stats(r->pager, &b));
    uint64_t h[EXO_PAGER_LATENCY_BUCKETS], n = 0;
    for (int i = 0; i < EXO_PAGER_LATENCY_BUCKETS; i++)
        n += h[i] = b.latency[i] - a.latency[i];
    r->accesses_per_s = (double)(accesses / threads * threads) * 1e9 / (double)ns;
    r->faults_per_s = (double)(b.faults - a.faults) * 1e9 / (double)ns;
    r->median_us = quantile_ns(h, n, 0.5) / 1e3;
    r->p99_us = quantile_ns(h, n, 0.99) / 1e3;
}

static void bench_regions(const char *dir, const char *fs, exo_pager_delivery delivery)
{
    const char *del = delivery == EXO_PAGER_SIGBUS ? "sigbus" : "threads";
    char params[128], path[KINDS][128];
    snprintf(params, sizeof params, "\"fs\":\"%s\",\"delivery\":\"%s\"", fs, del);
    struct region_run run[KINDS];
    for (int k = 0; k < KINDS; k++) {
        snprintf(path[k], sizeof path[k], "%s/pager-%s", dir, kind_name[k]);
        if (!(run[k].store = open_store(k, path[k], params))) {
            while (k-- > 0)
                TRY(exo_pager_store_close(run[k].store));
            return;
        }
    }
    for (int k = 0; k < KINDS; k++) {
        exo_pager_options o = {.size = REGION, .budget = BUDGET, .unit = UNIT,
                               .policy = EXO_PAGER_FIFO, .delivery = delivery, .threads = 1,
                               .store = run[k].store};
        TRY(exo_pager_create(&o, &run[k].pager));
        char *base = exo_pager_base(run[k].pager);
        for (size_t off = 0; off < REGION; off += UNIT) /* every unit in the store */
            base[off] = 1;
        timed_walk(&run[k], 1, opt.accesses / 4, 99); /* a random resident set */
    }
    /* Warm runs first: a cold run leaves the file partly out of the page cache. */
    int phases = strcmp(fs, "tmpfs") ? 2 : 1;
    for (int cold = 0; cold < phases; cold++)
        for (int threads = 1; threads <= MAX_THREADS; threads *= 4)
            for (int r = 0; r < opt.repeats; r++)
                for (int k = 0; k < KINDS; k++) {
                    if (cold)
                        drop_cache(path[k]);
                    timed_walk(&run[k], threads, cold ? opt.accesses / 5 : opt.accesses,
                               (uint64_t)r + 1);
                    char p[PARAMS_LEN], base_p[PARAMS_LEN];
                    const char *bp = row_params(p, base_p, params, cold ? "cold" : "warm",
                                                threads, k);
                    emit("pager_store_fault_median", "us", run[k].median_us, p, bp, NULL);
                    emit("pager_store_fault_p99", "us", run[k].p99_us, p, bp, NULL);
                    emit("pager_store_accesses", "accesses/s", run[k].accesses_per_s, p, bp,
                         NULL);
                    emit("pager_store_faults", "faults/s", run[k].faults_per_s, p, bp, NULL);
                }
    for (int k = 0; k < KINDS; k++) {
        TRY(exo_pager_destroy(run[k].pager));
        TRY(exo_pager_store_close(run[k].store));
    }
}

/* ---- the store called directly ---- */

#define COLD_CALLS 2000 /* per thread: reads from the disk take ~50 us each */

enum call_mode { READ_WARM, WRITE_WARM, READ_COLD, MODES };
static const char *const mode_name[MODES] = {"store_read_ns", "store_write_ns",
                                             "store_read_ns"};

struct caller {
    exo_pager_store *s;
    enum call_mode mode;
    uint64_t first, count, seed;
    long calls;
    char *buf;
};

static void *call_store(void *arg)
{
    struct caller *c = arg;
    for (long i = 0; i < c->calls; i++) {
        /* Cold: every unit once (7919 is prime to the power-of-two count). */
        uint64_t unit = c->first + (c->mode == READ_COLD ? (uint64_t)i * 7919 + c->seed
                                                         : next(&c->seed)) % c->count;
        int rc = c->mode == WRITE_WARM ? exo_pager_store_write(c->s, unit, UNIT, c->buf)
                                       : exo_pager_store_read(c->s, unit, UNIT, c->buf);
        if (rc)
            bench_die(c->mode == WRITE_WARM ? "store write" : "store read", rc);
    }
    return NULL;
}

static void bench_calls(const char *dir, const char *fs)
{
    char params[64];
    snprintf(params, sizeof params, "\"fs\":\"%s\"", fs);
    exo_pager_store *s[KINDS];
    char path[KINDS][128];
    static char bufs[MAX_THREADS][UNIT] __attribute__((aligned(4096)));
    for (int k = 0; k < KINDS; k++) {
        snprintf(path[k], sizeof path[k], "%s/calls-%s", dir, kind_name[k]);
        if (!(s[k] = open_store(k, path[k], params))) {
            while (k-- > 0)
                TRY(exo_pager_store_close(s[k]));
            return;
        }
        memset(bufs[0], 0x5a, UNIT);
        for (uint64_t u = 0; u < STORE_FILE / UNIT; u++)
            TRY(exo_pager_store_write(s[k], u, UNIT, bufs[0]));
    }
    /* Warm runs first (a cold run leaves the file partly out of the page cache); tmpfs has
     * no disk behind its page cache, so no cold reads there. */
    int modes = strcmp(fs, "tmpfs") ? MODES : READ_COLD;
    for (int m = 0; m < modes; m++)
        for (int threads = 1; threads <= MAX_THREADS; threads *= 4)
            for (int r = 0; r < opt.repeats; r++)
                for (int k = 0; k < KINDS; k++) {
                    struct caller c[MAX_THREADS];
                    void *args[MAX_THREADS];
                    uint64_t per = STORE_FILE / UNIT / (uint64_t)threads;
                    long calls = m == READ_COLD ? COLD_CALLS : opt.calls;
                    if (m == READ_COLD)
                        drop_cache(path[k]);
                    for (int i = 0; i < threads; i++) {
                        c[i] = (struct caller){s[k], (enum call_mode)m, (uint64_t)i * per, per,
                                               (uint64_t)(r * 31 + i) * 2654435761u + 7,
                                               calls, bufs[i]};
                        args[i] = &c[i];
                    }
                    uint64_t ns = run_team(call_store, args, threads);
                    char p[PARAMS_LEN], base_p[PARAMS_LEN], note[64];
                    const char *bp = row_params(p, base_p, params,
                                                m == READ_COLD ? "cold" : "warm", threads, k);
                    snprintf(note, sizeof note, "%u rings",
                             k == URING ? exo_pager_uring_rings(s[k]) : 0);
                    emit(mode_name[m], "ns", (double)ns / (double)calls, p, bp,
                         k == URING ? note : NULL);
                    if (m != WRITE_WARM)
                        emit("store_calls", "calls/s", (double)calls * threads * 1e9 / (double)ns,
                             p, bp, NULL);
                }
    for (int k = 0; k < KINDS; k++)
        TRY(exo_pager_store_close(s[k]));
}

static int body(void)
{
    const char *dirs[2] = {bench_root(), NULL};
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/exomem-bench-store-XXXXXX");
    if (!opt.quick) {
        if (!mkdtemp(tmp_dir))
            bench_die("mkdtemp under /tmp", -EXO_EIO);
        atexit(remove_tmp_dir);
        dirs[1] = tmp_dir;
    } else {
        tmp_dir[0] = 0;
    }
    for (int d = 0; d < 2 && dirs[d]; d++) {
        const char *fs = fs_name(dirs[d]);
        bench_calls(dirs[d], fs);
        bench_regions(dirs[d], fs, EXO_PAGER_THREADS);
        bench_regions(dirs[d], fs, EXO_PAGER_SIGBUS);
    }
    return 0;
}

int main(int argc, char **argv)
{
    opt.quick = bench_parse_args(argc, argv, &opt.repeats, 1, NULL);
    if (opt.quick) {
        opt.accesses /= 8;
        opt.calls /= 8;
    }
    return bench_run_in_private_registry(body);
}
