/* The huge page test fixture (hugepool_fixture.h). */
#include "hugepool_fixture.h"
#include "harness.h"

#include <fcntl.h>
#include <mntent.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

long hp_pool_start[2] = {-1, -1};

static const char *pool_path(int k)
{
    return k == 0 ? "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
                  : "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages";
}

long hp_read_pool(int k)
{
    char buf[32] = "";
    int fd = open(pool_path(k), O_RDONLY);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    return n > 0 ? strtol(buf, NULL, 10) : -1;
}

/* Async-signal-safe: only open/write/close/umount2 with prepared strings. */
static char pool_text[2][24];
char hp_mount_dirs[3][4096];

static pid_t fixture_pid;

static void cleanup(void)
{
    if (getpid() != fixture_pid)
        return; /* a child of test_in_child() leaves the parent's mounts alone */
    for (int i = 0; i < 3; i++)
        if (hp_mount_dirs[i][0])
            umount2(hp_mount_dirs[i], MNT_DETACH);
    for (int k = 0; k < 2; k++) {
        if (hp_pool_start[k] < 0 || hp_read_pool(k) == hp_pool_start[k])
            continue;
        int fd = open(pool_path(k), O_WRONLY);
        if (fd >= 0) {
            if (write(fd, pool_text[k], strlen(pool_text[k])) < 0)
                (void)0;
            close(fd);
        }
    }
}

static void on_crash(int sig)
{
    cleanup();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* As root, run in a mount namespace of our own, without the huge page mounts other
 * programs made: the private-mount path is then always the one tested, another program
 * unmounting its hugetlbfs cannot pull the files from under this test, and whatever this
 * test mounts disappears with it even if it crashes. Other programs see none of this. */
static void private_namespace(void)
{
    if (geteuid() != 0 || unshare(CLONE_NEWNS) != 0 ||
        mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        return;
    FILE *f = setmntent("/proc/self/mounts", "r");
    if (!f)
        return;
    struct mntent *e;
    char dirs[16][1024];
    int n = 0;
    while ((e = getmntent(f)) != NULL && n < 16)
        if (!strcmp(e->mnt_type, "hugetlbfs") ||
            (!strcmp(e->mnt_type, "tmpfs") && hasmntopt(e, "huge")))
            snprintf(dirs[n++], sizeof dirs[0], "%s", e->mnt_dir);
    endmntent(f);
    while (n > 0)
        umount2(dirs[--n], MNT_DETACH);
}

const char *hp_fixture(void)
{
    private_namespace();
    const char *root = test_root_setup();
    fixture_pid = getpid();
    for (int k = 0; k < 2; k++) {
        hp_pool_start[k] = hp_read_pool(k);
        snprintf(pool_text[k], sizeof pool_text[k], "%ld\n", hp_pool_start[k]);
    }
    static const char *const kinds[] = {"2M", "1G", "thp"};
    for (int i = 0; i < 3; i++)
        snprintf(hp_mount_dirs[i], sizeof hp_mount_dirs[i], "%s/mnt/%s", root, kinds[i]);
    atexit(cleanup); /* runs before the registry's own removal (atexit is LIFO) */
    signal(SIGSEGV, on_crash);
    signal(SIGBUS, on_crash);
    signal(SIGABRT, on_crash);
    return root;
}

int hp_write_pool(int k, long pages)
{
    char text[24];
    int n = snprintf(text, sizeof text, "%ld\n", pages);
    int fd = open(pool_path(k), O_WRONLY);
    if (fd < 0)
        return -1;
    int rc = write(fd, text, (size_t)n) == n ? 0 : -1;
    close(fd);
    return rc;
}
