/* The persistent store (apps/pstore), with each DIRTY engine the kernel has: pointers stay
 * valid across reopen in a new process; uncommitted changes never reach the file; a commit
 * writes exactly the dirty pages; a crash at each step of a commit (test hook) leaves the
 * old or the new state as the protocol says; a damaged committed log is refused and a torn
 * one dropped; an occupied address gives EXO_EOVERLAP. Then a kill -9 loop: a child commits
 * in a loop and is killed at random times (seed printed; PSTORE_CRASH_SEED and
 * PSTORE_CRASH_SECONDS change them); after each kill the reopened store must equal the last
 * acknowledged commit or the one in flight, checked by a checksum of the whole heap, and
 * each of those outcomes (and a log replayed, a torn log dropped) must have been seen.
 */
#include "pstore.h"
#include "harness.h"

#include <exomem/vm.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define STORE_SIZE (4u << 20)
#define NODES 200
#define BIG_BYTES 65536

struct node {
    struct node *next;
    uint64_t value;
    struct node *self; /* a pointer to itself: valid only at the same address */
};

struct app_root {
    struct node *head;
    char *big; /* BIG_BYTES, for counting dirty pages */
};

static const char *root_dir;
static char path[512];
static exo_vm_engine engine;
static uint64_t base;

static struct pstore *open_store(int crash_point)
{
    struct pstore *p;
    struct pstore_options o = {.engine = engine, .crash_point = crash_point};
    CHECK_OK(pstore_open(path, &o, &p));
    CHECK(pstore_base(p) == (void *)(uintptr_t)base);
    return p;
}

static uint64_t committed_checksum(int *recovered)
{
    struct pstore *p = open_store(0);
    struct pstore_stats st;
    pstore_get_stats(p, &st);
    if (recovered)
        *recovered = st.recovered;
    CHECK_OK(pstore_check(p));
    uint64_t sum = pstore_checksum(p);
    pstore_close(p);
    return sum;
}

static void put_str(struct pstore *p, const char *k, const char *v)
{
    CHECK_OK(pstore_put(p, k, strlen(k), v, strlen(v)));
}

static int has_value(struct pstore *p, const char *k, const char *v)
{
    const void *val;
    size_t n;
    if (pstore_get(p, k, strlen(k), &val, &n) != 0)
        return 0;
    return n == strlen(v) && !memcmp(val, v, n);
}

/* In a fresh process: the list built by the parent is intact at the same addresses. */
static void verify_in_child(void *arg)
{
    (void)arg;
    struct pstore *p = open_store(0);
    struct app_root *r = pstore_root(p);
    CHECK(r != NULL);
    uint64_t i = 0;
    for (struct node *n = r->head; n; n = n->next, i++) {
        CHECK(n->self == n);
        CHECK_EQ(n->value, i * i);
    }
    CHECK_EQ(i, NODES);
    CHECK(has_value(p, "k42", "v42"));
    CHECK(!has_value(p, "ghost", "boo")); /* was never committed */
    CHECK_OK(pstore_check(p));
    pstore_close(p);
}

