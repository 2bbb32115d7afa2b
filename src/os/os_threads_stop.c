/* What stopping a process's threads needs from the kernel (CARAT's moves): the list of its
 * threads, futex waits and wakes, and its writable mappings. Nothing here calls malloc or
 * stdio: these run while other threads are stopped, possibly inside malloc. */
#include "os/os.h"
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* Close fd and return rc: the one way out of a failed read below (errno saved first). */
static int close_with(int fd, int rc)
{
    close(fd);
    return rc;
}

int exo_os_list_threads(pid_t *tids, int max)
{
    int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -exo_os_code(errno);
    char buf[4096] __attribute__((aligned(8)));
    int n = 0;
    for (;;) {
        long got = syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (got < 0)
            return close_with(fd, -exo_os_code(errno));
        if (got == 0)
            break;
        for (long off = 0; off < got;) {
            struct linux_dirent64 *d = (struct linux_dirent64 *)(buf + off);
            off += d->d_reclen;
            if (d->d_name[0] < '0' || d->d_name[0] > '9')
                continue;
            if (n == max)
                return close_with(fd, -EXO_ENOSPC);
            tids[n++] = (pid_t)strtol(d->d_name, NULL, 10);
        }
    }
    close(fd);
    return n;
}

void exo_os_futex_wait(const uint32_t *word, uint32_t expected)
{
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

void exo_os_futex_wake_all(const uint32_t *word)
{
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
}

/* Parse a hex number at *p, leaving *p after it. */
static uintptr_t hex(const char **p)
{
    uintptr_t v = 0;
    for (;; (*p)++) {
        char c = **p;
        if (c >= '0' && c <= '9')
            v = v * 16 + (uintptr_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v = v * 16 + (uintptr_t)(c - 'a' + 10);
        else
            return v;
    }
}

int exo_os_writable_ranges(uintptr_t *ranges, int max, char *buf, size_t buf_len)
{
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -exo_os_code(errno);
    size_t len = 0;
    for (;;) {
        if (len == buf_len - 1)
            return close_with(fd, -EXO_ENOSPC);
        ssize_t got = read(fd, buf + len, buf_len - 1 - len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return close_with(fd, -exo_os_code(errno));
        if (got == 0)
            break;
        len += (size_t)got;
    }
    close(fd);
    buf[len] = 0;
    int n = 0;
    for (const char *p = buf; *p;) {
        uintptr_t lo = hex(&p);
        p++;                                  /* '-' */
        uintptr_t hi = hex(&p);
        p++;                                  /* ' ' */
        bool w = p[0] == 'r' && p[1] == 'w';  /* readable and writable */
        const char *nl = strchr(p, '\n');
        p = nl ? nl + 1 : p + strlen(p);
        if (!w)
            continue;
        if (n == max)
            return -EXO_ENOSPC;
        ranges[2 * n] = lo;
        ranges[2 * n + 1] = hi;
        n++;
    }
    return n;
}

uintptr_t exo_os_thread_pointer(void)
{
#if defined(__x86_64__)
    uintptr_t tp;
    __asm__("movq %%fs:0, %0" : "=r"(tp));   /* the descriptor's pointer to itself */
    return tp;
#else
    return 0;
#endif
}

int exo_os_thread_stack(uintptr_t *lo, uintptr_t *hi)
{
    pthread_attr_t attr;
    void *addr;
    size_t size;
    if (pthread_getattr_np(pthread_self(), &attr) != 0)
        return -EXO_EIO;
    int r = pthread_attr_getstack(&attr, &addr, &size);
    pthread_attr_destroy(&attr);
    if (r != 0)
        return -EXO_EIO;
    *lo = (uintptr_t)addr;
    *hi = (uintptr_t)addr + size;
    return 0;
}
