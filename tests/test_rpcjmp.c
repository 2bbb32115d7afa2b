/* apps/rpcjmp (SpaceJMP Figure 7): a store's records reached by switching and through server
 * processes over every transport (pipe, stream and seqpacket sockets, shared-memory ring).
 *   - a value written through one way is read back byte for byte through every way, the
 *     server processes reading it from their own address spaces;
 *   - a server holds the store's lock from its first request to a release (a switching
 *     client gets EXO_EBUSY meanwhile) and bad keys and lengths are refused by both sides;
 *   - a client killed with SIGKILL while switched in and writing (holding the exclusive
 *     lock) neither blocks the next client nor leaves a torn record: the record's current
 *     version always carries its commit number and exactly the bytes written for it;
 *   - that check does catch a torn value (negative control).
 */
#include "rpcjmp.h"
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define STORE "t"
#define NRECORDS 8u
#define NCHANS 4           /* pipe, stream, seqpacket, ring */
#define KILL_ROUNDS 8
#define KILL_KEY 7u

static uint8_t wbuf[RPCJMP_PAYLOAD_MAX], rbuf[RPCJMP_PAYLOAD_MAX], want[RPCJMP_PAYLOAD_MAX];

/* A server process for one channel; dies with the test. */
static pid_t start_server(struct rpcjmp_chan *server_end, struct rpcjmp_chan *client_end)
{
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        rpcjmp_chan_close(client_end);
        struct rpcjmp_server s;
        int rc = rpcjmp_server_open(STORE, &s);
        if (rc == 0)
            rc = rpcjmp_server_serve(&s, server_end);
        if (rc)
            fprintf(stderr, "server: %s\n", exomem_last_error());
        rpcjmp_server_close(&s);
        _exit(rc ? 1 : 0);
    }
    rpcjmp_chan_close(server_end);
    return pid;
}

/* The record's current version must carry its commit number and exactly the bytes
 * rpcjmp_fill() makes for it; returns the commit number. The store is switched in. */
static uint64_t check_record(const struct rpcjmp_jmp *j, unsigned key)
{
    struct rpcjmp_record_view v;
    CHECK_OK(rpcjmp_record_peek(j->base, key, &v));
    CHECK(v.len <= RPCJMP_PAYLOAD_MAX);
    rpcjmp_fill(key, v.seq, want, v.len);
    if (memcmp(v.data, want, v.len) != 0) {
        fprintf(stderr, "record %u: commit %llu, %zu bytes: the bytes are not the ones "
                "written for it (torn)\n", key, (unsigned long long)v.seq, v.len);
        exit(1);
    }
    return v.seq;
}

/* Read key through way r (0: switching, else channel r-1) and compare with want[0..len). */
static void read_back(struct rpcjmp_jmp *j, struct rpcjmp_chan *chans, int r, unsigned key,
                      size_t len)
{
    memset(rbuf, 0, sizeof rbuf);
    long got = r == 0 ? rpcjmp_jmp_read(j, key, rbuf, sizeof rbuf)
                      : rpcjmp_call_read(&chans[r - 1], key, rbuf, sizeof rbuf);
    CHECK_EQ(got, (long)len);
    CHECK(memcmp(rbuf, want, len) == 0);
    if (r > 0)
        CHECK_OK(rpcjmp_call_release(&chans[r - 1]));
}

