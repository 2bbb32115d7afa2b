/* Fault injection: every operation that changes the registry or the address space, walked
 * with each of its system calls failing in turn (tests/fault_walk.c says what is checked
 * after each failure). Fails on the first broken promise, naming the call and the errno. */
#include "fault_walk.h"
#include "harness.h"

#include <string.h>

int main(int argc, char **argv)
{
    test_root_setup();
    bool quick = argc > 1 && !strcmp(argv[1], "--quick");
    struct fault_walk_result r[32];
    size_t count = fault_walk_all(fault_walk_cli_path(), quick, r, 32);
    unsigned long injected = 0, clean = 0, tolerated = 0;
    int broken = 0;
    for (size_t i = 0; i < count; i++) {
        if (r[i].skipped) {
            printf("%-28s skipped: %s\n", r[i].op, r[i].why);
            continue;
        }
        printf("%-28s %4lu calls %5lu faults: %5lu failed cleanly, %4lu tolerated%s%s\n",
               r[i].op, r[i].calls, r[i].injected, r[i].failed_clean, r[i].tolerated,
               r[i].broken ? "  BROKEN: " : "", r[i].broken ? r[i].why : "");
        injected += r[i].injected;
        clean += r[i].failed_clean;
        tolerated += r[i].tolerated;
        broken += r[i].broken;
    }
    printf("%lu faults injected: %lu failed cleanly and succeeded on retry, %lu tolerated; "
           "%d operations broke a promise\n", injected, clean, tolerated, broken);
    CHECK(injected > 0);
    return broken ? 1 : 0;
}
