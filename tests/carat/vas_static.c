/* VAS safety from call sites: a static function is analysed with what all its callers
 * agree on. sum() is called in two VASes (two attachments of one VAS: g_vh and vh), each
 * time with a pointer of the VAS current there, so its dereferences are proven safe. fill()
 * is only called after switching to g_vh with a pointer of that VAS, so going home inside
 * it and dereferencing is reported there. */
#include "vas_fixture.h"

vhandle_t g_vh;   /* the VAS's handle (vas_fixture.h) */

static NOINLINE long sum(volatile long *p, int n)
{
    long s = 0;
    for (int i = 0; i < n; i++)
        s += p[i];                  /* safe: p's VAS is current at every call */
    return s;
}

static NOINLINE void fill(volatile long *q, int bad)
{
    q[0] = 7;                       /* safe: called in g_vh's VAS with q of that VAS */
    CHECK(vas_switch(VAS_HOME) == 0);
    if (bad)
        q[1] = 8;                   /* reported at compile time; stops the bad run */
    CHECK(vas_switch(g_vh) == 0);
    q[2] = 9;                       /* safe */
}

int main(int argc, char **argv)
{
    int bad = vas_fixture_bad(argc, argv);
    struct vas_fixture fx;
    vhandle_t vh;                   /* a second attachment of the VAS, kept in a local */
    vas_fixture_open("carat-vas-static", &fx, &g_vh);
    CHECK(vas_attach(fx.vid, &vh) == 0);
    CHECK(vas_switch(g_vh) == 0);
    volatile long *p = seg_malloc(fx.sid, 64);
    CHECK(p);
    for (int i = 0; i < 4; i++)
        p[i] = i;                   /* safe */
    CHECK(sum(p, 4) == 6);
    CHECK(vas_switch(vh) == 0);
    volatile long *r = seg_malloc(fx.sid, 64);
    CHECK(r);
    r[0] = 5;                       /* safe */
    CHECK(sum(r, 1) == 5);
    CHECK(vas_switch(g_vh) == 0);
    volatile long *q = seg_malloc(fx.sid, 64);
    CHECK(q);
    fill(q, bad);
    CHECK(q[0] == 7 && q[2] == 9);  /* safe: fill() leaves g_vh current */
    CHECK(vas_switch(VAS_HOME) == 0);
    CHECK(vas_detach(vh) == 0);
    vas_fixture_close(&fx);
    printf("vas_static: ok\n");
    return 0;
}
