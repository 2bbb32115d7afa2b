/* fork() with VASes attached and switched in (docs/spacejmp.md, "fork"): the child keeps
 * the parent's attachments but starts at home, with nothing visible and no lock held, and
 * with segment descriptions of its own, so the parent's exclusive lock keeps it out until
 * the parent leaves; then it switches in like any process and sees the parent's data. The
 * parent is unaffected: its lock, its mappings and its switching stay as they were. */
#include "harness.h"

#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB (UINT64_C(1) << 20)

static vhandle_t vh;
static char *mem;

static void child_at_home(void *arg)
{
    (void)arg;
    alarm(20);
    CHECK_EQ(vas_current(), VAS_HOME);
    CHECK(test_faults(mem, 0));                   /* nothing visible */
    CHECK_ERR(vas_try_switch(vh), EXO_EBUSY);     /* the parent's lock is not ours */
    CHECK_EQ(vas_current(), VAS_HOME);
}

/* Waits (vas_switch blocks) until the parent goes home, then reads and writes. */
static void child_waits_then_enters(void *arg)
{
    int *pipe_fds = arg;
    alarm(20);
    CHECK_EQ(write(pipe_fds[1], "w", 1), 1);
    CHECK_OK(vas_switch(vh));
    CHECK(!strcmp(mem, "parent was here"));
    strcpy(mem, "child was here");
    CHECK_OK(vas_switch(VAS_HOME));
    CHECK_OK(vas_detach(vh));
}

int main(void)
{
    test_root_setup();
    segid_t sid;
    vasid_t vid;
    CHECK_OK(seg_alloc("forked", test_base(0), MIB, 0600, &sid));
    CHECK_OK(vas_create("forked", 0600, &vid));
    CHECK_OK(seg_attach(vid, sid, SEG_RDWR));
    CHECK_OK(vas_attach(vid, &vh));
    CHECK_OK(vas_switch(vh));
    mem = (char *)(uintptr_t)test_base(0);
    strcpy(mem, "parent was here");

    /* 1. A child forked while the parent is in. */
    CHECK_EQ(test_in_child(child_at_home, NULL), 0);
    CHECK_EQ(vas_current(), vh);                  /* the parent is still in, */
    CHECK(!strcmp(mem, "parent was here"));       /* its mapping intact, */
    CHECK(!test_faults(mem, 1));
    CHECK_EQ(test_in_child(child_at_home, NULL), 0); /* and still holds the lock */

    /* 2. A child forked while the parent is in waits for it, then enters. */
    int fds[2];
    CHECK_OK(pipe(fds));
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        child_waits_then_enters(fds);
        _exit(0);
    }
    char c;
    CHECK_EQ(read(fds[0], &c, 1), 1);             /* the child is about to wait */
    usleep(100 * 1000);
    CHECK_OK(vas_switch(VAS_HOME));               /* let it in */
    int status;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    /* 3. The parent switches on as before and sees what the child wrote. */
    CHECK_OK(vas_switch(vh));
    CHECK(!strcmp(mem, "child was here"));
    CHECK_OK(vas_switch(VAS_HOME));
    CHECK_OK(vas_detach(vh));
    CHECK_OK(seg_detach(vid, sid));
    CHECK_OK(vas_delete(vid));
    CHECK_OK(seg_delete(sid));
    printf("test_fork: ok\n");
    return 0;
}
