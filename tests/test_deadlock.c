/* Two processes that each hold one segment and switch into a VAS that needs the other's
 * (A in X wants Y, B in Y wants X) both get there: a switch that finds a lock taken goes
 * home, dropping what it holds, before it waits (docs/spacejmp.md, "Lockable segments"), so
 * neither waits while holding what the other waits for. Rounds repeat it with both sides
 * starting at once; a watchdog fails the test instead of letting a deadlock hang it. */
#include "harness.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB (UINT64_C(1) << 20)
#define ROUNDS 50

static vasid_t vx, vy;

/* Hold `first`, tell the parent, wait for "go", switch to `second`, bump a counter in
 * every segment of it, go home, tell the parent, and wait until the other process is home
 * too before taking `first` again (else it would stand in the way of the other's crossing,
 * a wait the test, not the library, would have made); ROUNDS times. */
static void crosser(vasid_t first, vasid_t second, int ready_fd, int go_fd)
{
    alarm(60);
    vhandle_t h1, h2;
    CHECK_OK(vas_attach(first, &h1));
    CHECK_OK(vas_attach(second, &h2));
    for (int r = 0; r < ROUNDS; r++) {
        CHECK_OK(vas_switch(h1));
        CHECK_EQ(write(ready_fd, "r", 1), 1);
        char c;
        CHECK_EQ(read(go_fd, &c, 1), 1);
        CHECK_OK(vas_switch(h2));
        CHECK_EQ(vas_current(), h2);
        (*(volatile uint64_t *)test_base(second == vx ? 0 : 1))++;
        CHECK_OK(vas_switch(VAS_HOME));
        CHECK_EQ(write(ready_fd, "d", 1), 1);
        CHECK_EQ(read(go_fd, &c, 1), 1);
    }
    CHECK_OK(vas_detach(h1));
    CHECK_OK(vas_detach(h2));
}

static pid_t start(vasid_t first, vasid_t second, int ready[2], int go[2])
{
    CHECK_OK(pipe(ready));
    CHECK_OK(pipe(go));
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        crosser(first, second, ready[1], go[0]);
        _exit(0);
    }
    return pid;
}

int main(void)
{
    test_root_setup();
    segid_t sx, sy;
    CHECK_OK(seg_alloc("x", test_base(0), MIB, 0600, &sx));
    CHECK_OK(seg_alloc("y", test_base(1), MIB, 0600, &sy));
    CHECK_OK(vas_create("x", 0600, &vx));
    CHECK_OK(seg_attach(vx, sx, SEG_RDWR));
    CHECK_OK(vas_create("y", 0600, &vy));
    CHECK_OK(seg_attach(vy, sy, SEG_RDWR));

    int ra[2], ga[2], rb[2], gb[2];
    pid_t a = start(vx, vy, ra, ga), b = start(vy, vx, rb, gb);
    alarm(90);
    for (int r = 0; r < ROUNDS; r++) {
        char c;
        CHECK_EQ(read(ra[0], &c, 1), 1); /* A holds X */
        CHECK_EQ(read(rb[0], &c, 1), 1); /* B holds Y */
        CHECK_EQ(write(ga[1], "g", 1), 1);
        CHECK_EQ(write(gb[1], "g", 1), 1);
        CHECK_EQ(read(ra[0], &c, 1), 1); /* both crossed and went home */
        CHECK_EQ(read(rb[0], &c, 1), 1);
        CHECK_EQ(write(ga[1], "n", 1), 1);
        CHECK_EQ(write(gb[1], "n", 1), 1);
    }
    int status;
    CHECK_EQ(waitpid(a, &status, 0), a);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_EQ(waitpid(b, &status, 0), b);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    alarm(0);

    /* Each crossed into the other's VAS every round: both counters are ROUNDS. */
    vhandle_t hx, hy;
    CHECK_OK(vas_attach(vx, &hx));
    CHECK_OK(vas_attach(vy, &hy));
    CHECK_OK(vas_switch(hx));
    CHECK_EQ(*(volatile uint64_t *)test_base(0), ROUNDS);
    CHECK_OK(vas_switch(hy));
    CHECK_EQ(*(volatile uint64_t *)test_base(1), ROUNDS);
    CHECK_OK(vas_switch(VAS_HOME));
    printf("test_deadlock: %d rounds of crossed switches, no deadlock\n", ROUNDS);
    return 0;
}
