/* VAS safety through recursion: the summaries of recursive functions are iterated to a
 * fixed point. descend(h, n) switches to h at the bottom of its recursion, so h is current
 * whenever it returns; nest(n) goes home and back at each level, restoring the VAS it found.
 * ping() and pong() leave g_vh's VAS or home current depending on the parity of n, which is
 * unknown to their caller: the dereference after ping() is checked, not reported. */
#include "vas_fixture.h"

vhandle_t g_vh;   /* the VAS's handle (vas_fixture.h) */
static volatile int levels;   /* keeps the recursive calls from being tail calls */

NOINLINE int descend(vhandle_t h, int n)
{
    if (n == 0)
        return vas_switch(h);
    int r = descend(h, n - 1);
    levels++;
    return r;
}

NOINLINE long nest(int n)
{
    vhandle_t old = vas_current();
    CHECK(vas_switch(VAS_HOME) == 0);
    long r = n > 0 ? nest(n - 1) + 1 : 0;
    CHECK(vas_switch(old) == 0);
    return r;
}

NOINLINE int ping(int n);

NOINLINE int pong(int n)
{
    if (n == 0)
        return vas_switch(VAS_HOME);
    int r = ping(n - 1);
    levels++;
    return r;
}

NOINLINE int ping(int n)
{
    if (n == 0)
        return vas_switch(g_vh);
    int r = pong(n - 1);
    levels++;
    return r;
}

int main(int argc, char **argv)
{
    int bad = vas_fixture_bad(argc, argv);
    struct vas_fixture fx;
    vas_fixture_open("carat-vas-recursion", &fx, &g_vh);
    CHECK(vas_switch(g_vh) == 0);
    volatile long *p = seg_malloc(fx.sid, 64);
    CHECK(p);
    p[0] = 1;                       /* safe */
    CHECK(vas_switch(VAS_HOME) == 0);
    CHECK(descend(g_vh, 3) == 0);
    p[1] = 2;                       /* safe: descend(h) leaves h current */
    CHECK(nest(3) == 3);
    p[2] = 3;                       /* safe: nest() restores the VAS */
    CHECK(ping(bad ? 1 : 2) == 0);
    p[3] = 4;                       /* checked: ping() leaves an unknown VAS; stops the bad run */
    CHECK(p[0] == 1 && p[1] == 2 && p[2] == 3);
    vas_fixture_close(&fx);
    printf("vas_recursion: ok\n");
    return 0;
}
