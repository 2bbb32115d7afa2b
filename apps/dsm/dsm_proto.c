/* dsm wire protocol: sending and receiving one packet (see dsm_proto.h). */
#include "dsm_proto.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

int dsm_send(int fd, uint32_t type, uint32_t page, uint32_t arg, const void *data, uint32_t len)
{
    struct dsm_msg_hdr h = { .type = type, .page = page, .arg = arg, .len = len };
    struct iovec iov[2] = { { &h, sizeof h }, { (void *)data, len } };
    struct msghdr mh = { .msg_iov = iov, .msg_iovlen = len ? 2 : 1 };
    for (;;) {
        ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL);
        if (n == (ssize_t)(sizeof h + len))
            return 0;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
            return -EPIPE;
        return n < 0 ? -errno : -EPROTO;
    }
}

int dsm_recv(int fd, struct dsm_msg *m, int timeout_ms)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };
    for (;;) {
        int r = poll(&p, 1, timeout_ms);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            return -ETIMEDOUT;
        ssize_t n = recv(fd, m, sizeof *m, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno == ECONNRESET ? -EPIPE : -errno;
        if (n == 0)
            return -EPIPE;
        if ((size_t)n < sizeof m->h || (size_t)n != sizeof m->h + m->h.len)
            return -EPROTO;
        return 0;
    }
}
