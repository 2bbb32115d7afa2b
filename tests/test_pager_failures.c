/* A pager store that fails (exo_pager_store_fail: every call -EXO_EIO, as a dead disk or
 * server would) gives the faulting access SIGBUS after a bounded retry, never a hang, with
 * the reason in exo_pager_last_failure(); dirty data whose write-back fails stays resident
 * and is never lost; once the store works again, exo_pager_advise(WILLNEED) brings a failed
 * unit back. Both deliveries, the file and the memory store (the io_uring file store in
 * test_pager_uring.c). The walk is pager_failures_scenario() of pager_fixture.c; every step
 * runs under alarm(). */
#include "harness.h"
#include "pager_fixture.h"

#include <exomem/pager.h>
#include <unistd.h>

int main(void)
{
    const char *root = test_root_setup();
    const char *why = NULL;
    if (exo_vm_engine_supported(EXO_VM_ENGINE_UFFD, 0, &why) != 0)
        SKIP("userfaultfd is not usable here: %s\n", why ? why : "?");
    pager_failures_install();
    char path[512];
    snprintf(path, sizeof path, "%s/failing-store", root);
    for (int d = 0; d < 2; d++)
        for (int f = 0; f < 2; f++) {
            exo_pager_store *s;
            if (f) {
                unlink(path);
                CHECK_OK(exo_pager_store_file(path, &s));
            } else {
                CHECK_OK(exo_pager_store_memory(EXO_PAGER_LZ4, &s));
            }
            pager_failures_scenario(s, d ? EXO_PAGER_SIGBUS : EXO_PAGER_THREADS);
            CHECK_OK(exo_pager_store_close(s));
        }
    unlink(path);
    printf("test_pager_failures: ok (%d SIGBUS seen)\n", pager_bus_errors());
    return 0;
}