static void basic(void)
{
    CHECK_OK(pstore_create(path, base, STORE_SIZE));
    CHECK_ERR(pstore_create(path, base, STORE_SIZE), EXO_EEXIST);
    struct pstore *p = open_store(0);
    CHECK_EQ(pstore_engine(p), engine);
    struct pstore *again;
    CHECK_ERR(pstore_open(path, NULL, &again), EXO_EBUSY);

    struct app_root *r = pstore_malloc(p, sizeof *r, NULL);
    CHECK(r);
    r->big = pstore_malloc(p, BIG_BYTES, NULL);
    CHECK(r->big);
    memset(r->big, 0, BIG_BYTES);
    struct node **link = &r->head;
    for (uint64_t i = 0; i < NODES; i++) {
        struct node *n = pstore_malloc(p, sizeof *n, NULL);
        CHECK(n);
        *n = (struct node){.value = i * i, .self = n};
        *link = n;
        link = &n->next;
    }
    pstore_set_root(p, r);
    char k[16], v[16];
    for (int i = 0; i < 100; i++) {
        snprintf(k, sizeof k, "k%d", i);
        snprintf(v, sizeof v, "v%d", i);
        put_str(p, k, v);
    }
    CHECK_OK(pstore_commit(p));
    uint64_t sum = pstore_checksum(p);

    /* Uncommitted changes are dropped by close. */
    put_str(p, "ghost", "boo");
    r->head->value = 7;
    pstore_close(p);
    CHECK_EQ(test_in_child(verify_in_child, NULL), 0);
    CHECK_EQ(committed_checksum(NULL), sum);

    /* A commit writes exactly the pages written since the last one. */
    p = open_store(0);
    r = pstore_root(p);
    CHECK_OK(pstore_commit(p));
    struct pstore_stats st;
    pstore_get_stats(p, &st);
    CHECK_EQ(st.last_commit_pages, 0);
    for (int rep = 0; rep < 3; rep++)
        for (int pg = 1; pg <= 9; pg += 4) /* 3 pages, 16 KiB apart, written 3 times each */
            r->big[pg * 4096 + rep] = (char)(pg + rep);
    CHECK_OK(pstore_commit(p));
    pstore_get_stats(p, &st);
    CHECK_EQ(st.last_commit_pages, 3);
    sum = pstore_checksum(p);
    pstore_close(p);
    CHECK_EQ(committed_checksum(NULL), sum);
    p = open_store(0);
    r = pstore_root(p);
    CHECK_EQ(r->big[9 * 4096 + 2], 11);
    pstore_close(p);

    /* The store's address is taken: a clear error, and nothing changes. */
    void *block = mmap((void *)(uintptr_t)(base + 8192), 4096, PROT_READ,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    CHECK(block == (void *)(uintptr_t)(base + 8192));
    CHECK_ERR(pstore_open(path, NULL, &p), EXO_EOVERLAP);
    CHECK(strstr(exomem_last_error(), "taken") != NULL);
    munmap(block, 4096);
    CHECK_EQ(committed_checksum(NULL), sum);
}

/* ---- crashes at chosen points of a commit ---- */

static int sum_pipe[2];

static void commit_and_crash(void *arg)
{
    struct pstore *p = open_store(*(int *)arg);
    struct app_root *r = pstore_root(p);
    put_str(p, "phase", "new");
    for (int pg = 0; pg < 16; pg++)
        r->big[pg * 4096 + 7] ^= 0x33;
    uint64_t sum = pstore_checksum(p);
    CHECK(write(sum_pipe[1], &sum, sizeof sum) == sizeof sum);
    pstore_commit(p); /* dies inside */
    _exit(3);
}

static uint64_t crash_at(int point)
{
    CHECK(pipe(sum_pipe) == 0);
    CHECK_EQ(test_in_child(commit_and_crash, &point), 128 + SIGKILL);
    uint64_t sum = 0;
    CHECK(read(sum_pipe[0], &sum, sizeof sum) == sizeof sum);
    close(sum_pipe[0]);
    close(sum_pipe[1]);
    return sum;
}

static off_t log_size(void)
{
    char lp[600];
    snprintf(lp, sizeof lp, "%s.log", path);
    struct stat sb;
    CHECK(stat(lp, &sb) == 0);
    return sb.st_size;
}

static void damage_log(off_t at, int truncate_to_at)
{
    char lp[600];
    snprintf(lp, sizeof lp, "%s.log", path);
    int fd = open(lp, O_RDWR);
    CHECK(fd >= 0);
    if (truncate_to_at) {
        CHECK(ftruncate(fd, at) == 0);
    } else {
        char c;
        CHECK(pread(fd, &c, 1, at) == 1);
        c ^= 0x40;
        CHECK(pwrite(fd, &c, 1, at) == 1);
    }
    close(fd);
}

static void crash_points(void)
{
    int rec;
    uint64_t old = committed_checksum(NULL);
    /* Log written, no commit record: dropped; the old state stays. */
    crash_at(PSTORE_CRASH_BEFORE_RECORD);
    CHECK(log_size() > 0);
    CHECK_EQ(committed_checksum(&rec), old);
    CHECK_EQ(rec, -1);
    /* Commit record durable: replayed, before or half-way through applying. */
    uint64_t sum = crash_at(PSTORE_CRASH_BEFORE_APPLY);
    CHECK_EQ(committed_checksum(&rec), sum);
    CHECK_EQ(rec, 1);
    CHECK_EQ(log_size(), 0);
    sum = crash_at(PSTORE_CRASH_MID_APPLY);
    CHECK_EQ(committed_checksum(&rec), sum);
    CHECK_EQ(rec, 1);
    old = sum;
    /* A torn commit record is an incomplete log: dropped. */
    crash_at(PSTORE_CRASH_BEFORE_APPLY);
    damage_log(log_size() - 8, 1);
    CHECK_EQ(committed_checksum(&rec), old);
    CHECK_EQ(rec, -1);
    /* A committed log with a damaged page is refused, and left for inspection. */
    crash_at(PSTORE_CRASH_BEFORE_APPLY);
    off_t size = log_size();
    damage_log(size - 32 - 100, 0); /* inside the last page image */
    struct pstore *p;
    CHECK_ERR(pstore_open(path, NULL, &p), EXO_ECORRUPT);
    CHECK(strstr(exomem_last_error(), "checksum") != NULL);
    CHECK_EQ(log_size(), size);
    char lp[600];
    snprintf(lp, sizeof lp, "%s.log", path);
    CHECK(unlink(lp) == 0); /* an operator's decision: the file itself was not touched */
    CHECK_EQ(committed_checksum(NULL), old);
}

/* ---- kill -9 at random times ---- */

/* After its time, the loop goes on (at most this long) until every outcome has been seen. */
#define KILL_LOOP_EXTRA_S 60

struct msg {
    uint64_t kind; /* 1: about to commit, 2: committed */
    uint64_t seq;
    uint64_t sum;
};

static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int msg_fd;
static uint64_t child_seed;

/* The commit counter the committer keeps under key "seq" (0 before its first commit). */
static uint64_t stored_seq(struct pstore *p)
{
    const void *v;
    size_t n;
    uint64_t seq = 0;
    if (pstore_get(p, "seq", 3, &v, &n) == 0)
        memcpy(&seq, v, sizeof seq);
    return seq;
}

static void committer(void *arg)
{
    (void)arg;
    struct pstore *p = open_store(0);
    uint64_t seq = stored_seq(p);
    char key[32], val[4096];
    for (int i = 0; i < 100000; i++) {
        seq++;
        CHECK_OK(pstore_put(p, "seq", 3, &seq, sizeof seq));
        for (int k = 0; k < 4; k++) {
            uint64_t r = rng(&child_seed);
            snprintf(key, sizeof key, "key%llu", (unsigned long long)(r % 300));
            if (r % 7 == 0) {
                pstore_del(p, key, strlen(key));
                continue;
            }
            size_t len = 1 + (r >> 20) % sizeof val;
            memset(val, 'a' + (int)(seq % 26), len);
            CHECK_OK(pstore_put(p, key, strlen(key), val, len));
        }
        struct msg m = {1, seq, pstore_checksum(p)};
        CHECK(write(msg_fd, &m, sizeof m) == sizeof m);
        CHECK_OK(pstore_commit(p));
        m.kind = 2;
        CHECK(write(msg_fd, &m, sizeof m) == sizeof m);
    }
    _exit(0);
}

static void kill_loop(void)
{
    const char *s = getenv("PSTORE_CRASH_SEED"), *d = getenv("PSTORE_CRASH_SECONDS");
    uint64_t seed = s ? strtoull(s, NULL, 0) : 20261123, rs = seed | 1;
    double seconds = d ? atof(d) : 2.0;
    fprintf(stderr, "kill -9 loop (%s): seed %llu, %.1f s\n", exo_vm_engine_name(engine),
            (unsigned long long)seed, seconds);
    uint64_t done_seq = 0, done_sum = committed_checksum(NULL);
    int kills = 0, as_acked = 0, as_inflight = 0, replays = 0, drops = 0;
    bool all_seen = false;
    double elapsed = 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        int fds[2];
        CHECK(pipe(fds) == 0);
        child_seed = rng(&rs);
        fflush(NULL);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            msg_fd = fds[1];
            committer(NULL);
        }
        close(fds[1]);
        struct msg m, inflight = {0, 0, 0};
        ssize_t got = read(fds[0], &m, sizeof m); /* the child is committing */
        usleep((useconds_t)(rng(&rs) % 3000));
        kill(pid, SIGKILL);
        int status;
        CHECK(waitpid(pid, &status, 0) == pid);
        if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) {
            fprintf(stderr, "committer ended with status %#x\n", status);
            CHECK(0);
        }
        for (; got == sizeof m; got = read(fds[0], &m, sizeof m)) {
            if (m.kind == 1)
                inflight = m;
            else
                done_seq = m.seq, done_sum = m.sum;
        }
        close(fds[0]);
        int rec;
        uint64_t sum = committed_checksum(&rec);
        replays += rec == 1, drops += rec == -1;
        if (sum == done_sum && (inflight.seq == 0 || inflight.seq == done_seq ||
                                inflight.sum != done_sum)) {
            as_acked++;
        } else if (inflight.seq == done_seq + 1 && sum == inflight.sum) {
            as_inflight++;
            done_seq = inflight.seq, done_sum = inflight.sum;
        } else {
            fprintf(stderr, "after kill %d: store checksum %016llx is neither the acknowledged "
                    "commit %llu (%016llx) nor the one in flight %llu (%016llx)\n", kills,
                    (unsigned long long)sum, (unsigned long long)done_seq,
                    (unsigned long long)done_sum, (unsigned long long)inflight.seq,
                    (unsigned long long)inflight.sum);
            CHECK(0);
        }
        struct pstore *p = open_store(0);
        CHECK_EQ(stored_seq(p), done_seq);
        pstore_close(p);
        kills++;
        clock_gettime(CLOCK_MONOTONIC, &t);
        elapsed = (double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9;
        all_seen = as_acked && as_inflight && replays && drops;
    } while (elapsed < seconds || (!all_seen && elapsed < seconds + KILL_LOOP_EXTRA_S));
    fprintf(stderr, "kill -9 loop: %d kills, %llu commits; the store held the acknowledged "
            "commit %d times and the one in flight %d times; %d logs replayed, %d dropped\n",
            kills, (unsigned long long)done_seq, as_acked, as_inflight, replays, drops);
    /* docs/appel-li.md promises each of these outcomes; a loop that never met one of them
     * proved nothing about it. */
    if (!all_seen) {
        fprintf(stderr, "kill -9 loop: in %.0f s not every outcome was seen (acknowledged "
                "state %d, in-flight commit %d, log replayed %d, torn log dropped %d)\n",
                elapsed, as_acked, as_inflight, replays, drops);
        CHECK(0);
    }
}

int main(void)
{
    root_dir = test_root_setup();
    exo_vm_engine engines[] = {EXO_VM_ENGINE_SIGNAL, EXO_VM_ENGINE_UFFD, EXO_VM_ENGINE_SOFTDIRTY};
    int ran = 0;
    for (size_t i = 0; i < sizeof engines / sizeof engines[0]; i++) {
        engine = engines[i];
        const char *why = NULL;
        if (exo_vm_engine_supported(engine, EXO_VM_TRACK_DIRTY, &why) != 0) {
            fprintf(stderr, "engine %s: skipped: %s\n", exo_vm_engine_name(engine),
                    why ? why : "not supported");
            continue;
        }
        base = test_base(1 + (int)i);
        snprintf(path, sizeof path, "%s/store-%s.db", root_dir, exo_vm_engine_name(engine));
        basic();
        crash_points();
        kill_loop();
        fprintf(stderr, "engine %s: ok\n", exo_vm_engine_name(engine));
        ran++;
    }
    if (!ran)
        SKIP("no DIRTY engine works here");
    return 0;
}
