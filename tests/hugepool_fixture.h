/* For tests that use huge pages: a mount namespace of their own (as root), a temporary
 * registry, and the huge page pools and the registry's private mounts put back as found at
 * exit, also after a failed check or a crash. */
#ifndef EXOMEM_HUGEPOOL_FIXTURE_H
#define EXOMEM_HUGEPOOL_FIXTURE_H

/* The pools' sizes when the fixture was made: [0] 2M, [1] 1G; -1 where the kernel has none. */
extern long hp_pool_start[2];

/* The registry's private mounts: [0] mnt/2M, [1] mnt/1G, [2] mnt/thp. */
extern char hp_mount_dirs[3][4096];

/* Set everything up (call first, instead of test_root_setup()); returns the registry. */
const char *hp_fixture(void);

/* The size of pool k (0: 2M, 1: 1G) now, or -1. */
long hp_read_pool(int k);

/* Set pool k's size (what the kernel gives may be less): 0 or -1. */
int hp_write_pool(int k, long pages);

#endif
