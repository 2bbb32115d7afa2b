/* Serving faults: filling units, noting first writes, evicting and writing back. Every
 * function here runs with the region's lock held.
 *
 * The invariant that keeps every write: a unit's memory is dropped only while it is
 * write-protected (clean units always are; a dirty one is protected, then written to the
 * store, then dropped), so a write either lands before the protection, and is in what the
 * store receives, or waits in the kernel and lands on the unit filled again afterwards. */
#include "pager/pager_internal.h"
#include "internal.h"
#include "os/os.h"
#include "os/os_vm.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Store calls are tried this many times, waiting 1, 4, ... ms in between, before a fault
 * is given up (docs/pager.md: a store that fails). */
#define STORE_TRIES 3

void exo_pager_set_failure(struct exo_pager *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->failure, sizeof p->failure, fmt, ap);
    va_end(ap);
}

static uint64_t unit_addr(const struct exo_pager *p, uint64_t u)
{
    return p->base + u * p->unit;
}

static int store_read(struct exo_pager *p, uint64_t u, void *buf)
{
    int rc = 0;
    for (unsigned i = 0; i < STORE_TRIES; i++) {
        if (i)
            exo_os_sleep_ns(UINT64_C(1000000) << (2 * (i - 1)));
        rc = exo_pager_store_read(p->store, u, p->unit, buf);
        if (rc == 0 || rc == -EXO_ENOENT)
            return rc;
        p->stats->store_errors++;
    }
    return rc;
}

static int store_write(struct exo_pager *p, uint64_t u, const void *buf)
{
    int rc = 0;
    for (unsigned i = 0; i < STORE_TRIES; i++) {
        if (i)
            exo_os_sleep_ns(UINT64_C(1000000) << (2 * (i - 1)));
        if ((rc = exo_pager_store_write(p->store, u, p->unit, buf)) == 0)
            return 0;
        p->stats->store_errors++;
    }
    return rc;
}

/* Set unit u's entry; an entry that becomes 0 leaves the table. -EXO_ENOMEM only when a
 * new entry cannot be made. */
static int set_entry(struct exo_pager *p, uint64_t u, uint64_t value)
{
    if (value == 0) {
        p->table->ops->remove(p->table, u);
        return 0;
    }
    uint64_t *e = p->table->ops->insert(p->table, u);
    if (!e)
        return -EXO_ENOMEM;
    *e = value;
    return 0;
}

static uint64_t get_entry(struct exo_pager *p, uint64_t u)
{
    uint64_t *e = p->table->ops->find(p->table, u);
    return e ? *e : 0;
}

static void release_frame(struct exo_pager *p, uint32_t f)
{
    p->frames[f] = (struct frame){.prev = NO_FRAME, .next = p->free_head};
    p->free_head = f;
}

int exo_pager_write_back(struct exo_pager *p, uint32_t f)
{
    struct frame *fr = &p->frames[f];
    if (!fr->dirty)
        return 0;
    uint64_t addr = unit_addr(p, fr->unit);
    int rc = 0;
    if (!fr->wp) {
        if ((rc = exo_os_uffd_wp(p->uffd, addr, p->unit, true, false)) != 0)
            return rc;
        fr->wp = true;
    }
    /* Writers now wait in the kernel: what is read here is what the unit holds. */
    if ((rc = store_write(p, fr->unit, (const void *)(uintptr_t)addr)) != 0) {
        exo_pager_set_failure(p, "%s store write of unit %llu failed: %s", p->store->kind,
                              (unsigned long long)fr->unit, exomem_strerror(rc));
        if (exo_os_uffd_wp(p->uffd, addr, p->unit, false, false) == 0)
            fr->wp = false; /* dirty data stays resident and writable until it is written */
        return rc;
    }
    fr->dirty = false;
    p->dirty--;
    exo_pager_note_occupancy(p);
    p->stats->writebacks++;
    return set_entry(p, fr->unit, get_entry(p, fr->unit) | ENTRY_STORED);
}

int exo_pager_evict(struct exo_pager *p, uint32_t f)
{
    struct frame *fr = &p->frames[f];
    uint64_t u = fr->unit, addr = unit_addr(p, u);
    int rc = exo_pager_write_back(p, f);
    if (rc)
        return rc;
    if (!fr->wp) { /* clean units are protected already; make sure */
        if ((rc = exo_os_uffd_wp(p->uffd, addr, p->unit, true, false)) != 0)
            return rc;
        fr->wp = true;
    }
    if ((rc = exo_os_drop_pages(addr, p->unit)) != 0)
        return rc;
    set_entry(p, u, get_entry(p, u) & ENTRY_STORED);
    exo_pager_policy_removed(p, f);
    release_frame(p, f);
    p->resident--;
    exo_pager_note_occupancy(p);
    p->stats->evictions++;
    return 0;
}

/* A frame for a new unit: a free one, else the policy's victim, evicted. A victim whose
 * write-back fails stays resident and another is tried, a few times. */
