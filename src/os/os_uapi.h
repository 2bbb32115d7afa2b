/* Kernel interfaces newer than Debian 12's 6.1 uapi headers, written from the documented ABI
 * (Documentation/admin-guide/mm/userfaultfd.rst, pagemap.rst). Support is probed at run time;
 * these are only the numbers and layouts. Our own struct names avoid a clash once the system
 * headers grow the real ones. */
#ifndef EXOMEM_OS_UAPI_H
#define EXOMEM_OS_UAPI_H

#include <linux/userfaultfd.h>
#include <stdint.h>
#include <sys/ioctl.h>

/* userfaultfd(2) flag: only faults raised by user-mode accesses (usable without privilege). */
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
/* Write-protect also applies to pages never populated (6.4). */
#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 13)
#endif
/* Write-protect faults are resolved by the kernel itself, which only records the write (6.7). */
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1 << 15)
#endif
#ifndef UFFD_FEATURE_WP_HUGETLBFS_SHMEM
#define UFFD_FEATURE_WP_HUGETLBFS_SHMEM (1 << 12)
#endif
#ifndef UFFD_FEATURE_THREAD_ID
#define UFFD_FEATURE_THREAD_ID (1 << 8)
#endif

/* Fault delivery as SIGBUS in the faulting thread (4.14), poisoned pages (6.6). */
#ifndef UFFD_FEATURE_SIGBUS
#define UFFD_FEATURE_SIGBUS (1 << 7)
#endif
#ifndef UFFD_FEATURE_POISON
#define UFFD_FEATURE_POISON (1 << 14)
#endif
/* UFFDIO_POISON: mark missing pages so that an access raises SIGBUS (BUS_MCEERR_AR). */
struct exo_uffdio_poison {
    uint64_t start;
    uint64_t len;
    uint64_t mode; /* bit 0: don't wake */
    int64_t updated;
};
#define EXO_UFFDIO_POISON _IOWR(UFFDIO, 0x08, struct exo_uffdio_poison)

/* PAGEMAP_SCAN ioctl on /proc/<pid>/pagemap (6.7): page categories. */
#define EXO_PAGE_IS_WPALLOWED (UINT64_C(1) << 0)
#define EXO_PAGE_IS_WRITTEN (UINT64_C(1) << 1)
#define EXO_PAGE_IS_FILE (UINT64_C(1) << 2)
#define EXO_PAGE_IS_PRESENT (UINT64_C(1) << 3)
#define EXO_PAGE_IS_SWAPPED (UINT64_C(1) << 4)
#define EXO_PAGE_IS_PFNZERO (UINT64_C(1) << 5)
#define EXO_PAGE_IS_HUGE (UINT64_C(1) << 6)
#define EXO_PAGE_IS_SOFT_DIRTY (UINT64_C(1) << 7)

/* Scan flags: write-protect the pages that matched (async uffd-wp ranges only), and fail
 * unless every scanned range is registered for async write-protect. */
#define EXO_PM_SCAN_WP_MATCHING (UINT64_C(1) << 0)
#define EXO_PM_SCAN_CHECK_WPASYNC (UINT64_C(1) << 1)

/* One run of pages with the same categories, [start, end). */
struct exo_page_region {
    uint64_t start;
    uint64_t end;
    uint64_t categories;
};

/* The scan request; the kernel writes walk_end (where it stopped) back. */
struct exo_pm_scan_arg {
    uint64_t size; /* sizeof(struct exo_pm_scan_arg) */
    uint64_t flags;
    uint64_t start;
    uint64_t end;
    uint64_t walk_end;
    uint64_t vec;     /* struct exo_page_region array */
    uint64_t vec_len; /* its length */
    uint64_t max_pages;
    uint64_t category_inverted;
    uint64_t category_mask;
    uint64_t category_anyof_mask;
    uint64_t return_mask;
};

#define EXO_PAGEMAP_SCAN _IOWR('f', 16, struct exo_pm_scan_arg)

/* pagemap entry bits (8 bytes per page). */
#define EXO_PM_SOFT_DIRTY (UINT64_C(1) << 55)
#define EXO_PM_PRESENT (UINT64_C(1) << 63)

#endif
