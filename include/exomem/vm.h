/* exomem virtual-memory primitives for user programs (Appel and Li, ASPLOS 1991).
 *
 *   TRAP    a user handler runs when a protected page is accessed, then resumes the access
 *   PROT1   decrease the accessibility of one page
 *   PROTN   decrease the accessibility of N pages (one call)
 *   UNPROT  increase the accessibility of a page
 *   DIRTY   which pages of a region were written since the last call
 *   MAP2    the same memory at two addresses, with different protections
 *
 * The primitives work on a *region*: a page-aligned range of memory the caller owns and has
 * mapped already (anonymous memory, a memfd or shm mapping, a visible exomem segment).
 * Each region picks its engine when it is created:
 *
 *   EXO_VM_ENGINE_SIGNAL     mprotect + a chained SIGSEGV/SIGBUS handler. Any protection
 *                            (no access, read only). The handler runs in signal context.
 *   EXO_VM_ENGINE_UFFD       userfaultfd write-protect (UFFDIO_WRITEPROTECT). Protection is
 *                            read-only only (uffd cannot trap reads). The handler runs on the
 *                            region's handler thread. Does not split the process's mappings.
 *   EXO_VM_ENGINE_SOFTDIRTY  DIRTY only, through /proc/self/clear_refs and pagemap's
 *                            soft-dirty bit, where the kernel has CONFIG_MEM_SOFT_DIRTY.
 *
 * A region made with EXO_VM_TRACK_DIRTY is a dirty-tracking region: exo_vm_dirty() works,
 * the protection calls do not (EXO_EINVAL), and the library's write tracking is invisible to
 * the program (with the uffd engine it uses the asynchronous mode, UFFD_FEATURE_WP_ASYNC, read
 * back with the PAGEMAP_SCAN ioctl). A region without the flag is a trap region.
 *
 * An engine the kernel lacks is reported when the region is created (EXO_ENOTSUP, with the
 * reason in exomem_last_error()), never later by a crash. exo_vm_engine_supported() asks
 * without creating anything.
 *
 * What a handler may call:
 *   - signal engine: the handler runs inside the SIGSEGV handler of the faulting thread. It
 *     may call exo_vm_prot1/protn/unprot/protect (async-signal-safe), memcpy and other
 *     async-signal-safe functions; not malloc, printf, locks that the faulting thread could
 *     hold, or exo_vm_region_create/destroy.
 *   - uffd engine: the handler runs on the region's handler thread while the faulting thread
 *     waits in the kernel. It may call anything, including malloc, but must not wait for the
 *     faulting thread, and must not touch write-protected pages of its own region except
 *     through a MAP2 view or after unprotecting them.
 * Faults on pages of a region that its handler declines, and faults outside every region, go
 * to the handler that was installed before (or the default action): a real crash still
 * crashes, with its usual signal and core.
 *
 * Every call returns 0 or a negative exomem error code (-EXO_...), sets errno and
 * exomem_last_error(), and on failure leaves the region and the memory as they were.
 *
 * Threads: calls on different regions never wait for each other. Calls on one region from
 * several threads are safe (a short spin lock guards its page states; exo_vm_dirty() calls
 * are serialised by a mutex), except exo_vm_region_destroy(), which must not race with any
 * other call on the same region (as free() with the use of what it frees). The protection
 * calls never block: with the uffd engine they are one ioctl each, with the signal engine
 * one mprotect, and they may be called from a handler as said above.
 */
#ifndef EXOMEM_VM_H
#define EXOMEM_VM_H

#include <exomem/access.h>
#include <stddef.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct exo_vm_region exo_vm_region;

typedef enum exo_vm_engine {
    EXO_VM_ENGINE_AUTO = 0,      /* the best engine the kernel has for the region's use */
    EXO_VM_ENGINE_SIGNAL = 1,
    EXO_VM_ENGINE_UFFD = 2,
    EXO_VM_ENGINE_SOFTDIRTY = 3, /* dirty-tracking regions only */
} exo_vm_engine;

