/* Pager regions (exomem/pager.h): making and freeing them, hints, discard, flush, stats. */
#include "pager/pager_internal.h"
#include "pager/publish.h"
#include "pager/segment_region.h"
#include "internal.h"
#include "os/os.h"
#include "os/os_vm.h"

#include <stdlib.h>
#include <string.h>

#define MAX_THREADS 64

int exo_pager_table_new(exo_pager_table kind, uint64_t nunits, struct pager_table **out)
{
    struct pager_table *t = kind == EXO_PAGER_TABLE_RADIX    ? exo_pager_radix_new(nunits)
                            : kind == EXO_PAGER_TABLE_HASH   ? exo_pager_hash_new(nunits)
                            : kind == EXO_PAGER_TABLE_VECTOR ? exo_pager_vector_new(nunits)
                                                             : NULL;
    if (!t)
        return kind >= EXO_PAGER_TABLE_RADIX && kind <= EXO_PAGER_TABLE_VECTOR ? -EXO_ENOMEM
                                                                                : -EXO_EINVAL;
    *out = t;
    return 0;
}

int exo_pager_table_each(struct pager_table *t,
                         int (*fn)(uint64_t unit, uint64_t *entry, void *arg), void *arg)
{
    return t->ops->each(t, fn, arg);
}

EXO_API const char *exo_pager_policy_name(exo_pager_policy policy)
{
    switch (policy) {
    case EXO_PAGER_FIFO: return "fifo";
    case EXO_PAGER_CLOCK: return "clock";
    case EXO_PAGER_LRU: return "lru";
    case EXO_PAGER_MRU: return "mru";
    case EXO_PAGER_CUSTOM: return "custom";
    }
    return "unknown";
}

EXO_API const char *exo_pager_table_name(exo_pager_table table)
{
    switch (table) {
    case EXO_PAGER_TABLE_RADIX: return "radix";
    case EXO_PAGER_TABLE_HASH: return "hash";
    case EXO_PAGER_TABLE_VECTOR: return "vector";
    }
    return "unknown";
}

/* The options with defaults filled in, or the first thing wrong with them. */
static int check_options(const exo_pager_options *in, exo_pager_options *o)
{
    if (!in)
        return exo_fail(EXO_EINVAL, "pager: options are NULL");
    *o = *in;
    if (!o->unit)
        o->unit = EXO_PAGER_UNIT_4K;
    if (!o->policy)
        o->policy = EXO_PAGER_FIFO;
    if (!o->table)
        o->table = EXO_PAGER_TABLE_RADIX;
    if (!o->delivery)
        o->delivery = EXO_PAGER_THREADS;
    if (!o->threads)
        o->threads = 1;
    if (o->unit != EXO_PAGER_UNIT_4K && o->unit != EXO_PAGER_UNIT_2M)
        return exo_fail(EXO_EINVAL, "pager: unit %zu is neither 4 KiB nor 2 MiB", o->unit);
    if (o->size == 0 || o->size % o->unit)
        return exo_fail(EXO_EINVAL, "pager: size %zu is not a non-zero multiple of the unit "
                        "(%zu)", o->size, o->unit);
    if (o->budget < o->unit || o->budget % o->unit)
        return exo_fail(EXO_EINVAL, "pager: budget %zu is not a non-zero multiple of the unit "
                        "(%zu)", o->budget, o->unit);
    if (o->budget > o->size)
        o->budget = o->size; /* no more frames than units */
    if (o->budget / o->unit >= NO_FRAME)
        return exo_fail(EXO_EINVAL, "pager: budget %zu is more than %u units", o->budget,
                        NO_FRAME - 1);
    if (o->policy < EXO_PAGER_FIFO || o->policy > EXO_PAGER_CUSTOM)
        return exo_fail(EXO_EINVAL, "pager: unknown policy %d", (int)o->policy);
    if (o->policy == EXO_PAGER_CUSTOM && !o->callbacks.victim)
        return exo_fail(EXO_EINVAL, "pager: EXO_PAGER_CUSTOM needs a victim callback");
    if (o->table < EXO_PAGER_TABLE_RADIX || o->table > EXO_PAGER_TABLE_VECTOR)
        return exo_fail(EXO_EINVAL, "pager: unknown page-table structure %d", (int)o->table);
    if (o->delivery != EXO_PAGER_THREADS && o->delivery != EXO_PAGER_SIGBUS)
        return exo_fail(EXO_EINVAL, "pager: unknown delivery %d", (int)o->delivery);
    if (o->threads > MAX_THREADS)
        return exo_fail(EXO_EINVAL, "pager: %u handler threads (at most %d)", o->threads,
                        MAX_THREADS);
    if (!o->store)
        return exo_fail(EXO_EINVAL, "pager: no store");
    if (o->flags & ~EXO_PAGER_HUGE_PAGES)
        return exo_fail(EXO_EINVAL, "pager: unknown flags %#x", o->flags);
    if ((o->flags & EXO_PAGER_HUGE_PAGES) && o->unit != EXO_PAGER_UNIT_2M)
        return exo_fail(EXO_EINVAL, "pager: EXO_PAGER_HUGE_PAGES needs 2 MiB units");
    if (o->flags & EXO_PAGER_HUGE_PAGES) {
        long avail = 0;
        int rc = exo_os_pool_available(EXO_PAGER_UNIT_2M, NULL, &avail);
        if (rc || (uint64_t)avail < o->budget / o->unit)
            return exo_fail(EXO_ENOHUGE, "pager: a budget of %zu 2 MiB huge pages needs that "
                            "many free in the 2 MiB pool, which has %ld (as root: raise "
                            "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages)",
                            o->budget / o->unit, rc ? 0L : avail);
    }
    return 0;
}

