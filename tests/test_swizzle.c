/* Extending addressability by pointer swizzling (apps/swizzle): a 16 MiB persistent search
 * tree used through a 1 MiB window answers every lookup right over many sessions; a value
 * written in one session is in the next, and the file holds persistent pointers, never
 * window addresses; a window too small for the next page fails that access with SIGBUS and
 * says why; bad arguments are refused. */
#include "harness.h"

#include "swizzle.h"

#include <exomem/vm.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#define NODES 262144 /* 16 MiB of 64-byte nodes */

static char store[256];
static swz *bus_session;

static void cleanup(void)
{
    unlink(store);
}

static void lookups_over_sessions(void)
{
    uint64_t rng = 12345, done = 0, sessions = 0;
    while (done < 5000) {
        swz *s;
        CHECK_OK(swz_open(store, 1 << 20, 256 << 10, &s));
        sessions++;
        while (done < 5000 && swz_window_free(s) > 64) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            uint64_t key = (rng % NODES) * 2;
            struct swz_node *n = swz_tree_find(swz_root(s), key);
            CHECK(n != NULL && n->key == key && n->value == key * 3);
            CHECK(swz_tree_find(swz_root(s), key + 1) == NULL); /* odd keys are not there */
            done++;
        }
        struct swz_stats st;
        swz_get_stats(s, &st);
        CHECK(st.reserved <= st.window_pages && st.faults > 0 && st.swizzled > 0);
        CHECK_OK(swz_close(s));
    }
    CHECK(sessions > 2); /* the store is 16x the window: it took several */
}

static void updates_persist_unswizzled(void)
{
    swz *s;
    CHECK_OK(swz_open(store, 1 << 20, 256 << 10, &s));
    struct swz_node *n = swz_tree_find(swz_root(s), 2 * 12345);
    CHECK(n != NULL);
    n->value = 777;
    struct swz_node *root = swz_root(s);
    root->value = 555;
    CHECK_OK(swz_close(s));
    /* In the file: the root's pointers are persistent (tagged), not window addresses. */
    int fd = open(store, O_RDONLY);
    CHECK(fd >= 0);
    uint64_t w[4];
    CHECK(pread(fd, w, sizeof w, 0) == sizeof w);
    close(fd);
    CHECK(w[1] == 555 && (w[2] & SWZ_TAG) && (w[3] & SWZ_TAG));
    CHECK(w[2] == swz_pptr(0, 64) && w[3] == swz_pptr(0, 128));
    CHECK_OK(swz_open(store, 1 << 20, 256 << 10, &s));
    n = swz_tree_find(swz_root(s), 2 * 12345);
    CHECK(n != NULL && n->value == 777);
    CHECK(((struct swz_node *)swz_root(s))->value == 555);
    CHECK_OK(swz_close(s));
}

static void on_bus(int sig)
{
    (void)sig;
    const char *why = swz_last_failure(bus_session);
    if (write(1, why, strlen(why)) < 0)
        _exit(1);
    _exit(42);
}

/* A 2-page window: the root's page is window page 0; its nodes' children are on two more
 * pages, which cannot both be reserved: the first access past the root's page fails. */
static void window_too_small(void *arg)
{
    (void)arg;
    struct sigaction sa = {.sa_handler = on_bus};
    sigaction(SIGBUS, &sa, NULL);
    CHECK_OK(swz_open(store, 2 * SWZ_PAGE, 2 * SWZ_PAGE, &bus_session));
    volatile struct swz_node *n = swz_tree_find(swz_root(bus_session), 2 * (NODES - 1));
    (void)n;
    _exit(0); /* should not get here */
}

static void refused(void)
{
    swz *s;
    CHECK_ERR(swz_open(store, 0, 4096, &s), EXO_EINVAL);
    CHECK_ERR(swz_open(store, 3 * SWZ_PAGE + 1, 4096, &s), EXO_EINVAL);
    CHECK_ERR(swz_open("/nonexistent/store", 1 << 20, 4096, &s), EXO_ENOENT);
    char odd[300];
    snprintf(odd, sizeof odd, "%s.odd", store);
    int fd = open(odd, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0 && write(fd, "x", 1) == 1);
    close(fd);
    CHECK_ERR(swz_open(odd, 1 << 20, 4096, &s), EXO_EINVAL);
    unlink(odd);
    CHECK_ERR(swz_build_tree(store, 0), EXO_EINVAL);
    CHECK_OK(swz_close(NULL));
}

int main(void)
{
    const char *root = test_root_setup();
    const char *why = NULL;
    if (exo_vm_engine_supported(EXO_VM_ENGINE_UFFD, 0, &why) != 0)
        SKIP("userfaultfd is not usable here: %s\n", why ? why : "?");
    snprintf(store, sizeof store, "%s/swizzle.store", root);
    atexit(cleanup);
    CHECK_OK(swz_build_tree(store, NODES));
    lookups_over_sessions();
    updates_persist_unswizzled();
    fflush(stdout);
    int status = test_in_child(window_too_small, NULL);
    CHECK_EQ(status, 42);
    refused();
    printf("\ntest_swizzle: ok\n");
    return 0;
}
