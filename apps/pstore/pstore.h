/* A persistent store (Appel and Li, "Virtual memory primitives for user programs",
 * application 5): a heap kept in a file and mapped at the address recorded in the file, so
 * that pointers stored in it stay valid across runs and processes.
 *
 * The working mapping is private (MAP_PRIVATE of the file): what the program writes never
 * reaches the file until pstore_commit(). A dirty-tracking region (DIRTY) over the mapping
 * tells commit which pages were written; commit writes only those, atomically, through a
 * redo log next to the file (FILE.log): the pages with their checksums, fsync, a commit
 * record, fsync; then the pages go to the file, fsync, and the log is emptied. Opening a
 * store first recovers: a complete log (valid commit record) is replayed, an incomplete one
 * is discarded (the file was not touched yet); a complete log whose pages do not match
 * their checksums is refused (EXO_ECORRUPT), since the file may hold part of it.
 *
 * One process has a store open at a time (an exclusive lock on the file: EXO_EBUSY).
 * Allocation is thread-safe; the key-value calls and pstore_commit are not (no thread may
 * write to the store while a commit runs: the log must hold what the checksums say).
 * Calls return 0 or a negative exomem code (errno set; exomem_last_error() says why);
 * allocation calls return NULL and set *code where given.
 */
#ifndef EXOMEM_PSTORE_H
#define EXOMEM_PSTORE_H

#include <exomem/vm.h>
#include <stddef.h>
#include <stdint.h>

struct pstore;

/* How a store is opened. Zero-initialise. */
struct pstore_options {
    exo_vm_engine engine; /* DIRTY engine (EXO_VM_ENGINE_AUTO: the best one available) */
    int crash_point;      /* test hook: PSTORE_CRASH_* (the process kills itself there) */
};

/* Test hook: where pstore_commit() kills its own process with SIGKILL. */
enum {
    PSTORE_CRASH_NONE = 0,
    PSTORE_CRASH_BEFORE_RECORD = 1, /* log pages written and synced, no commit record yet */
    PSTORE_CRASH_BEFORE_APPLY = 2,  /* commit record durable, file not yet touched */
    PSTORE_CRASH_MID_APPLY = 3,     /* about half of the pages written to the file */
};

struct pstore_stats {
    uint64_t commits;           /* successful commits since open */
    uint64_t last_commit_pages; /* pages the last commit wrote */
    uint64_t last_commit_bytes; /* bytes it wrote to the log and the file together */
    int recovered;              /* open replayed a complete log (1) or discarded an
                                   incomplete one (-1), or found none (0) */
};

/* Create the store file `path` (it must not exist: EXO_EEXIST) of `size` bytes, mapped at
 * `base` from then on (both page-aligned), with an empty heap and key-value table, and
 * commit it. Does not keep it open. */
int pstore_create(const char *path, uint64_t base, size_t size);

/* Recover and open the store at its recorded address. EXO_EOVERLAP if something else is
 * mapped there (the message names the range), EXO_ECORRUPT for a damaged file or log,
 * EXO_EBUSY if another process has it open. */
int pstore_open(const char *path, const struct pstore_options *opt, struct pstore **out);

/* Write the pages changed since the last commit, atomically. */
int pstore_commit(struct pstore *p);

/* Unmap the store, dropping what was not committed. */
int pstore_close(struct pstore *p);

/* Heap allocation inside the store (thread-safe). */
void *pstore_malloc(struct pstore *p, size_t size, int *code);
int pstore_free(struct pstore *p, void *ptr);

/* The application's root pointer (NULL in a new store). */
void *pstore_root(struct pstore *p);
void pstore_set_root(struct pstore *p, void *root);

/* The mapping: its address (fixed for the file's lifetime) and size. */
void *pstore_base(const struct pstore *p);
size_t pstore_size(const struct pstore *p);

/* A checksum of the whole mapped store, as it is in memory now. */
uint64_t pstore_checksum(const struct pstore *p);

/* The DIRTY engine in use, and the statistics. */
exo_vm_engine pstore_engine(const struct pstore *p);
void pstore_get_stats(const struct pstore *p, struct pstore_stats *out);

/* Walk the heap and the key-value table; 0 if consistent, else EXO_ECORRUPT. */
int pstore_check(struct pstore *p);

/* ---- the persistent key-value table (a chained hash table in the heap) ---- */

/* Insert or replace. */
int pstore_put(struct pstore *p, const void *key, size_t klen, const void *val, size_t vlen);

/* Find: *val points into the store (valid until the key is changed); EXO_ENOENT if absent. */
int pstore_get(struct pstore *p, const void *key, size_t klen, const void **val, size_t *vlen);

/* Remove; EXO_ENOENT if absent. */
int pstore_del(struct pstore *p, const void *key, size_t klen);

/* Number of keys. */
size_t pstore_count(struct pstore *p);

/* Call fn for each key (in table order); stops early when fn returns non-zero. */
int pstore_each(struct pstore *p,
                int (*fn)(const void *key, size_t klen, const void *val, size_t vlen, void *arg),
                void *arg);

#endif
