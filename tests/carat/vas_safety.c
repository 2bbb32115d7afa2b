/* SpaceJMP VAS safety (exomem-cc with EXOMEM_CARAT_PARTS=vas): a pointer from seg_malloc
 * while VAS A is current is used in A (proven safe: no check), passed through vcast (no
 * check either), and, with "bad", used after switching home: the compiler warns at that line
 * and the inserted check stops the program with SIGSEGV and a message. test_carat.sh checks
 * the warning, the counts and the run. Runs in the test's own registry (EXOMEM_ROOT). */
#include "carat_check.h"

#include <exomem/exomem.h>
#include <string.h>

#define BASE UINT64_C(0x3b0000000000)

int main(int argc, char **argv)
{
    segid_t sid;
    vasid_t vid;
    vhandle_t vh;
    CHECK(seg_alloc("carat-vas-safety", BASE, 2u << 20, 0600, &sid) == 0);
    CHECK(vas_create("carat-vas-safety", 0600, &vid) == 0);
    CHECK(seg_attach(vid, sid, SEG_RDWR) == 0);
    CHECK(vas_attach(vid, &vh) == 0);
    CHECK(vas_switch(vh) == 0);
    long *p = seg_malloc(sid, 64);
    CHECK(p);
    p[0] = 1;                       /* in its own VAS: proven safe */
    long *trusted = vcast(p);
    CHECK(vas_switch(VAS_HOME) == 0);
    int bad = argc > 1 && strcmp(argv[1], "bad") == 0;
    if (bad)
        p[1] = 2;                   /* the unsafe dereference: after switching away */
    CHECK(vas_switch(vh) == 0);
    trusted[2] = 3;                 /* vcast: never checked */
    CHECK(p[0] == 1 && trusted[2] == 3);
    CHECK(vas_switch(VAS_HOME) == 0);
    CHECK(vas_detach(vh) == 0);
    CHECK(vas_delete(vid) == 0);
    CHECK(seg_delete(sid) == 0);
    printf("vas_safety: ok\n");
    return 0;
}
