/* Regions of the Appel-Li primitives: the region table, argument checks, and dispatch to
 * the engines (engine_signal.c, engine_uffd.c, engine_softdirty.c).
 *
 * The table is a fixed array of slots so that the SIGSEGV handler can search it without
 * locks or allocation: a slot holds an atomic region pointer and a count of handlers using
 * it; destroy empties the slot, then waits for that count to drain before freeing. */
#include "vm/vm_internal.h"
#include "internal.h"
#include "os/os.h"
#include "os/os_vm.h"

#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VM_MAX_REGIONS 1024

static _Atomic(struct exo_vm_region *) slots[VM_MAX_REGIONS];
static atomic_int slot_users[VM_MAX_REGIONS];
static atomic_int slots_high; /* slots at and above this index were never used */
/* Recursive: engines walk the table (exo_vm_table_each) while a create holds it. */
static pthread_mutex_t table_mutex = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

__thread int exo_vm_in_signal __attribute__((tls_model("initial-exec")));

int exo_vm_fail(int code, const char *fmt, ...)
{
    if (code < 0)
        code = -code;
    if (exo_vm_in_signal || !fmt) {
        /* Formatting is not async-signal-safe: in a handler only errno tells. */
        if (!exo_vm_in_signal)
            return exo_fail(code, NULL);
        errno = exomem_errno(code);
        return -code;
    }
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return exo_fail(code, "%s", msg);
}

size_t exo_vm_page(void)
{
    static size_t page;
    if (!page)
        page = (size_t)exo_os_page_size();
    return page;
}

void exo_vm_lock(struct exo_vm_region *r)
{
    while (atomic_flag_test_and_set_explicit(&r->lock, memory_order_acquire))
        exo_os_yield();
}

void exo_vm_unlock(struct exo_vm_region *r)
{
    atomic_flag_clear_explicit(&r->lock, memory_order_release);
}

struct exo_vm_region *exo_vm_table_pin(uintptr_t addr, int *slot)
{
    int high = atomic_load(&slots_high);
    for (int i = 0; i < high; i++) {
        struct exo_vm_region *r = atomic_load(&slots[i]);
        if (!r || addr < r->base || addr - r->base >= r->len)
            continue;
        atomic_fetch_add(&slot_users[i], 1);
        if (atomic_load(&slots[i]) == r) {
            *slot = i;
            return r;
        }
        atomic_fetch_sub(&slot_users[i], 1);
    }
    return NULL;
}

void exo_vm_table_unpin(int slot)
{
    atomic_fetch_sub(&slot_users[slot], 1);
}

void exo_vm_table_each(void (*fn)(struct exo_vm_region *, void *), void *arg)
{
    pthread_mutex_lock(&table_mutex);
    int high = atomic_load(&slots_high);
    for (int i = 0; i < high; i++) {
        struct exo_vm_region *r = atomic_load(&slots[i]);
        if (r)
            fn(r, arg);
    }
    pthread_mutex_unlock(&table_mutex);
}

static void table_remove(struct exo_vm_region *r)
{
    atomic_store(&slots[r->slot], NULL);
    while (atomic_load(&slot_users[r->slot]) != 0)
        exo_os_yield();
}

EXO_API size_t exo_vm_page_size(void)
{
    return exo_vm_page();
}

EXO_API const char *exo_vm_engine_name(exo_vm_engine engine)
{
    switch (engine) {
    case EXO_VM_ENGINE_AUTO: return "auto";
    case EXO_VM_ENGINE_SIGNAL: return "signal";
    case EXO_VM_ENGINE_UFFD: return "uffd";
    case EXO_VM_ENGINE_SOFTDIRTY: return "softdirty";
    }
    return "unknown";
}

