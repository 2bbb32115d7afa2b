/* The run-time side of the CARAT plugin's VAS-safety checks (llvm/VasSafety.cpp): a
 * dereference the compiler could not prove safe checks that its pointer's address space is
 * the current one, and stops the program as a fault would when it is not. */
#include "internal.h"
#include "os/os.h"
#include "os/os_vm.h"

#include <stdio.h>

EXO_API void *vas_cast(void *p)
{
    return p;
}

EXO_API void exo_vas_deref_check(vhandle_t expected, const char *site)
{
    vhandle_t now = vas_current();
    if (now == expected)
        return;
    fprintf(stderr, "exomem: VAS safety: %s: a pointer into address space %d (handle) is "
            "used while address space %d is current\n", site ? site : "?", expected, now);
    exo_os_signal_thread(exo_os_gettid(), SIGSEGV);
}
