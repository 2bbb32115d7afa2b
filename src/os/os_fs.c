/* Names in the file system: directories, links, metadata and modes, for the registry and
 * the segments' data files. Each wrapper is one call (two for mkdir, which also undoes the
 * umask), retries nothing (none of these return EINTR on local file systems) and returns
 * 0 or -EXO_ code with errno kept for the caller's message. */
#include "os/os.h"
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int fail_code(void)
{
    return -exo_os_code(errno);
}

int exo_os_mkdir(const char *path, mode_t mode)
{
    if (exo_os_fault(EXO_FAULT_NAME))
        return fail_code();
    if (mkdir(path, mode) != 0)
        return fail_code();
    if (chmod(path, mode) != 0) { /* mkdir applied the umask: set the exact mode */
        int err = errno;
        rmdir(path);
        errno = err;
        return fail_code();
    }
    return 0;
}

int exo_os_rmdir(const char *path)
{
    if (exo_os_fault(EXO_FAULT_NAME))
        return fail_code();
    return rmdir(path) == 0 ? 0 : fail_code();
}

int exo_os_unlink(const char *path)
{
    if (exo_os_fault(EXO_FAULT_NAME))
        return fail_code();
    return unlink(path) == 0 ? 0 : fail_code();
}

int exo_os_link(const char *existing, const char *path)
{
    if (exo_os_fault(EXO_FAULT_NAME))
        return fail_code();
    return link(existing, path) == 0 ? 0 : fail_code();
}

int exo_os_symlink(const char *target, const char *path)
{
    if (exo_os_fault(EXO_FAULT_NAME))
        return fail_code();
    return symlink(target, path) == 0 ? 0 : fail_code();
}

int exo_os_readlink(const char *path, char *buf, size_t len)
{
    if (len == 0)
        return -EXO_EINVAL;
    if (exo_os_fault(EXO_FAULT_READ))
        return fail_code();
    ssize_t n = readlink(path, buf, len - 1);
    if (n < 0)
        return fail_code();
    buf[n] = '\0';
    return (int)n;
}

int exo_os_stat(const char *path, struct stat *st)
{
    if (exo_os_fault(EXO_FAULT_READ))
        return fail_code();
    return stat(path, st) == 0 ? 0 : fail_code();
}

int exo_os_lstat(const char *path, struct stat *st)
{
    if (exo_os_fault(EXO_FAULT_READ))
        return fail_code();
    return lstat(path, st) == 0 ? 0 : fail_code();
}

int exo_os_fstat(int fd, struct stat *st)
{
    if (exo_os_fault(EXO_FAULT_READ))
        return fail_code();
    return fstat(fd, st) == 0 ? 0 : fail_code();
}

int exo_os_chmod(const char *path, mode_t mode)
{
    if (exo_os_fault(EXO_FAULT_NAME))
        return fail_code();
    return chmod(path, mode) == 0 ? 0 : fail_code();
}

int exo_os_fchmod(int fd, mode_t mode)
{
    if (exo_os_fault(EXO_FAULT_NAME))
        return fail_code();
    return fchmod(fd, mode) == 0 ? 0 : fail_code();
}

int exo_os_dir_each(const char *dir, int (*each)(const char *name, void *arg), void *arg)
{
    if (exo_os_fault(EXO_FAULT_READ))
        return fail_code();
    DIR *d = opendir(dir);
    if (!d)
        return fail_code();
    int rc = 0;
    struct dirent *e;
    errno = 0;
    while (!rc && (e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        rc = each(e->d_name, arg);
        errno = 0;
    }
    if (!rc && errno != 0)
        rc = fail_code();
    int err = errno;
    closedir(d);
    errno = err;
    return rc;
}

static int stop_at_first(const char *name, void *arg)
{
    (void)name;
    (void)arg;
    return 1;
}

int exo_os_dir_is_empty(const char *dir)
{
    int rc = exo_os_dir_each(dir, stop_at_first, NULL);
    return rc < 0 ? rc : rc == 0;
}

uid_t exo_os_euid(void)
{
    return geteuid();
}

int exo_os_pid(void)
{
    return (int)getpid();
}

int exo_os_process_start(int pid, uint64_t *ticks)
{
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -exo_os_code(errno);
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = '\0';
    /* Field 22 (starttime); the command name (field 2) may hold spaces, so count from ')'. */
    char *p = strrchr(line, ')');
    for (int field = 2; p && field < 22; field++)
        p = strchr(p + 1, ' ');
    unsigned long long t;
    if (!p || sscanf(p + 1, "%llu", &t) != 1)
        return -EXO_EIO;
    *ticks = t;
    return 0;
}