EXO_API int exo_vm_engine_supported(exo_vm_engine engine, unsigned flags, const char **why)
{
    const char *reason = NULL;
    int rc = 0;
    switch (engine) {
    case EXO_VM_ENGINE_AUTO:
    case EXO_VM_ENGINE_SIGNAL:
        break;
    case EXO_VM_ENGINE_UFFD:
        rc = exo_vm_uffd_supported(flags, false, &reason);
        break;
    case EXO_VM_ENGINE_SOFTDIRTY:
        if (!(flags & EXO_VM_TRACK_DIRTY)) {
            reason = "the softdirty engine only tracks dirty pages (EXO_VM_TRACK_DIRTY)";
            rc = -EXO_ENOTSUP;
        } else {
            rc = exo_vm_softdirty_supported(&reason);
        }
        break;
    default:
        reason = "no such engine";
        rc = -EXO_EINVAL;
    }
    if (why)
        *why = reason;
    if (rc)
        return exo_vm_fail(rc, "engine %s: %s", exo_vm_engine_name(engine), reason);
    exo_clear_error();
    return 0;
}

/* Pick the engine for a region and check that it works there. */
static int resolve_engine(const exo_vm_options *opt, bool shmem, exo_vm_engine *out)
{
    const char *why = NULL;
    int rc;
    switch (opt->engine) {
    case EXO_VM_ENGINE_AUTO:
        *out = exo_vm_uffd_supported(opt->flags, shmem, &why) == 0 ? EXO_VM_ENGINE_UFFD
                                                                : EXO_VM_ENGINE_SIGNAL;
        return 0;
    case EXO_VM_ENGINE_SIGNAL:
        *out = EXO_VM_ENGINE_SIGNAL;
        return 0;
    case EXO_VM_ENGINE_UFFD:
        if ((rc = exo_vm_uffd_supported(opt->flags, shmem, &why)) != 0)
            return exo_vm_fail(rc, "uffd engine: %s", why);
        *out = EXO_VM_ENGINE_UFFD;
        return 0;
    case EXO_VM_ENGINE_SOFTDIRTY:
        if (!(opt->flags & EXO_VM_TRACK_DIRTY))
            return exo_vm_fail(EXO_EINVAL, "the softdirty engine only makes dirty-tracking "
                                       "regions (EXO_VM_TRACK_DIRTY)");
        if ((rc = exo_vm_softdirty_supported(&why)) != 0)
            return exo_vm_fail(rc, "softdirty engine: %s", why);
        *out = EXO_VM_ENGINE_SOFTDIRTY;
        return 0;
    }
    return exo_vm_fail(EXO_EINVAL, "engine %d is not an exo_vm_engine", (int)opt->engine);
}

static void region_free(struct exo_vm_region *r)
{
    free((void *)r->state);
    free(r->saved);
    free(r->pending);
    pthread_mutex_destroy(&r->dirty_lock);
    free(r);
}

