/* A pager store that fails (exo_pager_store_fail: every call -EXO_EIO, as a dead disk or
 * server would) gives the faulting access SIGBUS after a bounded retry, never a hang, with
 * the reason in exo_pager_last_failure(); dirty data whose write-back fails stays resident
 * and is never lost; once the store works again, exo_pager_advise(WILLNEED) brings a failed
 * unit back. Both deliveries, both kinds of store. Every step runs under alarm(). */
#include "harness.h"

#include <exomem/pager.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#define UNIT ((size_t)4 << 10)

static sigjmp_buf escape;
static volatile sig_atomic_t bus_errors;

/* Installed before any pager region, so that the pager's own SIGBUS handler chains to it
 * for the faults it cannot serve. */
static void on_sigbus(int sig, siginfo_t *si, void *ctx)
{
    (void)sig, (void)si, (void)ctx;
    bus_errors++;
    siglongjmp(escape, 1);
}

/* Read one byte of p; 1 if the read raised SIGBUS. */
static int read_faults(volatile const char *p, char *out)
{
    if (sigsetjmp(escape, 1))
        return 1;
    *out = *p;
    return 0;
}

static void check_units(const char *base, int first, int count)
{
    for (int u = first; u < first + count; u++)
        for (size_t i = 0; i < UNIT; i += 512)
            if (base[(size_t)u * UNIT + i] != (char)('A' + u)) {
                fprintf(stderr, "unit %d byte %zu: %d, expected %c\n", u, i,
                        base[(size_t)u * UNIT + i], 'A' + u);
                exit(1);
            }
}

static void scenario(exo_pager_delivery delivery, int file_store, const char *path)
{
    exo_pager_store *s;
    if (file_store) {
        unlink(path);
        CHECK_OK(exo_pager_store_file(path, &s));
    } else {
        CHECK_OK(exo_pager_store_memory(EXO_PAGER_LZ4, &s));
    }
    exo_pager_options o = {.size = 16 * UNIT, .budget = 4 * UNIT, .delivery = delivery,
                           .store = s};
    exo_pager *p;
    CHECK_OK(exo_pager_create(&o, &p));
    char *base = exo_pager_base(p);
    alarm(30);

    /* 1. A fill the store cannot serve: SIGBUS, the reason, and the unit back later. */
    for (int u = 0; u < 8; u++)
        memset(base + (size_t)u * UNIT, 'A' + u, UNIT); /* units 0-3 go to the store */
    CHECK_OK(exo_pager_flush(p)); /* 4-7 clean: making room needs no write */
    CHECK_OK(exo_pager_store_fail(s, 1000));
    char c = 0;
    int before = bus_errors;
    CHECK(read_faults(base, &c));
    CHECK_EQ(bus_errors, before + 1);
    CHECK(strstr(exo_pager_last_failure(p), "store read of unit 0") != NULL);
    CHECK(read_faults(base, &c)); /* still failing: SIGBUS again, not a hang */
    exo_pager_stats st;
    CHECK_OK(exo_pager_get_stats(p, &st));
    CHECK(st.store_errors >= 3);
    CHECK_OK(exo_pager_store_fail(s, 0));
    CHECK_OK(exo_pager_advise(p, base, UNIT, EXO_PAGER_WILLNEED, 0));
    CHECK(!read_faults(base, &c));
    CHECK_EQ(c, 'A');
    check_units(base, 0, 8);

    /* 2. Write-backs that fail: the dirty units stay resident, nothing is lost, and the
     * fault that needed a frame gets SIGBUS. */
    CHECK_OK(exo_pager_advise(p, base, o.size, EXO_PAGER_DONTNEED, 0));
    for (int u = 0; u < 4; u++)
        memset(base + (size_t)u * UNIT, 'A' + u, UNIT); /* four dirty units fill the budget */
    CHECK_OK(exo_pager_store_fail(s, 1000));
    CHECK(read_faults(base + 9 * UNIT, &c));
    CHECK(strstr(exo_pager_last_failure(p), "store") != NULL);
    CHECK_OK(exo_pager_get_stats(p, &st));
    CHECK_EQ(st.dirty_bytes, 4 * UNIT);
    check_units(base, 0, 4); /* resident: no fault needed, and unchanged */
    CHECK_ERR(exo_pager_flush(p), EXO_EIO);
    CHECK_OK(exo_pager_store_fail(s, 0));
    CHECK_OK(exo_pager_advise(p, base + 9 * UNIT, UNIT, EXO_PAGER_WILLNEED, 0));
    CHECK(!read_faults(base + 9 * UNIT, &c));
    CHECK_EQ(c, 0); /* never written */
    CHECK_OK(exo_pager_advise(p, base, o.size, EXO_PAGER_DONTNEED, 0)); /* all to the store */
    check_units(base, 0, 8);
    alarm(0);
    CHECK_OK(exo_pager_destroy(p));
    CHECK_OK(exo_pager_store_close(s));
}

int main(void)
{
    const char *root = test_root_setup();
    const char *why = NULL;
    if (exo_vm_engine_supported(EXO_VM_ENGINE_UFFD, 0, &why) != 0)
        SKIP("userfaultfd is not usable here: %s\n", why ? why : "?");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    CHECK_OK(sigaction(SIGBUS, &sa, NULL));
    char path[512];
    snprintf(path, sizeof path, "%s/failing-store", root);
    for (int d = 0; d < 2; d++)
        for (int f = 0; f < 2; f++)
            scenario(d ? EXO_PAGER_SIGBUS : EXO_PAGER_THREADS, f, path);
    unlink(path);
    printf("test_pager_failures: ok (%d SIGBUS seen)\n", (int)bus_errors);
    return 0;
}
