/* The file layout that the file stores share: unit u at offset u * size of one sparse file.
 * What the file holds past its end, or in a hole, reads as -EXO_ENOENT or zeros, so units
 * never written cost no disk; discard punches a hole. The layout, its end, usage and discard
 * live in store_file.c; a kind supplies only how bytes move (struct file_io): pread/pwrite
 * for exo_pager_store_file, rings for exo_pager_store_file_uring (store_file_uring.c). Both
 * kinds read each other's files, so a region can switch between them over one file. */
#ifndef EXOMEM_PAGER_STORE_FILE_H
#define EXOMEM_PAGER_STORE_FILE_H

#include "pager/store.h"

#include <sys/types.h>

struct file_store;

/* How a kind of file store moves bytes: calls that may run in a SIGBUS handler. */
struct file_io {
    /* One read of up to len bytes at off: the count (0 at the end) or a -EXO_ code. */
    long (*read_some)(struct file_store *f, void *buf, size_t len, off_t off);
    /* Write all len bytes at off: 0 or a -EXO_ code. */
    int (*write_all)(struct file_store *f, const void *buf, size_t len, off_t off);
    /* Free what the kind added (NULL: nothing), before the file is closed. */
    void (*fini)(struct file_store *f);
};

/* The first member of every file store (freed with free() at close). */
struct file_store {
    exo_pager_store base;
    int fd;
    const struct file_io *io;
    atomic_uint_fast64_t end;   /* the file's size, as far as we made it */
    atomic_uint_fast64_t units; /* units written through this store */
};

/* Set f (the caller's, zeroed) up over fd, an open regular file that f then owns, as a
 * store of `kind` moving bytes with io: 0, -EXO_EINVAL (not a regular file), the kernel's
 * fstat errors; on failure fd is still the caller's. Records no message. */
int exo_pager_file_store_adopt(struct file_store *f, int fd, const char *kind,
                               const struct file_io *io);

/* Open (or create, mode 0600) the store's file at path and set f up as above. On failure
 * the message names path and the cause, nothing stays open, and -code is returned (the
 * kernel's open errors, -EXO_EINVAL for a path that is not a regular file). */
int exo_pager_file_store_open(struct file_store *f, const char *path, const char *kind,
                              const struct file_io *io);

/* How many rings a store made by exo_pager_store_file_uring has made so far (for tests and
 * benchmarks). */
unsigned exo_pager_uring_rings(exo_pager_store *s);

#endif