EXO_API int exo_vm_region_create(void *base, size_t len, const exo_vm_options *opt,
                                 exo_vm_region **out)
{
    static const exo_vm_options defaults;
    if (!out)
        return exo_vm_fail(EXO_EINVAL, "exo_vm_region_create: out is NULL");
    *out = NULL;
    if (!opt)
        opt = &defaults;
    uintptr_t b = (uintptr_t)base;
    size_t page = exo_vm_page();
    if (opt->flags & ~(unsigned)EXO_VM_TRACK_DIRTY)
        return exo_vm_fail(EXO_EINVAL, "unknown region flags %#x", opt->flags);
    if ((unsigned)opt->engine > EXO_VM_ENGINE_SOFTDIRTY)
        return exo_vm_fail(EXO_EINVAL, "engine %d is not an exo_vm_engine", (int)opt->engine);
    if (b % page || len % page)
        return exo_vm_fail(EXO_EALIGN, "region %#lx+%#zx is not page-aligned (%zu)",
                       (unsigned long)b, len, page);
    if (len == 0 || b + len < b || b + len > EXO_USER_ADDR_END)
        return exo_vm_fail(EXO_ESIZE, "region %#lx+%#zx is empty or leaves the address space",
                       (unsigned long)b, len);
    struct exo_os_range_info info;
    int rc = exo_os_range_info(b, len, &info);
    if (rc == -EXO_ENOTMAPPED)
        return exo_vm_fail(rc, "region %#lx+%#zx: nothing is mapped at %s", (unsigned long)b, len,
                       info.gap);
    if (rc)
        return exo_vm_fail(rc, "region %#lx+%#zx: cannot read /proc/self/maps", (unsigned long)b,
                       len);
    if (info.access == EXO_ACCESS_NONE)
        return exo_vm_fail(EXO_EINVAL, "region %#lx+%#zx: part of the memory is inaccessible "
                                   "(PROT_NONE); make it readable first", (unsigned long)b, len);
    exo_vm_engine engine;
    if ((rc = resolve_engine(opt, info.any_shared, &engine)) != 0)
        return rc;
    if (info.access != EXO_ACCESS_RW && engine != EXO_VM_ENGINE_SIGNAL)
        return exo_vm_fail(EXO_EINVAL, "region %#lx+%#zx: the %s engine needs writable memory",
                       (unsigned long)b, len, exo_vm_engine_name(engine));
    if (info.access != EXO_ACCESS_RW && (opt->flags & EXO_VM_TRACK_DIRTY))
        return exo_vm_fail(EXO_EINVAL, "region %#lx+%#zx: dirty tracking needs writable memory",
                       (unsigned long)b, len);

    struct exo_vm_region *r = calloc(1, sizeof *r);
    if (!r)
        return exo_vm_fail(EXO_ENOMEM, "region: out of memory");
    r->base = b;
    r->len = len;
    r->npages = len / page;
    r->engine = engine;
    r->flags = opt->flags;
    r->handler = opt->handler;
    r->arg = opt->arg;
    r->max_access = info.access == EXO_ACCESS_RW ? EXO_VM_READWRITE : EXO_VM_READONLY;
    r->uffd = r->stop_fd = r->pagemap_fd = -1;
    atomic_flag_clear(&r->lock);
    pthread_mutex_init(&r->dirty_lock, NULL);
    bool dirty = opt->flags & EXO_VM_TRACK_DIRTY;
    /* One byte per page for every engine, so that AUTO can fall back to signal. */
    r->state = calloc(r->npages, 1);
    r->saved = dirty ? NULL : calloc(r->npages, 1);
    if (!r->state || (!dirty && !r->saved)) {
        size_t npages = r->npages;
        region_free(r);
        return exo_vm_fail(EXO_ENOMEM, "region: out of memory for %zu pages", npages);
    }
    if (!dirty)
        memset((void *)r->state, r->max_access, r->npages);
    /* Installed even for uffd regions, in case AUTO falls back to signal below. */
    if ((engine == EXO_VM_ENGINE_SIGNAL || opt->engine == EXO_VM_ENGINE_AUTO) &&
        (rc = exo_vm_signal_ensure_handler()) != 0) {
        region_free(r);
        return exo_vm_fail(rc, "cannot install the SIGSEGV/SIGBUS handler");
    }

    pthread_mutex_lock(&table_mutex);
    int free_slot = -1, high = atomic_load(&slots_high);
    for (int i = 0; i < high; i++) {
        struct exo_vm_region *o = atomic_load(&slots[i]);
        if (!o) {
            if (free_slot < 0)
                free_slot = i;
            continue;
        }
        if (o->base < b + len && b < o->base + o->len) {
            pthread_mutex_unlock(&table_mutex);
            region_free(r);
            return exo_vm_fail(EXO_EOVERLAP, "region %#lx+%#zx overlaps region %#lx+%#zx",
                           (unsigned long)b, len, (unsigned long)o->base, o->len);
        }
    }
    if (free_slot < 0) {
        if (high == VM_MAX_REGIONS) {
            pthread_mutex_unlock(&table_mutex);
            region_free(r);
            return exo_vm_fail(EXO_ENOMEM, "too many regions (at most %d)", VM_MAX_REGIONS);
        }
        free_slot = high;
        atomic_store(&slots_high, high + 1);
    }
    r->slot = free_slot;
    /* Published before the engine protects anything, so the handler knows every fault the
     * engine can cause. */
    atomic_store(&slots[free_slot], r);
    switch (engine) {
    case EXO_VM_ENGINE_SIGNAL: rc = exo_vm_signal_create(r); break;
    case EXO_VM_ENGINE_UFFD: rc = exo_vm_uffd_create(r, info.any_shared); break;
    case EXO_VM_ENGINE_SOFTDIRTY: rc = exo_vm_softdirty_create(r); break;
    default: rc = -EXO_EINVAL;
    }
    if (rc == -EXO_ENOTSUP && opt->engine == EXO_VM_ENGINE_AUTO &&
        engine == EXO_VM_ENGINE_UFFD) {
        /* The kernel has uffd but not for this memory (a regular file, say). */
        r->engine = engine = EXO_VM_ENGINE_SIGNAL;
        rc = exo_vm_signal_create(r);
    }
    if (rc) {
        table_remove(r);
        pthread_mutex_unlock(&table_mutex);
        region_free(r);
        return rc; /* the engine set the message */
    }
    pthread_mutex_unlock(&table_mutex);
    exo_clear_error();
    *out = r;
    return 0;
}