/* Accessibility of a page: what the program may still do without a trap. The values are
 * access.h's, the same as every other exomem call's (EXO_VM_READONLY == EXO_ACCESS_READ). */
enum {
    EXO_VM_NOACCESS = EXO_ACCESS_NONE, /* every access traps (signal engine only) */
    EXO_VM_READONLY = EXO_ACCESS_READ, /* writes trap */
    EXO_VM_READWRITE = EXO_ACCESS_RW,  /* nothing traps */
};

/* Region flags. */
enum {
    EXO_VM_TRACK_DIRTY = 1u << 0, /* a dirty-tracking region (see above) */
};

/* What a handler tells the library to do with the faulting access. */
typedef enum exo_vm_action {
    EXO_VM_RESUME = 0,   /* retry the access (the handler made the page accessible) */
    EXO_VM_DECLINE = 1,  /* not ours: pass the fault on to the previous handler */
    EXO_VM_REDIRECT = 2, /* install fault->redirect's page_size bytes at the faulting page
                            (which then gets fault->redirect_prot), then retry the access */
} exo_vm_action;

/* One fault, as the handler sees it. */
typedef struct exo_vm_fault {
    exo_vm_region *region;
    void *addr;          /* the faulting address */
    void *page;          /* the start of its page */
    int is_write;        /* 1 write, 0 read, -1 unknown */
    int in_signal;       /* 1: signal context (signal engine); 0: handler thread (uffd) */
    const void *redirect; /* set by the handler for EXO_VM_REDIRECT */
    int redirect_prot;   /* ... and the page's accessibility afterwards (EXO_VM_*) */
} exo_vm_fault;

typedef exo_vm_action (*exo_vm_handler)(exo_vm_fault *fault, void *arg);

/* How a region is made. Zero-initialise, then set what you need. */
typedef struct exo_vm_options {
    exo_vm_engine engine;   /* EXO_VM_ENGINE_AUTO picks uffd where it works, else signal */
    unsigned flags;         /* EXO_VM_TRACK_DIRTY */
    exo_vm_handler handler; /* trap regions: runs on each fault in a protected page; NULL
                               means every such fault is declined */
    void *arg;              /* passed to the handler */
} exo_vm_options;

/* The page size the primitives work in (the base page size, 4096 here). Never fails. */
size_t exo_vm_page_size(void);

/* 0 if `engine` works on this kernel for a region with `flags`; else -EXO_ENOTSUP and, when
 * why != NULL, a sentence saying what is missing (-EXO_EINVAL for an unknown engine or
 * flags). Probes the kernel once per engine (a userfaultfd is opened and closed); thread-safe. */
int exo_vm_engine_supported(exo_vm_engine engine, unsigned flags, const char **why);

/* Name of an engine ("signal", "uffd", "softdirty", "auto"); never NULL, never fails. */
const char *exo_vm_engine_name(exo_vm_engine engine);

/* Make a region over [base, base+len), which must be page-aligned and mapped by the caller.
 * Everything starts accessible; a dirty-tracking region starts with no page dirty. Errors:
 * -EXO_EALIGN, -EXO_ENOTMAPPED (not all mapped), -EXO_EOVERLAP (overlaps another region),
 * -EXO_ENOTSUP (engine missing), -EXO_EINVAL (unknown flags, memory not writable where the
 * engine or dirty tracking needs it, PROT_NONE memory), -EXO_ENOMEM. With the uffd engine a
 * handler thread is started (and registration takes time in proportion to len). */
int exo_vm_region_create(void *base, size_t len, const exo_vm_options *opt, exo_vm_region **out);

/* Make the whole region accessible again, stop tracking, free the region. The memory stays
 * mapped and keeps its contents. -EXO_EINVAL for NULL. Blocks until the region's handler
 * thread (uffd) has finished the fault it is handling; must not be called from a handler of
 * the same region, nor while another thread uses the region. */
int exo_vm_region_destroy(exo_vm_region *region);

