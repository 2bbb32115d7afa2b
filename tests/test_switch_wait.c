/* A thread waiting in vas_switch() for a segment lock that another process holds does not
 * block the process's other threads: meanwhile they ask vas_current(), switch into other
 * VASes and allocate there. The waiter gets in once the lock is released, and fails with
 * EXO_EDETACHED if another thread detached its VAS while it waited.
 *
 * Every call of the main thread runs under alarm(): before the fix those calls waited for
 * the other process, so a regression fails here instead of passing slowly. */
#include "harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB (UINT64_C(1) << 20)

static vasid_t v_held, v_free;
static segid_t s_free;

/* The other process: on 's' switches into v_held (taking its lock), on 'h' goes home, on
 * 'x' leaves; it answers each command with 'k'. */
static void holder(int cmd, int reply)
{
    vhandle_t vh;
    CHECK_OK(vas_attach(v_held, &vh));
    char c;
    while (read(cmd, &c, 1) == 1 && c != 'x') {
        CHECK_OK(vas_switch(c == 's' ? vh : VAS_HOME));
        CHECK_EQ(write(reply, "k", 1), 1);
    }
    CHECK_OK(vas_detach(vh));
}

static int cmd_fd, reply_fd;

static void command(char c)
{
    CHECK_EQ(write(cmd_fd, &c, 1), 1);
    char k = 0;
    CHECK_EQ(read(reply_fd, &k, 1), 1);
    CHECK_EQ(k, 'k');
}

struct waiter {
    pthread_t thread;
    vhandle_t vh;
    atomic_int started, done, rc;
};

static void *wait_switch(void *arg)
{
    struct waiter *w = arg;
    atomic_store(&w->started, 1);
    atomic_store(&w->rc, vas_switch(w->vh));
    atomic_store(&w->done, 1);
    return NULL;
}

static void start_waiter(struct waiter *w, vhandle_t vh)
{
    memset(w, 0, sizeof *w);
    w->vh = vh;
    CHECK_OK(pthread_create(&w->thread, NULL, wait_switch, w));
    while (!atomic_load(&w->started))
        usleep(1000);
    usleep(100 * 1000); /* let it reach the wait (not needed for correctness, only to test it) */
}

/* What the other threads must still be able to do while the waiter waits. */
static void other_threads_go_on(vhandle_t free_vh)
{
    alarm(20);
    vhandle_t cur = vas_current();
    CHECK(cur == VAS_HOME);               /* the waiter went home before waiting */
    CHECK_OK(vas_switch(free_vh));
    char *p = seg_malloc(s_free, 64);
    CHECK(p != NULL);
    strcpy(p, "still running");
    CHECK_OK(seg_free(p));
    CHECK_OK(vas_switch(VAS_HOME));
    alarm(0);
}

int main(void)
{
    test_root_setup();
    segid_t s_held;
    CHECK_OK(seg_alloc("held", test_base(0), MIB, 0600, &s_held));
    CHECK_OK(seg_alloc("free", test_base(1), MIB, 0600, &s_free));
    CHECK_OK(vas_create("held", 0600, &v_held));
    CHECK_OK(seg_attach(v_held, s_held, SEG_RDWR));
    CHECK_OK(vas_create("free", 0600, &v_free));
    CHECK_OK(seg_attach(v_free, s_free, SEG_RDWR));

    int to[2], from[2];
    CHECK_OK(pipe(to));
    CHECK_OK(pipe(from));
    fflush(NULL);
    pid_t pid = fork(); /* before this process attaches anything */
    CHECK(pid >= 0);
    if (pid == 0) {
        close(to[1]);
        close(from[0]);
        holder(to[0], from[1]);
        _exit(0);
    }
    close(to[0]);
    close(from[1]);
    cmd_fd = to[1];
    reply_fd = from[0];

    vhandle_t h_held, h_free;
    CHECK_OK(vas_attach(v_held, &h_held));
    CHECK_OK(vas_attach(v_free, &h_free));

    /* 1. The waiter waits; the rest of the process does not. */
    command('s');
    struct waiter w;
    start_waiter(&w, h_held);
    other_threads_go_on(h_free);
    CHECK(!atomic_load(&w.done)); /* the other process still holds the lock */
    command('h');
    CHECK_OK(pthread_join(w.thread, NULL));
    CHECK_OK(atomic_load(&w.rc));
    CHECK_EQ(vas_current(), h_held);
    *(volatile int *)test_base(0) = 42; /* in, read-write */
    CHECK_OK(vas_switch(VAS_HOME));

    /* 2. Its VAS detached by another thread while it waits: EXO_EDETACHED, nothing held. */
    command('s');
    start_waiter(&w, h_held);
    alarm(20);
    CHECK_OK(vas_detach(h_held));
    alarm(0);
    command('h');
    CHECK_OK(pthread_join(w.thread, NULL));
    CHECK_EQ(atomic_load(&w.rc), -EXO_EDETACHED);
    CHECK_EQ(vas_current(), VAS_HOME);
    command('s'); /* the other process gets in again: we hold nothing */
    command('h');

    CHECK_EQ(write(cmd_fd, "x", 1), 1);
    int status;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_OK(vas_detach(h_free));
    printf("test_switch_wait: ok\n");
    return 0;
}