static void free_region(struct exo_pager *p)
{
    exo_pager_unpublish(p);
    if (p->base && !p->base_borrowed)
        exo_os_unmap(p->base, p->size);
    if (p->uffd >= 0)
        exo_os_close(p->uffd);
    if (p->table)
        p->table->ops->destroy(p->table);
    free(p->frames);
    free(p->buf);
    free(p->zeros);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* The userfaultfd, asking for what the delivery needs. */
static int open_uffd(struct exo_pager *p)
{
    uint64_t want = UFFD_FEATURE_PAGEFAULT_FLAG_WP |
                    (p->delivery == EXO_PAGER_SIGBUS ? UFFD_FEATURE_SIGBUS : UFFD_FEATURE_POISON);
    uint64_t got = 0;
    const char *why = NULL;
    int rc = exo_os_uffd_open(want, &got, &p->uffd, &why);
    if (rc)
        return exo_fail(-rc, "pager: %s", why ? why : "userfaultfd failed");
    if ((rc = exo_os_uffd_register(p->uffd, p->base, p->size, true, true, NULL)) != 0)
        return exo_fail(-rc, "pager: the kernel refuses missing and write-protect faults on "
                        "anonymous memory (userfaultfd register)");
    return 0;
}

static int create_region(const exo_pager_options *opt, uint64_t fixed_base, exo_pager **out);

EXO_API int exo_pager_create(const exo_pager_options *opt, exo_pager **out)
{
    exo_clear_error();
    return create_region(opt, 0, out);
}

int exo_pager_create_at(const exo_pager_options *opt, uint64_t base, exo_pager **out)
{
    if (!base)
        return exo_fail(EXO_EINVAL, "pager: no base for a region at a fixed address");
    return create_region(opt, base, out);
}

/* The region's memory: anywhere, or over the caller's reservation at fixed_base. */
static int map_region(struct exo_pager *p, const exo_pager_options *o, uint64_t fixed_base)
{
    bool huge = o->flags & EXO_PAGER_HUGE_PAGES;
    if (!fixed_base)
        return exo_os_map_anon(p->size, huge, &p->base);
    int rc = exo_os_map_anon_fixed(fixed_base, p->size, huge);
    if (!rc) {
        p->base = fixed_base;
        p->base_borrowed = true;
    }
    return rc;
}

static int create_region(const exo_pager_options *opt, uint64_t fixed_base, exo_pager **out)
{
    exo_pager_options o = {0};
    int rc = check_options(opt, &o);
    if (rc)
        return rc;
    if (!out)
        return exo_fail(EXO_EINVAL, "pager: out is NULL");
    int none = 0;
    if (!atomic_compare_exchange_strong(&o.store->users, &none, 1))
        return exo_fail(EXO_EBUSY, "pager: the %s store serves another region", o.store->kind);
    struct exo_pager *p = calloc(1, sizeof *p);
    if (!p) {
        atomic_store(&o.store->users, 0);
        return exo_fail(EXO_ENOMEM, "pager: out of memory");
    }
    p->stats = &p->own_stats;
    pthread_mutex_init(&p->lock, NULL);
    p->uffd = p->stop_fd = -1;
    p->size = o.size;
    p->unit = o.unit;
    p->nunits = o.size / o.unit;
    p->nframes = (uint32_t)(o.budget / o.unit);
    p->policy = o.policy;
    p->delivery = o.delivery;
    p->callbacks = o.callbacks;
    p->store = o.store;
    p->readahead = o.readahead;
    p->nthreads = o.threads;
    p->head = p->tail = p->hand = NO_FRAME;
    p->stats->budget_bytes = o.budget;
    p->frames = malloc((size_t)p->nframes * sizeof *p->frames);
    p->buf = aligned_alloc(EXO_PAGER_UNIT_4K, p->unit);
    p->zeros = aligned_alloc(EXO_PAGER_UNIT_4K, p->unit);
    rc = !p->frames || !p->buf || !p->zeros ? -EXO_ENOMEM
                                            : exo_pager_table_new(o.table, p->nunits, &p->table);
    if (rc) {
        rc = exo_fail(-rc, "pager: out of memory for %u frames", p->nframes);
    } else if ((rc = map_region(p, &o, fixed_base)) != 0) {
        rc = exo_fail(-rc, "pager: cannot reserve %zu bytes of address space", o.size);
    }
    if (!rc) {
        memset(p->zeros, 0, p->unit);
        p->free_head = NO_FRAME;
        for (uint32_t f = p->nframes; f-- > 0;) {
            p->frames[f] = (struct frame){.prev = NO_FRAME, .next = p->free_head};
            p->free_head = f;
        }
        exo_pager_publish(p, o.table);
        exo_pager_note_occupancy(p);
        if ((rc = open_uffd(p)) == 0)
            rc = exo_pager_delivery_start(p);
    }
    if (rc) {
        atomic_store(&o.store->users, 0);
        free_region(p);
        return rc;
    }
    *out = p;
    return 0;
}

EXO_API void *exo_pager_base(const exo_pager *p)
{
    return p ? (void *)(uintptr_t)p->base : NULL;
}

/* Write back every dirty resident unit; the first error, after trying them all. */
static int write_back_all(struct exo_pager *p)
{
    int first = 0;
    for (uint32_t f = 0; f < p->nframes; f++) {
        if (!p->frames[f].used || !p->frames[f].dirty)
            continue;
        int rc = exo_pager_write_back(p, f);
        if (rc && !first)
            first = rc;
    }
    return first;
}

int exo_pager_quiesce(exo_pager *p)
{
    pthread_mutex_lock(&p->lock);
    int rc = write_back_all(p);
    /* The lock stays held either way: no fault is served until resume or release. */
    return rc ? exo_fail(-rc, "pager: %s", p->failure) : 0;
}

void exo_pager_resume(exo_pager *p)
{
    pthread_mutex_unlock(&p->lock);
}

void exo_pager_release(exo_pager *p)
{
    pthread_mutex_unlock(&p->lock);
    exo_pager_delivery_stop(p);
    atomic_store(&p->store->users, 0);
    free_region(p);
}

EXO_API int exo_pager_destroy(exo_pager *p)
{
    exo_clear_error();
    if (!p)
        return exo_fail(EXO_EINVAL, "exo_pager_destroy: pager is NULL");
    pthread_mutex_lock(&p->lock);
    int rc = write_back_all(p);
    pthread_mutex_unlock(&p->lock);
    exo_pager_delivery_stop(p);
    if (rc)
        rc = exo_fail(-rc, "pager: dirty units were lost with the region: %s", p->failure);
    atomic_store(&p->store->users, 0);
    free_region(p);
    return rc;
}

/* The units [*first, *end) that cover [addr, addr+len) (rounded out), or -EXO_EINVAL. */
static int unit_range(const struct exo_pager *p, const void *addr, size_t len, bool round_in,
                      uint64_t *first, uint64_t *end)
{
    uint64_t a = (uint64_t)(uintptr_t)addr;
    if (a < p->base || len > p->size || a - p->base > p->size - len)
        return exo_fail(EXO_EINVAL, "pager: [%p, +%zu) is not inside the region [%#llx, +%llu)",
                        addr, len, (unsigned long long)p->base, (unsigned long long)p->size);
    uint64_t lo = a - p->base, hi = lo + len;
    *first = round_in ? (lo + p->unit - 1) / p->unit : lo / p->unit;
    *end = round_in ? hi / p->unit : (hi + p->unit - 1) / p->unit;
    return 0;
}

static uint32_t frame_of(struct exo_pager *p, uint64_t u)
{
    uint64_t *e = p->table->ops->find(p->table, u);
    return e && (*e & ENTRY_RESIDENT) ? ENTRY_FRAME(*e) : NO_FRAME;
}

static int advise_units(struct exo_pager *p, uint64_t u0, uint64_t u1, exo_pager_advice advice,
                        size_t arg)
{
    int rc = 0;
    switch (advice) {
    case EXO_PAGER_WILLNEED:
        for (uint64_t u = u0; u < u1 && !rc; u++) {
            exo_pager_unpoison(p, u);
            rc = exo_pager_fill(p, u, true);
        }
        return rc == -EXO_ENOMEM ? 0 : rc; /* as far as the budget allows */
    case EXO_PAGER_DONTNEED:
        for (uint64_t u = u0; u < u1 && !rc; u++) {
            uint32_t f = frame_of(p, u);
            if (f != NO_FRAME && !p->frames[f].pinned)
                rc = exo_pager_evict(p, f);
        }
        return rc;
    case EXO_PAGER_SEQUENTIAL:
        p->seq_lo = u0;
        p->seq_hi = u1;
        p->seq_ahead = arg;
        return 0;
    case EXO_PAGER_PIN:
        if (p->pinned + (u1 - u0) >= p->nframes)
            return exo_fail(EXO_ENOMEM, "pager: pinning %llu more units would leave no frame "
                            "for faults (%u pinned of %u)", (unsigned long long)(u1 - u0),
                            p->pinned, p->nframes);
        for (uint64_t u = u0; u < u1 && !rc; u++) {
            exo_pager_unpoison(p, u);
            if ((rc = exo_pager_fill(p, u, true)) == 0 && !p->frames[frame_of(p, u)].pinned) {
                p->frames[frame_of(p, u)].pinned = true;
                p->pinned++;
            }
        }
        return rc;
    case EXO_PAGER_UNPIN:
        for (uint64_t u = u0; u < u1; u++) {
            uint32_t f = frame_of(p, u);
            if (f != NO_FRAME && p->frames[f].pinned) {
                p->frames[f].pinned = false;
                p->pinned--;
            }
        }
        return 0;
    }
    return exo_fail(EXO_EINVAL, "pager: unknown advice %d", (int)advice);
}

EXO_API int exo_pager_advise(exo_pager *p, void *addr, size_t len, exo_pager_advice advice,
                             size_t arg)
{
    exo_clear_error();
    if (!p)
        return exo_fail(EXO_EINVAL, "exo_pager_advise: pager is NULL");
    uint64_t u0 = 0, u1 = 0; /* set by unit_range; zero keeps -O2 from guessing */
    int rc = unit_range(p, addr, len, false, &u0, &u1);
    if (rc)
        return rc;
    pthread_mutex_lock(&p->lock);
    rc = advise_units(p, u0, u1, advice, arg);
    pthread_mutex_unlock(&p->lock);
    if (rc && !exomem_last_error()[0])
        rc = exo_fail(-rc, "pager: %s", p->failure);
    return rc;
}

EXO_API int exo_pager_discard(exo_pager *p, void *addr, size_t len)
{
    exo_clear_error();
    if (!p)
        return exo_fail(EXO_EINVAL, "exo_pager_discard: pager is NULL");
    uint64_t u0 = 0, u1 = 0; /* set by unit_range; zero keeps -O2 from guessing */
    int rc = unit_range(p, addr, len, true, &u0, &u1);
    if (rc)
        return rc;
    pthread_mutex_lock(&p->lock);
    for (uint64_t u = u0; u < u1 && !rc; u++) {
        uint32_t f = frame_of(p, u);
        if (f != NO_FRAME) {
            /* Dropped as it is: clean it first so that eviction writes nothing. */
            if (p->frames[f].dirty) {
                p->frames[f].dirty = false;
                p->dirty--;
                exo_pager_note_occupancy(p);
            }
            if (p->frames[f].pinned) {
                p->frames[f].pinned = false;
                p->pinned--;
            }
            rc = exo_pager_evict(p, f);
        }
        if (!rc)
            exo_pager_unpoison(p, u);
        if (!rc && (rc = exo_pager_store_discard(p->store, u, p->unit)) == 0)
            p->table->ops->remove(p->table, u);
    }
    pthread_mutex_unlock(&p->lock);
    if (rc)
        rc = exo_fail(-rc, "pager: discard failed: %s", exomem_strerror(rc));
    return rc;
}

EXO_API int exo_pager_flush(exo_pager *p)
{
    exo_clear_error();
    if (!p)
        return exo_fail(EXO_EINVAL, "exo_pager_flush: pager is NULL");
    pthread_mutex_lock(&p->lock);
    int rc = write_back_all(p);
    pthread_mutex_unlock(&p->lock);
    if (rc)
        rc = exo_fail(-rc, "pager: %s", p->failure);
    return rc;
}

EXO_API int exo_pager_get_stats(exo_pager *p, exo_pager_stats *out)
{
    exo_clear_error();
    if (!p || !out)
        return exo_fail(EXO_EINVAL, "exo_pager_get_stats: pager or out is NULL");
    pthread_mutex_lock(&p->lock);
    *out = *p->stats;
    out->resident_bytes = (uint64_t)p->resident * p->unit;
    out->dirty_bytes = (uint64_t)p->dirty * p->unit;
    out->table_bytes = p->table->ops->bytes(p->table);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < EXO_PAGER_LATENCY_BUCKETS; i++)
        out->latency[i] = __atomic_load_n(&p->stats->latency[i], __ATOMIC_RELAXED);
    return 0;
}