EXO_API int exo_vm_region_destroy(exo_vm_region *r)
{
    if (!r)
        return exo_vm_fail(EXO_EINVAL, "exo_vm_region_destroy: region is NULL");
    pthread_mutex_lock(&table_mutex);
    pthread_mutex_lock(&r->dirty_lock);
    /* Not under exo_vm_lock: a uffd handler may be in exo_vm_unprot while we wait for its
     * thread. Access first, then the slot: a fault the engine caused always finds its region. */
    switch (r->engine) {
    case EXO_VM_ENGINE_SIGNAL: exo_vm_signal_destroy(r); break;
    case EXO_VM_ENGINE_UFFD: exo_vm_uffd_destroy(r); break;
    case EXO_VM_ENGINE_SOFTDIRTY: exo_vm_softdirty_destroy(r); break;
    default: break;
    }
    table_remove(r);
    pthread_mutex_unlock(&r->dirty_lock);
    pthread_mutex_unlock(&table_mutex);
    region_free(r);
    exo_clear_error();
    return 0;
}

EXO_API exo_vm_engine exo_vm_region_engine(const exo_vm_region *r)
{
    return r ? r->engine : EXO_VM_ENGINE_AUTO;
}

/* Set the kernel's protection of pages [idx, idx+n) to `access` through the engine. */
static int engine_protect(struct exo_vm_region *r, size_t idx, size_t n, int access)
{
    uintptr_t a = r->base + idx * exo_vm_page();
    size_t len = n * exo_vm_page();
    if (r->engine == EXO_VM_ENGINE_SIGNAL)
        return exo_vm_signal_protect(r, a, len, access);
    return exo_vm_uffd_protect(r, a, len, access);
}

/* Common checks of the protection calls; clamps access to what the memory allows. */
static int check_trap(struct exo_vm_region *r, int *access, const char *call)
{
    if (!r)
        return exo_vm_fail(EXO_EINVAL, "%s: region is NULL", call);
    if (r->flags & EXO_VM_TRACK_DIRTY)
        return exo_vm_fail(EXO_EINVAL, "%s: region %#lx is a dirty-tracking region; protection "
                                   "calls need a trap region", call, (unsigned long)r->base);
    if (*access != EXO_VM_NOACCESS && *access != EXO_VM_READONLY && *access != EXO_VM_READWRITE)
        return exo_vm_fail(EXO_EINVAL, "%s: access %d is not EXO_VM_NOACCESS, _READONLY or "
                                   "_READWRITE", call, *access);
    if (*access == EXO_VM_NOACCESS && r->engine == EXO_VM_ENGINE_UFFD)
        return exo_vm_fail(EXO_ENOTSUP, "%s: the uffd engine cannot trap reads (write-protect "
                                    "only): use EXO_VM_READONLY or the signal engine", call);
    if (*access > r->max_access)
        *access = r->max_access;
    return 0;
}

