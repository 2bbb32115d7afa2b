/* Faults that are not ours reach the handler installed before the library's: a fault
 * outside every region, a fault that a region's handler declines, and a fault in a region
 * without a handler, on each engine. With the default action, the process dies by SIGSEGV
 * as it would without the library. */
#include "test_vm_util.h"

#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>

static sigjmp_buf jump;
static volatile sig_atomic_t prev_ran;
static void *volatile prev_addr;

static void previous_handler(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    prev_ran++;
    prev_addr = si->si_addr;
    siglongjmp(jump, sig);
}

static atomic_int declined;

static exo_vm_action decline(exo_vm_fault *f, void *arg)
{
    (void)f;
    (void)arg;
    atomic_fetch_add(&declined, 1);
    return EXO_VM_DECLINE;
}

/* Write p; returns 1 if the previous handler caught a fault. */
static int faults_to_previous(char *p)
{
    int before = prev_ran;
    if (sigsetjmp(jump, 1) == 0)
        *(volatile char *)p = 1;
    return prev_ran == before + 1;
}

static exo_vm_region *protected_region(char *mem, exo_vm_engine engine, exo_vm_handler h)
{
    exo_vm_options opt = {.engine = engine, .handler = h};
    exo_vm_region *r;
    CHECK_OK(exo_vm_region_create(mem, 4 * PG, &opt, &r));
    CHECK_OK(exo_vm_prot1(r, mem + PG, EXO_VM_READONLY));
    return r;
}

/* --- in children, with the default action --- */

static exo_vm_engine child_engine;

static void default_action(void)
{
    signal(SIGSEGV, SIG_DFL); /* also replaces a sanitizer's handler */
    signal(SIGBUS, SIG_DFL);
}

static void child_foreign(void *arg)
{
    (void)arg;
    default_action();
    char *mem = vm_test_map(4 * PG);
    protected_region(mem, child_engine, decline);
    char *none = mmap(NULL, PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    *(volatile char *)none = 1;
    _exit(0);
}

static void child_declined(void *arg)
{
    (void)arg;
    default_action();
    char *mem = vm_test_map(4 * PG);
    protected_region(mem, child_engine, decline);
    *(volatile char *)(mem + PG) = 1;
    _exit(0);
}

static void child_no_handler(void *arg)
{
    (void)arg;
    default_action();
    char *mem = vm_test_map(4 * PG);
    protected_region(mem, child_engine, NULL);
    *(volatile char *)(mem + PG) = 1;
    _exit(0);
}

static void children(exo_vm_engine engine)
{
    child_engine = engine;
    CHECK_EQ(test_in_child(child_foreign, NULL), 128 + SIGSEGV);
    CHECK_EQ(test_in_child(child_declined, NULL), 128 + SIGSEGV);
    CHECK_EQ(test_in_child(child_no_handler, NULL), 128 + SIGSEGV);
}

static void in_process(exo_vm_engine engine)
{
    char *mem = vm_test_map(4 * PG);
    exo_vm_region *r = protected_region(mem, engine, decline);
    char *none = mmap(NULL, PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(none != MAP_FAILED);

    atomic_store(&declined, 0);
    CHECK(faults_to_previous(none));
    CHECK(prev_addr == none);
    CHECK_EQ(atomic_load(&declined), 0); /* not a region's fault: its handler never ran */

    CHECK(faults_to_previous(mem + PG + 3));
    CHECK_EQ(atomic_load(&declined), 1);
    if (engine == EXO_VM_ENGINE_SIGNAL)
        CHECK(prev_addr == mem + PG + 3);
    /* Accessible pages of the region do not fault. */
    CHECK(!faults_to_previous(mem));
    CHECK_OK(exo_vm_region_destroy(r));
    CHECK(!faults_to_previous(mem + PG));

    r = protected_region(mem, engine, NULL);
    CHECK(faults_to_previous(mem + PG));
    CHECK_OK(exo_vm_region_destroy(r));
    munmap(mem, 4 * PG);
    munmap(none, PG);
}

int main(void)
{
    int uffd = vm_test_engine_ok(EXO_VM_ENGINE_UFFD, 0);
    /* Children first: the library installs its handler once per process, and the children
     * must install it over the default action, not inherit it. */
    children(EXO_VM_ENGINE_SIGNAL);
    if (uffd)
        children(EXO_VM_ENGINE_UFFD);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = previous_handler;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGSEGV, &sa, NULL) == 0);
    in_process(EXO_VM_ENGINE_SIGNAL);
    if (uffd)
        in_process(EXO_VM_ENGINE_UFFD);
    printf("ok\n");
    return 0;
}
