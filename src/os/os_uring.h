/* src/os wrappers for io_uring (Debian's liburing): a ring, and one read or write through it,
 * waited for. Same conventions as os.h: 0 or a result, a negative exomem code on failure,
 * errno set to the kernel's error for the caller's message, EINTR retried, injected faults
 * (rings are OPEN, reads READ, writes WRITE, as for files). The wrappers keep no state; a
 * ring is the caller's, and one thread at a time may use it.
 *
 * Async-signal-safe: liburing makes these system calls itself (io_uring_setup, mmap,
 * io_uring_enter, munmap, close) and allocates nothing on these paths (it allocates only
 * for probes, which are not used here). */
#ifndef EXOMEM_OS_URING_H
#define EXOMEM_OS_URING_H

#include <liburing.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Make *ring with room for `entries` requests (rounded up to a power of two by the kernel).
 * -EXO_ENOTSUP when the kernel refuses io_uring itself: errno ENOSYS (built without it) or
 * EPERM (sysctl kernel.io_uring_disabled, a seccomp filter or an LSM); -EXO_ENOMEM, ... */
int exo_os_ring_open(struct io_uring *ring, unsigned entries);

/* Free a ring made by exo_os_ring_open (nothing for a ring that failed to open). */
void exo_os_ring_close(struct io_uring *ring);

/* One read of up to len bytes of fd at off through ring: the count read (0 at the end of
 * the file) or a -EXO_ code. Waits for the completion. */
long exo_os_ring_pread_some(struct io_uring *ring, int fd, void *buf, size_t len, off_t off);

/* Write exactly len bytes of buf to fd at off through ring (short writes go on). */
int exo_os_ring_pwrite_all(struct io_uring *ring, int fd, const void *buf, size_t len,
                           off_t off);

/* The sysctl kernel.io_uring_disabled: 0 (allowed), 1 (only for CAP_SYS_ADMIN and the group
 * kernel.io_uring_group), 2 (disabled); -1 when this kernel has no such sysctl. */
int exo_os_ring_disabled(void);

#endif