static int take_frame(struct exo_pager *p, uint32_t *out)
{
    uint32_t skipped[8];
    unsigned nskipped = 0;
    int rc = 0;
    while (p->free_head == NO_FRAME) {
        uint32_t v = exo_pager_policy_victim(p);
        if (v == NO_FRAME) {
            if (nskipped == 0) { /* else rc and the failure are the last write-back's */
                exo_pager_set_failure(p, "no frame to evict: all %u are pinned or in use",
                                      p->nframes);
                rc = -EXO_ENOMEM;
            }
            break;
        }
        if ((rc = exo_pager_evict(p, v)) == 0)
            continue;
        if (nskipped == sizeof skipped / sizeof skipped[0])
            break;
        p->frames[v].busy = true;
        skipped[nskipped++] = v;
    }
    for (unsigned i = 0; i < nskipped; i++)
        p->frames[skipped[i]].busy = false;
    if (p->free_head == NO_FRAME)
        return rc ? rc : -EXO_ENOMEM;
    uint32_t f = p->free_head;
    p->free_head = p->frames[f].next;
    *out = f;
    return 0;
}

static int fill_unit(struct exo_pager *p, uint64_t u, bool write, bool prefetch)
{
    uint64_t entry = get_entry(p, u);
    if (entry & ENTRY_RESIDENT)
        return 0;
    if (entry & ENTRY_POISONED)
        return -EXO_EIO;
    uint32_t f;
    int rc = take_frame(p, &f);
    if (rc)
        return rc;
    const void *src = p->buf;
    rc = store_read(p, u, p->buf);
    bool zero = rc == -EXO_ENOENT;
    if (zero) {
        src = p->zeros;
        rc = 0;
    }
    /* The entry first: making it may allocate, and nothing is mapped yet to undo. */
    if (!rc && (rc = set_entry(p, u, ENTRY_WITH_FRAME(entry | ENTRY_RESIDENT, f))) != 0)
        exo_pager_set_failure(p, "no memory for the page table entry of unit %llu",
                              (unsigned long long)u);
    else if (rc)
        exo_pager_set_failure(p, "%s store read of unit %llu failed: %s", p->store->kind,
                              (unsigned long long)u, exomem_strerror(rc));
    uint64_t addr = unit_addr(p, u);
    if (!rc && (rc = exo_os_uffd_copy(p->uffd, addr, src, p->unit, !write, false)) != 0) {
        exo_pager_set_failure(p, "filling unit %llu failed: %s", (unsigned long long)u,
                              exomem_strerror(rc));
        set_entry(p, u, entry);
    }
    if (rc) {
        release_frame(p, f);
        return rc;
    }
    p->frames[f] = (struct frame){.unit = u, .prev = NO_FRAME, .next = NO_FRAME, .used = true,
                                  .dirty = write, .wp = !write};
    p->resident++;
    exo_pager_note_occupancy(p);
    p->dirty += write;
    exo_pager_policy_filled(p, f, write);
    if (zero)
        p->stats->zero_fills++;
    else
        p->stats->store_reads++;
    if (prefetch)
        p->stats->readaheads++;
    return 0;
}

int exo_pager_fill(struct exo_pager *p, uint64_t u, bool count_as_readahead)
{
    return fill_unit(p, u, false, count_as_readahead);
}

/* Units to read ahead after a fault on unit u. */
static uint64_t readahead_for(const struct exo_pager *p, uint64_t u)
{
    if (u >= p->seq_lo && u < p->seq_hi)
        return p->seq_ahead;
    return p->readahead;
}

int exo_pager_serve(struct exo_pager *p, uint64_t addr, bool write)
{
    uint64_t u = (addr - p->base) / p->unit;
    uint64_t entry = get_entry(p, u);
    if (entry & ENTRY_RESIDENT) {
        uint32_t f = ENTRY_FRAME(entry);
        struct frame *fr = &p->frames[f];
        if (!write || !fr->wp) /* served already by another fault: just let it go on */
            return exo_os_uffd_wake(p->uffd, unit_addr(p, u), p->unit);
        int rc = exo_os_uffd_wp(p->uffd, unit_addr(p, u), p->unit, false, false);
        if (rc)
            return rc;
        fr->wp = false;
        if (!fr->dirty) {
            fr->dirty = true;
            p->dirty++;
            exo_pager_note_occupancy(p);
            p->stats->write_faults++;
        }
        exo_pager_policy_referenced(p, f, true);
        return 0;
    }
    int rc = fill_unit(p, u, write, false);
    if (rc)
        return rc;
    p->stats->faults++;
    uint64_t ahead = readahead_for(p, u);
    if (ahead) {
        uint32_t f = ENTRY_FRAME(get_entry(p, u));
        p->frames[f].busy = true; /* read-ahead must not evict the unit it follows */
        for (uint64_t k = 1; k <= ahead && u + k < p->nunits; k++)
            if (fill_unit(p, u + k, false, true) != 0)
                break;
        p->frames[f].busy = false;
    }
    return 0;
}

void exo_pager_unpoison(struct exo_pager *p, uint64_t u)
{
    uint64_t entry = get_entry(p, u);
    if (!(entry & ENTRY_POISONED))
        return;
    exo_os_drop_pages(unit_addr(p, u), p->unit); /* removes the poison marker */
    set_entry(p, u, entry & ~ENTRY_POISONED);
}
