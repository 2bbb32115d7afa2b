/* io_uring through Debian's liburing (os_uring.h): rings, and one request at a time through
 * them, waited for. */
#include "os/os_uring.h"
#include "os/os.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>

/* Largest request: read and write take an unsigned length. */
#define MAX_REQUEST ((size_t)1 << 30)
/* Submissions refused with EAGAIN or EBUSY (no kernel memory for the request just now) are
 * tried this many times. */
#define SUBMIT_TRIES 16

int exo_os_ring_open(struct io_uring *ring, unsigned entries)
{
    memset(ring, 0, sizeof *ring);
    ring->ring_fd = -1;
    int rc;
    if (exo_os_fault(EXO_FAULT_OPEN))
        rc = -errno;
    else
        rc = io_uring_queue_init(entries, ring, 0); /* liburing: -errno, errno untouched */
    if (rc == 0)
        return 0;
    memset(ring, 0, sizeof *ring);
    ring->ring_fd = -1;
    errno = -rc;
    if (errno == ENOSYS || errno == EPERM)
        return -EXO_ENOTSUP;
    return -exo_os_code(errno);
}

void exo_os_ring_close(struct io_uring *ring)
{
    if (ring->ring_fd >= 0)
        io_uring_queue_exit(ring);
    memset(ring, 0, sizeof *ring);
    ring->ring_fd = -1;
}

/* The ring broke (a failure that may leave a request queued or in flight): make a fresh one
 * of the same size, so that nothing stale is ever submitted with a later request. */
static void ring_reset(struct io_uring *ring)
{
    unsigned entries = ring->sq.ring_entries;
    int saved = errno;
    exo_os_ring_close(ring);
    exo_os_ring_open(ring, entries ? entries : 1);
    errno = saved;
}

/* Submit one read or write and wait for it: its result (bytes, or -errno), or -errno of
 * io_uring_enter itself. */
static long ring_one(struct io_uring *ring, bool write, int fd, void *buf, size_t len,
                     off_t off)
{
    if (ring->ring_fd < 0) { /* a reset could not make a new ring */
        ring_reset(ring);
        if (ring->ring_fd < 0)
            return -ENOMEM;
    }
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    if (!sqe) { /* never: one request at a time, and every one is waited for */
        ring_reset(ring);
        return -EBUSY;
    }
    unsigned n = (unsigned)(len < MAX_REQUEST ? len : MAX_REQUEST);
    if (write)
        io_uring_prep_write(sqe, fd, buf, n, (uint64_t)off);
    else
        io_uring_prep_read(sqe, fd, buf, n, (uint64_t)off);
    /* An interrupted io_uring_enter, or one short of kernel memory for the request for a
     * moment, leaves the request queued in the ring, and the next one submits it: retry
     * (EAGAIN and EBUSY a bounded number of times). */
    int rc, busy = 0;
    do
        rc = io_uring_submit_and_wait(ring, 1);
    while (rc == -EINTR || ((rc == -EAGAIN || rc == -EBUSY) && ++busy < SUBMIT_TRIES));
    if (rc < 0) {
        ring_reset(ring);
        return rc;
    }
    struct io_uring_cqe *cqe = NULL;
    do
        rc = io_uring_wait_cqe(ring, &cqe); /* no system call when it is there already */
    while (rc == -EINTR);
    if (rc < 0 || !cqe) {
        ring_reset(ring);
        return rc < 0 ? rc : -EIO;
    }
    long res = cqe->res;
    io_uring_cqe_seen(ring, cqe);
    return res;
}

long exo_os_ring_pread_some(struct io_uring *ring, int fd, void *buf, size_t len, off_t off)
{
    long n;
    do {
        if (exo_os_fault(EXO_FAULT_READ))
            n = -errno;
        else
            n = ring_one(ring, false, fd, buf, len, off);
    } while (n == -EINTR);
    if (n >= 0)
        return n;
    errno = (int)-n;
    return -exo_os_code(errno);
}

int exo_os_ring_pwrite_all(struct io_uring *ring, int fd, const void *buf, size_t len,
                           off_t off)
{
    const char *p = buf;
    while (len > 0) {
        long n = exo_os_fault(EXO_FAULT_WRITE) ? -errno
                                                : ring_one(ring, true, fd, (void *)p, len, off);
        if (n == -EINTR)
            continue;
        if (n < 0) {
            errno = (int)-n;
            return -exo_os_code(errno);
        }
        if (n == 0) {
            errno = EIO;
            return -EXO_EIO; /* no progress: never loop forever */
        }
        p += n;
        len -= (size_t)n;
        off += n;
    }
    return 0;
}

int exo_os_ring_disabled(void)
{
    long v = exo_os_read_long("/proc/sys/kernel/io_uring_disabled");
    return v >= 0 && v <= 9 ? (int)v : -1;
}
