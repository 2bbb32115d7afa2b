/* A RESP server over the store, so that redis-cli and redis-benchmark can talk to it: one
 * process, poll() over a UNIX socket and its connections, every request run with
 * kvjmp_exec() (the server is just another client that switches in and out per request). */
#include "kvjmp.h"

#include <exomem/error.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_CONNS 1024
#define MAX_ARGS 4096

struct conn {
    int fd;
    struct kvjmp_buf in, out;
};

static int listen_on(const char *path)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof a.sun_path)
        return exomem_set_error(EXO_ENAMETOOLONG, "kvjmp serve: socket path too long: %s", path);
    strcpy(a.sun_path, path);
    unlink(path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 512) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return exomem_set_error(EXO_EIO, "kvjmp serve: cannot listen on %s: %s", path,
                                strerror(e));
    }
    return fd;
}

/* Run every complete request in c->in; 0, or -1 to drop the connection. */
static int run_requests(struct kvjmp *kv, struct conn *c, const char **argv, size_t *argvlen)
{
    size_t off = 0;
    int rc = 0;
    while (off < c->in.len) {
        int argc = 0;
        long k = kvjmp_resp_parse_request(c->in.data + off, c->in.len - off, MAX_ARGS, &argc,
                                          argv, argvlen);
        if (k == 0)
            break;
        if (k < 0) {
            kvjmp_buf_put(&c->out, "-ERR Protocol error\r\n", 21);
            rc = -1;
            break;
        }
        off += (size_t)k;
        if (argc == 0)
            continue;
        int e = kvjmp_exec(kv, argc, argv, argvlen, &c->out);
        if (e < 0) {
            char m[300];
            int n = snprintf(m, sizeof m, "-ERR kvjmp: %s\r\n", exomem_last_error());
            kvjmp_buf_put(&c->out, m, (size_t)n < sizeof m ? (size_t)n : sizeof m - 1);
        }
    }
    memmove(c->in.data, c->in.data + off, c->in.len - off);
    c->in.len -= off;
    return rc;
}

static void drop(struct conn *c)
{
    close(c->fd);
    kvjmp_buf_free(&c->in);
    kvjmp_buf_free(&c->out);
    c->fd = -1;
}

/* Read what is there, answer it, write what can be written; 0 or -1 (drop). */
static int serve_conn(struct kvjmp *kv, struct conn *c, short revents, const char **argv,
                      size_t *argvlen)
{
    if (revents & (POLLIN | POLLHUP | POLLERR)) {
        char buf[65536];
        ssize_t r = read(c->fd, buf, sizeof buf);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
            return -1;
        if (r > 0 && (kvjmp_buf_put(&c->in, buf, (size_t)r) != 0 ||
                      run_requests(kv, c, argv, argvlen) != 0))
            revents |= POLLHUP; /* answer what we can, then drop */
    }
    size_t off = 0;
    while (off < c->out.len) {
        ssize_t w = write(c->fd, c->out.data + off, c->out.len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN)
            break;
        if (w <= 0)
            return -1;
        off += (size_t)w;
    }
    memmove(c->out.data, c->out.data + off, c->out.len - off);
    c->out.len -= off;
    return (revents & POLLHUP) && c->out.len == 0 ? -1 : 0;
}

int kvjmp_serve(const char *name, const char *path, volatile int *stop)
{
    struct kvjmp *kv;
    int rc = kvjmp_open(name, &kv);
    if (rc)
        return rc;
    int lfd = listen_on(path);
    if (lfd < 0) {
        kvjmp_close(kv);
        return lfd;
    }
    static struct conn conns[MAX_CONNS];
    static struct pollfd pfd[MAX_CONNS + 1];
    static const char *argv[MAX_ARGS];
    static size_t argvlen[MAX_ARGS];
    int n = 0;
    while (!*stop) {
        pfd[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
        for (int i = 0; i < n; i++)
            pfd[i + 1] = (struct pollfd){ .fd = conns[i].fd,
                                          .events = POLLIN | (conns[i].out.len ? POLLOUT : 0) };
        int r = poll(pfd, (nfds_t)n + 1, 100);
        if (r < 0 && errno != EINTR) {
            rc = exomem_set_error(EXO_EIO, "kvjmp serve: poll: %s", strerror(errno));
            break;
        }
        if (r <= 0)
            continue;
        for (int i = 0; i < n; i++)
            if (pfd[i + 1].revents && serve_conn(kv, &conns[i], pfd[i + 1].revents, argv,
                                                 argvlen) != 0)
                drop(&conns[i]);
        int k = 0; /* compact the dropped ones away */
        for (int i = 0; i < n; i++)
            if (conns[i].fd >= 0)
                conns[k++] = conns[i];
        n = k;
        if (pfd[0].revents & POLLIN) {
            int fd;
            while (n < MAX_CONNS && (fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0)
                conns[n++] = (struct conn){ .fd = fd };
        }
    }
    for (int i = 0; i < n; i++)
        drop(&conns[i]);
    close(lfd);
    unlink(path);
    int r2 = kvjmp_close(kv);
    return rc ? rc : r2;
}
