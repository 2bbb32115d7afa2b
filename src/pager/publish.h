/* A pager region's statistics, published for other processes (`exomem pager stats PID`).
 *
 * Each region of a process keeps its counters in a small file of the registry,
 * pager/<pid>-<n>.stats, mapped shared: the fault paths update them in place, so publishing
 * costs nothing per fault, and a reader sees them live (counter by counter, not as one
 * snapshot). The file goes when the region is destroyed; one left by a process that died
 * is recognised by its pid and start time and removed by the reader. */
#ifndef EXOMEM_PAGER_PUBLISH_H
#define EXOMEM_PAGER_PUBLISH_H

#include <exomem/pager.h>
#include <stddef.h>
#include <stdint.h>

struct exo_pager;

#define EXO_PAGER_PUB_MAGIC "EXOPGST1"
#define EXO_PAGER_PUB_VERSION 1

struct exo_pager_pub {
    char magic[8];
    uint32_t version;
    int32_t pid;
    uint64_t start_time;        /* the process's start, clock ticks since boot */
    uint64_t serial;            /* n in the file name */
    uint64_t base, size, unit;
    uint32_t policy, table, delivery, threads;
    char store[32];             /* the store's kind: "file", "memory-lz4", ... */
    exo_pager_stats stats;      /* live */
};

/* Point p->stats at a published record (or, when the registry cannot take one, at the
 * region's own copy: publishing is best effort and never fails a region). */
void exo_pager_publish(struct exo_pager *p, exo_pager_table table);

/* Remove the region's record. */
void exo_pager_unpublish(struct exo_pager *p);

/* Call each(record, arg) for every live region of process pid, in serial order; records of
 * a process that is gone (or whose pid was reused) are removed. Returns how many were
 * visited, -EXO_ENOENT (with a message) when pid runs no exomem pager region, or another
 * negative code when the registry cannot be read. */
int exo_pager_published_each(int pid, void (*each)(const struct exo_pager_pub *rec, void *arg),
                             void *arg);

#endif
