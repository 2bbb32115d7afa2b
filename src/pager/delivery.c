/* Fault delivery: handler threads reading the userfaultfd, or the faulting thread itself in
 * a SIGBUS handler (UFFD_FEATURE_SIGBUS).
 *
 * Threads. Each reads up to BATCH events at a time and serves them under one hold of the
 * region's lock. A unit that cannot be filled (the store failed past its retries) is
 * poisoned (UFFDIO_POISON): the waiting thread is woken and its access raises SIGBUS, and so
 * does every later access until exo_pager_advise() tries the unit again.
 *
 * SIGBUS. One process-wide handler finds the region by address (a lock-free table, as the
 * signal engine of src/vm does) and serves the fault in the faulting thread; a fault it
 * cannot serve, and every SIGBUS that is not a pager fault, goes to the action installed
 * before. The handler takes the region's mutex: a thread is never interrupted while holding
 * it, because the pager's own code never touches a region's memory in a way that faults. */
#include "pager/pager_internal.h"
#include "internal.h"
#include "os/os.h"
#include "os/os_vm.h"

#include <string.h>

#define BATCH 32
#define MAX_SIGBUS_REGIONS 64

void exo_pager_count_latency(struct exo_pager *p, uint64_t ns)
{
    unsigned b = 0;
    while (b + 1 < EXO_PAGER_LATENCY_BUCKETS && (ns >> (b + 1)))
        b++;
    __atomic_fetch_add(&p->stats->latency[b], 1, __ATOMIC_RELAXED);
}

/* ---- handler threads ---- */

static void serve_event(struct exo_pager *p, const struct uffd_msg *m)
{
    if (m->event != UFFD_EVENT_PAGEFAULT)
        return;
    uint64_t addr = m->arg.pagefault.address & ~(uint64_t)(EXO_PAGER_UNIT_4K - 1);
    bool write = m->arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WRITE;
    uint64_t t0 = exo_os_now_ns();
    if (exo_pager_serve(p, addr, write) == 0) {
        exo_pager_count_latency(p, exo_os_now_ns() - t0);
        return;
    }
    /* Could not be filled: the faulting thread gets SIGBUS, never a hang. */
    uint64_t u = (addr - p->base) / p->unit;
    uint64_t *e = p->table->ops->insert(p->table, u);
    if (e)
        *e |= ENTRY_POISONED;
    if (exo_os_uffd_poison(p->uffd, p->base + u * p->unit, p->unit) != 0)
        exo_os_uffd_wake(p->uffd, p->base + u * p->unit, p->unit);
}

static void *handler_main(void *arg)
{
    struct exo_pager *p = arg;
    struct uffd_msg msgs[BATCH];
    exo_os_block_signals(NULL); /* faults only: signals go to the application's threads */
    for (;;) {
        int w = exo_os_uffd_wait(p->uffd, p->stop_fd);
        if (w <= 0)
            break;
        long n = exo_os_uffd_read(p->uffd, msgs, BATCH);
        if (n < 0)
            break;
        if (n == 0)
            continue;
        pthread_mutex_lock(&p->lock);
        for (long i = 0; i < n; i++)
            serve_event(p, &msgs[i]);
        pthread_mutex_unlock(&p->lock);
    }
    return NULL;
}

/* ---- SIGBUS ---- */

static struct exo_pager *_Atomic sigbus_regions[MAX_SIGBUS_REGIONS];
static struct sigaction old_bus;
static pthread_once_t install_once = PTHREAD_ONCE_INIT;
static int install_rc;

static struct exo_pager *region_at(uint64_t addr)
{
    for (int i = 0; i < MAX_SIGBUS_REGIONS; i++) {
        struct exo_pager *p = atomic_load(&sigbus_regions[i]);
        if (p && addr >= p->base && addr - p->base < p->size)
            return p;
    }
    return NULL;
}

static void on_sigbus(int sig, siginfo_t *si, void *ctx)
{
    int saved = errno;
    uint64_t addr = (uint64_t)(uintptr_t)si->si_addr;
    struct exo_pager *p = si->si_code == BUS_ADRERR ? region_at(addr) : NULL;
    int rc = -EXO_EINVAL;
    if (p) {
        uint64_t t0 = exo_os_now_ns();
        pthread_mutex_lock(&p->lock);
        rc = exo_pager_serve(p, addr & ~(uint64_t)(EXO_PAGER_UNIT_4K - 1),
                             exo_os_fault_is_write(ctx) != 0);
        pthread_mutex_unlock(&p->lock);
        if (rc == 0)
            exo_pager_count_latency(p, exo_os_now_ns() - t0);
    }
    if (rc)
        exo_os_signal_chain(sig, si, ctx, &old_bus);
    errno = saved;
}

static void install(void)
{
    install_rc = exo_os_signal_install(SIGBUS, on_sigbus, &old_bus);
}

static int sigbus_add(struct exo_pager *p)
{
    pthread_once(&install_once, install);
    if (install_rc)
        return exo_fail(-install_rc, "pager: cannot install the SIGBUS handler");
    for (int i = 0; i < MAX_SIGBUS_REGIONS; i++) {
        struct exo_pager *none = NULL;
        if (atomic_compare_exchange_strong(&sigbus_regions[i], &none, p)) {
            p->slot = i;
            return 0;
        }
    }
    return exo_fail(EXO_ENOMEM, "pager: %d regions with SIGBUS delivery exist already",
                    MAX_SIGBUS_REGIONS);
}

/* ---- start and stop ---- */

int exo_pager_delivery_start(struct exo_pager *p)
{
    p->slot = -1;
    if (p->delivery == EXO_PAGER_SIGBUS)
        return sigbus_add(p);
    int rc = exo_os_eventfd(&p->stop_fd);
    if (rc)
        return exo_fail(-rc, "pager: cannot make the handler threads' stop event");
    for (unsigned i = 0; i < p->nthreads; i++) {
        int err = pthread_create(&p->threads[i], NULL, handler_main, p);
        if (err) {
            p->nthreads = i;
            exo_pager_delivery_stop(p);
            return exo_fail(EXO_ENOMEM, "pager: cannot start handler thread %u: %s", i,
                            strerror(err));
        }
    }
    return 0;
}

void exo_pager_delivery_stop(struct exo_pager *p)
{
    if (p->delivery == EXO_PAGER_SIGBUS) {
        if (p->slot >= 0)
            atomic_store(&sigbus_regions[p->slot], NULL);
        p->slot = -1;
        return;
    }
    if (p->stop_fd >= 0) {
        exo_os_eventfd_poke(p->stop_fd);
        for (unsigned i = 0; i < p->nthreads; i++)
            pthread_join(p->threads[i], NULL);
        exo_os_close(p->stop_fd);
        p->stop_fd = -1;
    }
    p->nthreads = 0;
}
