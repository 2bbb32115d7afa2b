/* rpcjmp's channels: pipes, UNIX sockets and busy-polled shared-memory rings carrying
 * rpcjmp_msg messages. See rpcjmp.h and rpcjmp_msg.h. */
#include "rpcjmp_msg.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define HDR ((size_t)sizeof(struct rpcjmp_msg))
#define SLOT_DATA 56
#define CLIENT_TIMEOUT_MS 10000

/* A cache-line slot as in FastForward: the producer fills a slot whose flag is 0 and sets it
 * to 1; the consumer copies it out and sets it back to 0. No shared head or tail index, so
 * the two sides touch each other's lines only when a slot changes hands. */
struct ring_slot {
    alignas(64) _Atomic uint32_t full;
    uint32_t n;
    uint8_t data[SLOT_DATA];
};

struct rpcjmp_ring_pair {
    alignas(64) _Atomic pid_t pid[2];   /* each side's process, for noticing a dead peer */
    struct ring_slot ring[2][RPCJMP_RING_SLOTS]; /* ring[s] carries side s's messages */
};

const char *rpcjmp_transport_name(int transport)
{
    switch (transport) {
    case RPCJMP_PIPE: return "pipe";
    case RPCJMP_STREAM: return "stream";
    case RPCJMP_SEQPACKET: return "seqpacket";
    case RPCJMP_RING: return "ring";
    default: return "?";
    }
}

static void chan_init(struct rpcjmp_chan *ch, int transport)
{
    memset(ch, 0, sizeof *ch);
    ch->transport = transport;
    ch->rfd = ch->wfd = -1;
}

static int errno_code(const char *what, int transport)
{
    int e = errno;
    return exomem_set_error(e == ENOMEM ? EXO_ENOMEM : EXO_EIO, "rpcjmp: %s channel: %s: %s",
                            rpcjmp_transport_name(transport), what, strerror(e));
}

int rpcjmp_chan_pair(int transport, struct rpcjmp_chan *client, struct rpcjmp_chan *server)
{
    chan_init(client, transport);
    chan_init(server, transport);
    client->timeout_ms = CLIENT_TIMEOUT_MS;
    server->side = 1;
    int a[2], b[2];
    switch (transport) {
    case RPCJMP_PIPE:
        if (pipe2(a, O_CLOEXEC) != 0)
            return errno_code("pipe", transport);
        if (pipe2(b, O_CLOEXEC) != 0) {
            int rc = errno_code("pipe", transport);
            close(a[0]);
            close(a[1]);
            return rc;
        }
        client->wfd = a[1];
        server->rfd = a[0];
        server->wfd = b[1];
        client->rfd = b[0];
        return 0;
    case RPCJMP_STREAM:
    case RPCJMP_SEQPACKET:
        if (socketpair(AF_UNIX, (transport == RPCJMP_STREAM ? SOCK_STREAM : SOCK_SEQPACKET) |
                       SOCK_CLOEXEC, 0, a) != 0)
            return errno_code("socketpair", transport);
        client->rfd = client->wfd = a[0];
        server->rfd = server->wfd = a[1];
        if (transport == RPCJMP_SEQPACKET &&
            !(server->bounce = malloc(HDR + RPCJMP_PAYLOAD_MAX))) {
            close(a[0]);
            close(a[1]);
            return exomem_set_error(EXO_ENOMEM, "rpcjmp: no memory for a message buffer");
        }
        return 0;
    case RPCJMP_RING: {
        /* A mapping per end, of one memory file, so that each process unmaps its own end. */
        size_t size = sizeof(struct rpcjmp_ring_pair);
        int fd = memfd_create("rpcjmp-ring", MFD_CLOEXEC);
        if (fd < 0)
            return errno_code("memfd_create", transport);
        void *p = MAP_FAILED, *q = MAP_FAILED;
        if (ftruncate(fd, (off_t)size) == 0 &&
            (p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) != MAP_FAILED)
            q = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        int rc = q == MAP_FAILED ? errno_code("mmap", transport) : 0;
        close(fd);
        if (rc) {
            if (p != MAP_FAILED)
                munmap(p, size);
            return rc;
        }
        client->rings = p; /* zero-filled: every slot empty */
        server->rings = q;
        /* Both ends are this process's until another process uses one (bind_side), so a
         * server forked off waits for no client that died before its first request. */
        atomic_store(&client->rings->pid[0], getpid());
        atomic_store(&client->rings->pid[1], getpid());
        return 0;
    }
    default:
        return exomem_set_error(EXO_EINVAL, "rpcjmp: unknown transport %d", transport);
    }
}

