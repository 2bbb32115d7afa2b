/* The address map (addr_map.h). */
#include "carat/addr_map.h"
#include "carat/carat_mem.h"
#include "internal.h"

#define FIRST_CAP 1024

/* Fibonacci hashing: the product's high half mixes every bit of the key, including the
 * high ones that differ between pages and the middle ones that differ between blocks. */
static uint32_t home_of(uintptr_t key, uint32_t cap)
{
    return (uint32_t)(key * 0x9e3779b97f4a7c15ull >> 32) & (cap - 1);
}

void exo_carat_addr_map_put(struct addr_map *m, uintptr_t key, void *value)
{
    uint32_t i = home_of(key, m->cap);
    while (m->e[i].value)
        i = (i + 1) & (m->cap - 1);
    m->e[i] = (struct addr_map_entry){ key, value };
    m->count++;
}

int exo_carat_addr_map_reserve(struct addr_map *m)
{
    if ((m->count + 1) * 2 <= m->cap)
        return 0;
    uint32_t old_cap = m->cap, cap = old_cap ? old_cap * 2 : FIRST_CAP;
    struct addr_map_entry *old = m->e, *bigger = exo_carat_mem_alloc(cap * sizeof *bigger);
    if (!bigger)
        return -EXO_ENOMEM;
    m->e = bigger;
    m->cap = cap;
    m->count = 0;
    for (uint32_t i = 0; i < old_cap; i++)
        if (old[i].value)
            exo_carat_addr_map_put(m, old[i].key, old[i].value);
    exo_carat_mem_free(old, old_cap * sizeof *old);
    m->bytes = (uint64_t)cap * sizeof *bigger;
    return 0;
}

uint32_t exo_carat_addr_map_find(const struct addr_map *m, uintptr_t key)
{
    if (!m->cap)
        return UINT32_MAX;
    for (uint32_t i = home_of(key, m->cap); m->e[i].value; i = (i + 1) & (m->cap - 1))
        if (m->e[i].key == key)
            return i;
    return UINT32_MAX;
}

void *exo_carat_addr_map_get(const struct addr_map *m, uintptr_t key)
{
    uint32_t i = exo_carat_addr_map_find(m, key);
    return i == UINT32_MAX ? NULL : m->e[i].value;
}

void exo_carat_addr_map_remove_at(struct addr_map *m, uint32_t i)
{
    uint32_t mask = m->cap - 1;
    for (uint32_t j = (i + 1) & mask; m->e[j].value; j = (j + 1) & mask) {
        uint32_t home = home_of(m->e[j].key, m->cap);
        if (((j - home) & mask) >= ((j - i) & mask)) {   /* home at or before the hole */
            m->e[i] = m->e[j];
            i = j;
        }
    }
    m->e[i] = (struct addr_map_entry){ 0, NULL };
    m->count--;
}
