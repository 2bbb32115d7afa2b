/* The kernel's own paging as a peer: a memory cgroup (v1 memory.limit_in_bytes, or v2
 * memory.max where that controller is mounted) that limits a process to a budget, with swap
 * on zram or on a swap file. All of it needs root; everything made is undone at exit (also
 * after SIGINT/SIGTERM: call kswap_cleanup from the handler's path or rely on atexit). */
#ifndef EXOMEM_KERNEL_SWAP_H
#define EXOMEM_KERNEL_SWAP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum kswap_device { KSWAP_NONE, KSWAP_ZRAM, KSWAP_FILE };

/* Make a memory cgroup limited to limit_bytes. NULL when ready, else why not. */
const char *kswap_cgroup_make(uint64_t limit_bytes);

/* Move process pid into the cgroup (0 or -errno). */
int kswap_cgroup_enter(pid_t pid);

/* Turn swap on on one device of `bytes` (zram with lz4, or a file in dir) and every other
 * device of ours off; KSWAP_NONE turns ours off. NULL when ready, else why not. */
const char *kswap_use(enum kswap_device dev, uint64_t bytes, const char *dir);

/* Is swap of anyone else's on (it would take part in the kernel's runs)? */
bool kswap_foreign_swap(void);

/* Undo everything: swap off, zram reset, swap file removed, cgroup removed. Idempotent. */
void kswap_cleanup(void);

#endif
