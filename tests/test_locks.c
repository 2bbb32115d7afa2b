/* Lockable segments across processes: RW switches serialise, RO switches share, a RW
 * try-switch against a holder fails with EXO_EBUSY and changes nothing, a holder killed by
 * SIGKILL releases its locks, and VAS_CTL_SET_LOCKING 0 takes none.
 *
 * Every helper process is forked before the parent attaches anything, so no attachment,
 * descriptor or lock is inherited; each attaches on its own. */
#include "harness.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define SEG_SIZE (UINT64_C(1) << 20)
#define ITERATIONS 2000

static vasid_t v_rw, v_ro;   /* the same segment, attached read-write and read-only */

/* A helper process and its two pipes: the parent sends commands, the helper answers. */
struct helper {
    pid_t pid;
    int cmd_fd, reply_fd;
};

static void send_byte(int fd, char c)
{
    CHECK_EQ(write(fd, &c, 1), 1);
}

static int is_helper;

/* A helper whose parent has gone (failed) just leaves; the parent reports a helper that
 * failed (it printed why). */
static char recv_byte(int fd)
{
    char c = 0;
    if (read(fd, &c, 1) != 1) {
        if (is_helper)
            _exit(3);
        fprintf(stderr, "a helper process failed\n");
        exit(1);
    }
    return c;
}

/* Fork a helper running fn(cmd_fd, reply_fd, arg); it exits 0 when fn returns. */
static struct helper start_helper(void (*fn)(int, int, long), long arg)
{
    int to[2], from[2];
    CHECK_OK(pipe(to));
    CHECK_OK(pipe(from));
    fflush(NULL);
    struct helper h;
    h.pid = fork();
    CHECK(h.pid >= 0);
    if (h.pid == 0) {
        is_helper = 1;
        close(to[1]);
        close(from[0]);
        fn(to[0], from[1], arg);
        _exit(0);
    }
    close(to[0]);
    close(from[1]);
    h.cmd_fd = to[1];
    h.reply_fd = from[0];
    return h;
}

