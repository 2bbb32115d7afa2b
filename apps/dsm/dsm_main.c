/* dsm: run a shared-array workload on N processes sharing virtual memory (Li and Hudak's
 * DSM over Unix-domain sockets) and print one JSON line with the counts and the rate.
 *
 *   dsm [--nodes N] [--pages P] [--rounds K] [--pattern locked|disjoint|false-sharing]
 *
 * Exits 0 when node 0 found every element exactly as expected, 1 otherwise.
 */
#include "dsm.h"
#include "dsm_work.h"

#include <exomem/error.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long number(const char *s)
{
    char *end;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || *end || v <= 0) {
        fprintf(stderr, "dsm: bad number '%s'\n", s ? s : "");
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    dsm_config cfg = { .nodes = 3, .pages = 8 };
    struct dsm_work w = { .pattern = DSM_PATTERN_LOCKED, .rounds = 100 };
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--nodes"))
            cfg.nodes = (int)number(v), i++;
        else if (!strcmp(argv[i], "--pages"))
            cfg.pages = (size_t)number(v), i++;
        else if (!strcmp(argv[i], "--rounds"))
            w.rounds = number(v), i++;
        else if (!strcmp(argv[i], "--pattern") && v && dsm_pattern_parse(v, &w.pattern) == 0)
            i++;
        else {
            fprintf(stderr, "usage: dsm [--nodes N] [--pages P] [--rounds K] "
                            "[--pattern locked|disjoint|false-sharing]\n");
            return 2;
        }
    }
    w.elems = cfg.pages * 4096 / sizeof(uint64_t);
    dsm_result r;
    int rc = dsm_run(&cfg, dsm_work_node, &w, &r);
    double secs = (double)r.total.work_ns / 1e9;
    printf("{\"pattern\":\"%s\",\"nodes\":%d,\"pages\":%zu,\"rounds\":%ld,\"ok\":%s,"
           "\"read_faults\":%llu,\"write_faults\":%llu,\"invalidations\":%llu,"
           "\"page_transfers\":%llu,\"messages\":%llu,\"transactions\":%llu,"
           "\"updates_per_s\":%.0f}\n",
           dsm_pattern_name(w.pattern), cfg.nodes, cfg.pages, w.rounds, rc == 0 ? "true" : "false",
           (unsigned long long)r.total.read_faults, (unsigned long long)r.total.write_faults,
           (unsigned long long)r.total.invalidations, (unsigned long long)r.page_transfers,
           (unsigned long long)r.messages, (unsigned long long)r.transactions,
           secs > 0 ? dsm_work_updates(&w, cfg.nodes) / secs : 0.0);
    if (rc != 0)
        fprintf(stderr, "dsm: %s (node %d failed)\n", exomem_strerror(rc), r.failed_node);
    return rc == 0 ? 0 : 1;
}
