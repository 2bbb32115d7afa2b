/* Reliability: the fault walk of tests/fault_walk.c (each system call of each operation
 * failing in turn, with five errnos; the promises checked after every failure) run once,
 * its counts printed as measurements for the report's reliability section. The walk is
 * deterministic: --repeats does not apply; --quick injects one errno per call instead of
 * five. */
#include "bench_util.h"
#include "fault_walk.h"

#include <stdio.h>

static bool quick;

static int body(void)
{
    struct fault_walk_result r[32];
    size_t count = fault_walk_all(fault_walk_cli_path(), quick, r, 32);
    int broken = 0;
    for (size_t i = 0; i < count; i++) {
        char params[160];
        snprintf(params, sizeof params, "\"op\": \"%s\", \"errnos\": %d", r[i].op, quick ? 1 : 5);
        if (r[i].skipped) {
            bench_emit("faults_skipped", "operations", 1, params, NULL, r[i].why);
            continue;
        }
        bench_emit("faults_calls", "calls", (double)r[i].calls, params, NULL, NULL);
        bench_emit("faults_injected", "faults", (double)r[i].injected, params, NULL, NULL);
        bench_emit("faults_failed_clean", "faults", (double)r[i].failed_clean, params, NULL,
                   NULL);
        bench_emit("faults_tolerated", "faults", (double)r[i].tolerated, params, NULL, NULL);
        bench_emit("faults_broken", "operations", r[i].broken ? 1 : 0, params, NULL,
                   r[i].broken ? r[i].why : NULL);
        broken += r[i].broken;
    }
    return broken ? 1 : 0;
}

int main(int argc, char **argv)
{
    int repeats = 1;
    quick = bench_parse_args(argc, argv, &repeats, 1,
                             "  The walk runs once (it is deterministic); --quick: one errno "
                             "per call instead of five.\n");
    return bench_run_in_private_registry(body);
}
