/* rpcjmp's request/response exchange: the client calls and the server loop. See rpcjmp.h. */
#include "rpcjmp_msg.h"

#include <stdlib.h>

/* The response to a request: 0 or the server's error (arg), or a channel failure. */
static int response_status(int rc, const struct rpcjmp_msg *r, uint32_t op)
{
    if (rc == 1)
        return exomem_set_error(EXO_EIO, "rpcjmp: the server closed the channel");
    if (rc < 0)
        return rc;
    if (r->op != op)
        return exomem_set_error(EXO_EIO, "rpcjmp: a response to op %u for op %u", r->op, op);
    if (r->arg < 0)
        return exomem_set_error(r->arg, "rpcjmp: the server answered: %s",
                                exomem_strerror(r->arg));
    return 0;
}

long rpcjmp_call_read(struct rpcjmp_chan *ch, unsigned key, void *buf, size_t cap)
{
    if (cap > RPCJMP_PAYLOAD_MAX)
        cap = RPCJMP_PAYLOAD_MAX;
    struct rpcjmp_msg q = { RPCJMP_OP_READ, key, 0, (int32_t)cap }, r;
    int rc = rpcjmp_chan_send(ch, &q, NULL);
    if (rc)
        return rc;
    rc = response_status(rpcjmp_chan_recv(ch, &r, buf, cap), &r, RPCJMP_OP_READ);
    return rc ? rc : (long)r.len;
}

int rpcjmp_call_write(struct rpcjmp_chan *ch, unsigned key, const void *buf, size_t len)
{
    if (len > RPCJMP_PAYLOAD_MAX)
        return exomem_set_error(EXO_EINVAL, "rpcjmp: a %zu-byte value (at most %u)", len,
                                RPCJMP_PAYLOAD_MAX);
    struct rpcjmp_msg q = { RPCJMP_OP_WRITE, key, (uint32_t)len, 0 }, r;
    int rc = rpcjmp_chan_send(ch, &q, buf);
    if (rc)
        return rc;
    return response_status(rpcjmp_chan_recv(ch, &r, NULL, 0), &r, RPCJMP_OP_WRITE);
}

int rpcjmp_call_release(struct rpcjmp_chan *ch)
{
    struct rpcjmp_msg q = { RPCJMP_OP_RELEASE, 0, 0, 0 }, r;
    int rc = rpcjmp_chan_send(ch, &q, NULL);
    if (rc)
        return rc;
    return response_status(rpcjmp_chan_recv(ch, &r, NULL, 0), &r, RPCJMP_OP_RELEASE);
}

int rpcjmp_call_close(struct rpcjmp_chan *ch)
{
    struct rpcjmp_msg q = { RPCJMP_OP_CLOSE, 0, 0, 0 };
    return rpcjmp_chan_send(ch, &q, NULL);
}

/* ---- the server ---- */

static int go_in(struct rpcjmp_server *s)
{
    if (s->in)
        return 0;
    int rc = vas_switch(s->rw);
    s->in = rc == 0;
    return rc;
}

static int go_home(struct rpcjmp_server *s)
{
    if (!s->in)
        return 0;
    int rc = vas_switch(VAS_HOME);
    s->in = rc != 0;
    return rc;
}

/* Answer one request (not CLOSE); `scratch` takes the payload of a write that is refused. */
static int answer(struct rpcjmp_server *s, struct rpcjmp_chan *ch, const struct rpcjmp_msg *q,
                  uint8_t *scratch)
{
    struct rpcjmp_msg r = { q->op, q->key, 0, 0 };
    const void *payload = NULL;
    bool bad_key = q->key >= s->nrecords;
    switch (q->op) {
    case RPCJMP_OP_READ: {
        struct rpcjmp_record_view v;
        if (q->len)
            return exomem_set_error(EXO_EIO, "rpcjmp: a read request with a payload");
        if (bad_key || q->arg < 0)
            r.arg = -EXO_EINVAL;
        else if (!(r.arg = go_in(s)) && !(r.arg = rpcjmp_record_peek(s->base, q->key, &v))) {
            r.len = v.len < (size_t)q->arg ? (uint32_t)v.len : (uint32_t)q->arg;
            payload = v.data; /* sent straight from the record */
        }
        break;
    }
    case RPCJMP_OP_WRITE: {
        if (q->len > RPCJMP_PAYLOAD_MAX)
            return exomem_set_error(EXO_EIO, "rpcjmp: a %u-byte write request", q->len);
        if (bad_key || (r.arg = go_in(s))) {
            int rc = rpcjmp_chan_recv_body(ch, scratch, q->len);
            if (rc)
                return rc;
            r.arg = bad_key ? -EXO_EINVAL : r.arg;
            break;
        }
        int rc = rpcjmp_chan_recv_body(ch, rpcjmp_record_begin(s->base, q->key), q->len);
        if (rc)
            return rc;
        rpcjmp_record_commit(s->base, q->key, q->len);
        break;
    }
    case RPCJMP_OP_RELEASE:
        r.arg = go_home(s);
        break;
    default:
        return exomem_set_error(EXO_EIO, "rpcjmp: unknown request %u", q->op);
    }
    s->served++;
    return rpcjmp_chan_send(ch, &r, payload);
}

int rpcjmp_server_serve(struct rpcjmp_server *s, struct rpcjmp_chan *ch)
{
    uint8_t *scratch = malloc(RPCJMP_PAYLOAD_MAX);
    if (!scratch)
        return exomem_set_error(EXO_ENOMEM, "rpcjmp: no memory for the server's buffer");
    int rc;
    for (;;) {
        struct rpcjmp_msg q;
        rc = rpcjmp_chan_recv_hdr(ch, &q);
        if (rc == 1 || (rc == 0 && q.op == RPCJMP_OP_CLOSE)) {
            rc = 0;
            break;
        }
        if (rc || (rc = answer(s, ch, &q, scratch)))
            break;
    }
    free(scratch);
    int home = go_home(s);
    return rc ? rc : home;
}
