/* dsm workloads on a shared array (see dsm_work.h). */
#include "dsm_work.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define ELEMS_PER_PAGE (4096 / sizeof(uint64_t))

static const char *const names[] = { "locked", "disjoint", "false-sharing" };

const char *dsm_pattern_name(dsm_pattern p) { return names[p]; }

int dsm_pattern_parse(const char *s, dsm_pattern *out)
{
    for (int p = 0; p < 3; p++)
        if (!strcmp(s, names[p])) {
            *out = (dsm_pattern)p;
            return 0;
        }
    return -1;
}

double dsm_work_updates(const struct dsm_work *w, int nodes)
{
    double per_round = (double)w->elems;
    return (double)w->rounds * per_round * (w->pattern == DSM_PATTERN_LOCKED ? nodes : 1);
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Node `id` of `n` owns whole pages [first, end) of the array in the disjoint pattern. */
static void slice(size_t elems, int id, int n, size_t *first, size_t *end)
{
    size_t pages = (elems + ELEMS_PER_PAGE - 1) / ELEMS_PER_PAGE;
    size_t lo = pages * (size_t)id / (size_t)n, hi = pages * (size_t)(id + 1) / (size_t)n;
    *first = lo * ELEMS_PER_PAGE;
    *end = hi * ELEMS_PER_PAGE < elems ? hi * ELEMS_PER_PAGE : elems;
}

static uint64_t expected(const struct dsm_work *w, int n)
{
    if (w->pattern == DSM_PATTERN_LOCKED)
        return (uint64_t)w->rounds * (uint64_t)(n * (n + 1) / 2);
    return (uint64_t)w->rounds;
}

int dsm_work_node(dsm_node *node, void *arg)
{
    const struct dsm_work *w = arg;
    /* volatile: every update is one real load and store of shared memory (not vectorised,
     * not kept in a register), so all patterns and node counts do the same work per update */
    volatile uint64_t *a = dsm_base(node);
    int id = dsm_node_id(node), n = dsm_node_count(node);
    if (w->elems * sizeof(uint64_t) > dsm_size(node) || dsm_barrier(node) != 0)
        return 1;
    uint64_t t0 = now_ns();
    for (long r = 0; r < w->rounds; r++) {
        if (w->pattern == DSM_PATTERN_LOCKED) {
            if (dsm_lock(node, 0) != 0)
                return 1;
            for (size_t j = 0; j < w->elems; j++)
                a[j] += (uint64_t)id + 1;
            if (dsm_unlock(node, 0) != 0)
                return 1;
        } else if (w->pattern == DSM_PATTERN_DISJOINT) {
            size_t first, end;
            slice(w->elems, id, n, &first, &end);
            for (size_t j = first; j < end; j++)
                a[j]++;
        } else {
            for (size_t j = (size_t)id; j < w->elems; j += (size_t)n)
                a[j]++;
        }
    }
    dsm_set_work_time(node, now_ns() - t0);
    if (dsm_barrier(node) != 0)
        return 1;
    if (id != 0)
        return 0;
    uint64_t want = expected(w, n);
    for (size_t j = 0; j < w->elems; j++)
        if (a[j] != want) {
            fprintf(stderr, "dsm: element %zu is %llu, expected %llu\n", j,
                    (unsigned long long)a[j], (unsigned long long)want);
            return 1;
        }
    return 0;
}
