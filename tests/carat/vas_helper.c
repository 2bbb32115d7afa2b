/* VAS safety across calls: helpers that switch, and what their callers dereference
 * afterwards. enter_global() and enter(h) leave a known VAS current, visit_home() restores
 * the VAS it found: the dereferences after them are proven safe. After leave(), which goes
 * home, the dereference is warned about at compile time and checked at run time. */
#include "vas_fixture.h"

vhandle_t g_vh;   /* the VAS's handle (vas_fixture.h) */

/* Switches to the VAS of g_vh. */
NOINLINE int enter_global(void)
{
    return vas_switch(g_vh);
}

/* Switches to the VAS it is given. */
NOINLINE int enter(vhandle_t h)
{
    return vas_switch(h);
}

/* Goes home. */
NOINLINE int leave(void)
{
    return vas_switch(VAS_HOME);
}

/* Goes home for a moment, then back to the VAS it found. */
NOINLINE size_t visit_home(const char *s)
{
    vhandle_t old = vas_current();
    CHECK(vas_switch(VAS_HOME) == 0);
    size_t n = strlen(s);
    CHECK(vas_switch(old) == 0);
    return n;
}

int main(int argc, char **argv)
{
    int bad = vas_fixture_bad(argc, argv);
    struct vas_fixture fx;
    vas_fixture_open("carat-vas-helper", &fx, &g_vh);
    CHECK(enter_global() == 0);
    volatile long *p = seg_malloc(fx.sid, 64);
    CHECK(p);
    p[0] = 1;                       /* safe: enter_global() left g_vh current */
    CHECK(leave() == 0);
    if (bad)
        p[1] = 2;                   /* reported at compile time; stops the bad run */
    CHECK(enter(g_vh) == 0);
    p[2] = 3;                       /* safe: enter(h) left h current */
    CHECK(visit_home("exomem") == 6);
    p[3] = 4;                       /* safe: visit_home() restored the VAS */
    CHECK(p[0] == 1 && p[2] == 3 && p[3] == 4);
    vas_fixture_close(&fx);
    printf("vas_helper: ok\n");
    return 0;
}
