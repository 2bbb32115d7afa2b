/* Concurrent, incremental checkpoints of a running program's memory region (Appel and Li,
 * "Virtual memory primitives for user programs", application 3).
 *
 * A checkpoint saves the region as it was at the instant ckpt_begin() returned, while the
 * program keeps running: ckpt_begin write-protects the pages to save (PROTN), a background
 * thread copies them to the checkpoint file, and a write by the program to a page not yet
 * copied traps (TRAP): the handler copies that page first, then makes it writable (UNPROT)
 * and the write proceeds. The program pauses only for the protection call and for the
 * traps it takes.
 *
 * Incremental checkpoints (CKPT_TRACK): after a page is copied it stays write-protected, so
 * the first write to it after the checkpoint traps once, and that trap is how the
 * checkpointer learns the page is dirty (the paper's DIRTY by protection). The same
 * protection thus serves both copy-on-write and dirty tracking; a separate dirty-tracking
 * region could not cover the same pages anyway (regions may not overlap). An incremental
 * checkpoint copies only the pages written since the previous checkpoint.
 *
 * On disk, in the checkpoint directory: ckpt-NNNNNN.dat files (a header, the sorted page
 * index of a delta, the page images) and MANIFEST, the chain "base + deltas", replaced
 * atomically (write, fsync, rename) once a checkpoint is complete. ckpt_restore() rebuilds
 * the region from the chain.
 *
 * Calls return 0 or a negative exomem error code (errno set, exomem_last_error() says why).
 * One checkpointer per region; its calls are made by one thread (the program's), while any
 * thread of the program may write to the region.
 */
#ifndef EXOMEM_CKPT_H
#define EXOMEM_CKPT_H

#include <exomem/vm.h>
#include <stddef.h>
#include <stdint.h>

struct ckpt;

enum ckpt_kind {
    CKPT_FULL = 0,        /* every page; starts a new chain */
    CKPT_INCREMENTAL = 1, /* the pages written since the previous checkpoint (needs CKPT_TRACK) */
};

/* Option flags. */
enum {
    CKPT_TRACK = 1u << 0,       /* keep copied pages protected to learn which are written */
    CKPT_FSYNC = 1u << 1,       /* fsync checkpoint files (off: for tmpfs and benchmarks) */
    CKPT_HOLD_COPIER = 1u << 2, /* test hook: the copier waits for ckpt_release_copier() */
};

struct ckpt_options {
    exo_vm_engine engine; /* trap engine: EXO_VM_ENGINE_SIGNAL, _UFFD or _AUTO */
    unsigned flags;       /* CKPT_* */
};

/* What the checkpointer did; the "last" fields describe the latest checkpoint. */
struct ckpt_stats {
    unsigned chain_len;         /* checkpoints in the current chain (base + deltas) */
    uint64_t last_pages;        /* pages the latest checkpoint wrote */
    uint64_t last_bytes;        /* bytes it wrote (header, index and pages) */
    uint64_t last_cow_copies;   /* pages it copied in the fault handler (copy-on-write) */
    uint64_t last_begin_ns;     /* time ckpt_begin (or stop-and-copy) kept the program */
    uint64_t last_total_ns;     /* from ckpt_begin until the checkpoint was complete */
    uint64_t traps;             /* handler entries, all checkpoints */
    uint64_t dirty_traps;       /* traps that only recorded a dirty page */
    uint64_t handler_ns;        /* time spent inside the handler, all traps */
};

/* Attach a checkpointer to [base, base+len) (page-aligned, mapped read-write, owned by the
 * caller) writing into directory `dir` (created if missing). Makes a trap region on it. */
int ckpt_create(void *base, size_t len, const char *dir, const struct ckpt_options *opt,
                struct ckpt **out);

/* Start a concurrent checkpoint of `kind` and return as soon as the pages are protected;
 * the checkpoint is the region's content at that instant. EXO_EBUSY if one is running,
 * EXO_EINVAL for an incremental one without CKPT_TRACK or without a base. */
int ckpt_begin(struct ckpt *c, enum ckpt_kind kind);

/* Is the running checkpoint complete (1), still copying (0)? */
int ckpt_done(struct ckpt *c);

/* Wait for the running checkpoint (if any) to complete; returns its result. */
int ckpt_wait(struct ckpt *c);

/* Test hook for CKPT_HOLD_COPIER: let the waiting copier start. */
void ckpt_release_copier(struct ckpt *c);

/* The baseline: stop-and-copy. Writes the checkpoint synchronously (the program, being
 * this thread, is stopped throughout) and returns when it is complete. */
int ckpt_stop_and_copy(struct ckpt *c, enum ckpt_kind kind);

/* Copy the statistics (the last_* fields describe a checkpoint once ckpt_done() says so). */
void ckpt_get_stats(const struct ckpt *c, struct ckpt_stats *out);

/* The trap engine the region uses. */
exo_vm_engine ckpt_engine(const struct ckpt *c);

/* Wait for a running checkpoint, remove the protection and the region, free. The memory
 * and the checkpoint files stay. */
int ckpt_destroy(struct ckpt *c);

/* Rebuild a region of len bytes at base (mapped writable, not under a checkpointer) from
 * the chain in `dir`: the base and its first `upto` deltas' worth (upto = 0: the whole
 * chain; upto = 1: the base only). EXO_ECORRUPT for a damaged chain, EXO_ESIZE if len
 * differs from the checkpointed region's. */
int ckpt_restore(const char *dir, void *base, size_t len, unsigned upto);

#endif
