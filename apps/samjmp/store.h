/* Where samjmp keeps parsed alignment records between its stage processes (SpaceJMP
 * Figures 11 and 12).
 *
 * A store is a chain of equal chunks of memory with a header at the start of chunk 0.
 * Everything in it is named by an sj_ref, a 64-bit number, and sj_ptr() turns a ref into an
 * address by adding the store's `delta`:
 *   - VAS store: the chunks are segments of a named VAS at fixed, 1 GiB-aligned bases, so a
 *     ref IS the address (delta 0): raw pointers, valid in every process that switches in.
 *   - mmap store: the chunks are consecutive parts of one file that each process maps
 *     wherever the kernel puts it, so a ref is an offset in the file (delta = the address
 *     of the mapping): the region-based offsets the paper compares against.
 * The stage code is the same for both; only opening, growing and dropping differ.
 *
 * Space is taken with a bump allocator. Stages run in a chain (load, sort, index) and each
 * one's results live after the previous one's: redoing stage k first rolls the allocator
 * back to where stage k-1 ended and forgets the stages after it; a stage's `done` flag is
 * set last, after everything it wrote. So a stage killed half-way leaves its flag clear and
 * its space is taken back by the next run of it; nothing half-written is taken as done.
 *
 * Stages that write (load, sort, index) have the store to themselves; stages that only read
 * share it with each other. A VAS store is two VASes listing the same segments: '<name>'
 * read-write, so switching in takes the segments' exclusive locks, and '<name>.ro'
 * read-only, whose readers take shared locks. An mmap store's file is flock()ed, exclusive
 * or shared, and readers map it read-only. The kernel drops these locks when the holder
 * dies. Not thread-safe: one thread per process.
 */
#ifndef SAMJMP_STORE_H
#define SAMJMP_STORE_H

#include <exomem/exomem.h>

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

typedef uint64_t sj_ref;

enum sj_kind { SJ_VAS = 1, SJ_MMAP = 2 };
enum sj_order { SJ_ORDER_COORD = 0, SJ_ORDER_NAME = 1 };
enum sj_stage { SJ_LOAD, SJ_SORT, SJ_INDEX, SJ_NSTAGES };

struct sj_mark {
    _Atomic uint32_t done;  /* the stage finished; its results below are complete */
    uint32_t chunk;         /* allocator position where its results end */
    uint64_t used;
};

struct sj_target {
    sj_ref name;            /* NUL-terminated */
    int64_t len;
};

/* The index stage's result for one reference sequence: where its records are in the sorted
 * array, how many are mapped and placed-unmapped (samtools idxstats' columns), and a linear
 * index of 16 kbp windows (the first sorted record that may overlap each window). */
struct sj_ref_index {
    uint64_t first, end;    /* [first, end) in the sorted array */
    uint64_t n_mapped, n_unmapped;
    sj_ref linear;          /* uint64_t[n_windows] */
    uint64_t n_windows;
};

struct sj_header {
    uint64_t magic;
    uint32_t version;
    uint32_t kind;          /* enum sj_kind */
    uint64_t chunk_size;    /* bytes of each chunk */
    uint64_t stride;        /* distance between chunk starts (1 GiB for VAS stores) */
    sj_ref first;           /* ref of chunk 0 (its base address, or 0) */
    uint32_t nchunks;
    uint32_t cur_chunk;     /* allocator: chunk being filled and bytes used in it */
    uint64_t cur_used;
    struct sj_mark mark[SJ_NSTAGES];
    /* load: the header text, the reference sequences, the records in input order */
    sj_ref hdr_text;
    uint64_t l_text;
    int64_t n_targets;
    sj_ref targets;         /* struct sj_target[n_targets] */
    uint64_t n_recs;
    sj_ref recs;            /* sj_ref[n_recs] */
    /* sort */
    sj_ref sorted;          /* sj_ref[n_recs] in sort_order */
    uint32_t sort_order;    /* SJ_ORDER_COORD or SJ_ORDER_NAME */
    uint32_t unused;
    /* index */
    sj_ref index;           /* struct sj_ref_index[n_targets] */
    uint64_t n_no_coor;     /* records without a reference (samtools idxstats' '*' line) */
};

struct sj_store {
    enum sj_kind kind;
    char name[EXOMEM_NAME_MAX + 1];
    uintptr_t delta;        /* address = delta + ref */
    struct sj_header *h;
    int readonly;           /* opened with SJ_READ */
    /* VAS */
    vasid_t vid;            /* the VAS switched into: '<name>', or '<name>.ro' for readers */
    vasid_t ro_vid;         /* writers: '<name>.ro', which gets every chunk they add */
    vhandle_t vh;
    /* mmap */
    int fd;
    char *map;              /* reserved range; the file's chunks are mapped from its start */
    uint64_t reserved;
};

static inline void *sj_ptr(const struct sj_store *s, sj_ref r)
{
    return (void *)(s->delta + (uintptr_t)r);
}

static inline sj_ref sj_refof(const struct sj_store *s, const void *p)
{
    return (sj_ref)((uintptr_t)p - s->delta);
}

/* How to open a store: a VAS store (dir NULL) or an mmap store with its file in dir. */
struct sj_where {
    const char *mmap_dir;   /* NULL: a VAS store */
    uint64_t base;          /* VAS stores: chunk 0's base (1 GiB-aligned) */
    uint64_t chunk_size;    /* for a new store; at most 1 GiB */
};

enum sj_mode {
    SJ_READ,                /* stages that only read: shared with other readers */
    SJ_WRITE,               /* sort, index: the store to itself */
    SJ_CREATE,              /* load: as SJ_WRITE, making the store if it is missing */
};

/* Open store `name` in `mode`. Switches the process into the VAS (or maps the file) and
 * takes the store's lock, waiting for stages that hold it in a conflicting mode. 0 or a
 * negative -EXO_ code with exomem_last_error() set: -EXO_ENOENT (no such store and not
 * SJ_CREATE), -EXO_ECORRUPT (not a samjmp store), the exomem and system errors of attaching
 * or mapping. */
int sj_open(struct sj_store *s, const char *name, const struct sj_where *w, enum sj_mode mode);

/* Switch home and detach (or unmap); the store stays for the next process. */
void sj_close(struct sj_store *s);

/* Delete store `name` and everything in it. -EXO_ENOENT if there is none. */
int sj_drop(const char *name, const struct sj_where *w);

/* Begin stage `st`: forget it and the stages after it and roll the allocator back to where
 * the stage before it ended. -EXO_EINVAL when that earlier stage is not done (the message
 * names the command to run first). */
int sj_stage_begin(struct sj_store *s, enum sj_stage st);

/* End stage `st`: remember where its results end, then mark it done. */
void sj_stage_done(struct sj_store *s, enum sj_stage st);

/* Is stage `st` done? If not, set an error naming the command to run and return it. */
int sj_require(struct sj_store *s, enum sj_stage st);

/* Take `size` bytes (8-byte aligned) from the store, adding a chunk when the current one is
 * full. Returns the ref, or 0 with exomem_last_error() set (-EXO_ENOMEM past chunk_size or
 * VAS_SEGS_MAX chunks, or the error of adding one). */
sj_ref sj_alloc(struct sj_store *s, uint64_t size);

/* Print the store's kind, chunks, bytes used (chunks before the current one counted whole),
 * record count and which stages are done, one "key<TAB>value" line each. Never fails. */
int sj_info(struct sj_store *s, FILE *out);

#endif
