/* Locks: OFD record locks for segments, flock for the registry.
 *
 * Both kinds belong to an open file description, so the kernel drops them when the holder
 * dies (even by SIGKILL) and a crashed process never blocks the next one. */
#include "os/os.h"
#include "internal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <string.h>
#include <stdio.h>
#include <sys/file.h>

int exo_os_lock(int fd, enum exo_lock_mode mode, bool wait)
{
    if (exo_os_fault(EXO_FAULT_LOCK))
        return -exo_os_code(errno);
    struct flock fl = {
        .l_type = mode == EXO_LOCK_EXCLUSIVE ? F_WRLCK : mode == EXO_LOCK_SHARED ? F_RDLCK
                                                                                 : F_UNLCK,
        .l_whence = SEEK_SET,
        .l_start = 0,
        .l_len = 0, /* the whole file, however large it grows */
        .l_pid = 0, /* required to be 0 for OFD locks */
    };
    for (;;) {
        if (fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl) == 0)
            return 0;
        if (errno == EINTR && wait)
            continue;
        if (errno == EAGAIN || errno == EACCES)
            return -EXO_EBUSY;
        return -exo_os_code(errno);
    }
}

int exo_os_unlock(int fd)
{
    return exo_os_lock(fd, EXO_LOCK_NONE, false);
}

int exo_os_flock(int fd, bool exclusive, long timeout_ms)
{
    if (exo_os_fault(EXO_FAULT_LOCK))
        return -exo_os_code(errno);
    /* Poll with a growing sleep (1 ms to 50 ms) rather than block: a registry lock file can
     * be opened by any user of the registry, and nobody must be able to stall the others
     * forever by holding it. */
    long waited_us = 0, step_us = 1000;
    while (flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
        if (errno == EINTR)
            continue;
        if (errno != EWOULDBLOCK)
            return -exo_os_code(errno);
        if (waited_us >= timeout_ms * 1000)
            return -EXO_EBUSY;
        exo_os_sleep_ns(step_us * 1000);
        waited_us += step_us;
        step_us = step_us * 2 > 50000 ? 50000 : step_us * 2;
    }
    return 0;
}

int exo_os_flock_holder(int fd)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return 0;
    FILE *f = fopen("/proc/locks", "re");
    if (!f)
        return 0;
    char line[256];
    int holder = 0;
    while (!holder && fgets(line, sizeof line, f)) {
        int pid;
        unsigned maj, min;
        unsigned long ino;
        char *flock_at = strstr(line, "FLOCK");
        if (flock_at && !strstr(line, "->") &&
            sscanf(flock_at, "FLOCK %*s %*s %d %x:%x:%lu", &pid, &maj, &min, &ino) == 4 &&
            ino == (unsigned long)st.st_ino)
            holder = pid;
    }
    fclose(f);
    return holder;
}

int exo_os_funlock(int fd)
{
    if (flock(fd, LOCK_UN) != 0)
        return -exo_os_code(errno);
    return 0;
}
