/* dsm internals shared by the manager (dsm_manager.c) and the node side (dsm_node.c). */
#ifndef EXOMEM_DSM_INTERNAL_H
#define EXOMEM_DSM_INTERNAL_H

#include "dsm.h"

/* In a node process: map the region (all INVALID), install the fault handler and start the
 * service thread on the given connections (which the node then owns). 0 or -errno/-exo code. */
int dsm_node_start(int id, int nodes, size_t pages, int fault_fd, int svc_fd, int timeout_ms,
                   dsm_node **out);

/* Report the counters, keep serving until every node has left, then tear down and free the
 * node. 0, or -1 with errno when the cluster broke. */
int dsm_node_finish(dsm_node *node);

#endif