/* The engine a region actually uses (AUTO resolved); EXO_VM_ENGINE_AUTO for NULL. Never
 * fails otherwise; never blocks. */
exo_vm_engine exo_vm_region_engine(const exo_vm_region *region);

/* PROT1: set one page's accessibility (EXO_VM_NOACCESS or EXO_VM_READONLY). -EXO_EINVAL (a
 * dirty-tracking region, an access that is not an EXO_VM_ value, EXO_VM_NOACCESS with the
 * uffd engine), -EXO_EALIGN / -EXO_ENOTMAPPED (page not a page of the region). */
int exo_vm_prot1(exo_vm_region *region, void *page, int access);

/* PROTN: set the accessibility of n pages, which need not be adjacent, in one call. With the
 * uffd engine this does not add mappings to the process however scattered the pages are.
 * Errors as exo_vm_prot1(), checked for every page before any changes; -EXO_ENOMEM when the
 * signal engine would split the process's mappings past vm.max_map_count; after any
 * failure the pages changed so far are put back, so nothing has changed. */
int exo_vm_protn(exo_vm_region *region, void *const *pages, size_t n, int access);

/* Set the accessibility of a page-aligned range inside the region (EXO_VM_READWRITE
 * allowed). Errors as exo_vm_prot1(). */
int exo_vm_protect(exo_vm_region *region, void *addr, size_t len, int access);

/* UNPROT: make one page fully accessible (as far as the memory allows). Errors as
 * exo_vm_prot1(); with the uffd engine it also wakes a thread waiting on that page. */
int exo_vm_unprot(exo_vm_region *region, void *page);

/* Called by exo_vm_dirty for each run of adjacent dirty pages; return non-zero to stop (the
 * pages not yet reported stay dirty for the next call). */
typedef int (*exo_vm_dirty_fn)(void *addr, size_t len, void *arg);

/* DIRTY: report the pages of a dirty-tracking region written since the last call (or since
 * creation), in address order, and start tracking afresh for the pages reported. A page
 * written while the call runs is reported now or by the next call, never lost. Returns the
 * number of pages reported, or a negative error code: -EXO_EINVAL (a trap region, or NULL).
 * fn may be NULL: the pages are then counted and tracked afresh without a report.
 * Blocks while another exo_vm_dirty() on the same region runs; takes time in proportion to
 * the region (one PAGEMAP_SCAN, or a pass over the page states) plus the callbacks. */
long exo_vm_dirty(exo_vm_region *region, exo_vm_dirty_fn fn, void *arg);

/* MAP2: one piece of shared memory seen at two addresses. */
typedef struct exo_vm_map2 {
    void *a;     /* first view */
    void *b;     /* second view */
    size_t len;
    int fd;      /* the memory (a memfd, or the caller's fd); owned by the map2 when made by
                    exo_vm_map2_create */
    int owns_fd;
} exo_vm_map2;

/* MAP2 over fresh memory (a memfd of len bytes, zero-filled): view a gets access_a, view b
 * access_b (EXO_VM_*). Both views see every write at once: they are the same pages.
 * -EXO_EINVAL (an access that is not an EXO_VM_ value, out NULL), -EXO_EALIGN (len not a
 * multiple of the page size), -EXO_ESIZE (len 0), -EXO_ENOMEM. Never blocks; thread-safe. */
int exo_vm_map2_create(size_t len, int access_a, int access_b, exo_vm_map2 *out);

/* MAP2 over the caller's memory: len bytes of fd (a memfd, shm or exomem segment data file)
 * from offset off. The fd stays the caller's. Errors as exo_vm_map2_create(), and the
 * kernel's for fd (-EXO_EACCES when fd is not open for the access asked). */
int exo_vm_map2_fd(int fd, off_t off, size_t len, int access_a, int access_b, exo_vm_map2 *out);

/* Unmap both views (and close the memfd if the map2 made it). -EXO_EINVAL for NULL. Must
 * not race with another call on the same map2. */
int exo_vm_map2_destroy(exo_vm_map2 *m);

#ifdef __cplusplus
}
#endif
#endif