EXO_API int exo_pager_latency_bucket(const exo_pager_stats *st, double q)
{
    if (!st || !(q > 0 && q <= 1))
        return -1;
    uint64_t n = 0, seen = 0;
    for (int i = 0; i < EXO_PAGER_LATENCY_BUCKETS; i++)
        n += st->latency[i];
    for (int i = 0; i < EXO_PAGER_LATENCY_BUCKETS && n; i++)
        if ((double)(seen += st->latency[i]) >= q * (double)n)
            return i;
    return -1;
}

EXO_API int exo_pager_query(exo_pager *p, const void *addr, unsigned *state)
{
    exo_clear_error();
    if (!p || !state)
        return exo_fail(EXO_EINVAL, "exo_pager_query: pager or state is NULL");
    uint64_t a = (uint64_t)(uintptr_t)addr;
    if (a < p->base || a - p->base >= p->size)
        return exo_fail(EXO_EINVAL, "exo_pager_query: %p is outside the region", addr);
    uint64_t u = (a - p->base) / p->unit;
    pthread_mutex_lock(&p->lock);
    const uint64_t *e = p->table->ops->find(p->table, u);
    uint64_t entry = e ? *e : 0;
    unsigned st = (entry & ENTRY_STORED) ? EXO_PAGER_STORED : 0;
    if (entry & ENTRY_RESIDENT) {
        st |= EXO_PAGER_RESIDENT;
        if (p->frames[ENTRY_FRAME(entry)].dirty)
            st |= EXO_PAGER_DIRTY;
    }
    pthread_mutex_unlock(&p->lock);
    *state = st;
    return 0;
}

EXO_API const char *exo_pager_last_failure(const exo_pager *p)
{
    return p ? p->failure : "";
}
