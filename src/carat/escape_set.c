/* Escape sets: for one allocation, the memory slots known to hold a pointer into it, with
 * the pointer each was last told to hold (the paper's Allocation-to-Escape map, one set per
 * allocation). Open addressing on the slot address; slot 0 means empty. Not thread-safe:
 * the runtime's lock guards them, as it does the allocation table. */
#include "carat/alloc_table.h"
#include "carat/carat_internal.h"
#include "carat/carat_mem.h"
#include "internal.h"

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
    set_put(s, (struct escape_slot){ slot, value, in_alloc });
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

/* The word at addr, read as the program left it (racing its writers is fine: a slot being
 * written has its new value's escape logged, and applied before any move). */
CARAT_NO_ASAN static uintptr_t read_word(uintptr_t addr)
{
    return __atomic_load_n((const uintptr_t *)addr, __ATOMIC_RELAXED);
}

uint32_t exo_carat_escape_set_purge(struct alloc_table *t, struct escape_set *s)
{
    uint32_t dropped = 0;
    struct alloc *in = NULL;   /* the allocation the last slot was in: slots come in runs */
    for (uint32_t i = 0; i < s->cap;) {
        uintptr_t slot = s->slots[i].slot;
        if (slot && (!in || slot - in->base >= in->size))
            in = exo_carat_alloc_table_find(t, slot);
        if (slot && in && slot + 8 <= in->base + in->size &&
            read_word(slot) != s->slots[i].value) {
            /* Removing re-places the rest of the run: position i may hold another slot
             * now, so look at it again. (One re-placed across the end is not looked at:
             * this is a clean-up, not a guarantee.) */
            exo_carat_escape_set_remove(s, slot);
            dropped++;
        } else {
            i++;
        }
    }
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

bool exo_carat_escape_set_holds(const struct escape_set *s, uintptr_t slot, uintptr_t value)
{
    if (!s->cap)
        return false;
    uint32_t i = probe(s, slot);
    return s->slots[i].slot && s->slots[i].value == value;
}

void exo_carat_escape_set_free(struct alloc_table *t, struct escape_set *s)
{
    t->bytes -= (uint64_t)s->cap * sizeof *s->slots;
    exo_carat_mem_free(s->slots, s->cap * sizeof *s->slots);
    memset(s, 0, sizeof *s);
}
