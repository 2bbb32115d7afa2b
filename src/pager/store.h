/* Backing stores behind pager regions. A store keeps units by index; one region uses a
 * store at a time. Every call returns 0 or a negative exomem code and never records a
 * message (the pager does, naming the region and unit). Calls may run in a SIGBUS handler
 * (EXO_PAGER_SIGBUS delivery): the file store uses only async-signal-safe calls there; the
 * others allocate (the memory store's compression libraries, the Redis stores' hiredis),
 * which is safe as long as the faulting access was not inside the allocator itself
 * (docs/pager.md). */
#ifndef EXOMEM_PAGER_STORE_H
#define EXOMEM_PAGER_STORE_H

#include <exomem/pager.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct store_ops {
    /* Read unit into buf (size bytes): -EXO_ENOENT when the store has never held it. */
    int (*read)(exo_pager_store *s, uint64_t unit, size_t size, void *buf);
    int (*write)(exo_pager_store *s, uint64_t unit, size_t size, const void *buf);
    /* Forget unit (reads give -EXO_ENOENT afterwards). */
    int (*discard)(exo_pager_store *s, uint64_t unit, size_t size);
    void (*usage)(exo_pager_store *s, uint64_t *bytes, uint64_t *units);
    void (*close)(exo_pager_store *s);
};

struct exo_pager_store {
    const struct store_ops *ops;
    const char *kind;          /* "file", "memory-lz4", ... for messages */
    atomic_int users;          /* regions using it: 0 or 1 */
    atomic_uint fail_next;     /* test hook: calls left to fail */
};

/* The calls the pager makes: the test hook first, then the store. */
int exo_pager_store_read(exo_pager_store *s, uint64_t unit, size_t size, void *buf);
int exo_pager_store_write(exo_pager_store *s, uint64_t unit, size_t size, const void *buf);
int exo_pager_store_discard(exo_pager_store *s, uint64_t unit, size_t size);

/* A file store over fd (a regular file; owned from now on, closed on failure): 0, -EXO_EINVAL
 * (not a regular file), -EXO_ENOMEM, the kernel's fstat errors. Records no message. */
int exo_pager_store_file_fd(int fd, exo_pager_store **out);

#endif
