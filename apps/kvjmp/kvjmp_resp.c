/* RESP2, the Redis wire protocol: buffers, request parsing, reply framing, and a tiny
 * blocking client on a UNIX socket. */
#include "kvjmp.h"

#include <exomem/error.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int kvjmp_buf_put(struct kvjmp_buf *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d)
            return exomem_set_error(EXO_ENOMEM, "kvjmp: no memory for a %zu-byte buffer", cap);
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

void kvjmp_buf_free(struct kvjmp_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

/* A decimal number ending in CRLF at p[0..n): its value and the bytes it took (0 if
 * incomplete, -1 if malformed). */
static long read_number(const char *p, size_t n, long long *out)
{
    const char *cr = memchr(p, '\r', n);
    if (!cr)
        return n > 22 ? -1 : 0;
    size_t len = (size_t)(cr - p);
    if (len + 2 > n)
        return 0;
    if (cr[1] != '\n' || len == 0 || len > 20)
        return -1;
    long long v = 0;
    size_t i = p[0] == '-';
    if (i == len)
        return -1;
    for (; i < len; i++) {
        if (p[i] < '0' || p[i] > '9' || v > (LLONG_MAX - 9) / 10)
            return -1;
        v = v * 10 + (p[i] - '0');
    }
    *out = p[0] == '-' ? -v : v;
    return (long)len + 2;
}

long kvjmp_resp_reply_len(const char *p, size_t n)
{
    if (n == 0)
        return 0;
    long long v;
    long k;
    switch (p[0]) {
    case '+':
    case '-':
    case ':': {
        const char *nl = memchr(p, '\n', n);
        return nl ? (long)(nl - p) + 1 : 0;
    }
    case '$':
        if ((k = read_number(p + 1, n - 1, &v)) <= 0)
            return k;
        if (v < 0)
            return 1 + k;
        if ((size_t)(1 + k + v + 2) > n)
            return 0;
        return 1 + k + (long)v + 2;
    case '*': {
        if ((k = read_number(p + 1, n - 1, &v)) <= 0)
            return k;
        size_t off = 1 + (size_t)k;
        for (long long i = 0; i < v; i++) {
            long e = kvjmp_resp_reply_len(p + off, n - off);
            if (e <= 0)
                return e;
            off += (size_t)e;
        }
        return (long)off;
    }
    default:
        return -1;
    }
}

/* An inline command: words separated by spaces, up to CRLF or LF. */
static long parse_inline(char *p, size_t n, int max, int *argc, const char **argv,
                         size_t *argvlen)
{
    char *nl = memchr(p, '\n', n);
    if (!nl)
        return n > 65536 ? -1 : 0;
    char *end = nl > p && nl[-1] == '\r' ? nl - 1 : nl;
    int c = 0;
    for (char *q = p; q < end;) {
        while (q < end && *q == ' ')
            q++;
        if (q == end)
            break;
        char *w = q;
        while (q < end && *q != ' ')
            q++;
        if (c == max)
            return -1;
        argv[c] = w;
        argvlen[c++] = (size_t)(q - w);
    }
    *argc = c;
    return (long)(nl - p) + 1;
}

long kvjmp_resp_parse_request(char *p, size_t n, int max, int *argc, const char **argv,
                              size_t *argvlen)
{
    if (n == 0)
        return 0;
    if (p[0] != '*')
        return parse_inline(p, n, max, argc, argv, argvlen);
    long long cnt;
    long k = read_number(p + 1, n - 1, &cnt);
    if (k <= 0)
        return k;
    if (cnt > max || cnt < 0)
        return -1;
    size_t off = 1 + (size_t)k;
    for (long long i = 0; i < cnt; i++) {
        if (off >= n)
            return 0;
        if (p[off] != '$')
            return -1;
        long long len;
        if ((k = read_number(p + off + 1, n - off - 1, &len)) <= 0)
            return k;
        if (len < 0 || len > (512LL << 20))
            return -1;
        off += 1 + (size_t)k;
        if (off + (size_t)len + 2 > n)
            return 0;
        argv[i] = p + off;
        argvlen[i] = (size_t)len;
        off += (size_t)len + 2;
    }
    *argc = (int)cnt;
    return (long)off;
}

int kvjmp_resp_put_command(struct kvjmp_buf *b, int argc, const char *const *argv,
                           const size_t *argvlen)
{
    char h[32];
    int rc = kvjmp_buf_put(b, h, (size_t)snprintf(h, sizeof h, "*%d\r\n", argc));
    for (int i = 0; i < argc && rc == 0; i++) {
        rc = kvjmp_buf_put(b, h, (size_t)snprintf(h, sizeof h, "$%zu\r\n", argvlen[i]));
        if (rc == 0)
            rc = kvjmp_buf_put(b, argv[i], argvlen[i]);
        if (rc == 0)
            rc = kvjmp_buf_put(b, "\r\n", 2);
    }
    return rc;
}

int kvjmp_resp_connect(const char *path)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof a.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(a.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

int kvjmp_resp_call(int fd, int argc, const char *const *argv, const size_t *argvlen,
                    struct kvjmp_buf *reply)
{
    reply->len = 0;
    if (kvjmp_resp_put_command(reply, argc, argv, argvlen) != 0)
        return -1;
    for (size_t off = 0; off < reply->len;) {
        ssize_t w = write(fd, reply->data + off, reply->len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        off += (size_t)w;
    }
    reply->len = 0;
    for (;;) {
        long k = kvjmp_resp_reply_len(reply->data, reply->len);
        if (k > 0)
            return 0;
        if (k < 0) {
            errno = EPROTO;
            return -1;
        }
        char buf[16384];
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (r == 0)
                errno = ECONNRESET;
            return -1;
        }
        if (kvjmp_buf_put(reply, buf, (size_t)r) != 0)
            return -1;
    }
}
