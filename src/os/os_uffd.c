/* userfaultfd wrappers: open + API handshake, register, write-protect, wake, read. */
#include "os/os.h"
#include "os/os_vm.h"
#include "internal.h"

#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static int uffd_syscall(int flags)
{
#ifdef SYS_userfaultfd
    return (int)syscall(SYS_userfaultfd, flags);
#else
    errno = ENOSYS;
    return -1;
#endif
}

int exo_os_uffd_open(uint64_t features, uint64_t *got, int *fd, const char **why)
{
    int f = uffd_syscall(O_CLOEXEC | O_NONBLOCK);
    if (f < 0 && (errno == EPERM || errno == EACCES))
        /* vm.unprivileged_userfaultfd=0: only user-mode faults are allowed without
         * CAP_SYS_PTRACE, which is all the primitives need. */
        f = uffd_syscall(O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
    if (f < 0) {
        int e = errno;
        if (why)
            *why = e == ENOSYS ? "the kernel has no userfaultfd system call"
                 : (e == EPERM || e == EACCES) ? "userfaultfd is not permitted to this process "
                                                 "(vm.unprivileged_userfaultfd=0, no "
                                                 "CAP_SYS_PTRACE, user-mode-only refused)"
                                               : "userfaultfd() failed";
        errno = e;
        return e == ENOSYS || e == EPERM || e == EACCES ? -EXO_ENOTSUP : -exo_os_code(e);
    }
    struct uffdio_api api;
    memset(&api, 0, sizeof api);
    api.api = UFFD_API;
    api.features = features;
    if (ioctl(f, UFFDIO_API, &api) != 0) {
        int e = errno;
        close(f);
        if (why)
            *why = "the kernel refused the userfaultfd features asked for (UFFDIO_API)";
        errno = e;
        return -EXO_ENOTSUP;
    }
    if (got)
        *got = api.features;
    *fd = f;
    return 0;
}

int exo_os_uffd_register(int fd, uint64_t addr, uint64_t len, bool missing, bool wp,
                         uint64_t *ioctls)
{
    struct uffdio_register reg;
    memset(&reg, 0, sizeof reg);
    reg.range.start = addr;
    reg.range.len = len;
    reg.mode = (missing ? UFFDIO_REGISTER_MODE_MISSING : 0) | (wp ? UFFDIO_REGISTER_MODE_WP : 0);
    if (ioctl(fd, UFFDIO_REGISTER, &reg) != 0)
        return errno == EINVAL ? -EXO_ENOTSUP : -exo_os_code(errno);
    if (ioctls)
        *ioctls = reg.ioctls;
    return 0;
}

int exo_os_uffd_unregister(int fd, uint64_t addr, uint64_t len)
{
    struct uffdio_range range = {.start = addr, .len = len};
    if (ioctl(fd, UFFDIO_UNREGISTER, &range) != 0)
        return -exo_os_code(errno);
    return 0;
}

int exo_os_uffd_wp(int fd, uint64_t addr, uint64_t len, bool protect, bool dontwake)
{
    struct uffdio_writeprotect wp;
    memset(&wp, 0, sizeof wp);
    wp.range.start = addr;
    wp.range.len = len;
    wp.mode = (protect ? UFFDIO_WRITEPROTECT_MODE_WP : 0) |
              (dontwake ? UFFDIO_WRITEPROTECT_MODE_DONTWAKE : 0);
    if (exo_os_fault(EXO_FAULT_PROTECT))
        return -exo_os_code(errno);
    for (;;) {
        if (ioctl(fd, UFFDIO_WRITEPROTECT, &wp) == 0)
            return 0;
        if (errno != EAGAIN && errno != EINTR)
            return -exo_os_code(errno);
    }
}

int exo_os_uffd_copy(int fd, uint64_t dst, const void *src, uint64_t len, bool wp, bool dontwake)
{
    struct uffdio_copy copy;
    memset(&copy, 0, sizeof copy);
    copy.dst = dst;
    copy.src = (uint64_t)(uintptr_t)src;
    copy.len = len;
    copy.mode = (wp ? UFFDIO_COPY_MODE_WP : 0) | (dontwake ? UFFDIO_COPY_MODE_DONTWAKE : 0);
    for (;;) {
        if (exo_os_fault(EXO_FAULT_MAP))
            return -exo_os_code(errno);
        copy.copy = 0;
        if (ioctl(fd, UFFDIO_COPY, &copy) == 0)
            return 0;
        /* EAGAIN: the address space changed meanwhile (or a partial copy): go on from where
         * the kernel stopped. */
        if (errno == EAGAIN && copy.copy > 0) {
            copy.dst += (uint64_t)copy.copy;
            copy.src += (uint64_t)copy.copy;
            copy.len -= (uint64_t)copy.copy;
            continue;
        }
        if (errno != EAGAIN && errno != EINTR)
            return -exo_os_code(errno);
    }
}

int exo_os_uffd_zeropage(int fd, uint64_t dst, uint64_t len, bool dontwake)
{
    struct uffdio_zeropage zero;
    memset(&zero, 0, sizeof zero);
    zero.range.start = dst;
    zero.range.len = len;
    zero.mode = dontwake ? UFFDIO_ZEROPAGE_MODE_DONTWAKE : 0;
    for (;;) {
        zero.zeropage = 0;
        if (ioctl(fd, UFFDIO_ZEROPAGE, &zero) == 0)
            return 0;
        if (errno != EAGAIN && errno != EINTR)
            return -exo_os_code(errno);
    }
}

int exo_os_uffd_poison(int fd, uint64_t addr, uint64_t len)
{
    struct exo_uffdio_poison poison = {.start = addr, .len = len};
    for (;;) {
        poison.updated = 0;
        if (ioctl(fd, EXO_UFFDIO_POISON, &poison) == 0)
            return 0;
        if (errno != EAGAIN && errno != EINTR)
            return -exo_os_code(errno);
    }
}

int exo_os_uffd_wake(int fd, uint64_t addr, uint64_t len)
{
    struct uffdio_range range = {.start = addr, .len = len};
    if (ioctl(fd, UFFDIO_WAKE, &range) != 0)
        return -exo_os_code(errno);
    return 0;
}

int exo_os_uffd_wait(int fd, int stop_fd)
{
    struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = stop_fd, .events = POLLIN}};
    for (;;) {
        int n = poll(p, 2, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -exo_os_code(errno);
        if (p[1].revents)
            return 0;
        if (p[0].revents & (POLLERR | POLLHUP | POLLNVAL))
            return -EXO_EIO;
        if (p[0].revents)
            return 1;
    }
}

long exo_os_uffd_read(int fd, struct uffd_msg *msgs, size_t n)
{
    for (;;) {
        ssize_t got = read(fd, msgs, n * sizeof *msgs);
        if (got >= 0)
            return (long)((size_t)got / sizeof *msgs);
        if (errno == EAGAIN)
            return 0;
        if (errno != EINTR)
            return -exo_os_code(errno);
    }
}

int exo_os_eventfd(int *fd)
{
    int f = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (f < 0)
        return -exo_os_code(errno);
    *fd = f;
    return 0;
}

int exo_os_eventfd_poke(int fd)
{
    uint64_t one = 1;
    if (write(fd, &one, sizeof one) != (ssize_t)sizeof one)
        return -exo_os_code(errno);
    return 0;
}
