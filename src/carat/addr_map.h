/* A map from an address-like key (a block's base, a page number) to a pointer: open
 * addressing with linear probing, at most half full, removal by shifting the rest of a probe
 * run back (no tombstones). The allocation table's hash by base and the page index's pages
 * are both one. Memory from the runtime's own allocator; not thread-safe (the runtime's
 * lock guards its users). */
#ifndef EXOMEM_CARAT_ADDR_MAP_H
#define EXOMEM_CARAT_ADDR_MAP_H

#include <stdint.h>

struct addr_map_entry {
    uintptr_t key;
    void *value;             /* NULL: an empty entry */
};

struct addr_map {
    struct addr_map_entry *e;
    uint32_t cap, count;
    uint64_t bytes;          /* memory of the entries */
};

/* Make room for one more key. -EXO_ENOMEM, and nothing changed. */
int exo_carat_addr_map_reserve(struct addr_map *m);
/* Add key (not in the map) with value (not NULL); room was reserved. */
void exo_carat_addr_map_put(struct addr_map *m, uintptr_t key, void *value);
/* The index of key's entry, or UINT32_MAX. */
uint32_t exo_carat_addr_map_find(const struct addr_map *m, uintptr_t key);
/* The value of key, or NULL. */
void *exo_carat_addr_map_get(const struct addr_map *m, uintptr_t key);
/* Remove the entry at index i (from exo_carat_addr_map_find). */
void exo_carat_addr_map_remove_at(struct addr_map *m, uint32_t i);

#endif
