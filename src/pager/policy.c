/* Replacement policies over the list of resident frames (oldest first).
 *
 * What a policy can see on this kernel: user space gets no accessed bits, so a unit is
 * "referenced" when it is filled, and when a write to it faults: its first write after a
 * fill, and, for CLOCK, its first write after the hand passed it (the hand write-protects
 * a dirty unit it passes, so a unit written again is seen again). Reads of a resident unit
 * are invisible: under CLOCK a unit only read is evicted on the hand's second pass.
 *
 *   FIFO   the list is in fill order; evict its head
 *   LRU    a reference moves the unit to the tail; evict the head
 *   MRU    as LRU, but evict the tail: the unit used last, which a cyclic scan needs last
 *   CLOCK  the hand sweeps the list; a referenced unit loses its bit and is passed over
 *   CUSTOM the application's callbacks name the victim (FIFO when they name none) */
#include "pager/pager_internal.h"
#include "os/os_vm.h"

static void unlink_frame(struct exo_pager *p, uint32_t f)
{
    struct frame *fr = &p->frames[f];
    if (p->hand == f)
        p->hand = fr->next;
    if (fr->prev != NO_FRAME)
        p->frames[fr->prev].next = fr->next;
    else
        p->head = fr->next;
    if (fr->next != NO_FRAME)
        p->frames[fr->next].prev = fr->prev;
    else
        p->tail = fr->prev;
    fr->prev = fr->next = NO_FRAME;
}

static void append(struct exo_pager *p, uint32_t f)
{
    struct frame *fr = &p->frames[f];
    fr->prev = p->tail;
    fr->next = NO_FRAME;
    if (p->tail != NO_FRAME)
        p->frames[p->tail].next = f;
    else
        p->head = f;
    p->tail = f;
}

void exo_pager_policy_filled(struct exo_pager *p, uint32_t f, bool write)
{
    append(p, f);
    p->frames[f].ref = true;
    if (p->policy == EXO_PAGER_CUSTOM && p->callbacks.filled)
        p->callbacks.filled(p->callbacks.arg, p->frames[f].unit, write);
}

void exo_pager_policy_referenced(struct exo_pager *p, uint32_t f, bool write)
{
    p->frames[f].ref = true;
    if (p->policy == EXO_PAGER_LRU || p->policy == EXO_PAGER_MRU) {
        unlink_frame(p, f);
        append(p, f);
    } else if (p->policy == EXO_PAGER_CUSTOM && p->callbacks.referenced) {
        p->callbacks.referenced(p->callbacks.arg, p->frames[f].unit, write);
    }
}

void exo_pager_policy_removed(struct exo_pager *p, uint32_t f)
{
    unlink_frame(p, f);
    if (p->policy == EXO_PAGER_CUSTOM && p->callbacks.evicted)
        p->callbacks.evicted(p->callbacks.arg, p->frames[f].unit);
}

static bool evictable(const struct exo_pager *p, uint32_t f)
{
    return f != NO_FRAME && p->frames[f].used && !p->frames[f].pinned && !p->frames[f].busy;
}

static uint32_t first_from_head(struct exo_pager *p)
{
    for (uint32_t f = p->head; f != NO_FRAME; f = p->frames[f].next)
        if (evictable(p, f))
            return f;
    return NO_FRAME;
}

static uint32_t first_from_tail(struct exo_pager *p)
{
    for (uint32_t f = p->tail; f != NO_FRAME; f = p->frames[f].prev)
        if (evictable(p, f))
            return f;
    return NO_FRAME;
}

/* Second chance. Passing a referenced unit clears its bit; a dirty one is write-protected
 * again (its data stays dirty) so that its next write is seen as a reference. Two sweeps
 * find a victim whenever one is evictable. */
static uint32_t clock_victim(struct exo_pager *p)
{
    uint64_t steps = 2 * (uint64_t)p->resident + 2;
    for (uint64_t i = 0; i < steps; i++) {
        if (p->hand == NO_FRAME)
            p->hand = p->head;
        uint32_t f = p->hand;
        if (f == NO_FRAME)
            return NO_FRAME;
        p->hand = p->frames[f].next;
        struct frame *fr = &p->frames[f];
        if (!evictable(p, f))
            continue;
        if (!fr->ref)
            return f;
        fr->ref = false;
        if (fr->dirty && !fr->wp &&
            exo_os_uffd_wp(p->uffd, p->base + fr->unit * p->unit, p->unit, true, false) == 0)
            fr->wp = true;
    }
    return first_from_head(p);
}

static uint32_t custom_victim(struct exo_pager *p)
{
    size_t unit = p->callbacks.victim(p->callbacks.arg);
    if (unit != SIZE_MAX && unit < p->nunits) {
        uint64_t *e = p->table->ops->find(p->table, unit);
        if (e && (*e & ENTRY_RESIDENT) && evictable(p, ENTRY_FRAME(*e)))
            return ENTRY_FRAME(*e);
    }
    return first_from_head(p);
}

uint32_t exo_pager_policy_victim(struct exo_pager *p)
{
    switch (p->policy) {
    case EXO_PAGER_MRU: return first_from_tail(p);
    case EXO_PAGER_CLOCK: return clock_victim(p);
    case EXO_PAGER_CUSTOM: return custom_victim(p);
    default: return first_from_head(p); /* FIFO, LRU */
    }
}