static void every_way(struct rpcjmp_jmp *j)
{
    static const int kinds[NCHANS] = { RPCJMP_PIPE, RPCJMP_STREAM, RPCJMP_SEQPACKET,
                                       RPCJMP_RING };
    static const size_t lens[1 + NCHANS] = { 8, 513, 4096, RPCJMP_PAYLOAD_MAX, 100 };
    struct rpcjmp_chan chans[NCHANS], server_ends[NCHANS];
    pid_t pids[NCHANS];
    for (int c = 0; c < NCHANS; c++) {
        CHECK_OK(rpcjmp_chan_pair(kinds[c], &chans[c], &server_ends[c]));
        pids[c] = start_server(&server_ends[c], &chans[c]);
    }
    /* The first values, as rpcjmp_store_create() made them, through every way. */
    rpcjmp_fill(0, 1, want, RPCJMP_PAYLOAD_MAX);
    for (int r = 0; r <= NCHANS; r++)
        read_back(j, chans, r, 0, RPCJMP_PAYLOAD_MAX);

    /* Way w writes key w+1; every way reads it back. */
    for (int w = 0; w <= NCHANS; w++) {
        unsigned key = (unsigned)w + 1;
        rpcjmp_fill(key, 100 + (uint64_t)w, wbuf, lens[w]);
        memcpy(want, wbuf, lens[w]);
        if (w == 0) {
            CHECK_OK(rpcjmp_jmp_write(j, key, wbuf, lens[w]));
        } else {
            CHECK_OK(rpcjmp_call_write(&chans[w - 1], key, wbuf, lens[w]));
            /* The server is switched in (exclusive) until it is released. */
            CHECK_ERR(vas_try_switch(j->ro), EXO_EBUSY);
            CHECK_OK(rpcjmp_call_release(&chans[w - 1]));
        }
        for (int r = 0; r <= NCHANS; r++)
            read_back(j, chans, r, key, lens[w]);
        /* One write is one commit: the first value was commit 1. */
        CHECK_OK(vas_switch(j->ro));
        struct rpcjmp_record_view v;
        CHECK_OK(rpcjmp_record_peek(j->base, key, &v));
        CHECK_EQ(v.seq, 2);
        CHECK_EQ(v.len, lens[w]);
        CHECK_OK(vas_switch(VAS_HOME));
    }

    /* Refusals, on both sides: a key past the store, a value too long. */
    CHECK_ERR(rpcjmp_jmp_read(j, NRECORDS, rbuf, 8), EXO_EINVAL);
    CHECK_ERR(rpcjmp_jmp_write(j, 0, wbuf, RPCJMP_PAYLOAD_MAX + 1), EXO_EINVAL);
    for (int c = 0; c < NCHANS; c++) {
        CHECK_ERR(rpcjmp_call_read(&chans[c], NRECORDS, rbuf, 8), EXO_EINVAL);
        CHECK_ERR(rpcjmp_call_write(&chans[c], NRECORDS + 5, wbuf, 64), EXO_EINVAL);
        CHECK_ERR(rpcjmp_call_write(&chans[c], 0, wbuf, RPCJMP_PAYLOAD_MAX + 1), EXO_EINVAL);
        /* The channel still works after them. */
        rpcjmp_fill(0, 1, want, RPCJMP_PAYLOAD_MAX);
        read_back(j, chans, c + 1, 0, RPCJMP_PAYLOAD_MAX);
    }
    CHECK_EQ(vas_current(), VAS_HOME);

    for (int c = 0; c < NCHANS; c++) {
        CHECK_OK(rpcjmp_call_close(&chans[c]));
        rpcjmp_chan_close(&chans[c]);
        int status;
        CHECK(waitpid(pids[c], &status, 0) == pids[c]);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
}

/* The child: switch in for writing and commit new values of KILL_KEY until killed. */
static void write_forever(struct rpcjmp_jmp *j, int ready_fd)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (vas_switch(j->rw) != 0)
        _exit(2);
    for (unsigned n = 0;; n++) {
        struct rpcjmp_record_view v;
        if (rpcjmp_record_peek(j->base, KILL_KEY, &v) != 0)
            _exit(3);
        size_t len = n % 4 == 3 ? 1000 + n % 3000 : RPCJMP_PAYLOAD_MAX;
        rpcjmp_fill(KILL_KEY, v.seq + 1, rpcjmp_record_begin(j->base, KILL_KEY), len);
        rpcjmp_record_commit(j->base, KILL_KEY, len);
        if (n == 0 && write(ready_fd, "x", 1) != 1)
            _exit(4);
    }
}

