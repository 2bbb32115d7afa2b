/* dsm: shared virtual memory between processes (Li and Hudak's IVY; Appel and Li,
 * application 2), over Unix-domain sockets on one machine.
 *
 * Every node is a process with its own private copy of the shared region. Each page is, in
 * each node, INVALID (EXO_VM_NOACCESS), READ (EXO_VM_READONLY) or WRITE (EXO_VM_READWRITE):
 * single writer, multiple readers, invalidation on write. A central manager (the process that
 * calls dsm_run) keeps each page's owner and copyset and serialises the transactions:
 *
 *   read fault   the node asks the manager; the manager has the owner send the page (the
 *                owner drops to READ), adds the node to the copyset; the node installs the
 *                bytes and maps the page READ, then confirms.
 *   write fault  the manager invalidates every copy (the owner sends the bytes if the writer
 *                has no valid copy), makes the node the owner with an empty copyset; the node
 *                maps the page WRITE and confirms.
 *
 * The fault handler (signal engine: signal context) does only socket I/O, memcpy and the
 * protection calls. Requests from the manager (send a page, drop to READ, invalidate) are
 * served by a service thread in every node, which reads and writes the pages through the
 * second view of a MAP2 pair, since the program's view may be inaccessible. A node that dies
 * makes the manager close every connection: the others then fail with a message (in a fault:
 * exit status DSM_EXIT_LOST; in dsm_lock/dsm_barrier: an error return), never hang.
 *
 * The region is at a different address in each node: share offsets, not pointers. One
 * program thread per node.
 */
#ifndef EXOMEM_DSM_H
#define EXOMEM_DSM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define DSM_MAX_NODES 16
#define DSM_MAX_LOCKS 64
#define DSM_EXIT_LOST 3  /* a node's exit status when the cluster broke under a fault */

typedef struct dsm_node dsm_node;

/* What one node counted (dsm_node_stats), and what the manager gathers from all (dsm_result). */
typedef struct dsm_stats {
    uint64_t read_faults;    /* faults resolved by fetching a READ copy */
    uint64_t write_faults;   /* faults resolved by taking ownership */
    uint64_t invalidations;  /* copies this node lost (service thread) */
    uint64_t pages_sent;     /* pages this node's service thread sent */
    uint64_t pages_received; /* pages installed by the fault handler */
    uint64_t work_ns;        /* set by the program with dsm_set_work_time (benchmarks) */
} dsm_stats;

typedef struct dsm_config {
    int nodes;          /* 1..DSM_MAX_NODES processes */
    size_t pages;       /* size of the shared region in pages */
    int timeout_ms;     /* how long to wait for a reply before giving up (default 10000) */
} dsm_config;

/* What dsm_run reports. */
typedef struct dsm_result {
    dsm_stats node[DSM_MAX_NODES];   /* as each node reported it when it left */
    dsm_stats total;                 /* sum over the nodes */
    int status[DSM_MAX_NODES];       /* each node's wait status */
    uint64_t messages;               /* messages the manager sent and received */
    uint64_t page_transfers;         /* page contents carried by the manager */
    uint64_t transactions;           /* page transactions the manager serialised */
    int failed_node;                 /* the first node found dead or broken, else -1 */
} dsm_result;

/* The program each node runs: returns its exit status (0 = fine). It must return rather
 * than exit(), so that the node can leave the cluster in order (keep serving its pages until
 * every node is done); a node that exits or crashes early breaks the run for everyone. */
typedef int (*dsm_node_fn)(dsm_node *node, void *arg);

/* Fork cfg->nodes processes, each running fn(node, arg) on the shared region, and act as the
 * manager until all of them have left. Returns 0 when every node exited 0; -EXO_EIO when a
 * node died or broke the protocol (result->failed_node says which), -EXO_EINVAL for a bad
 * config; result is filled in either way (may be NULL). */
int dsm_run(const dsm_config *cfg, dsm_node_fn fn, void *arg, dsm_result *result);

/* The shared region as this node sees it (the program's view), and its size in bytes. */
void *dsm_base(dsm_node *node);
size_t dsm_size(const dsm_node *node);
int dsm_node_id(const dsm_node *node);
int dsm_node_count(const dsm_node *node);

/* Mutual exclusion among the nodes (lock ids 0..DSM_MAX_LOCKS-1), granted in request order.
 * 0, or -1 with errno set (EPIPE: the cluster broke; EINVAL). */
int dsm_lock(dsm_node *node, unsigned lock_id);
int dsm_unlock(dsm_node *node, unsigned lock_id);

/* Wait until every node has reached the barrier. 0, or -1 with errno (EPIPE). */
int dsm_barrier(dsm_node *node);

/* This node's counters so far. */
dsm_stats dsm_node_stats(const dsm_node *node);

/* Record the time the program spent on its measured work (reported in dsm_result). */
void dsm_set_work_time(dsm_node *node, uint64_t ns);

#endif
