/* Internals of the Appel-Li primitives: the region, the engines' entry points, and the
 * async-signal-safe region table the signal handler searches. */
#ifndef EXOMEM_VM_INTERNAL_H
#define EXOMEM_VM_INTERNAL_H

#include <exomem/vm.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Per-page state of a signal-engine dirty region. */
enum { VM_PAGE_CLEAN = 0, VM_PAGE_DIRTYING = 1, VM_PAGE_DIRTY = 2 };

struct exo_vm_region {
    uintptr_t base;
    size_t len;
    size_t npages;
    exo_vm_engine engine;
    unsigned flags;
    exo_vm_handler handler;
    void *arg;
    int max_access;  /* EXO_VM_READWRITE, or EXO_VM_READONLY over read-only memory */
    int slot;        /* index in the region table */
    /* Trap regions: each page's accessibility (EXO_VM_*); signal dirty regions: VM_PAGE_*.
     * Read by fault handlers without a lock. */
    _Atomic unsigned char *state;
    unsigned char *saved;      /* old states during a protn, for rollback (under lock) */
    atomic_flag lock;          /* protection changes; a spinlock, so handlers may take it */
    pthread_mutex_t dirty_lock; /* one exo_vm_dirty at a time */
    /* uffd engine */
    int uffd;
    int stop_fd;
    bool thread_started;
    pthread_t thread;
    /* uffd async dirty and softdirty: /proc/self/pagemap */
    int pagemap_fd;
    /* softdirty: pages found dirty while clearing for another region */
    unsigned char *pending;
};

/* Failure that formats its message only outside signal context. */
int exo_vm_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Set while this thread runs the library's signal handler. */
extern __thread int exo_vm_in_signal __attribute__((tls_model("initial-exec")));

size_t exo_vm_page(void);
static inline size_t vm_page_index(const struct exo_vm_region *r, uintptr_t a)
{
    return (a - r->base) / exo_vm_page();
}

void exo_vm_lock(struct exo_vm_region *r);
void exo_vm_unlock(struct exo_vm_region *r);

/* The region containing addr, pinned against destruction until exo_vm_table_unpin(slot). */
struct exo_vm_region *exo_vm_table_pin(uintptr_t addr, int *slot);
void exo_vm_table_unpin(int slot);
/* Visit every live region (under the table mutex; not for signal context). */
void exo_vm_table_each(void (*fn)(struct exo_vm_region *, void *), void *arg);

/* Engines. create: after the common checks, with the region not yet in the table (but the
 * table mutex held, so nothing else can claim the range). protect: [addr, addr+len) inside
 * the region, state already validated; sets the kernel's protection only. */
int exo_vm_signal_create(struct exo_vm_region *r);
void exo_vm_signal_destroy(struct exo_vm_region *r);
int exo_vm_signal_protect(struct exo_vm_region *r, uintptr_t addr, size_t len, int access);
long exo_vm_signal_dirty(struct exo_vm_region *r, exo_vm_dirty_fn fn, void *arg);
int exo_vm_signal_ensure_handler(void);

int exo_vm_uffd_supported(unsigned flags, bool shmem, const char **why);
int exo_vm_uffd_create(struct exo_vm_region *r, bool shmem);
void exo_vm_uffd_destroy(struct exo_vm_region *r);
int exo_vm_uffd_protect(struct exo_vm_region *r, uintptr_t addr, size_t len, int access);
long exo_vm_uffd_dirty(struct exo_vm_region *r, exo_vm_dirty_fn fn, void *arg);

int exo_vm_softdirty_supported(const char **why);
int exo_vm_softdirty_create(struct exo_vm_region *r);
void exo_vm_softdirty_destroy(struct exo_vm_region *r);
long exo_vm_softdirty_dirty(struct exo_vm_region *r, exo_vm_dirty_fn fn, void *arg);

/* Run the user's handler for a fault in a trap region and carry out a REDIRECT (the
 * engine-specific parts go through protect). Returns the action taken. */
exo_vm_action exo_vm_run_handler(struct exo_vm_region *r, exo_vm_fault *f);

#endif
