/* The uffd engine: userfaultfd write-protect.
 *
 * Trap regions: the range is registered for write-protect faults; protection is
 * UFFDIO_WRITEPROTECT on runs of pages, which changes page-table bits only and never splits
 * the process's mappings. A handler thread per region reads the faults, runs the user's
 * handler, and wakes the faulting thread. A declined fault is sent to the faulting thread as
 * SIGSEGV (tgkill), so it reaches the previous handler or kills the process as usual.
 *
 * Dirty regions: asynchronous write-protect (UFFD_FEATURE_WP_ASYNC): the kernel resolves
 * each write fault itself and clears the page's write-protect bit; PAGEMAP_SCAN reports the
 * pages without the bit (PAGE_IS_WRITTEN) and write-protects them again in the same walk,
 * under the page-table lock, so a write racing with the scan is never lost. */
#include "vm/vm_internal.h"
#include "internal.h"
#include "os/os.h"
#include "os/os_vm.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static uint64_t probe_features;
static int probe_rc;
static const char *probe_why;
static bool probe_scan; /* PAGEMAP_SCAN works */

static void probe(void)
{
    /* Documented knob (docs/appel-li.md): pretend the kernel has no userfaultfd, to test
     * the ENOTSUP paths and the AUTO fallback. */
    if (exo_config()->vm_disable_uffd) {
        probe_rc = -EXO_ENOTSUP;
        probe_why = "userfaultfd disabled by EXOMEM_VM_DISABLE_UFFD";
        return;
    }
    int fd;
    probe_rc = exo_os_uffd_open(0, &probe_features, &fd, &probe_why);
    if (probe_rc)
        return;
    exo_os_close(fd);
    int pm = exo_os_pagemap_open();
    if (pm >= 0) {
        /* An empty scan: 0 where the kernel knows the ioctl, ENOTTY where not. */
        struct exo_page_region vec[1];
        struct exo_pm_scan_arg a = {.size = sizeof a, .start = 0x10000, .end = 0x10000,
                                    .vec = (uintptr_t)vec, .vec_len = 1,
                                    .category_mask = EXO_PAGE_IS_WRITTEN,
                                    .return_mask = EXO_PAGE_IS_WRITTEN};
        probe_scan = exo_os_pagemap_scan(pm, &a) >= 0;
        exo_os_close(pm);
    }
}

int exo_vm_uffd_supported(unsigned flags, bool shmem, const char **why)
{
    pthread_once(&probe_once, probe);
    const char *reason = NULL;
    if (probe_rc)
        reason = probe_why;
    else if (!(probe_features & UFFD_FEATURE_PAGEFAULT_FLAG_WP))
        reason = "the kernel's userfaultfd has no write-protect (UFFD_FEATURE_PAGEFAULT_FLAG_WP)";
    else if (shmem && !(probe_features & UFFD_FEATURE_WP_HUGETLBFS_SHMEM))
        reason = "the kernel's userfaultfd cannot write-protect shared memory "
                 "(UFFD_FEATURE_WP_HUGETLBFS_SHMEM)";
    else if ((flags & EXO_VM_TRACK_DIRTY) && !(probe_features & UFFD_FEATURE_WP_ASYNC))
        reason = "the kernel's userfaultfd has no asynchronous write-protect "
                 "(UFFD_FEATURE_WP_ASYNC, Linux 6.7)";
    else if ((flags & EXO_VM_TRACK_DIRTY) && !probe_scan)
        reason = "the kernel has no PAGEMAP_SCAN ioctl (Linux 6.7)";
    if (why)
        *why = reason;
    return reason ? -EXO_ENOTSUP : 0;
}