/* Wait for a helper; returns its exit status or 128 + signal. */
static int finish_helper(struct helper *h)
{
    int status;
    CHECK_EQ(waitpid(h->pid, &status, 0), h->pid);
    close(h->cmd_fd);
    close(h->reply_fd);
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

/* --- 1. read-modify-write in RW switches from two processes loses no update --- */

static void counter_worker(int cmd, int reply, long locking)
{
    vhandle_t vh;
    CHECK_OK(vas_ctl(VAS_CTL_SET_LOCKING, 0, &(int){(int)locking}));
    CHECK_OK(vas_attach(v_rw, &vh));
    send_byte(reply, 'r');
    recv_byte(cmd);   /* start together */
    volatile uint64_t *counter = (volatile uint64_t *)test_base(0);
    for (int i = 0; i < ITERATIONS; i++) {
        CHECK_OK(vas_switch(vh));
        uint64_t v = *counter;
        sched_yield();
        *counter = v + 1;
        CHECK_OK(vas_switch(VAS_HOME));
    }
    CHECK_OK(vas_detach(vh));
}

static uint64_t read_counter(vhandle_t vh)
{
    CHECK_OK(vas_switch(vh));
    uint64_t v = *(volatile uint64_t *)test_base(0);
    CHECK_OK(vas_switch(VAS_HOME));
    return v;
}

/* --- 2..4: a helper that switches into `arg` (a VAS id) on 's' (or tries, on 't'), goes
 * home on 'h', exits on 'x' */

static void holder(int cmd, int reply, long vid)
{
    vhandle_t vh;
    CHECK_OK(vas_attach((vasid_t)vid, &vh));
    send_byte(reply, 'a');
    for (;;) {
        char c = recv_byte(cmd);
        if (c == 's') {
            CHECK_OK(vas_switch(vh));
        } else if (c == 't') {   /* try: answer 'B' if busy */
            int rc = vas_try_switch(vh);
            CHECK(rc == 0 || rc == -EXO_EBUSY);
            if (rc) {
                send_byte(reply, 'B');
                continue;
            }
        } else if (c == 'u') {   /* switch in without taking locks */
            CHECK_OK(vas_ctl(VAS_CTL_SET_LOCKING, 0, &(int){0}));
            CHECK_OK(vas_switch(vh));
        } else if (c == 'h') {   /* home, and locking again from the next switch */
            CHECK_OK(vas_switch(VAS_HOME));
            CHECK_OK(vas_ctl(VAS_CTL_SET_LOCKING, 0, &(int){1}));
        } else if (c == 'p') {
            pause();   /* until killed */
        } else {
            break;
        }
        send_byte(reply, 'k');
    }
    CHECK_OK(vas_detach(vh));
}

/* Ask helper to switch in (or home, etc.) and wait for its acknowledgement. */
/* This process's mappings, read with plain read(2) into a static buffer so that reading
 * them maps nothing. */
static const char *maps_now(char *buf, size_t len)
{
    int fd = open("/proc/self/maps", O_RDONLY);
    CHECK(fd >= 0);
    size_t n = 0;
    ssize_t r;
    while (n < len - 1 && (r = read(fd, buf + n, len - 1 - n)) > 0)
        n += (size_t)r;
    close(fd);
    CHECK(n < len - 1);
    buf[n] = '\0';
    return buf;
}

static void command(struct helper *h, char c)
{
    send_byte(h->cmd_fd, c);
    CHECK_EQ(recv_byte(h->reply_fd), 'k');
}

/* A helper that tries a RW switch (the try is expected to fail with EBUSY) and reports. */
static void rw_prober(int cmd, int reply, long unused)
{
    (void)unused;
    vhandle_t vh;
    CHECK_OK(vas_attach(v_rw, &vh));
    send_byte(reply, 'a');
    recv_byte(cmd);
    int rc = vas_try_switch(vh);
    send_byte(reply, rc == -EXO_EBUSY ? 'B' : rc == 0 ? '0' : 'E');
    if (rc == 0)
        CHECK_OK(vas_switch(VAS_HOME));
    CHECK_OK(vas_detach(vh));
}

int main(void)
{
    test_root_setup();
    segid_t sid, first;
    vasid_t v_pair, v_first;
    /* "first" has the lower id, so a switch into "pair" locks it before "shared". */
    CHECK_OK(seg_alloc("first", test_base(1), SEG_SIZE, 0600, &first));
    CHECK_OK(seg_alloc("shared", test_base(0), SEG_SIZE, 0600, &sid));
    CHECK(first < sid);
    CHECK_OK(vas_create("pair", 0600, &v_pair));
    CHECK_OK(seg_attach(v_pair, sid, SEG_RDWR));
    CHECK_OK(seg_attach(v_pair, first, SEG_RDWR));
    CHECK_OK(vas_create("first", 0600, &v_first));
    CHECK_OK(seg_attach(v_first, first, SEG_RDWR));
    CHECK_OK(vas_create("rw", 0600, &v_rw));
    CHECK_OK(seg_attach(v_rw, sid, SEG_RDWR));
    CHECK_OK(vas_create("ro", 0600, &v_ro));
    CHECK_OK(seg_attach(v_ro, sid, SEG_RDONLY));

    /* All helpers are forked now, while the parent has attached nothing. */
    struct helper w1 = start_helper(counter_worker, 1);
    struct helper w2 = start_helper(counter_worker, 1);
    struct helper ro_holder = start_helper(holder, (long)v_ro);
    struct helper prober = start_helper(rw_prober, 0);
    struct helper victim = start_helper(holder, (long)v_rw);
    struct helper unlocked = start_helper(holder, (long)v_rw);
    struct helper first_user = start_helper(holder, (long)v_first);
    CHECK_EQ(recv_byte(first_user.reply_fd), 'a');
    CHECK_EQ(recv_byte(ro_holder.reply_fd), 'a');
    CHECK_EQ(recv_byte(prober.reply_fd), 'a');
    CHECK_EQ(recv_byte(victim.reply_fd), 'a');
    CHECK_EQ(recv_byte(unlocked.reply_fd), 'a');

    /* 1. Two processes incrementing a counter in RW switches: no update lost. */
    CHECK_EQ(recv_byte(w1.reply_fd), 'r');
    CHECK_EQ(recv_byte(w2.reply_fd), 'r');
    send_byte(w1.cmd_fd, 'g');
    send_byte(w2.cmd_fd, 'g');
    CHECK_EQ(finish_helper(&w1), 0);
    CHECK_EQ(finish_helper(&w2), 0);
    vhandle_t hrw, hro;
    CHECK_OK(vas_attach(v_rw, &hrw));
    CHECK_OK(vas_attach(v_ro, &hro));
    CHECK_EQ(read_counter(hrw), ITERATIONS * 2);

    /* 2. RO switches share; a RW try-switch meanwhile fails and changes nothing. */
    command(&ro_holder, 's');
    CHECK_OK(vas_try_switch(hro));
    CHECK_EQ(vas_current(), hro);
    CHECK_EQ(*(volatile uint64_t *)test_base(0), ITERATIONS * 2);
    CHECK(test_faults((const void *)test_base(0), 1));
    CHECK_OK(vas_switch(VAS_HOME));
    CHECK_ERR(vas_try_switch(hrw), EXO_EBUSY);
    CHECK_EQ(vas_current(), VAS_HOME);
    CHECK(test_faults((const void *)test_base(0), 0));
    /* From inside the RO VAS: the failed try leaves us there, our shared lock included. */
    CHECK_OK(vas_try_switch(hro));
    CHECK_ERR(vas_try_switch(hrw), EXO_EBUSY);
    CHECK_EQ(vas_current(), hro);
    CHECK_EQ(*(volatile uint64_t *)test_base(0), ITERATIONS * 2);
    CHECK(test_faults((const void *)test_base(0), 1));
    command(&ro_holder, 'h');          /* only our shared lock is left now */
    send_byte(ro_holder.cmd_fd, 'x');
    CHECK_EQ(finish_helper(&ro_holder), 0);
    send_byte(prober.cmd_fd, 'g');
    CHECK_EQ(recv_byte(prober.reply_fd), 'B');
    CHECK_EQ(finish_helper(&prober), 0);
    /* Our own RO -> RW switch of the same segment is no conflict. */
    CHECK_OK(vas_try_switch(hrw));
    CHECK_EQ(vas_current(), hrw);
    CHECK(!test_faults((const void *)test_base(0), 1));
    CHECK_OK(vas_switch(hro));
    CHECK_OK(vas_switch(VAS_HOME));

    /* 3. A RW holder killed with SIGKILL releases its lock. */
    command(&victim, 's');
    CHECK_ERR(vas_try_switch(hrw), EXO_EBUSY);
    CHECK_ERR(vas_try_switch(hro), EXO_EBUSY);
    CHECK_EQ(vas_current(), VAS_HOME);
    /* A failed try from a VAS whose segment would have to be parked leaves every mapping
     * as it was: no parking slot reserved for the switch that did not happen. */
    static char maps_before[1 << 16], maps_after[1 << 16];
    vhandle_t hfirst;
    CHECK_OK(vas_attach(v_first, &hfirst));
    CHECK_OK(vas_try_switch(hfirst));
    maps_now(maps_before, sizeof maps_before);
    CHECK_ERR(vas_try_switch(hrw), EXO_EBUSY);
    maps_now(maps_after, sizeof maps_after);
    if (strcmp(maps_before, maps_after) != 0) {
        fprintf(stderr, "a failed vas_try_switch changed the mappings:\n--- before\n%s--- after\n%s",
                maps_before, maps_after);
        return 1;
    }
    CHECK_EQ(vas_current(), hfirst);
    CHECK_OK(vas_switch(VAS_HOME));
    CHECK_OK(vas_detach(hfirst));
    /* A failed try into "pair" took "first" on its way and must have let it go again. */
    vhandle_t hpair;
    CHECK_OK(vas_attach(v_pair, &hpair));
    CHECK_ERR(vas_try_switch(hpair), EXO_EBUSY);
    CHECK_EQ(vas_current(), VAS_HOME);
    CHECK(test_faults((const void *)test_base(1), 0));
    command(&first_user, 't');
    command(&first_user, 'h');
    send_byte(victim.cmd_fd, 'p');
    CHECK_OK(kill(victim.pid, SIGKILL));
    CHECK_EQ(finish_helper(&victim), 128 + SIGKILL);
    CHECK_OK(vas_try_switch(hrw));
    CHECK_EQ(read_counter(hrw), ITERATIONS * 2);
    CHECK_OK(vas_switch(VAS_HOME));
    /* A blocking switch into "pair" while another process holds "first": waits, then gets
     * in once it is released. */
    command(&first_user, 's');
    CHECK_ERR(vas_try_switch(hpair), EXO_EBUSY);
    send_byte(first_user.cmd_fd, 'x');          /* leaves (detaching) shortly */
    CHECK_OK(vas_switch(hpair));
    CHECK_EQ(vas_current(), hpair);
    CHECK_EQ(*(volatile uint64_t *)test_base(0), ITERATIONS * 2);
    CHECK_EQ(finish_helper(&first_user), 0);
    CHECK_OK(vas_switch(VAS_HOME));
    CHECK_OK(vas_detach(hpair));

    /* 4. VAS_CTL_SET_LOCKING 0: no lock is taken, so nothing conflicts with it. */
    command(&unlocked, 'u');                 /* the helper is in, without a lock */
    CHECK_OK(vas_try_switch(hrw));           /* so we get in too */
    CHECK_OK(vas_switch(VAS_HOME));
    command(&unlocked, 'h');
    command(&unlocked, 's');                 /* now with its lock */
    CHECK_ERR(vas_try_switch(hrw), EXO_EBUSY);
    int off = 0;
    CHECK_OK(vas_ctl(VAS_CTL_SET_LOCKING, 0, &off));
    CHECK_OK(vas_try_switch(hrw));           /* we ignore the lock */
    CHECK_OK(vas_switch(VAS_HOME));
    int on = 1;
    CHECK_OK(vas_ctl(VAS_CTL_SET_LOCKING, 0, &on));
    CHECK_ERR(vas_try_switch(hrw), EXO_EBUSY);
    command(&unlocked, 'h');
    send_byte(unlocked.cmd_fd, 'x');
    CHECK_EQ(finish_helper(&unlocked), 0);
    CHECK_OK(vas_try_switch(hrw));
    CHECK_OK(vas_switch(VAS_HOME));

    CHECK_OK(vas_detach(hrw));
    CHECK_OK(vas_detach(hro));
    CHECK_OK(seg_detach(v_pair, sid));
    CHECK_OK(seg_detach(v_pair, first));
    CHECK_OK(seg_detach(v_first, first));
    CHECK_OK(vas_delete(v_pair));
    CHECK_OK(vas_delete(v_first));
    CHECK_OK(seg_delete(first));
    CHECK_OK(seg_detach(v_rw, sid));
    CHECK_OK(seg_detach(v_ro, sid));
    CHECK_OK(vas_delete(v_rw));
    CHECK_OK(vas_delete(v_ro));
    CHECK_OK(seg_delete(sid));
    printf("test_locks: ok\n");
    return 0;
}
