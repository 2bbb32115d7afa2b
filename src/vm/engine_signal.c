/* The signal engine: mprotect for protection, a process-wide SIGSEGV/SIGBUS handler for
 * traps and write tracking. The handler is chained: a fault that is not in a region of this
 * engine, or that the region's handler declines, goes to the handler that was installed
 * before ours, or takes the default action (the process dies with its usual signal). */
#include "vm/vm_internal.h"
#include "internal.h"
#include "os/os.h"
#include "os/os_vm.h"

#include <signal.h>
#include <string.h>
#include <ucontext.h>

static struct sigaction old_segv, old_bus;
static pthread_once_t install_once = PTHREAD_ONCE_INIT;
static int install_rc;

/* The address of the last fault this thread let retry because its page looked accessible:
 * a second fault there means the fault is not ours. */
static __thread uintptr_t stale_addr __attribute__((tls_model("initial-exec")));

/* Pass a fault on as if we had never been installed. */
static void chain(int sig, siginfo_t *si, void *ctx)
{
    exo_os_signal_chain(sig, si, ctx, sig == SIGBUS ? &old_bus : &old_segv);
}

/* The page looks accessible: let the access retry once (a protection change may have
 * raced with the fault); a second fault at the same address is not ours. */
static exo_vm_action retry_once(uintptr_t addr)
{
    if (stale_addr == addr) {
        stale_addr = 0;
        return EXO_VM_DECLINE;
    }
    stale_addr = addr;
    return EXO_VM_RESUME;
}

static exo_vm_action on_dirty_fault(struct exo_vm_region *r, uintptr_t addr)
{
    uintptr_t page = addr & ~(uintptr_t)(exo_vm_page() - 1);
    size_t idx = vm_page_index(r, page);
    unsigned char s = atomic_load(&r->state[idx]);
    if (s == VM_PAGE_CLEAN) {
        unsigned char expect = VM_PAGE_CLEAN;
        if (!atomic_compare_exchange_strong(&r->state[idx], &expect, VM_PAGE_DIRTYING))
            return EXO_VM_RESUME; /* another thread is on it: retry */
        if (exo_os_protect(page, exo_vm_page(), EXO_ACCESS_RW) != 0) {
            atomic_store(&r->state[idx], VM_PAGE_CLEAN);
            return EXO_VM_DECLINE;
        }
        atomic_store(&r->state[idx], VM_PAGE_DIRTY);
        stale_addr = 0;
        return EXO_VM_RESUME;
    }
    if (s == VM_PAGE_DIRTYING)
        return EXO_VM_RESUME;
    return retry_once(addr);
}

static exo_vm_action on_trap_fault(struct exo_vm_region *r, uintptr_t addr, void *ctx)
{
    uintptr_t page = addr & ~(uintptr_t)(exo_vm_page() - 1);
    size_t idx = vm_page_index(r, page);
    int s = atomic_load(&r->state[idx]);
    int is_write = exo_os_fault_is_write(ctx);
    if (s >= r->max_access || (s == EXO_VM_READONLY && is_write == 0))
        return retry_once(addr);
    stale_addr = 0;
    exo_vm_fault f = {.region = r, .addr = (void *)addr, .page = (void *)page,
                      .is_write = is_write, .in_signal = 1};
    return exo_vm_run_handler(r, &f);
}

static void on_fault(int sig, siginfo_t *si, void *ctx)
{
    int saved_errno = errno;
    exo_vm_action act = EXO_VM_DECLINE;
    if (si->si_code > 0) {
        int slot;
        struct exo_vm_region *r = exo_vm_table_pin((uintptr_t)si->si_addr, &slot);
        if (r) {
            if (r->engine == EXO_VM_ENGINE_SIGNAL) {
                exo_vm_in_signal++;
                act = (r->flags & EXO_VM_TRACK_DIRTY)
                          ? on_dirty_fault(r, (uintptr_t)si->si_addr)
                          : on_trap_fault(r, (uintptr_t)si->si_addr, ctx);
                exo_vm_in_signal--;
            }
            exo_vm_table_unpin(slot);
        }
    }
    errno = saved_errno;
    if (act == EXO_VM_DECLINE)
        chain(sig, si, ctx);
    errno = saved_errno;
}

static void install(void)
{
    install_rc = exo_os_signal_install(SIGSEGV, on_fault, &old_segv);
    if (install_rc == 0 && (install_rc = exo_os_signal_install(SIGBUS, on_fault, &old_bus)) != 0)
        exo_os_signal_restore(SIGSEGV, &old_segv);
}

int exo_vm_signal_ensure_handler(void)
{
    pthread_once(&install_once, install);
    return install_rc;
}

int exo_vm_signal_create(struct exo_vm_region *r)
{
    if (!(r->flags & EXO_VM_TRACK_DIRTY))
        return 0; /* everything starts accessible: nothing to do */
    /* Every page clean: read-only until its first write. */
    int rc = exo_os_protect(r->base, r->len, EXO_ACCESS_READ);
    if (rc) {
        exo_os_protect(r->base, r->len, EXO_ACCESS_RW);
        return exo_vm_fail(rc, "signal engine: cannot write-protect region %#lx+%#zx",
                       (unsigned long)r->base, r->len);
    }
    return 0;
}

void exo_vm_signal_destroy(struct exo_vm_region *r)
{
    if (r->flags & EXO_VM_TRACK_DIRTY) {
        exo_os_protect(r->base, r->len, EXO_ACCESS_RW);
        return;
    }
    /* Only the pages we changed: the memory around them keeps its own protection. */
    for (size_t i = 0; i < r->npages;) {
        if (atomic_load(&r->state[i]) == r->max_access) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < r->npages && atomic_load(&r->state[j]) != r->max_access)
            j++;
        exo_os_protect(r->base + i * exo_vm_page(), (j - i) * exo_vm_page(), r->max_access);
        i = j;
    }
}

int exo_vm_signal_protect(struct exo_vm_region *r, uintptr_t addr, size_t len, int access)
{
    (void)r;
    return exo_os_protect(addr, len, access);
}

long exo_vm_signal_dirty(struct exo_vm_region *r, exo_vm_dirty_fn fn, void *arg)
{
    long count = 0;
    size_t page = exo_vm_page();
    for (size_t i = 0; i < r->npages;) {
        if (atomic_load(&r->state[i]) != VM_PAGE_DIRTY) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < r->npages && atomic_load(&r->state[j]) == VM_PAGE_DIRTY)
            j++;
        /* Clean first, protect second: a write between the two lands on a still-writable
         * page and is seen by the callback below; a write after faults and dirties anew. */
        for (size_t k = i; k < j; k++)
            atomic_store(&r->state[k], VM_PAGE_CLEAN);
        int rc = exo_os_protect(r->base + i * page, (j - i) * page, EXO_ACCESS_READ);
        if (rc) {
            exo_os_protect(r->base + i * page, (j - i) * page, EXO_ACCESS_RW);
            for (size_t k = i; k < j; k++)
                atomic_store(&r->state[k], VM_PAGE_DIRTY);
            return exo_vm_fail(rc, "signal engine: cannot re-protect %zu pages at %#lx (%s)", j - i,
                           (unsigned long)(r->base + i * page), exomem_strerror(rc));
        }
        count += (long)(j - i);
        if (fn && fn((void *)(r->base + i * page), (j - i) * page, arg))
            return count;
        i = j;
    }
    return count;
}
