/* Internal helpers shared by every layer: error reporting and configuration. */
#ifndef EXOMEM_INTERNAL_H
#define EXOMEM_INTERNAL_H

#include <exomem/exomem.h>
#include <stdbool.h>
#include <stdint.h>

#define EXO_API __attribute__((visibility("default")))

/* Record a failure: sets errno to exomem_errno(code), the thread's detail message from fmt
 * (may be NULL), and returns -code. Use as `return exo_fail(EXO_EALIGN, "base %#lx", b);`. */
int exo_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Clear the thread's detail message (start of a successful call path). */
void exo_clear_error(void);

/* Configuration, read once from the environment (the only place getenv() is called). */
struct exo_config {
    char root[4096];          /* EXOMEM_ROOT, default /dev/shm/exomem-<euid> */
    bool root_is_default;     /* no EXOMEM_ROOT: the per-user registry */
    int engine;               /* EXOMEM_SWITCH=park|remap|keep -> enum vas_engine */
    uint64_t park_limit;      /* EXOMEM_PARK_LIMIT, bytes (K/M/G suffix), default 64G */
    char hugetlbfs_2m[4096];  /* EXOMEM_HUGETLBFS_2M: hugetlbfs mount for 2M segments */
    char hugetlbfs_1g[4096];  /* EXOMEM_HUGETLBFS_1G: hugetlbfs mount for 1G segments */
    char tmpfs_huge[4096];    /* EXOMEM_TMPFS_HUGE: tmpfs with huge pages for SEG_THP */
    char paged_dir[1000];     /* EXOMEM_PAGED_DIR: where SEG_PAGED stores go (/var/tmp) */
    bool vm_disable_uffd;     /* EXOMEM_VM_DISABLE_UFFD set and not "0" */
    long lock_timeout_ms;     /* EXOMEM_LOCK_TIMEOUT (ms; default 10000): registry lock wait */
    double carat_moves;       /* EXOMEM_CARAT_MOVES: worst-case moves a second (0: none) */
    const char *carat_report; /* EXOMEM_CARAT_REPORT: file for counters at exit, or NULL */
    uint32_t carat_quarantine; /* EXOMEM_CARAT_QUARANTINE: old copies of moved blocks kept */
};
const struct exo_config *exo_config(void);

/* Parse "123", "64K", "2M", "1G", "1T" (also lower case, optional "iB"/"B") into bytes.
 * Returns 0 or -EXO_EINVAL on junk or overflow. */
int exo_parse_size(const char *s, uint64_t *out);

#endif
