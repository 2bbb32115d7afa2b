/* Escape sets: for one allocation, the memory slots known to hold a pointer into it, with
 * the pointer each was last told to hold (the paper's Allocation-to-Escape map, one set per
 * allocation). Open addressing on the slot address; slot 0 means empty. Not thread-safe:
 * the runtime's lock guards them, as it does the allocation table. */
#include "carat/alloc_table.h"
#include "carat/carat_internal.h"
#include "carat/carat_mem.h"
#include "internal.h"
#include "os/os.h"

#include <string.h>

/* A mixing hash (splitmix64's finaliser), not a plain multiplication: a multiplicative hash
 * is linear, so the slots of a moved block (old addresses plus a constant) land on the old
 * slots' pattern shifted by a constant, and a block full of pointers to itself (SQLite's
 * sorter list, 2 MB of them) grew runs of 46,000 occupied entries that made every probe
 * of the set walk them. */
static uint32_t slot_hash(uintptr_t slot, uint32_t cap)
{
    uint64_t x = slot;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return (uint32_t)(x ^ (x >> 31)) & (cap - 1);
}

/* Where slot is in s, or the empty entry that ends its probe run (s->cap > 0). */
static uint32_t probe(const struct escape_set *s, uintptr_t slot)
{
    uint32_t i = slot_hash(slot, s->cap);
    while (s->slots[i].slot && s->slots[i].slot != slot)
        i = (i + 1) & (s->cap - 1);
    return i;
}

static void set_put(struct escape_set *s, struct escape_slot e)
{
    uint32_t i = probe(s, e.slot);
    if (!s->slots[i].slot)
        s->count++;
    s->slots[i] = e;
}

static bool set_full(const struct escape_set *s)
{
    return (uint64_t)(s->count + 1) * 4 > (uint64_t)s->cap * 3;   /* keep load under 3/4 */
}

int exo_carat_escape_set_add(struct alloc_table *t, struct escape_set *s, uintptr_t slot,
                             uintptr_t value, bool in_alloc, bool may_purge)
{
    /* A slot already there only gets its new value: a set at its limit need not grow (nor
     * be purged) for the slot it holds. */
    if (s->cap) {
        uint32_t i = probe(s, slot);
        if (s->slots[i].slot) {
            s->slots[i] = escape_slot_make(slot, value, in_alloc);
            return 0;
        }
    }
    /* Purge first only if it pays: a quarter of the set freed means a quarter of its size
     * in adds before the next purge, so each add costs O(1) on average. */
    bool grow = set_full(s);
    if (grow && may_purge && s->cap >= 16)
        grow = exo_carat_escape_set_purge(t, s) * 4 < s->cap;
    if (grow) {
        uint32_t cap = s->cap ? s->cap * 2 : 4;
        struct escape_set bigger = { exo_carat_mem_alloc(cap * sizeof *s->slots), cap, 0 };
        if (!bigger.slots)
            return -EXO_ENOMEM;
        for (uint32_t i = 0; i < s->cap; i++)
            if (s->slots[i].slot)
                set_put(&bigger, s->slots[i]);
        t->bytes += (uint64_t)(cap - s->cap) * sizeof *s->slots;
        exo_carat_alloc_table_note_peak(t);
        exo_carat_mem_free(s->slots, s->cap * sizeof *s->slots);
        *s = bigger;
    }
    set_put(s, escape_slot_make(slot, value, in_alloc));
    return 0;
}

void exo_carat_escape_set_remove(struct escape_set *s, uintptr_t slot)
{
    if (!s->cap)
        return;
    uint32_t i = probe(s, slot);
    if (!s->slots[i].slot)
        return;
    s->slots[i].slot = 0;
    s->count--;
    /* Re-place the rest of the probe run so lookups never stop at the new hole. */
    for (uint32_t j = (i + 1) & (s->cap - 1); s->slots[j].slot; j = (j + 1) & (s->cap - 1)) {
        struct escape_slot e = s->slots[j];
        s->slots[j].slot = 0;
        s->count--;
        set_put(s, e);
    }
}

