/* dsm workloads on a shared array of uint64_t, used by the `dsm` program, the benchmark and
 * the test. Every node runs dsm_work_node: barrier, the timed updates, barrier; then node 0
 * reads the whole array back and checks every element exactly. */
#ifndef EXOMEM_DSM_WORK_H
#define EXOMEM_DSM_WORK_H

#include "dsm.h"

typedef enum dsm_pattern {
    DSM_PATTERN_LOCKED,        /* each round, under lock 0, every node adds id+1 to every element */
    DSM_PATTERN_DISJOINT,      /* each node increments its own whole pages (no sharing) */
    DSM_PATTERN_FALSE_SHARING, /* node i increments elements i, i+n, i+2n...: same pages */
} dsm_pattern;

struct dsm_work {
    dsm_pattern pattern;
    size_t elems;  /* array length (uint64_t); must fit in the region */
    long rounds;
};

/* The node program (a dsm_node_fn; arg is a struct dsm_work *). Returns 0, or 1 when node 0
 * found a wrong element or a lock/barrier failed. */
int dsm_work_node(dsm_node *node, void *work);

/* How many element updates a run with `nodes` nodes makes in total. */
double dsm_work_updates(const struct dsm_work *w, int nodes);

/* "locked", "disjoint", "false-sharing". */
const char *dsm_pattern_name(dsm_pattern p);

/* Parse a pattern name; 0 or -1. */
int dsm_pattern_parse(const char *s, dsm_pattern *out);

#endif
