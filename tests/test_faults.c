/* Fault injection: every operation that changes the registry or the address space, walked
 * with each of its system calls failing in turn (tests/fault_walk.c says what is checked
 * after each failure). Fails on the first broken promise, naming the call and the errno. */
#include "fault_walk.h"
#include "harness.h"

#include <limits.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    test_root_setup();
    bool quick = argc > 1 && !strcmp(argv[1], "--quick");
    /* The exomem command sits in the build directory, one level above this program. */
    char bin[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", bin, sizeof bin - 16);
    CHECK(n > 0);
    bin[n] = '\0';
    char *slash = strrchr(bin, '/');
    CHECK(slash != NULL);
    strcpy(slash, "/../exomem");
    const char *cli = access(bin, X_OK) == 0 ? bin : NULL;
    if (!cli)
        fprintf(stderr, "note: no exomem command at %s: the CLI is not walked\n", bin);

    struct fault_walk_result r[32];
    size_t count = fault_walk_all(cli, quick, r, 32);
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
