/* Repair of a heap on 1 GiB pages that fork() failed to give the child (fork_repair.c).
 * The three hooks run inside the preload library's pthread_atfork handlers, with its heap
 * lock held; none allocates. */
#ifndef EXOMEM_FORK_REPAIR_H
#define EXOMEM_FORK_REPAIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Check forks for the heap [base, base+size) mapped with pages of `page` bytes; does nothing
 * for pages under 1 GiB, which fork copies reliably. Call once, before any fork. */
void fork_repair_init(uintptr_t base, size_t size, size_t page);

/* Before fork(): note the parent's pages and open the pipes. */
void fork_repair_prepare(void);

/* After fork(), in the parent: copy in what the child lacks (blocks until the child has
 * checked; returns at once when fork failed). */
void fork_repair_parent(void);

/* After fork(), in the child: report missing pages and wait for them; exits with status 127
 * if they cannot be had. */
void fork_repair_child(void);

#endif
