/* The kernel's own paging as a peer (kernel_swap.h). */
#include "kernel_swap.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/swap.h>
#include <unistd.h>

#define CG_V1 "/sys/fs/cgroup/memory"
#define CG_V2 "/sys/fs/cgroup"
#define ZRAM "/sys/block/zram0"

static char cg_dir[256];
static char swap_file[512];
static bool zram_on, zram_touched, file_on, cleanup_armed;
static pid_t owner;   /* the process that made it all: forked children must not undo it */

static int write_text(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = write(fd, text, strlen(text));
    int err = n < 0 ? errno : 0;
    close(fd);
    return n < 0 ? -err : 0;
}

static void arm_cleanup(void)
{
    if (!cleanup_armed) {
        cleanup_armed = true;
        owner = getpid();
        atexit(kswap_cleanup);
    }
}

const char *kswap_cgroup_make(uint64_t limit_bytes)
{
    static char why[512];
    if (geteuid() != 0)
        return "needs root (memory cgroup and swap)";
    arm_cleanup();
    char num[32];
    snprintf(num, sizeof num, "%llu", (unsigned long long)limit_bytes);
    if (!cg_dir[0]) {
        bool v1 = access(CG_V1 "/memory.limit_in_bytes", F_OK) == 0;
        snprintf(cg_dir, sizeof cg_dir, "%s/exomem-bench-%d", v1 ? CG_V1 : CG_V2, (int)getpid());
        if (mkdir(cg_dir, 0755) != 0 && errno != EEXIST) {
            snprintf(why, sizeof why, "cannot make a memory cgroup: %s", strerror(errno));
            cg_dir[0] = '\0';
            return why;
        }
    }
    char path[320];
    snprintf(path, sizeof path, "%s/memory.limit_in_bytes", cg_dir);
    if (access(path, F_OK) != 0)
        snprintf(path, sizeof path, "%s/memory.max", cg_dir);
    int rc = write_text(path, num);
    if (rc) {
        snprintf(why, sizeof why, "cannot set %s: %s", path, strerror(-rc));
        return why;
    }
    return NULL;
}

int kswap_cgroup_enter(pid_t pid)
{
    char path[320], num[32];
    snprintf(path, sizeof path, "%s/cgroup.procs", cg_dir);
    snprintf(num, sizeof num, "%d", (int)pid);
    return write_text(path, num);
}

/* A swap signature (the kernel's swap_header, version 1) on the first page of fd. */
static int write_swap_header(int fd, uint64_t bytes)
{
    long page = sysconf(_SC_PAGESIZE);
    unsigned char *h = calloc(1, (size_t)page);
    if (!h)
        return -ENOMEM;
    uint32_t version = 1, last_page = (uint32_t)(bytes / (uint64_t)page - 1), bad = 0;
    memcpy(h + 1024, &version, 4);
    memcpy(h + 1028, &last_page, 4);
    memcpy(h + 1032, &bad, 4);
    memcpy(h + page - 10, "SWAPSPACE2", 10);
    ssize_t n = pwrite(fd, h, (size_t)page, 0);
    free(h);
    return n == page ? 0 : -EIO;
}

static void all_off(void)
{
    if (zram_on && swapoff("/dev/zram0") == 0)
        zram_on = false;
    if (file_on && swapoff(swap_file) == 0)
        file_on = false;
}

static const char *zram_on_now(uint64_t bytes)
{
    static char why[256];
    if (access(ZRAM "/disksize", W_OK) != 0)
        return "no zram device (zram0) here";
    char num[32];
    zram_touched = true;
    write_text(ZRAM "/reset", "1");
    if (write_text(ZRAM "/comp_algorithm", "lz4") != 0)
        write_text(ZRAM "/comp_algorithm", "lzo-rle");
    snprintf(num, sizeof num, "%llu", (unsigned long long)bytes);
    int rc = write_text(ZRAM "/disksize", num);
    if (rc) {
        snprintf(why, sizeof why, "zram0 disksize: %s (in use?)", strerror(-rc));
        return why;
    }
    int fd = open("/dev/zram0", O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write_swap_header(fd, bytes) != 0) {
        if (fd >= 0)
            close(fd);
        return "cannot write a swap header on /dev/zram0";
    }
    close(fd);
    if (swapon("/dev/zram0", 0) != 0) {
        snprintf(why, sizeof why, "swapon /dev/zram0: %s", strerror(errno));
        return why;
    }
    zram_on = true;
    return NULL;
}

static const char *file_on_now(uint64_t bytes, const char *dir)
{
    static char why[600];
    snprintf(swap_file, sizeof swap_file, "%s/exomem-bench-swap-%d", dir, (int)getpid());
    int fd = open(swap_file, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(why, sizeof why, "cannot create %s: %s", swap_file, strerror(errno));
        return why;
    }
    /* Written, not fallocated: swapon refuses files with holes or unwritten extents on some
     * file systems. */
    static char chunk[1 << 20];
    int rc = 0;
    for (uint64_t off = 0; off < bytes && !rc; off += sizeof chunk)
        if (pwrite(fd, chunk, sizeof chunk, (off_t)off) != (ssize_t)sizeof chunk)
            rc = -errno;
    if (!rc)
        rc = write_swap_header(fd, bytes);
    if (!rc && fsync(fd) != 0)
        rc = -errno;
    close(fd);
    if (rc || swapon(swap_file, 0) != 0) {
        snprintf(why, sizeof why, "swap file %s: %s", swap_file, strerror(rc ? -rc : errno));
        unlink(swap_file);
        return why;
    }
    file_on = true;
    return NULL;
}

const char *kswap_use(enum kswap_device dev, uint64_t bytes, const char *dir)
{
    if (geteuid() != 0)
        return "needs root (swapon)";
    arm_cleanup();
    if ((dev == KSWAP_ZRAM && zram_on) || (dev == KSWAP_FILE && file_on))
        return NULL;
    all_off();
    if (zram_on || file_on)
        return "cannot turn the other swap device off";
    if (dev == KSWAP_ZRAM)
        return zram_on_now(bytes);
    if (dev == KSWAP_FILE)
        return file_on_now(bytes, dir);
    return NULL;
}

bool kswap_foreign_swap(void)
{
    FILE *f = fopen("/proc/swaps", "re");
    if (!f)
        return false;
    char line[512];
    bool foreign = false;
    if (fgets(line, sizeof line, f)) /* header */
        while (fgets(line, sizeof line, f))
            if (!strstr(line, "/dev/zram0") && !strstr(line, "exomem-bench-swap-"))
                foreign = true;
    fclose(f);
    return foreign;
}

void kswap_cleanup(void)
{
    if (!cleanup_armed || getpid() != owner)
        return;
    all_off();
    if (zram_touched && !zram_on && access(ZRAM "/reset", W_OK) == 0)
        write_text(ZRAM "/reset", "1");
    if (swap_file[0] && !file_on) {
        unlink(swap_file);
        swap_file[0] = '\0';
    }
    if (cg_dir[0] && rmdir(cg_dir) == 0)
        cg_dir[0] = '\0';
}
