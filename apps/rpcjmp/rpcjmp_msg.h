/* rpcjmp's messages and how a channel carries them (internal to apps/rpcjmp). */
#ifndef EXOMEM_RPCJMP_MSG_H
#define EXOMEM_RPCJMP_MSG_H

#include "rpcjmp.h"

enum rpcjmp_op {
    RPCJMP_OP_READ = 1,     /* arg: bytes wanted; response: the value's first bytes */
    RPCJMP_OP_WRITE,        /* payload: the new value */
    RPCJMP_OP_RELEASE,      /* the server switches home until the next request */
    RPCJMP_OP_CLOSE,        /* the client is done (no response) */
};

/* Every message starts with this header; `len` payload bytes follow it. */
struct rpcjmp_msg {
    uint32_t op;
    uint32_t key;
    uint32_t len;           /* payload bytes after the header */
    int32_t arg;            /* request: READ's bytes wanted; response: 0 or -EXO_... */
};

/* Send header h and h->len bytes of payload (may be NULL when h->len is 0). 0 or -EXO_EIO. */
int rpcjmp_chan_send(struct rpcjmp_chan *ch, const struct rpcjmp_msg *h, const void *payload);

/* Receive a message's header: 0, 1 when the peer closed the channel before a new message,
 * or -EXO_EIO. The h->len payload bytes are then taken with rpcjmp_chan_recv_body(). */
int rpcjmp_chan_recv_hdr(struct rpcjmp_chan *ch, struct rpcjmp_msg *h);
int rpcjmp_chan_recv_body(struct rpcjmp_chan *ch, void *dst, size_t len);

/* Receive a whole message whose payload (at most cap bytes) goes to dst: 0, 1 (closed) or
 * -EXO_EIO (also for a payload longer than cap). */
int rpcjmp_chan_recv(struct rpcjmp_chan *ch, struct rpcjmp_msg *h, void *dst, size_t cap);

#endif
