/* Locks: OFD record locks for segments, flock for the registry.
 *
 * Both kinds belong to an open file description, so the kernel drops them when the holder
 * dies (even by SIGKILL) and a crashed process never blocks the next one. */
#include "os/os.h"
#include "internal.h"

#include <fcntl.h>
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

int exo_os_flock(int fd, bool exclusive)
{
    if (exo_os_fault(EXO_FAULT_LOCK))
        return -exo_os_code(errno);
    while (flock(fd, exclusive ? LOCK_EX : LOCK_SH) != 0) {
        if (errno != EINTR)
            return -exo_os_code(errno);
    }
    return 0;
}

int exo_os_funlock(int fd)
{
    if (flock(fd, LOCK_UN) != 0)
        return -exo_os_code(errno);
    return 0;
}