static void handle_fault(struct exo_vm_region *r, const struct uffd_msg *m)
{
    uintptr_t addr = (uintptr_t)m->arg.pagefault.address;
    uintptr_t page = addr & ~(uintptr_t)(exo_vm_page() - 1);
    exo_vm_action act = EXO_VM_RESUME;
    if (page >= r->base && page - r->base < r->len &&
        (m->arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WP) &&
        atomic_load(&r->state[vm_page_index(r, page)]) < EXO_VM_READWRITE) {
        exo_vm_fault f = {.region = r, .addr = (void *)addr, .page = (void *)page,
                          .is_write = 1, .in_signal = 0};
        act = exo_vm_run_handler(r, &f);
    }
    if (act == EXO_VM_DECLINE && m->arg.pagefault.feat.ptid)
        /* Delivered when the thread leaves the fault: the previous SIGSEGV handler runs,
         * or the default action kills the process. */
        exo_os_signal_thread((pid_t)m->arg.pagefault.feat.ptid, SIGSEGV);
    exo_os_uffd_wake(r->uffd, page, exo_vm_page());
}

static void *handler_thread(void *p)
{
    struct exo_vm_region *r = p;
    struct uffd_msg msgs[16];
    while (exo_os_uffd_wait(r->uffd, r->stop_fd) > 0) {
        long n = exo_os_uffd_read(r->uffd, msgs, 16);
        if (n < 0)
            break;
        for (long i = 0; i < n; i++)
            if (msgs[i].event == UFFD_EVENT_PAGEFAULT)
                handle_fault(r, &msgs[i]);
    }
    return NULL;
}

/* Close whichever of the region's descriptors are open and mark them all closed. */
static void close_region_fds(struct exo_vm_region *r)
{
    if (r->uffd >= 0)
        exo_os_close(r->uffd);
    if (r->stop_fd >= 0)
        exo_os_close(r->stop_fd);
    if (r->pagemap_fd >= 0)
        exo_os_close(r->pagemap_fd);
    r->uffd = r->stop_fd = r->pagemap_fd = -1;
}

static int create_fail(struct exo_vm_region *r, int rc, const char *what)
{
    close_region_fds(r);
    return exo_vm_fail(rc, "uffd engine, region %#lx+%#zx: %s", (unsigned long)r->base, r->len,
                   what);
}

int exo_vm_uffd_create(struct exo_vm_region *r, bool shmem)
{
    bool dirty = r->flags & EXO_VM_TRACK_DIRTY;
    uint64_t want = (probe_features & UFFD_FEATURE_WP_UNPOPULATED) |
                    (shmem ? UFFD_FEATURE_WP_HUGETLBFS_SHMEM : 0);
    want |= dirty ? UFFD_FEATURE_WP_ASYNC
                  : UFFD_FEATURE_PAGEFAULT_FLAG_WP | (probe_features & UFFD_FEATURE_THREAD_ID);
    const char *why = NULL;
    int rc = exo_os_uffd_open(want, NULL, &r->uffd, &why);
    if (rc)
        return create_fail(r, rc, why);
    uint64_t ioctls = 0;
    rc = exo_os_uffd_register(r->uffd, r->base, r->len, false, true, &ioctls);
    if (rc == -EXO_ENOTSUP)
        return create_fail(r, rc, "userfaultfd cannot write-protect this memory (it works on "
                                  "anonymous, memfd/shm and hugetlbfs memory)");
    if (rc == -EXO_EBUSY)
        return create_fail(r, rc, "the range is registered with another userfaultfd");
    if (rc)
        return create_fail(r, rc, "UFFDIO_REGISTER failed");
    if (!(ioctls & (UINT64_C(1) << _UFFDIO_WRITEPROTECT))) {
        exo_os_uffd_unregister(r->uffd, r->base, r->len);
        return create_fail(r, -EXO_ENOTSUP, "the kernel allows no UFFDIO_WRITEPROTECT on "
                                            "this memory");
    }
    if (dirty) {
        int pm = exo_os_pagemap_open();
        if (pm < 0) {
            exo_os_uffd_unregister(r->uffd, r->base, r->len);
            return create_fail(r, pm, "cannot open /proc/self/pagemap");
        }
        r->pagemap_fd = pm;
        /* Start clean: every page write-protected (unpopulated ones too, where the kernel
         * has UFFD_FEATURE_WP_UNPOPULATED). */
        if ((rc = exo_os_uffd_wp(r->uffd, r->base, r->len, true, false)) != 0) {
            exo_os_uffd_unregister(r->uffd, r->base, r->len);
            return create_fail(r, rc, "UFFDIO_WRITEPROTECT of the whole region failed");
        }
        return 0;
    }
    if ((rc = exo_os_eventfd(&r->stop_fd)) != 0) {
        exo_os_uffd_unregister(r->uffd, r->base, r->len);
        return create_fail(r, rc, "cannot make an eventfd");
    }
    /* The handler thread takes no signals: they go to the program's own threads. */
    sigset_t old;
    exo_os_block_signals(&old);
    int err = pthread_create(&r->thread, NULL, handler_thread, r);
    exo_os_restore_signals(&old);
    if (err) {
        exo_os_uffd_unregister(r->uffd, r->base, r->len);
        return create_fail(r, exo_os_code(err) ? -exo_os_code(err) : -EXO_ENOMEM,
                           "cannot start the handler thread");
    }
    r->thread_started = true;
    return 0;
}

