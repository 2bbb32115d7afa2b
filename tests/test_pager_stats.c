/* Watching a region: exo_pager_query() tells a unit's state from the region's page table
 * (AVM's one-page dirty query); published statistics (exo_pager_list, `exomem pager stats
 * PID`): another process sees a live region's counters while it works, as text and JSON
 * from the CLI; a destroyed region disappears; a process killed with -9 leaves a record that
 * the next reader removes; bad arguments are rejected. */
#include "harness.h"

#include <exomem/pager.h>
#include <exomem/vm.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define KIB ((size_t)1 << 10)
#define UNITS 256
#define FRAMES 16

static const char *root;

/* A child that makes a region over a memory store, writes every unit twice (so it evicts,
 * writes back and reads back), tells the parent through `ready`, then waits to be killed or
 * told to finish through `go` (finishing destroys the region). */
static void region_child(int ready, int go)
{
    exo_pager_store *s;
    CHECK_OK(exo_pager_store_memory(EXO_PAGER_LZ4, &s));
    exo_pager_options o = {.size = UNITS * 4 * KIB, .budget = FRAMES * 4 * KIB,
                           .policy = EXO_PAGER_LRU, .table = EXO_PAGER_TABLE_HASH,
                           .threads = 2, .store = s};
    exo_pager *p;
    CHECK_OK(exo_pager_create(&o, &p));
    volatile uint64_t *base = exo_pager_base(p);
    for (int round = 1; round <= 2; round++)
        for (size_t u = 0; u < UNITS; u++)
            base[u * 512] = u * round;
    for (size_t u = 0; u < UNITS; u++)
        CHECK_EQ(base[u * 512], u * 2);
    char c = 1;
    CHECK(write(ready, &c, 1) == 1);
    CHECK(read(go, &c, 1) == 1);
    CHECK_OK(exo_pager_destroy(p));
    CHECK_OK(exo_pager_store_close(s));
    c = 2;
    CHECK(write(ready, &c, 1) == 1);
    CHECK(read(go, &c, 1) == 1 || 1);
    _exit(0);
}

static pid_t start_child(int *ready, int *go)
{
    int r[2], g[2];
    CHECK(pipe(r) == 0 && pipe(g) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(r[0]);
        close(g[1]);
        region_child(r[1], g[0]);
    }
    close(r[1]);
    close(g[0]);
    *ready = r[0];
    *go = g[1];
    char c;
    CHECK(read(*ready, &c, 1) == 1 && c == 1);
    return pid;
}

/* Run `exomem pager stats PID ARGS` and return its output in buf; its exit status. */
static int run_cli(pid_t pid, const char *args, char *buf, size_t len)
{
    const char *bin = getenv("EXOMEM_BIN");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "EXOMEM_ROOT='%s' '%s' pager stats %d %s 2>&1", root, bin,
             (int)pid, args);
    FILE *f = popen(cmd, "r");
    CHECK(f != NULL);
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static unsigned long long json_field(const char *json, const char *name)
{
    char key[64];
    snprintf(key, sizeof key, "\"%s\":", name);
    const char *p = strstr(json, key);
    CHECK(p != NULL);
    return strtoull(p + strlen(key), NULL, 10);
}

