/* dsm wire protocol between the nodes and the manager (internal to apps/dsm).
 *
 * Each node has two SOCK_SEQPACKET connections to the manager:
 *   fault channel    the node's program thread (or its fault handler) asks, the manager
 *                    answers: READ/WRITE -> GRANT -> DONE; LOCK/UNLOCK/BARRIER -> OK;
 *                    BYE -> FINISH once every node has left; then STATS (the node's
 *                    final dsm_stats, counted after its service thread stopped).
 *   service channel  the manager asks, the node's service thread answers:
 *                    FETCH_DOWNGRADE / FETCH_INVALIDATE -> DATA (the page); INVALIDATE -> ACK.
 * A message is a header and, when `len` > 0, that many payload bytes, sent as one packet.
 */
#ifndef EXOMEM_DSM_PROTO_H
#define EXOMEM_DSM_PROTO_H

#include <stdint.h>

#define DSM_PAGE 4096u

enum dsm_msg_type {
    DSM_READ = 1,          /* node: read fault on `page` */
    DSM_WRITE,             /* node: write fault on `page` */
    DSM_DONE,              /* node: the granted page is mapped (ends the transaction) */
    DSM_LOCK,              /* node: acquire lock `arg` */
    DSM_UNLOCK,            /* node: release lock `arg` */
    DSM_BARRIER,           /* node: arrived at the barrier */
    DSM_BYE,               /* node: finished (keeps serving until FINISH) */
    DSM_STATS,             /* node: after FINISH, its final dsm_stats as payload */
    DSM_GRANT,             /* manager: map `page` with access `arg`; payload = bytes, if any */
    DSM_OK,                /* manager: lock granted, unlock done, barrier passed */
    DSM_FINISH,            /* manager: everyone left; stop serving */
    DSM_FETCH_DOWNGRADE,   /* manager: send `page`, keep it READ */
    DSM_FETCH_INVALIDATE,  /* manager: send `page`, drop it */
    DSM_INVALIDATE,        /* manager: drop `page` */
    DSM_DATA,              /* service: the page's bytes */
    DSM_ACK,               /* service: dropped */
};

/* Page states in a node (also the access granted with DSM_GRANT). */
enum { DSM_INVALID = 0, DSM_READ_STATE = 1, DSM_WRITE_STATE = 2 };

struct dsm_msg_hdr {
    uint32_t type;
    uint32_t page;
    uint32_t arg;
    uint32_t len; /* payload bytes following the header */
};

struct dsm_msg {
    struct dsm_msg_hdr h;
    unsigned char data[DSM_PAGE];
};

/* Send one message (async-signal-safe: one sendmsg, no SIGPIPE). 0 or -errno. */
int dsm_send(int fd, uint32_t type, uint32_t page, uint32_t arg, const void *data, uint32_t len);

/* Receive one message, waiting at most timeout_ms (< 0: forever). Async-signal-safe (poll and
 * recv). 0, -ETIMEDOUT, -EPIPE when the peer closed, -EPROTO for a malformed packet, or -errno. */
int dsm_recv(int fd, struct dsm_msg *m, int timeout_ms);

#endif