/* Drop the slots of s that no longer hold the pointer they were told to hold, and those
 * that lay in a tracked allocation and lie in none now: freed memory, which a move leaves
 * alone anyway (move.c's slot_usable); a store into it once it is allocated again is a new
 * escape. Only slots in memory the table says is live are read, through the kernel
 * (exo_os_read_self), not directly: a tracked block freed by code the plugin never saw
 * may be unmapped by now, and a clean-up must not crash the program over it (an unreadable
 * slot is dropped). Reading races the program's writers, which is fine: a slot being
 * written has its new value's escape logged, and applied before any move. */
uint32_t exo_carat_escape_set_purge(struct alloc_table *t, struct escape_set *s)
{
    uintptr_t *addr = exo_carat_mem_alloc(s->cap * sizeof *addr);
    uintptr_t *word = exo_carat_mem_alloc(s->cap * sizeof *word);
    bool *ok = exo_carat_mem_alloc(s->cap * sizeof *ok);
    uint32_t n = 0, dropped = 0;
    if (!addr || !word || !ok)
        goto out;   /* no memory for the clean-up: the set grows instead */
    struct alloc *in = NULL;   /* the allocation the last slot was in: slots come in runs */
    uint32_t dead = 0;         /* freed slots, kept at the end of addr */
    for (uint32_t i = 0; i < s->cap; i++) {
        uintptr_t slot = s->slots[i].slot;
        if (!slot)
            continue;
        if (!in || slot - in->base >= in->size)
            in = exo_carat_alloc_table_find(t, slot);
        if (in && slot + 8 <= in->base + in->size)
            addr[n++] = slot;
        else if (!in && escape_in_alloc(&s->slots[i]))
            addr[s->cap - ++dead] = slot;   /* n + dead <= count < cap: no overlap */
    }
    for (uint32_t k = 0; k < dead; k++)   /* after the walk: removal shifts entries */
        exo_carat_escape_set_remove(s, addr[s->cap - 1 - k]);
    dropped = dead;
    if (exo_os_read_self(addr, word, ok, n) != 0)
        goto out;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = probe(s, addr[k]);
        if (s->slots[i].slot && (!ok[k] || word[k] != escape_value(&s->slots[i]))) {
            exo_carat_escape_set_remove(s, addr[k]);
            dropped++;
        }
    }
out:
    exo_carat_mem_free(addr, s->cap * sizeof *addr);
    exo_carat_mem_free(word, s->cap * sizeof *word);
    exo_carat_mem_free(ok, s->cap * sizeof *ok);
    return dropped;
}

int exo_carat_escape_set_rekey(struct escape_set *s, uintptr_t lo, uintptr_t len,
                               intptr_t delta)
{
    if (!s->count)
        return 0;
    struct escape_set out = { exo_carat_mem_alloc(s->cap * sizeof *s->slots), s->cap, 0 };
    if (!out.slots)
        return -EXO_ENOMEM;
    /* The others first: where a stale slot recorded in memory the new block now occupies
     * meets a moved one, the moved one (the block's live content) wins. */
    for (int moved = 0; moved < 2; moved++)
        for (uint32_t i = 0; i < s->cap; i++) {
            struct escape_slot e = s->slots[i];
            if (e.slot && (e.slot - lo < len) == (bool)moved) {
                if (moved)
                    e.slot += (uintptr_t)delta;
                set_put(&out, e);
            }
        }
    exo_carat_mem_free(s->slots, s->cap * sizeof *s->slots);
    *s = out;
    return 0;
}

void exo_carat_escape_set_prefetch(const struct escape_set *s, uintptr_t slot)
{
    if (s->cap)
        __builtin_prefetch(&s->slots[slot_hash(slot, s->cap)]);
}

bool exo_carat_escape_set_holds(const struct escape_set *s, uintptr_t slot, uintptr_t value)
{
    if (!s->cap)
        return false;
    uint32_t i = probe(s, slot);
    return s->slots[i].slot && escape_value(&s->slots[i]) == value;
}

void exo_carat_escape_set_free(struct alloc_table *t, struct escape_set *s)
{
    t->bytes -= (uint64_t)s->cap * sizeof *s->slots;
    exo_carat_mem_free(s->slots, s->cap * sizeof *s->slots);
    memset(s, 0, sizeof *s);
}