static int check_page(struct exo_vm_region *r, uintptr_t a, const char *call)
{
    if (a % exo_vm_page())
        return exo_vm_fail(EXO_EALIGN, "%s: %#lx is not page-aligned", call, (unsigned long)a);
    if (a < r->base || a - r->base >= r->len)
        return exo_vm_fail(EXO_EINVAL, "%s: page %#lx is outside region %#lx+%#zx", call,
                       (unsigned long)a, (unsigned long)r->base, r->len);
    return 0;
}

/* Apply the saved states of the given pages again (rollback after a failed change). */
static void restore_pages(struct exo_vm_region *r, void *const *pages, size_t first,
                          size_t count)
{
    for (size_t i = 0; i < count; i++) {
        size_t idx = pages ? vm_page_index(r, (uintptr_t)pages[i]) : first + i;
        engine_protect(r, idx, 1, r->saved[idx]);
        atomic_store(&r->state[idx], r->saved[idx]);
    }
}

/* Change the access of pages given as a list (pages != NULL) or as [first, first+count).
 * Lowered states are stored before the kernel's protection changes and raised ones after,
 * so a fault handler never sees a page as accessible while the kernel still traps it. */
static int set_access(struct exo_vm_region *r, void *const *pages, size_t first, size_t count,
                      int access)
{
    exo_vm_lock(r);
    for (size_t i = 0; i < count; i++) {
        size_t idx = pages ? vm_page_index(r, (uintptr_t)pages[i]) : first + i;
        r->saved[idx] = atomic_load(&r->state[idx]);
    }
    for (size_t i = 0; i < count; i++) {
        size_t idx = pages ? vm_page_index(r, (uintptr_t)pages[i]) : first + i;
        if (access < r->saved[idx])
            atomic_store(&r->state[idx], (unsigned char)access);
    }
    size_t done = 0;
    int rc = 0;
    while (done < count && rc == 0) {
        size_t run = 1, idx;
        if (pages) {
            idx = vm_page_index(r, (uintptr_t)pages[done]);
            while (done + run < count &&
                   (uintptr_t)pages[done + run] == (uintptr_t)pages[done] + run * exo_vm_page())
                run++;
        } else {
            idx = first;
            run = count;
        }
        rc = engine_protect(r, idx, run, access);
        if (rc == 0)
            done += run;
    }
    if (rc) {
        /* The failing run may be half done: put back everything up to its end. */
        restore_pages(r, pages, first, count);
        exo_vm_unlock(r);
        return exo_vm_fail(rc, "changing the protection of %zu pages of region %#lx failed "
                           "(%s); nothing changed", count, (unsigned long)r->base,
                       exomem_strerror(rc));
    }
    for (size_t i = 0; i < count; i++) {
        size_t idx = pages ? vm_page_index(r, (uintptr_t)pages[i]) : first + i;
        atomic_store(&r->state[idx], (unsigned char)access);
    }
    exo_vm_unlock(r);
    return 0;
}

/* PROT1 and UNPROT: check the region and the page (errors name the call `what`), then give
 * that one page `access`. */
static int set_page_access(exo_vm_region *r, void *page, int access, const char *what)
{
    int rc = check_trap(r, &access, what);
    if (rc == 0)
        rc = check_page(r, (uintptr_t)page, what);
    if (rc)
        return rc;
    return set_access(r, NULL, vm_page_index(r, (uintptr_t)page), 1, access);
}

EXO_API int exo_vm_prot1(exo_vm_region *r, void *page, int access)
{
    return set_page_access(r, page, access, "exo_vm_prot1");
}

EXO_API int exo_vm_protn(exo_vm_region *r, void *const *pages, size_t n, int access)
{
    int rc = check_trap(r, &access, "exo_vm_protn");
    if (rc)
        return rc;
    if (n && !pages)
        return exo_vm_fail(EXO_EINVAL, "exo_vm_protn: pages is NULL");
    for (size_t i = 0; i < n; i++)
        if ((rc = check_page(r, (uintptr_t)pages[i], "exo_vm_protn")) != 0)
            return rc;
    return n ? set_access(r, pages, 0, n, access) : 0;
}

