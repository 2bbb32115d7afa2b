/* VAS safety across calls that do not switch: libc functions known not to (strlen,
 * memcpy, printf, snprintf) and a function of the program that never switches leave the
 * current VAS known, so the dereferences after them are proven safe. A call the analysis
 * cannot read (through a function pointer, or to a function it does not know) may switch:
 * the dereference after it is checked at run time, but not reported. */
#include "vas_fixture.h"

#include <unistd.h>

NOINLINE size_t count(const char *s)
{
    return strlen(s);
}

vhandle_t g_vh;   /* the VAS's handle (vas_fixture.h) */

static int go_home(void)
{
    return vas_switch(VAS_HOME);
}

static int stay(void)
{
    return 0;
}

static int (*volatile hook)(void) = stay;

int main(int argc, char **argv)
{
    int bad = vas_fixture_bad(argc, argv);
    struct vas_fixture fx;
    char buf[32];
    vas_fixture_open("carat-vas-calls", &fx, &g_vh);
    CHECK(vas_switch(g_vh) == 0);
    volatile char *s = seg_malloc(fx.sid, 64);
    CHECK(s);
    memcpy((char *)s, "exomem", 7);
    s[0] = 'E';                     /* safe */
    printf("vas_calls: %zu\n", strlen((const char *)s));
    s[1] = 'X';                     /* safe after printf and strlen */
    CHECK(count((const char *)s) == 6);
    s[2] = 'O';                     /* safe after a function that never switches */
    snprintf(buf, sizeof buf, "%s", (const char *)s);
    s[3] = 'M';                     /* safe after snprintf */
    CHECK(getpid() > 0);
    s[4] = 'E';                     /* checked: getpid is not known not to switch */
    if (bad)
        hook = go_home;
    CHECK(hook() == 0);
    s[5] = 'M';                     /* checked: an indirect call; stops the bad run */
    CHECK(strcmp(buf, "EXOmem") == 0);
    vas_fixture_close(&fx);
    printf("vas_calls: ok\n");
    return 0;
}
