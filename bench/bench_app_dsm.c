/* bench_app_dsm: shared virtual memory between processes (Li and Hudak's DSM over Unix-domain
 * sockets, apps/dsm) on a shared array of uint64_t, with 1, 2 and 3 processes and three
 * access patterns:
 *   locked         every node adds to every element under one lock (true sharing);
 *   disjoint       each node updates its own pages (no sharing after the first faults);
 *   false-sharing  node i updates elements i, i+n, ...: different data, same pages.
 * Per run: dsm_updates (million element updates per second over the slowest node's time;
 * baseline: the same pattern with 1 node), and the counts dsm_faults, dsm_invalidations,
 * dsm_messages, dsm_transfers, and dsm_transaction_us (work time per page transaction in the
 * locked pattern, which does little else). One JSON line per measurement per repeat (bench/run.py protocol).
 */
#include "bench_util.h"
#include "dsm.h"
#include "dsm_work.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
    int repeats;
    long locked_rounds, disjoint_rounds, sharing_rounds;
} opt = { 5, 300, 20000, 50000 };

static void emit(const char *name, const char *unit, double value, const char *pattern,
                 int nodes, int with_baseline)
{
    printf("{\"name\":\"%s\",\"unit\":\"%s\",\"value\":%.4f,"
           "\"params\":{\"pattern\":\"%s\",\"nodes\":%d}",
           name, unit, value, pattern, nodes);
    if (with_baseline)
        printf(",\"baseline\":\"%s\",\"baseline_params\":{\"pattern\":\"%s\",\"nodes\":1}", name,
               pattern);
    printf("}\n");
    fflush(stdout);
}

static void run_one(dsm_pattern pattern, int nodes)
{
    dsm_config cfg = { .nodes = nodes, .timeout_ms = 20000 };
    struct dsm_work w = { .pattern = pattern };
    switch (pattern) {
    case DSM_PATTERN_LOCKED:
        cfg.pages = 8;
        w.rounds = opt.locked_rounds;
        break;
    case DSM_PATTERN_DISJOINT:
        cfg.pages = 48;
        w.rounds = opt.disjoint_rounds;
        break;
    default:
        cfg.pages = 4;
        w.rounds = opt.sharing_rounds;
        break;
    }
    w.elems = cfg.pages * 4096 / sizeof(uint64_t);
    dsm_result r;
    int rc = dsm_run(&cfg, dsm_work_node, &w, &r);
    if (rc != 0)
        bench_die("dsm_run (a node failed or the result was wrong)", rc);
    const char *p = dsm_pattern_name(pattern);
    double secs = (double)r.total.work_ns / 1e9;
    emit("dsm_updates", "Mupdates/s", dsm_work_updates(&w, nodes) / secs / 1e6, p, nodes,
         nodes > 1);
    emit("dsm_faults", "faults", (double)(r.total.read_faults + r.total.write_faults), p, nodes, 0);
    emit("dsm_invalidations", "invalidations", (double)r.total.invalidations, p, nodes, 0);
    emit("dsm_messages", "messages", (double)r.messages, p, nodes, 0);
    emit("dsm_transfers", "pages", (double)r.page_transfers, p, nodes, 0);
    /* the locked pattern is all faults: its time per transaction is what one costs */
    if (pattern == DSM_PATTERN_LOCKED && nodes > 1 && r.transactions > 0)
        emit("dsm_transaction_us", "us", secs * 1e6 / (double)r.transactions, p, nodes, 0);
}

static int bench_main(void)
{
    const char *why = NULL;
    if (exo_vm_engine_supported(EXO_VM_ENGINE_SIGNAL, 0, &why) != 0) {
        printf("{\"name\":\"skip\",\"params\":{},\"reason\":\"signal engine: %s\"}\n",
               why ? why : "unavailable");
        return 0;
    }
    for (int r = 0; r < opt.repeats; r++)
        for (int p = DSM_PATTERN_LOCKED; p <= DSM_PATTERN_FALSE_SHARING; p++)
            for (int nodes = 1; nodes <= 3; nodes++)
                run_one((dsm_pattern)p, nodes);
    return 0;
}

int main(int argc, char **argv)
{
    if (bench_parse_args(argc, argv, &opt.repeats, 3, NULL)) {
        opt.locked_rounds = 60;
        opt.disjoint_rounds = 4000;
        opt.sharing_rounds = 10000;
    }
    return bench_run_in_private_registry(bench_main);
}