EXO_API int exo_vm_protect(exo_vm_region *r, void *addr, size_t len, int access)
{
    int rc = check_trap(r, &access, "exo_vm_protect");
    if (rc)
        return rc;
    uintptr_t a = (uintptr_t)addr;
    if (len % exo_vm_page())
        return exo_vm_fail(EXO_EALIGN, "exo_vm_protect: length %#zx is not page-aligned", len);
    if ((rc = check_page(r, a, "exo_vm_protect")) != 0)
        return rc;
    if (len == 0)
        return 0;
    if ((rc = check_page(r, a + len - exo_vm_page(), "exo_vm_protect")) != 0)
        return rc;
    return set_access(r, NULL, vm_page_index(r, a), len / exo_vm_page(), access);
}

EXO_API int exo_vm_unprot(exo_vm_region *r, void *page)
{
    return set_page_access(r, page, EXO_VM_READWRITE, "exo_vm_unprot");
}

EXO_API long exo_vm_dirty(exo_vm_region *r, exo_vm_dirty_fn fn, void *arg)
{
    if (!r)
        return exo_vm_fail(EXO_EINVAL, "exo_vm_dirty: region is NULL");
    if (!(r->flags & EXO_VM_TRACK_DIRTY))
        return exo_vm_fail(EXO_EINVAL, "exo_vm_dirty: region %#lx is a trap region, made without "
                                   "EXO_VM_TRACK_DIRTY", (unsigned long)r->base);
    pthread_mutex_lock(&r->dirty_lock);
    long n;
    switch (r->engine) {
    case EXO_VM_ENGINE_SIGNAL: n = exo_vm_signal_dirty(r, fn, arg); break;
    case EXO_VM_ENGINE_UFFD: n = exo_vm_uffd_dirty(r, fn, arg); break;
    default: n = exo_vm_softdirty_dirty(r, fn, arg); break;
    }
    pthread_mutex_unlock(&r->dirty_lock);
    if (n >= 0)
        exo_clear_error();
    return n;
}

exo_vm_action exo_vm_run_handler(struct exo_vm_region *r, exo_vm_fault *f)
{
    if (!r->handler)
        return EXO_VM_DECLINE;
    exo_vm_action act = r->handler(f, r->arg);
    if (act != EXO_VM_REDIRECT)
        return act == EXO_VM_RESUME ? EXO_VM_RESUME : EXO_VM_DECLINE;
    if (!f->redirect)
        return EXO_VM_DECLINE;
    int prot = f->redirect_prot;
    if (prot != EXO_VM_NOACCESS && prot != EXO_VM_READONLY)
        prot = EXO_VM_READWRITE;
    if (prot == EXO_VM_NOACCESS && r->engine == EXO_VM_ENGINE_UFFD)
        prot = EXO_VM_READONLY;
    if (prot > r->max_access)
        prot = r->max_access;
    size_t idx = vm_page_index(r, (uintptr_t)f->page);
    exo_vm_lock(r);
    /* Open the page, fill it, then give it its new access. With uffd the faulting thread
     * stays asleep meanwhile (the engine wakes it). */
    int rc;
    if (r->engine == EXO_VM_ENGINE_UFFD)
        rc = exo_os_uffd_wp(r->uffd, (uintptr_t)f->page, exo_vm_page(), false, true);
    else
        rc = exo_os_protect((uintptr_t)f->page, exo_vm_page(), EXO_VM_READWRITE);
    if (rc == 0) {
        memcpy(f->page, f->redirect, exo_vm_page());
        if (prot != EXO_VM_READWRITE) {
            atomic_store(&r->state[idx], (unsigned char)prot);
            if (r->engine == EXO_VM_ENGINE_UFFD)
                rc = exo_os_uffd_wp(r->uffd, (uintptr_t)f->page, exo_vm_page(), true, true);
            else
                rc = exo_os_protect((uintptr_t)f->page, exo_vm_page(), prot);
        }
        atomic_store(&r->state[idx], (unsigned char)prot);
    }
    exo_vm_unlock(r);
    return rc == 0 ? EXO_VM_REDIRECT : EXO_VM_DECLINE;
}