static void live_region_is_seen(void)
{
    int ready, go;
    pid_t pid = start_child(&ready, &go);
    exo_pager_info info[4];
    size_t count;
    /* The counters of the child's last fault are updated just after the fault is served,
     * which may be after the child has gone on and told us it is done: read until two
     * readings 20 ms apart agree (at most 2 s). */
    exo_pager_info before;
    CHECK_OK(exo_pager_list(pid, &before, 1, &count));
    for (int tries = 0; tries < 100; tries++) {
        usleep(20000);
        CHECK_OK(exo_pager_list(pid, info, 4, &count));
        if (memcmp(&info[0].stats, &before.stats, sizeof before.stats) == 0)
            break;
        before = info[0];
    }
    CHECK_EQ(count, 1);
    CHECK_EQ(info[0].pid, pid);
    CHECK_EQ(info[0].size, UNITS * 4 * KIB);
    CHECK(info[0].policy == EXO_PAGER_LRU && info[0].table == EXO_PAGER_TABLE_HASH);
    CHECK(info[0].delivery == EXO_PAGER_THREADS && info[0].threads == 2);
    CHECK(strcmp(info[0].store, "memory-lz4") == 0);
    const exo_pager_stats *s = &info[0].stats;
    /* 2 x 256 first writes with 16 frames: every unit faulted in each round, and the
     * second round's fills come from the store. */
    CHECK(s->faults >= 2 * UNITS && s->evictions >= 2 * UNITS - FRAMES);
    CHECK(s->writebacks >= UNITS && s->store_reads >= UNITS);
    CHECK_EQ(s->resident_bytes, FRAMES * 4 * KIB);
    CHECK_EQ(s->budget_bytes, FRAMES * 4 * KIB);
    CHECK(s->table_bytes > 0);
    uint64_t timed = 0;
    for (int i = 0; i < EXO_PAGER_LATENCY_BUCKETS; i++)
        timed += s->latency[i];
    CHECK(timed >= 2 * UNITS);

    if (getenv("EXOMEM_BIN")) {
        char out[8192];
        CHECK_EQ(run_cli(pid, "--json", out, sizeof out), 0);
        CHECK(json_field(out, "pid") == (unsigned long long)pid);
        CHECK_EQ(json_field(out, "faults"), s->faults);
        CHECK_EQ(json_field(out, "evictions"), s->evictions);
        CHECK(strstr(out, "\"policy\":\"lru\"") && strstr(out, "\"store\":\"memory-lz4\""));
        CHECK_EQ(run_cli(pid, "", out, sizeof out), 0);
        CHECK(strstr(out, "1 pager region") && strstr(out, "policy lru, table hash") &&
              strstr(out, "fault latency: median <"));
    } else {
        printf("test_pager_stats: EXOMEM_BIN not set, CLI part skipped\n");
    }

    /* Destroyed: gone from the list. */
    char c = 1;
    CHECK(write(go, &c, 1) == 1);
    CHECK(read(ready, &c, 1) == 1 && c == 2);
    CHECK_ERR(exo_pager_list(pid, info, 4, &count), EXO_ENOENT);
    CHECK(strstr(exomem_last_error(), "no pager region") != NULL);
    CHECK(write(go, &c, 1) == 1);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(ready);
    close(go);
}

static size_t records_of(pid_t pid)
{
    char dir[1024], prefix[64];
    snprintf(dir, sizeof dir, "ls '%s/pager' 2>/dev/null", root);
    snprintf(prefix, sizeof prefix, "%d-", (int)pid);
    FILE *f = popen(dir, "r");
    CHECK(f != NULL);
    char line[256];
    size_t n = 0;
    while (fgets(line, sizeof line, f))
        n += strncmp(line, prefix, strlen(prefix)) == 0;
    pclose(f);
    return n;
}

static void killed_process_record_is_removed(void)
{
    int ready, go;
    pid_t pid = start_child(&ready, &go);
    CHECK_EQ(records_of(pid), 1);
    CHECK(kill(pid, SIGKILL) == 0);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFSIGNALED(st));
    CHECK_EQ(records_of(pid), 1); /* nobody removed it: the process could not */
    exo_pager_info info[1];
    size_t count;
    CHECK_ERR(exo_pager_list(pid, info, 1, &count), EXO_ENOENT);
    CHECK(strstr(exomem_last_error(), "no such process") != NULL);
    CHECK_EQ(records_of(pid), 0);
    close(ready);
    close(go);
}

static void own_regions_and_bad_arguments(void)
{
    exo_pager_store *s1, *s2;
    CHECK_OK(exo_pager_store_memory(EXO_PAGER_PLAIN, &s1));
    CHECK_OK(exo_pager_store_memory(EXO_PAGER_ZSTD, &s2));
    exo_pager_options o = {.size = 64 * KIB, .budget = 8 * KIB, .store = s1};
    exo_pager *a, *b;
    CHECK_OK(exo_pager_create(&o, &a));
    o.store = s2;
    o.delivery = EXO_PAGER_SIGBUS;
    CHECK_OK(exo_pager_create(&o, &b));
    exo_pager_info info[2];
    size_t count;
    CHECK_OK(exo_pager_list(getpid(), info, 1, &count)); /* cap 1, two regions */
    CHECK_EQ(count, 2);
    CHECK(strcmp(info[0].store, "memory") == 0 || strcmp(info[0].store, "memory-plain") == 0);
    CHECK_OK(exo_pager_list(getpid(), info, 2, &count));
    CHECK(info[1].delivery == EXO_PAGER_SIGBUS && strcmp(info[1].store, "memory-zstd") == 0);
    CHECK_ERR(exo_pager_list(getpid(), NULL, 1, &count), EXO_EINVAL);
    CHECK_ERR(exo_pager_list(getpid(), info, 1, NULL), EXO_EINVAL);
    CHECK_ERR(exo_pager_list(0, info, 1, &count), EXO_EINVAL);
    CHECK_ERR(exo_pager_list(-5, info, 1, &count), EXO_EINVAL);
    CHECK_OK(exo_pager_destroy(a));
    CHECK_OK(exo_pager_list(getpid(), info, 2, &count));
    CHECK_EQ(count, 1);
    CHECK_OK(exo_pager_destroy(b));
    CHECK_ERR(exo_pager_list(getpid(), info, 2, &count), EXO_ENOENT);
    CHECK_OK(exo_pager_store_close(s1));
    CHECK_OK(exo_pager_store_close(s2));
    if (getenv("EXOMEM_BIN")) {
        char out[1024];
        CHECK_EQ(run_cli(getpid(), "", out, sizeof out), 3);
        CHECK(strstr(out, "no pager region"));
        CHECK_EQ(run_cli(getpid(), "extra", out, sizeof out), 2);
    }
}