int rpcjmp_chan_from_socket(int fd, bool server, struct rpcjmp_chan *ch)
{
    chan_init(ch, RPCJMP_STREAM);
    if (fd < 0)
        return exomem_set_error(EXO_EINVAL, "rpcjmp: no socket");
    ch->rfd = ch->wfd = fd;
    ch->side = server;
    return 0;
}

void rpcjmp_chan_close(struct rpcjmp_chan *ch)
{
    if (ch->rfd >= 0)
        close(ch->rfd);
    if (ch->wfd >= 0 && ch->wfd != ch->rfd)
        close(ch->wfd);
    if (ch->rings)
        munmap(ch->rings, sizeof(struct rpcjmp_ring_pair));
    free(ch->bounce);
    chan_init(ch, ch->transport);
}

/* ---- pipes and sockets ---- */

static int write_all(struct rpcjmp_chan *ch, struct iovec *iov, int iovcnt)
{
    while (iovcnt > 0) {
        ssize_t n;
        if (ch->transport == RPCJMP_PIPE) {
            n = writev(ch->wfd, iov, iovcnt);
        } else {
            struct msghdr m = { .msg_iov = iov, .msg_iovlen = (size_t)iovcnt };
            n = sendmsg(ch->wfd, &m, MSG_NOSIGNAL);
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return errno_code("send", ch->transport);
        while (iovcnt > 0 && (size_t)n >= iov->iov_len) {
            n -= (ssize_t)iov->iov_len;
            iov++;
            iovcnt--;
        }
        if (iovcnt > 0) {
            iov->iov_base = (uint8_t *)iov->iov_base + n;
            iov->iov_len -= (size_t)n;
        }
    }
    return 0;
}

/* 0, 1 when the channel ended before the first byte (and may_end), or -EXO_EIO. */
static int read_all(struct rpcjmp_chan *ch, void *dst, size_t len, bool may_end)
{
    uint8_t *p = dst;
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(ch->rfd, p + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0 && got == 0 && may_end)
            return 1;
        if (n == 0) {
            errno = EPIPE;
            return errno_code("receive (closed in the middle of a message)", ch->transport);
        }
        if (n < 0)
            return errno_code("receive", ch->transport);
        got += (size_t)n;
    }
    return 0;
}

/* One SOCK_SEQPACKET message into hdr and dst (at most cap payload bytes). */
static int recv_packet(struct rpcjmp_chan *ch, struct rpcjmp_msg *h, void *dst, size_t cap,
                       size_t *payload)
{
    struct iovec iov[2] = { { h, HDR }, { dst, cap } };
    struct msghdr m = { .msg_iov = iov, .msg_iovlen = 2 };
    ssize_t n;
    while ((n = recvmsg(ch->rfd, &m, 0)) < 0 && errno == EINTR)
        ;
    if (n == 0)
        return 1;
    if (n < 0)
        return errno_code("receive", ch->transport);
    if ((size_t)n < HDR || (m.msg_flags & MSG_TRUNC) || (size_t)n - HDR != h->len)
        return exomem_set_error(EXO_EIO, "rpcjmp: seqpacket channel: a malformed message "
                                "(%zd bytes)", n);
    *payload = (size_t)n - HDR;
    return 0;
}

/* ---- rings ---- */

