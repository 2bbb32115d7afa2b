/* What the VAS-safety programs across calls share (vas_helper.c, vas_static.c,
 * vas_return.c, vas_calls.c, vas_recursion.c): one segment in one VAS, attached, in the
 * test's own registry (EXOMEM_ROOT). Each program makes its dereferences through volatile
 * pointers, so that the optimiser keeps every one and test_carat.sh can check exact counts.
 * With the argument "bad" a program also makes the dereference on the line marked "stops
 * the bad run", whose check must raise SIGSEGV. */
#ifndef VAS_FIXTURE_H
#define VAS_FIXTURE_H
#include "carat_check.h"

#include <exomem/exomem.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

struct vas_fixture {
    segid_t sid;
    vasid_t vid;
    vhandle_t *vh;
};

/* The handle goes to *vh: a global whose address vas_attach() took is read afresh at each
 * use, so the analysis sees the same variable at every vas_switch (a handle the optimiser
 * forwards from a store is a plain value instead). */
static inline void vas_fixture_open(const char *name, struct vas_fixture *fx, vhandle_t *vh)
{
    CHECK(seg_alloc(name, UINT64_C(0x3c0000000000), 2u << 20, 0600, &fx->sid) == 0);
    CHECK(vas_create(name, 0600, &fx->vid) == 0);
    CHECK(seg_attach(fx->vid, fx->sid, SEG_RDWR) == 0);
    CHECK(vas_attach(fx->vid, vh) == 0);
    fx->vh = vh;
}

static inline void vas_fixture_close(struct vas_fixture *fx)
{
    CHECK(vas_switch(VAS_HOME) == 0);
    CHECK(vas_detach(*fx->vh) == 0);
    CHECK(vas_delete(fx->vid) == 0);
    CHECK(seg_delete(fx->sid) == 0);
}

static inline int vas_fixture_bad(int argc, char **argv)
{
    return argc > 1 && strcmp(argv[1], "bad") == 0;
}
#endif