static void killed_writers(struct rpcjmp_jmp *j)
{
    CHECK_OK(vas_switch(j->ro));
    uint64_t last = check_record(j, KILL_KEY);
    CHECK_OK(vas_switch(VAS_HOME));
    int torn_kills = 0;
    unsigned seed = (unsigned)time(NULL);
    fprintf(stderr, "kill rounds: seed %u\n", seed);
    srand(seed);
    for (int round = 0; round < KILL_ROUNDS; round++) {
        int p[2];
        CHECK(pipe(p) == 0);
        fflush(NULL);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            close(p[0]);
            write_forever(j, p[1]);
        }
        close(p[1]);
        char b;
        CHECK_EQ(read(p[0], &b, 1), 1); /* it is switched in and has committed once */
        close(p[0]);
        struct timespec ts = { 0, (long)(rand() % 5000) * 1000 }; /* 0-5 ms of writing */
        nanosleep(&ts, NULL);
        CHECK(kill(pid, SIGKILL) == 0);
        int status;
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        /* The next writer gets in at once, and finds the last commit whole. */
        CHECK_OK(vas_try_switch(j->rw));
        uint64_t seq = check_record(j, KILL_KEY);
        CHECK(seq > last);
        last = seq;
        /* Was the kill in the middle of a value? Then the other version holds the start of
         * the next commit's bytes, not all of them. */
        const uint8_t *next = rpcjmp_record_begin(j->base, KILL_KEY);
        rpcjmp_fill(KILL_KEY, seq + 1, want, RPCJMP_PAYLOAD_MAX);
        size_t same = 0;
        while (same < RPCJMP_PAYLOAD_MAX && next[same] == want[same])
            same++;
        torn_kills += same >= 8 && same < RPCJMP_PAYLOAD_MAX;
        CHECK_OK(vas_switch(VAS_HOME));
    }
    /* The rounds must have tested what they are for (the fill is nearly all of the loop). */
    fprintf(stderr, "kill rounds: %d of %d killed a writer in the middle of a value\n",
            torn_kills, KILL_ROUNDS);
    CHECK(torn_kills > 0);
    /* Then an ordinary write and read through the switching client. */
    rpcjmp_fill(KILL_KEY, last + 1, wbuf, 4096);
    CHECK_OK(rpcjmp_jmp_write(j, KILL_KEY, wbuf, 4096));
    CHECK_OK(vas_switch(j->ro));
    CHECK_EQ(check_record(j, KILL_KEY), last + 1);
    CHECK_OK(vas_switch(VAS_HOME));
}

/* Negative control: a value whose bytes changed after its commit fails the check (in a
 * child, since the check exits). */
static void torn_value_is_caught(struct rpcjmp_jmp *j)
{
    CHECK_OK(vas_switch(j->rw));
    struct rpcjmp_record_view v;
    CHECK_OK(rpcjmp_record_peek(j->base, KILL_KEY, &v));
    uint8_t *data = (uint8_t *)(uintptr_t)v.data;
    data[v.len / 2] ^= 0xff; /* what a writer without a second version could leave */
    CHECK_OK(vas_switch(VAS_HOME));
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) { /* a fork starts at home */
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 2); /* its message is expected */
        if (vas_switch(j->ro) != 0)
            _exit(2);
        check_record(j, KILL_KEY);
        _exit(0);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    CHECK_OK(vas_switch(j->rw));
    data[v.len / 2] ^= 0xff;
    check_record(j, KILL_KEY);
    CHECK_OK(vas_switch(VAS_HOME));
}

int main(void)
{
    test_root_setup();
    signal(SIGPIPE, SIG_IGN);
    CHECK_OK(rpcjmp_store_create(STORE, test_base(0), NRECORDS));
    CHECK_ERR(rpcjmp_store_create(STORE, test_base(1), NRECORDS), EXO_EEXIST);
    CHECK_ERR(rpcjmp_store_create("n123456789012345678901234567890123456789012345678", 0, 1),
              EXO_ENAMETOOLONG);
    CHECK_ERR(rpcjmp_store_create("zero", test_base(2), 0), EXO_EINVAL);
    struct rpcjmp_jmp j;
    CHECK_OK(rpcjmp_jmp_open(STORE, &j));
    CHECK_EQ(j.nrecords, NRECORDS);
    CHECK(j.base == (uint8_t *)(uintptr_t)test_base(0));
    CHECK_ERR(rpcjmp_jmp_open("nosuch", &j), EXO_ENOENT);

    every_way(&j);
    killed_writers(&j);
    torn_value_is_caught(&j);

    rpcjmp_jmp_close(&j);
    CHECK_OK(rpcjmp_store_delete(STORE));
    CHECK_ERR(rpcjmp_store_delete(STORE), EXO_ENOENT);
    size_t nseg, nvas;
    CHECK_OK(seg_list(NULL, 0, &nseg, NULL));
    CHECK_OK(vas_list(NULL, 0, &nvas, NULL));
    CHECK_EQ(nseg, 0);
    CHECK_EQ(nvas, 0);
    printf("ok\n");
    return 0;
}