void exo_vm_uffd_destroy(struct exo_vm_region *r)
{
    if (!(r->flags & EXO_VM_TRACK_DIRTY)) {
        /* Open everything (waking any waiter), then stop the thread. */
        exo_os_uffd_wp(r->uffd, r->base, r->len, false, false);
        if (r->thread_started) {
            exo_os_eventfd_poke(r->stop_fd);
            pthread_join(r->thread, NULL);
        }
    }
    /* Unregistering also drops any write-protect bits left. */
    exo_os_uffd_unregister(r->uffd, r->base, r->len);
    close_region_fds(r);
}

int exo_vm_uffd_protect(struct exo_vm_region *r, uintptr_t addr, size_t len, int access)
{
    return exo_os_uffd_wp(r->uffd, addr, len, access != EXO_VM_READWRITE, false);
}

#define SCAN_VEC 512

long exo_vm_uffd_dirty(struct exo_vm_region *r, exo_vm_dirty_fn fn, void *arg)
{
    struct exo_page_region vec[SCAN_VEC];
    uint64_t start = r->base, end = r->base + r->len;
    long count = 0;
    while (start < end) {
        struct exo_pm_scan_arg a = {
            .size = sizeof a,
            .flags = EXO_PM_SCAN_WP_MATCHING | EXO_PM_SCAN_CHECK_WPASYNC,
            .start = start, .end = end,
            .vec = (uintptr_t)vec, .vec_len = SCAN_VEC,
            .category_mask = EXO_PAGE_IS_WRITTEN, .return_mask = EXO_PAGE_IS_WRITTEN};
        long n = exo_os_pagemap_scan(r->pagemap_fd, &a);
        if (n < 0)
            return exo_vm_fail(n, "uffd engine: PAGEMAP_SCAN of %#lx-%#lx failed (%s)",
                           (unsigned long)start, (unsigned long)end, exomem_strerror(n));
        for (long i = 0; i < n; i++) {
            size_t len = vec[i].end - vec[i].start;
            count += (long)(len / exo_vm_page());
            if (fn && fn((void *)(uintptr_t)vec[i].start, len, arg)) {
                /* The scan re-armed the runs not yet reported: make them written again
                 * (unprotected) so the next call reports them. */
                for (long k = i + 1; k < n; k++)
                    exo_os_uffd_wp(r->uffd, vec[k].start, vec[k].end - vec[k].start, false,
                                   false);
                return count;
            }
        }
        if (a.walk_end <= start)
            break;
        start = a.walk_end;
    }
    return count;
}
