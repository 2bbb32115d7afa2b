/* The fault walk: every exomem operation that changes the registry or the address space is
 * run again and again with one system call failing (src/os's fault injector: the Nth call
 * of one kind, for each kind and each N the operation makes, with several errnos). After
 * each failure the walk checks what the library promises: an error code and a message, the
 * registry exactly as before (every file, its mode, size and contents, the private mounts
 * and the huge page pools), the process's mappings and descriptors as before, and the
 * operation succeeding when retried. Used by tests/test_faults.c and bench/bench_faults.c. */
#ifndef EXOMEM_FAULT_WALK_H
#define EXOMEM_FAULT_WALK_H

#include <stdbool.h>
#include <stddef.h>

struct fault_walk_result {
    char op[48];
    unsigned long calls;        /* system calls the operation makes (all kinds) */
    unsigned long injected;     /* faults injected */
    unsigned long failed_clean; /* the operation failed and everything was as before */
    unsigned long tolerated;    /* the operation succeeded despite the fault (a retried
                                   EINTR, a best-effort call) */
    bool skipped;               /* the machine cannot run this operation */
    char why[160];              /* why skipped, or the first broken promise */
    bool broken;                /* a promise was broken: see why */
};

/* The exomem command of this build: tests/ and bench/ programs sit one directory below
 * it. NULL (with a line on stderr) when it is not there. */
const char *fault_walk_cli_path(void);

/* Run the walk over every operation (the CLI's with exomem_bin, when not NULL), filling
 * up to cap results; returns how many. `quick` uses one errno per fault instead of five.
 * Needs a registry of its own (EXOMEM_ROOT set by the caller) and root for THP and 2M. */
size_t fault_walk_all(const char *exomem_bin, bool quick, struct fault_walk_result *out,
                      size_t cap);

#endif
