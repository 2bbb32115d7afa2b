/* The process's writable mappings as a move reads them (mappings.c): from /proc/self/maps,
 * once per move and only when it needs them. Not thread-safe: the runtime's lock guards
 * them (a move holds it, with the world stopped). */
#ifndef EXOMEM_CARAT_MAPPINGS_H
#define EXOMEM_CARAT_MAPPINGS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Memory for the list, taken once: 0, or -EXO_ENOMEM (tried again at the next call). */
int exo_carat_mappings_reserve(void);
/* What was read is out of date (the world ran since): the next question reads it again. */
void exo_carat_mappings_stale(void);
/* Read the list if it is out of date (about 40 us). 0, or -EXO_ENOMEM (no list) or the
 * error of reading /proc/self/maps. */
int exo_carat_mappings_load(void);
/* The writable mapping holding the 8 bytes at a, as [*lo, *hi): false if none holds all of
 * them, or the list cannot be read. */
bool exo_carat_mappings_find(uintptr_t a, uintptr_t *lo, uintptr_t *hi);
/* Every writable mapping, as *n pairs [lo, hi) in address order (loaded first: NULL and 0
 * if the list cannot be read). */
const uintptr_t *exo_carat_mappings_all(int *n);
/* The mapping of thread tid's stack, its stack pointer sp in it: remembered across moves (a
 * thread's stack does not move while it lives), checked against sp (ids are reused). */
bool exo_carat_mappings_stack(pid_t tid, uintptr_t sp, uintptr_t *lo, uintptr_t *hi);

#endif
