/* The pager's page-table structures: a map from unit index to a 64-bit entry (pager
 * state: resident frame, store copy). The application chooses the structure per region
 * (exo_pager_table); all three keep the same contract:
 *
 *   find    the entry of unit u, or NULL when u has none (its entry is 0)
 *   insert  the entry of unit u, made (0) when missing; NULL only when out of memory.
 *           May move other entries: a pointer from find/insert is valid until the next
 *           insert or remove.
 *   remove  forget u's entry (the same as setting it to 0)
 *   bytes   memory the structure uses now
 *   each    call fn for every unit with a non-zero entry, in no set order, until fn returns
 *           non-zero (that value is returned); fn may change the entry but not insert or
 *           remove
 *
 * Not thread-safe: the region's lock guards its table. */
#ifndef EXOMEM_PAGER_TABLE_H
#define EXOMEM_PAGER_TABLE_H

#include <exomem/pager.h>
#include <stddef.h>
#include <stdint.h>

struct pager_table;

struct pager_table_ops {
    uint64_t *(*find)(struct pager_table *t, uint64_t unit);
    uint64_t *(*insert)(struct pager_table *t, uint64_t unit);
    void (*remove)(struct pager_table *t, uint64_t unit);
    size_t (*bytes)(const struct pager_table *t);
    int (*each)(struct pager_table *t, int (*fn)(uint64_t unit, uint64_t *entry, void *arg),
                void *arg);
    void (*destroy)(struct pager_table *t);
};

struct pager_table {
    const struct pager_table_ops *ops;
    uint64_t nunits;
};

/* Make a table of `kind` for units [0, nunits): 0, -EXO_EINVAL (unknown kind) or
 * -EXO_ENOMEM. */
int exo_pager_table_new(exo_pager_table kind, uint64_t nunits, struct pager_table **out);

/* t->ops->each(t, fn, arg). */
int exo_pager_table_each(struct pager_table *t,
                         int (*fn)(uint64_t unit, uint64_t *entry, void *arg), void *arg);

struct pager_table *exo_pager_radix_new(uint64_t nunits);
struct pager_table *exo_pager_hash_new(uint64_t nunits);
struct pager_table *exo_pager_vector_new(uint64_t nunits);

#endif
