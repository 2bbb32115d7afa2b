/* VAS safety of returned pointers: make() allocates in the VAS current when it is called,
 * make_in(h) in h (and leaves h current), make_global() in the VAS of g_vh (and restores
 * the VAS it found). Their callers know which VAS each pointer belongs to. */
#include "vas_fixture.h"

vhandle_t g_vh;   /* the VAS's handle (vas_fixture.h) */

NOINLINE long *make(segid_t sid)
{
    return seg_malloc(sid, 64);
}

NOINLINE long *make_in(vhandle_t h, segid_t sid)
{
    if (vas_switch(h) != 0)
        return NULL;
    return seg_malloc(sid, 64);
}

NOINLINE long *make_global(segid_t sid)
{
    vhandle_t old = vas_current();
    CHECK(vas_switch(g_vh) == 0);
    long *p = seg_malloc(sid, 64);
    CHECK(vas_switch(old) == 0);
    return p;
}

int main(int argc, char **argv)
{
    int bad = vas_fixture_bad(argc, argv);
    struct vas_fixture fx;
    vas_fixture_open("carat-vas-return", &fx, &g_vh);
    CHECK(vas_switch(g_vh) == 0);
    volatile long *a = make(fx.sid);
    CHECK(a);
    a[0] = 1;                       /* safe: a is of the VAS current at the call */
    CHECK(vas_switch(VAS_HOME) == 0);
    volatile long *b = make_in(g_vh, fx.sid);
    CHECK(b);
    b[0] = 2;                       /* safe: b is of g_vh's VAS, which make_in left current */
    a[1] = 3;                       /* safe */
    CHECK(vas_switch(VAS_HOME) == 0);
    volatile long *c = make_global(fx.sid);
    CHECK(c);
    if (bad)
        c[0] = 4;                   /* reported at compile time; stops the bad run */
    CHECK(vas_switch(g_vh) == 0);
    c[1] = 5;                       /* safe */
    CHECK(a[0] == 1 && b[0] == 2 && c[1] == 5);
    vas_fixture_close(&fx);
    printf("vas_return: ok\n");
    return 0;
}
