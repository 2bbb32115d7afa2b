/* exomem_last_error() is empty after every successful call, as error.h documents: a
 * message left over from a lookup inside a call that then succeeded ("no segment named
 * ...", the name check inside seg_alloc) must not reach the caller. (The in-segment heap's
 * calls are the documented exception, like malloc.) Each public call is made
 * right after a failing one, so that a call that forgets to clear the message is caught. */
#include "harness.h"

#include <string.h>

#define MIB (UINT64_C(1) << 20)

/* Leave a message behind: a lookup of a name that does not exist. */
static void dirty_message(void)
{
    segid_t none;
    CHECK_ERR(seg_find("no-such-segment", &none), EXO_ENOENT);
    CHECK(exomem_last_error()[0] != '\0');
}

#define CHECK_CLEAN(expr) do { dirty_message(); CHECK_OK(expr); \
    if (exomem_last_error()[0]) { fprintf(stderr, "%s:%d: %s succeeded but left the message " \
        "\"%s\"\n", __FILE__, __LINE__, #expr, exomem_last_error()); exit(1); } } while (0)

int main(void)
{
    test_root_setup();
    segid_t s0, s1, found;
    vasid_t v0, v1, vfound;
    vhandle_t vh;
    CHECK_CLEAN(seg_alloc("s0", test_base(0), 4 * MIB, 0600, &s0));
    struct seg_opts opts = {.page_size = SEG_PAGE_4K, .flags = SEG_NORESERVE};
    CHECK_CLEAN(seg_alloc_ex("s1", test_base(1), 4 * MIB, 0600, &opts, &s1));
    CHECK_CLEAN(seg_find("s0", &found));
    CHECK_EQ(found, s0);
    segid_t copy;
    CHECK_CLEAN(seg_clone(s1, "s1-copy", &copy));
    struct seg_info si;
    CHECK_CLEAN(seg_ctl(s0, SEG_CTL_INFO, &si));
    CHECK_CLEAN(vas_create("v0", 0600, &v0));
    CHECK_CLEAN(vas_find("v0", &vfound));
    CHECK_EQ(vfound, v0);
    CHECK_CLEAN(seg_attach(v0, s0, SEG_RDWR));
    CHECK_CLEAN(vas_clone(v0, "v1", &v1));
    CHECK_CLEAN(vas_attach(v0, &vh));
    CHECK_CLEAN(vas_switch(vh));
    /* The heap's calls are documented (error.h, alloc.h) to leave the message alone. */
    void *p = seg_malloc(s0, 100);
    CHECK(p != NULL);
    CHECK_OK(seg_free(p));
    size_t count, corrupt;
    struct seg_info segs[8];
    CHECK_CLEAN(seg_list(segs, 8, &count, &corrupt));
    CHECK_EQ(count, 3);
    struct vas_info vases[4];
    CHECK_CLEAN(vas_list(vases, 4, &count, &corrupt));
    CHECK_EQ(count, 2);
    CHECK_CLEAN(vas_try_switch(VAS_HOME));
    CHECK_CLEAN(vas_detach(vh));
    CHECK_CLEAN(vas_delete(v1));
    CHECK_CLEAN(seg_detach(v0, s0));
    CHECK_CLEAN(vas_delete(v0));
    CHECK_CLEAN(seg_delete(copy));
    CHECK_CLEAN(seg_delete(s1));
    CHECK_CLEAN(seg_delete(s0));
    printf("every successful call left exomem_last_error() empty\n");
    return 0;
}