static void bind_side(struct rpcjmp_chan *ch)
{
    if (!ch->bound) {
        atomic_store(&ch->rings->pid[ch->side], getpid());
        ch->bound = true;
    }
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Wait until *flag == want: spin, and give the CPU away every 64 polls, so that a peer on
 * the same CPU gets to run (a pure spin would hold the CPU for a whole time slice). Every
 * 16384 polls: has the peer died, or is the deadline past? */
static int ring_wait(struct rpcjmp_chan *ch, _Atomic uint32_t *flag, uint32_t want)
{
    uint64_t deadline = 0;
    for (unsigned polls = 1;; polls++) {
        if (atomic_load_explicit(flag, memory_order_acquire) == want)
            return 0;
        if (polls % 64 == 0)
            sched_yield();
        else
            __builtin_ia32_pause();
        if (polls % 16384 == 0) {
            pid_t peer = atomic_load(&ch->rings->pid[!ch->side]);
            if (peer > 0 && kill(peer, 0) != 0 && errno == ESRCH)
                return exomem_set_error(EXO_EIO, "rpcjmp: ring channel: the peer (pid %d) "
                                        "is gone", (int)peer);
            if (ch->timeout_ms > 0) {
                uint64_t now = now_ms();
                if (!deadline)
                    deadline = now + (uint64_t)ch->timeout_ms;
                else if (now > deadline)
                    return exomem_set_error(EXO_EIO, "rpcjmp: ring channel: no answer in "
                                            "%d ms", ch->timeout_ms);
            }
        }
    }
}

static int ring_send(struct rpcjmp_chan *ch, const struct rpcjmp_msg *h, const void *payload)
{
    bind_side(ch);
    struct ring_slot *ring = ch->rings->ring[ch->side];
    const uint8_t *part[2] = { (const uint8_t *)h, payload };
    size_t left[2] = { HDR, h->len };
    struct ring_slot *s = NULL;
    size_t off = SLOT_DATA; /* "the current slot is full": take a new one first */
    for (int i = 0; i < 2; i++) {
        while (left[i] > 0) {
            if (off == SLOT_DATA) {
                if (s) { /* publish the full slot */
                    s->n = SLOT_DATA;
                    atomic_store_explicit(&s->full, 1, memory_order_release);
                }
                s = &ring[ch->tx];
                ch->tx = (ch->tx + 1) % RPCJMP_RING_SLOTS;
                int rc = ring_wait(ch, &s->full, 0);
                if (rc)
                    return rc;
                off = 0;
            }
            size_t c = left[i] < SLOT_DATA - off ? left[i] : SLOT_DATA - off;
            memcpy(s->data + off, part[i], c);
            part[i] += c;
            left[i] -= c;
            off += c;
        }
    }
    s->n = (uint32_t)off; /* the header is never empty, so s is set */
    atomic_store_explicit(&s->full, 1, memory_order_release);
    return 0;
}

/* Take len bytes of the peer's messages; a message ends at a slot's end. */
static int ring_recv(struct rpcjmp_chan *ch, void *dst, size_t len)
{
    bind_side(ch);
    struct ring_slot *ring = ch->rings->ring[!ch->side];
    uint8_t *p = dst;
    while (len > 0) {
        struct ring_slot *s = &ring[ch->rx];
        if (ch->rx_off == 0) {
            int rc = ring_wait(ch, &s->full, 1);
            if (rc)
                return rc;
        }
        size_t c = s->n - ch->rx_off < len ? s->n - ch->rx_off : len;
        memcpy(p, s->data + ch->rx_off, c);
        p += c;
        len -= c;
        ch->rx_off += (unsigned)c;
        if (ch->rx_off == s->n) { /* hand the slot back */
            atomic_store_explicit(&s->full, 0, memory_order_release);
            ch->rx = (ch->rx + 1) % RPCJMP_RING_SLOTS;
            ch->rx_off = 0;
        }
    }
    return 0;
}

/* ---- messages ---- */

int rpcjmp_chan_send(struct rpcjmp_chan *ch, const struct rpcjmp_msg *h, const void *payload)
{
    if (ch->transport == RPCJMP_RING)
        return ring_send(ch, h, payload);
    struct iovec iov[2] = { { (void *)h, HDR }, { (void *)payload, h->len } };
    return write_all(ch, iov, h->len ? 2 : 1);
}

int rpcjmp_chan_recv_hdr(struct rpcjmp_chan *ch, struct rpcjmp_msg *h)
{
    switch (ch->transport) {
    case RPCJMP_RING:
        return ring_recv(ch, h, HDR);
    case RPCJMP_SEQPACKET:
        ch->bounce_off = 0;
        return recv_packet(ch, h, ch->bounce, RPCJMP_PAYLOAD_MAX, &ch->bounce_len);
    default:
        return read_all(ch, h, HDR, true);
    }
}

int rpcjmp_chan_recv_body(struct rpcjmp_chan *ch, void *dst, size_t len)
{
    switch (ch->transport) {
    case RPCJMP_RING:
        return ring_recv(ch, dst, len);
    case RPCJMP_SEQPACKET:
        if (len > ch->bounce_len - ch->bounce_off)
            return exomem_set_error(EXO_EIO, "rpcjmp: seqpacket channel: message too short");
        memcpy(dst, ch->bounce + ch->bounce_off, len);
        ch->bounce_off += len;
        return 0;
    default:
        return read_all(ch, dst, len, false);
    }
}

int rpcjmp_chan_recv(struct rpcjmp_chan *ch, struct rpcjmp_msg *h, void *dst, size_t cap)
{
    if (ch->transport == RPCJMP_SEQPACKET) {
        size_t n;
        return recv_packet(ch, h, dst, cap, &n);
    }
    int rc = rpcjmp_chan_recv_hdr(ch, h);
    if (rc)
        return rc;
    if (h->len > cap)
        return exomem_set_error(EXO_EIO, "rpcjmp: %s channel: a %u-byte payload for a "
                                "%zu-byte buffer", rpcjmp_transport_name(ch->transport),
                                h->len, cap);
    return rpcjmp_chan_recv_body(ch, dst, h->len);
}