static void query_states(void)
{
    exo_pager_store *s;
    CHECK_OK(exo_pager_store_memory(EXO_PAGER_LZ4, &s));
    exo_pager_options o = {.size = 8 * 4 * KIB, .budget = 2 * 4 * KIB, .policy = EXO_PAGER_FIFO,
                           .store = s};
    exo_pager *p;
    CHECK_OK(exo_pager_create(&o, &p));
    volatile char *base = exo_pager_base(p);
    unsigned st = 99;
    CHECK_OK(exo_pager_query(p, (const void *)base, &st));
    CHECK_EQ(st, 0); /* never touched */
    base[0] = 1;
    CHECK_OK(exo_pager_query(p, (const void *)(base + 100), &st));
    CHECK_EQ(st, EXO_PAGER_RESIDENT | EXO_PAGER_DIRTY);
    CHECK_OK(exo_pager_flush(p));
    CHECK_OK(exo_pager_query(p, (const void *)base, &st));
    CHECK_EQ(st, EXO_PAGER_RESIDENT | EXO_PAGER_STORED);
    base[4096] = 2;                    /* unit 1, then units 2 and 3 push unit 0 out (FIFO) */
    base[2 * 4096] = 3;
    CHECK_OK(exo_pager_query(p, (const void *)base, &st));
    CHECK_EQ(st, EXO_PAGER_STORED);
    CHECK_EQ(base[0], 1);              /* read back: resident again, clean */
    CHECK_OK(exo_pager_query(p, (const void *)base, &st));
    CHECK_EQ(st, EXO_PAGER_RESIDENT | EXO_PAGER_STORED);
    (void)base[3 * 4096];              /* read only: resident, clean, nothing stored */
    CHECK_OK(exo_pager_query(p, (const void *)(base + 3 * 4096), &st));
    CHECK_EQ(st, EXO_PAGER_RESIDENT);
    CHECK_ERR(exo_pager_query(p, (const void *)(base + o.size), &st), EXO_EINVAL);
    CHECK_ERR(exo_pager_query(p, (const void *)base, NULL), EXO_EINVAL);
    CHECK_ERR(exo_pager_query(NULL, (const void *)base, &st), EXO_EINVAL);
    CHECK_OK(exo_pager_destroy(p));
    CHECK_OK(exo_pager_store_close(s));
}

static void latency_buckets(void)
{
    exo_pager_stats st = {0};
    CHECK_EQ(exo_pager_latency_bucket(&st, 0.5), -1); /* nothing timed */
    st.latency[3] = 50;  /* [8, 16) ns */
    st.latency[10] = 49; /* [1024, 2048) ns */
    st.latency[20] = 1;
    CHECK_EQ(exo_pager_latency_bucket(&st, 0.5), 3);
    CHECK_EQ(exo_pager_latency_bucket(&st, 0.51), 10);
    CHECK_EQ(exo_pager_latency_bucket(&st, 0.99), 10);
    CHECK_EQ(exo_pager_latency_bucket(&st, 1.0), 20);
    CHECK_EQ(exo_pager_latency_bucket(&st, 0), -1);
    CHECK_EQ(exo_pager_latency_bucket(&st, 1.5), -1);
    CHECK_EQ(exo_pager_latency_bucket(NULL, 0.5), -1);
}

int main(void)
{
    root = test_root_setup();
    const char *why = NULL;
    if (exo_vm_engine_supported(EXO_VM_ENGINE_UFFD, 0, &why) != 0)
        SKIP("userfaultfd is not usable here: %s\n", why ? why : "?");
    latency_buckets();
    query_states();
    live_region_is_seen();
    killed_process_record_is_removed();
    own_regions_and_bad_arguments();
    printf("test_pager_stats: ok\n");
    return 0;
}
