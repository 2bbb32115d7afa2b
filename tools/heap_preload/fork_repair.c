/* Repair of a heap on 1 GiB pages that fork() failed to give the child.
 *
 * The heap is a private hugetlb mapping, so a forked child should share its pages
 * copy-on-write. On the kernel measured here (6.18, see docs/launcher.md), fork() now and then
 * leaves a 1 GiB page out of the child's page table: the child's first touch then faults in a
 * fresh zero page from the pool, and the child runs on an empty heap (Open MPI's forked child
 * followed the dynamic linker's lists into it and crashed: hpcc's "Local abort before
 * MPI_INIT"). 2 MiB pages never showed it.
 *
 * So around each fork, with the heap's lock held (no allocation changes the heap meanwhile):
 * the parent notes which heap pages it has; the child checks which of those it lacks and, if
 * any, tells the parent and waits; the parent writes those pages into the child with
 * process_vm_writev (a parent may write into its child even where the Yama LSM forbids the
 * other direction) and lets it go on. A child that cannot be repaired exits with status 127
 * and a message rather than run on a heap that is not its own.
 *
 * The cost, paid only for 1 GiB heap pages: two pipes and one message per fork, and on a
 * miss the copy a copy-on-write fault would have made anyway.
 */
#include "fork_repair.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_PAGES 256   /* heaps up to 256 GiB are checked */

static uintptr_t heap_base;
static size_t page_size, npages;
static unsigned char parent_has[MAX_PAGES];
static int to_parent[2] = {-1, -1}, to_child[2] = {-1, -1};
static bool armed;   /* this fork is checked: the pipes are open */

/* The child's report: its pid and the pages it lacks. */
struct report {
    pid_t pid;
    uint32_t count;
    uint32_t page[MAX_PAGES];
};

void fork_repair_init(uintptr_t base, size_t size, size_t page)
{
    if (page < ((size_t)1 << 30) || size / page > MAX_PAGES)
        return;
    heap_base = base;
    page_size = page;
    npages = size / page;
}

static void close_pair(int fds[2])
{
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0) {
            close(fds[i]);
            fds[i] = -1;
        }
}

/* Which heap pages this process has in its page table. mincore() reports per base page even
 * for hugetlb, so ask for the first 4 KiB of each huge page: one byte each. */
static bool pages_present(unsigned char *out)
{
    for (size_t i = 0; i < npages; i++) {
        unsigned char v;
        if (mincore((void *)(heap_base + i * page_size), 4096, &v) != 0)
            return false;
        out[i] = v & 1;
    }
    return true;
}

void fork_repair_prepare(void)
{
    armed = false;
    if (!npages || !pages_present(parent_has))
        return;
    if (pipe2(to_parent, O_CLOEXEC) != 0)
        return;
    if (pipe2(to_child, O_CLOEXEC) != 0) {
        close_pair(to_parent);
        return;
    }
    armed = true;
}

static bool write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        p += n;
        len -= (size_t)n;
    }
    return true;
}

static size_t read_full(int fd, void *buf, size_t len)
{
    char *p = buf;
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, p + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    return got;
}

void fork_repair_child(void)
{
    if (!armed)
        return;
    armed = false;
    close(to_parent[0]);
    close(to_child[1]);
    struct report r = {.pid = getpid()};
    unsigned char child_has[MAX_PAGES];
    if (!pages_present(child_has))
        memset(child_has, 1, sizeof child_has);   /* cannot tell: assume the kernel did it */
    for (size_t i = 0; i < npages; i++)
        if (parent_has[i] && !child_has[i])
            r.page[r.count++] = (uint32_t)i;
    size_t len = offsetof(struct report, page) + r.count * sizeof r.page[0];
    bool sent = write_all(to_parent[1], &r, len);
    close(to_parent[1]);
    char verdict = 0;
    if (r.count && (!sent || read_full(to_child[0], &verdict, 1) != 1 || verdict != 1)) {
        static const char msg[] = "libexomem_heap: fork() did not give this child the heap's "
                                  "1 GiB pages and they could not be copied in; exiting\n";
        write_all(2, msg, sizeof msg - 1);
        _exit(127);
    }
    close(to_child[0]);
    to_parent[0] = to_parent[1] = to_child[0] = to_child[1] = -1;
}

/* Copy heap page i of this process into the same address in process pid. */
static bool copy_page_into(pid_t pid, uint32_t i)
{
    size_t off = 0;
    while (off < page_size) {
        void *at = (void *)(heap_base + (size_t)i * page_size + off);
        struct iovec local = {at, page_size - off}, remote = {at, page_size - off};
        ssize_t n = process_vm_writev(pid, &local, 1, &remote, 1, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        off += (size_t)n;
    }
    return true;
}

void fork_repair_parent(void)
{
    if (!armed)
        return;
    armed = false;
    /* Close our write end first: with no child (fork failed) the read below sees EOF. */
    close(to_parent[1]);
    close(to_child[0]);
    struct report r;
    size_t head = offsetof(struct report, page);
    size_t got = read_full(to_parent[0], &r, head);
    if (got == head && r.count > 0 && r.count <= npages &&
        read_full(to_parent[0], r.page, r.count * sizeof r.page[0]) ==
            r.count * sizeof r.page[0]) {
        char verdict = 1;
        for (uint32_t k = 0; k < r.count && verdict; k++)
            if (r.page[k] >= npages || !copy_page_into(r.pid, r.page[k]))
                verdict = 2;
        write_all(to_child[1], &verdict, 1);
    }
    close(to_parent[0]);
    close(to_child[1]);
    to_parent[0] = to_parent[1] = to_child[0] = to_child[1] = -1;
}
