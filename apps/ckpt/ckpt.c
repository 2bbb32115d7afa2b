/* Concurrent and incremental checkpointing by write protection (see ckpt.h).
 *
 * Per page the checkpointer keeps a copy state (DONE, PENDING: to be copied by the running
 * checkpoint, COPYING: being copied by the copier or a handler) and a dirty bit (written
 * since the previous checkpoint, known from the write trap). Whoever moves a page from
 * PENDING to COPYING (one compare-and-swap) copies it; a handler that loses the race waits
 * for DONE before it lets the write through, so no page is ever saved after it changed.
 * Both the handler and the copier only use atomics, pwrite and the protection calls, so the
 * handler is safe in signal context (signal engine) as on the uffd handler thread.
 */
#include "ckpt.h"
#include <exomem/error.h>
#include "app_io.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FILE_MAGIC UINT64_C(0x31544b43504f5845) /* "EXOPCKT1" */
#define FILE_VERSION 1
#define MANIFEST_HEAD "exomem-ckpt 1"
#define COPY_BATCH 32 /* pages the copier claims and writes with one pwrite */

enum { PG_DONE = 0, PG_PENDING = 1, PG_COPYING = 2 };

/* The header at offset 0 of a checkpoint file; the index (npages sorted uint64 page numbers,
 * deltas only) follows it, the page images start at data_off. */
struct file_header {
    uint64_t magic;
    uint32_t version;
    uint32_t kind;
    uint64_t region_len;
    uint64_t npages;
    uint64_t data_off;
    uint64_t seq;
    uint64_t index_hash; /* of the index (0 for a full checkpoint) */
    uint64_t header_hash; /* of the fields above */
};

struct ckpt {
    char *base;
    size_t len, ps, npages;
    char dir[PATH_MAX - 32];
    unsigned flags;
    exo_vm_region *region;
    _Atomic uint64_t *dirty;      /* bitmap: written since the previous checkpoint */
    _Atomic unsigned char *state; /* PG_* per page */

    /* The running (or last) checkpoint. */
    int kind;
    int fd;
    uint64_t seq;
    uint64_t *index; /* sorted page numbers of a delta; NULL for a full checkpoint */
    size_t nslots;
    uint64_t data_off;
    pthread_t copier;
    bool copier_started;
    atomic_int done;
    atomic_int error;
    atomic_int hold;
    atomic_int beginning; /* ckpt_begin is choosing and protecting pages: traps wait */
    atomic_int in_handler; /* handlers past that gate: ckpt_begin waits for them */
    uint64_t t_begin;

    uint64_t *chain; /* seqs of the chain's files, base first */
    unsigned chain_len, chain_cap;
    uint64_t next_seq;

    struct ckpt_stats st;
    _Atomic uint64_t traps, dirty_traps, handler_ns, cow;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t hash_bytes(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * UINT64_C(0x100000001b3);
    return h;
}

static uint64_t header_hash(const struct file_header *h)
{
    return hash_bytes(h, offsetof(struct file_header, header_hash));
}

static void file_path(const struct ckpt *c, uint64_t seq, char *out, size_t cap)
{
    snprintf(out, cap, "%s/ckpt-%06llu.dat", c->dir, (unsigned long long)seq);
}

/* The file slot of page idx in the running checkpoint: its rank in the delta's index. */
static size_t slot_of(const struct ckpt *c, size_t idx)
{
    if (!c->index)
        return idx;
    size_t lo = 0, hi = c->nslots;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->index[mid] < idx)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static size_t page_of_slot(const struct ckpt *c, size_t slot)
{
    return c->index ? (size_t)c->index[slot] : slot;
}

static int save_pages(struct ckpt *c, size_t idx, size_t slot, size_t n)
{
    return app_pwrite_all(c->fd, c->base + idx * c->ps, n * c->ps,
                             (off_t)(c->data_off + slot * c->ps));
}

/* TRAP: a write to a protected page. Copy it first if the running checkpoint still needs it
 * (copy-on-write), note it dirty, let the write through. */
static exo_vm_action on_write_fault(exo_vm_fault *f, void *arg)
{
    struct ckpt *c = arg;
    int saved_errno = errno;
    uint64_t t0 = now_ns();
    if ((char *)f->page < c->base || (char *)f->page >= c->base + c->len)
        return EXO_VM_DECLINE;
    size_t idx = (size_t)((char *)f->page - c->base) / c->ps;
    /* A write that traps while ckpt_begin runs belongs after the checkpoint's instant (the
     * end of ckpt_begin): hold it until then, so that no thread's later write, landing on a
     * page not yet protected, can enter the checkpoint while this one does not. */
    atomic_fetch_add(&c->in_handler, 1);
    while (atomic_load(&c->beginning)) {
        atomic_fetch_sub(&c->in_handler, 1);
        while (atomic_load(&c->beginning))
            sched_yield();
        atomic_fetch_add(&c->in_handler, 1);
    }
    _Atomic unsigned char *st = &c->state[idx];
    unsigned char expect = PG_PENDING;
    bool copied = false;
    if (atomic_compare_exchange_strong(st, &expect, PG_COPYING)) {
        if (save_pages(c, idx, slot_of(c, idx), 1) != 0)
            atomic_store(&c->error, -EXO_EIO);
        atomic_store(st, PG_DONE);
        copied = true;
    } else {
        /* The copier is writing it out right now (a batch takes tens of microseconds);
         * yield after a while in case it is not even running. */
        for (unsigned spins = 0; atomic_load(st) != PG_DONE; spins++)
            if (spins > 2000)
                sched_yield();
    }
    if (c->flags & CKPT_TRACK)
        atomic_fetch_or(&c->dirty[idx / 64], UINT64_C(1) << (idx % 64));
    /* Count before UNPROT: with the uffd engine it wakes the faulting thread. */
    atomic_fetch_add(&c->traps, 1);
    if (copied)
        atomic_fetch_add(&c->cow, 1);
    else
        atomic_fetch_add(&c->dirty_traps, 1);
    int rc = exo_vm_unprot(c->region, f->page);
    atomic_fetch_sub(&c->in_handler, 1);
    atomic_fetch_add(&c->handler_ns, now_ns() - t0);
    errno = saved_errno;
    return rc == 0 ? EXO_VM_RESUME : EXO_VM_DECLINE;
}

/* ---- chain and manifest ---- */

static int write_manifest(struct ckpt *c, const uint64_t *chain, unsigned n)
{
    char tmp[PATH_MAX], path[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s/MANIFEST.tmp", c->dir);
    snprintf(path, sizeof path, "%s/MANIFEST", c->dir);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return exomem_set_error(EXO_EIO, "ckpt: cannot write %s: %s", tmp, strerror(errno));
    fprintf(f, "%s %zu\n", MANIFEST_HEAD, c->len);
    for (unsigned i = 0; i < n; i++)
        fprintf(f, "ckpt-%06llu.dat\n", (unsigned long long)chain[i]);
    bool ok = fflush(f) == 0 && (!(c->flags & CKPT_FSYNC) || fsync(fileno(f)) == 0);
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return exomem_set_error(EXO_EIO, "ckpt: cannot write %s: %s", path, strerror(errno));
    }
    if (c->flags & CKPT_FSYNC) {
        int dfd = open(c->dir, O_RDONLY | O_DIRECTORY);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
    }
    return 0;
}

/* The checkpoint's pages are all in the file: make it durable, add it to the chain (a full
 * one replaces the chain, whose files go) and publish the manifest. */
static int finish_checkpoint(struct ckpt *c)
{
    int rc = atomic_load(&c->error);
    if (rc == 0 && (c->flags & CKPT_FSYNC) && fsync(c->fd) != 0)
        rc = exomem_set_error(EXO_EIO, "ckpt: fsync: %s", strerror(errno));
    close(c->fd);
    c->fd = -1;
    if (rc == 0 && c->chain_len + 1 > c->chain_cap) {
        unsigned cap = c->chain_cap ? 2 * c->chain_cap : 16;
        uint64_t *ch = realloc(c->chain, cap * sizeof *ch);
        if (!ch)
            rc = exomem_set_error(EXO_ENOMEM, "ckpt: chain of %u checkpoints", cap);
        else
            c->chain = ch, c->chain_cap = cap;
    }
    char path[PATH_MAX];
    if (rc == 0) {
        unsigned old_len = c->chain_len;
        if (c->kind == CKPT_FULL) {
            rc = write_manifest(c, &c->seq, 1);
            for (unsigned i = 0; rc == 0 && i < old_len; i++) {
                file_path(c, c->chain[i], path, sizeof path);
                unlink(path);
            }
            if (rc == 0)
                c->chain[0] = c->seq, c->chain_len = 1;
        } else {
            c->chain[old_len] = c->seq;
            rc = write_manifest(c, c->chain, old_len + 1);
            if (rc == 0)
                c->chain_len = old_len + 1;
        }
    }
    if (rc != 0) {
        file_path(c, c->seq, path, sizeof path);
        unlink(path);
        /* The pages of a lost checkpoint must go into the next one. */
        for (size_t s = 0; s < c->nslots; s++) {
            size_t idx = page_of_slot(c, s);
            atomic_fetch_or(&c->dirty[idx / 64], UINT64_C(1) << (idx % 64));
        }
    }
    c->st.chain_len = c->chain_len;
    c->st.last_pages = c->nslots;
    c->st.last_bytes = c->data_off + (uint64_t)c->nslots * c->ps;
    c->st.last_total_ns = now_ns() - c->t_begin;
    return rc;
}

/* ---- starting a checkpoint ---- */

/* Choose the pages (every page, or the dirty ones, whose bits are cleared), mark them
 * PENDING, create the file and write its header and index. */
static int prepare_checkpoint(struct ckpt *c, enum ckpt_kind kind)
{
    c->kind = kind;
    free(c->index);
    c->index = NULL;
    atomic_store(&c->error, 0);
    size_t words = (c->npages + 63) / 64;
    if (kind == CKPT_FULL) {
        c->nslots = c->npages;
        for (size_t w = 0; w < words; w++)
            atomic_store(&c->dirty[w], 0);
        for (size_t i = 0; i < c->npages; i++)
            atomic_store_explicit(&c->state[i], PG_PENDING, memory_order_relaxed);
    } else {
        size_t n = 0;
        for (size_t w = 0; w < words; w++)
            n += (size_t)__builtin_popcountll(atomic_load(&c->dirty[w]));
        c->index = malloc((n ? n : 1) * sizeof *c->index);
        if (!c->index)
            return exomem_set_error(EXO_ENOMEM, "ckpt: index of %zu pages", n);
        size_t k = 0;
        for (size_t w = 0; w < words; w++) {
            uint64_t bits = atomic_exchange(&c->dirty[w], 0);
            for (; bits && k < n; bits &= bits - 1) {
                size_t idx = w * 64 + (size_t)__builtin_ctzll(bits);
                c->index[k++] = idx;
                atomic_store_explicit(&c->state[idx], PG_PENDING, memory_order_relaxed);
            }
            if (bits) /* written since the count: keep them for the next delta */
                atomic_fetch_or(&c->dirty[w], bits);
        }
        c->nslots = k;
    }
    atomic_thread_fence(memory_order_seq_cst);

    c->seq = c->next_seq++;
    char path[PATH_MAX];
    file_path(c, c->seq, path, sizeof path);
    c->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (c->fd < 0)
        return exomem_set_error(EXO_EIO, "ckpt: cannot create %s: %s", path, strerror(errno));
    size_t index_bytes = c->index ? c->nslots * sizeof *c->index : 0;
    c->data_off = (sizeof(struct file_header) + index_bytes + c->ps - 1) / c->ps * c->ps;
    struct file_header h = {
        .magic = FILE_MAGIC, .version = FILE_VERSION, .kind = (uint32_t)kind,
        .region_len = c->len, .npages = c->nslots, .data_off = c->data_off, .seq = c->seq,
        .index_hash = c->index ? hash_bytes(c->index, index_bytes) : 0,
    };
    h.header_hash = header_hash(&h);
    if (ftruncate(c->fd, (off_t)(c->data_off + c->nslots * c->ps)) != 0 ||
        app_pwrite_all(c->fd, &h, sizeof h, 0) != 0 ||
        (index_bytes && app_pwrite_all(c->fd, c->index, index_bytes, sizeof h) != 0)) {
        close(c->fd);
        unlink(path);
        return exomem_set_error(EXO_EIO, "ckpt: cannot write %s: %s", path, strerror(errno));
    }
    return 0;
}

/* Write-protect the pages of the running checkpoint (PROTN; the whole region at once for a
 * full checkpoint). */
static int protect_set(struct ckpt *c)
{
    /* Pages outside a delta are protected already (clean), so protecting the whole region
     * is right for a delta too; one call over the range costs about as much as PROTN of
     * npages/20 scattered pages with either engine (measured), so it wins for big deltas. */
    if (!c->index || c->nslots >= c->npages / 32)
        return exo_vm_protect(c->region, c->base, c->len, EXO_VM_READONLY);
    if (c->nslots == 0)
        return 0;
    void **pages = malloc(c->nslots * sizeof *pages);
    if (!pages)
        return exomem_set_error(EXO_ENOMEM, "ckpt: page list of %zu", c->nslots);
    for (size_t s = 0; s < c->nslots; s++)
        pages[s] = c->base + c->index[s] * c->ps;
    int rc = exo_vm_protn(c->region, pages, c->nslots, EXO_VM_READONLY);
    free(pages);
    return rc;
}

/* The background copier: claims runs of PENDING pages, writes each run with one pwrite,
 * then waits for the pages that handlers claimed. */
static void *copier_main(void *arg)
{
    struct ckpt *c = arg;
    while (atomic_load(&c->hold))
        usleep(100);
    for (size_t s = 0; s < c->nslots;) {
        size_t idx0 = page_of_slot(c, s), n = 0;
        while (n < COPY_BATCH && s + n < c->nslots && page_of_slot(c, s + n) == idx0 + n) {
            unsigned char expect = PG_PENDING;
            if (!atomic_compare_exchange_strong(&c->state[idx0 + n], &expect, PG_COPYING))
                break;
            n++;
        }
        if (n == 0) { /* a handler has this page */
            s++;
            continue;
        }
        if (save_pages(c, idx0, s, n) != 0)
            atomic_store(&c->error, -EXO_EIO);
        for (size_t i = 0; i < n; i++)
            atomic_store(&c->state[idx0 + i], PG_DONE);
        if (!(c->flags & CKPT_TRACK))
            exo_vm_protect(c->region, c->base + idx0 * c->ps, n * c->ps, EXO_VM_READWRITE);
        s += n;
    }
    for (size_t s = 0; s < c->nslots; s++)
        while (atomic_load(&c->state[page_of_slot(c, s)]) != PG_DONE)
            sched_yield();
    int rc = finish_checkpoint(c);
    if (rc != 0)
        atomic_store(&c->error, rc);
    atomic_store(&c->done, 1);
    return NULL;
}

/* Close the gate for traps, and wait for the handlers already past it (one that marked a
 * page dirty and is about to UNPROT it must not do so after the protection below). */
static void close_gate(struct ckpt *c)
{
    atomic_store(&c->beginning, 1);
    while (atomic_load(&c->in_handler) != 0)
        sched_yield();
}

static int check_kind(struct ckpt *c, enum ckpt_kind kind)
{
    if (kind != CKPT_FULL && kind != CKPT_INCREMENTAL)
        return exomem_set_error(EXO_EINVAL, "ckpt: unknown kind %d", (int)kind);
    if (kind == CKPT_INCREMENTAL && !(c->flags & CKPT_TRACK))
        return exomem_set_error(EXO_EINVAL, "ckpt: incremental checkpoints need CKPT_TRACK");
    if (kind == CKPT_INCREMENTAL && c->chain_len == 0)
        return exomem_set_error(EXO_EINVAL, "ckpt: incremental checkpoint without a base");
    if (c->copier_started && !atomic_load(&c->done))
        return exomem_set_error(EXO_EBUSY, "ckpt: a checkpoint is still being written");
    if (c->copier_started) {
        pthread_join(c->copier, NULL);
        c->copier_started = false;
    }
    return 0;
}

/* How every checkpoint starts: check the kind, note the start time and the copy-on-write
 * count so far (*cow0), close the gate and prepare the file. On failure the gate is open
 * again; on success it stays closed for the caller. */
static int start_checkpoint(struct ckpt *c, enum ckpt_kind kind, uint64_t *cow0)
{
    int rc = check_kind(c, kind);
    if (rc != 0)
        return rc;
    c->t_begin = now_ns();
    *cow0 = atomic_load(&c->cow);
    close_gate(c); /* threads that trap wait until it opens */
    rc = prepare_checkpoint(c, kind);
    if (rc != 0)
        atomic_store(&c->beginning, 0);
    return rc;
}

int ckpt_begin(struct ckpt *c, enum ckpt_kind kind)
{
    uint64_t cow0;
    int rc = start_checkpoint(c, kind, &cow0);
    if (rc != 0)
        return rc;
    rc = protect_set(c);
    atomic_store(&c->beginning, 0);
    if (rc != 0) {
        atomic_store(&c->error, rc);
        for (size_t s = 0; s < c->nslots; s++)
            atomic_store(&c->state[page_of_slot(c, s)], PG_DONE);
        finish_checkpoint(c);
        return rc;
    }
    atomic_store(&c->done, 0);
    atomic_store(&c->hold, (c->flags & CKPT_HOLD_COPIER) ? 1 : 0);
    c->st.last_begin_ns = now_ns() - c->t_begin;
    c->st.last_cow_copies = cow0; /* a base: ckpt_get_stats reports the difference */
    if (pthread_create(&c->copier, NULL, copier_main, c) != 0) {
        atomic_store(&c->hold, 0);
        copier_main(c); /* no thread: copy synchronously rather than fail half-way */
        c->copier_started = false;
        return atomic_load(&c->error);
    }
    c->copier_started = true;
    return 0;
}

int ckpt_done(struct ckpt *c)
{
    return !c->copier_started || atomic_load(&c->done);
}

void ckpt_release_copier(struct ckpt *c)
{
    atomic_store(&c->hold, 0);
}

int ckpt_wait(struct ckpt *c)
{
    if (!c->copier_started)
        return 0;
    atomic_store(&c->hold, 0);
    pthread_join(c->copier, NULL);
    c->copier_started = false;
    return atomic_load(&c->error);
}

int ckpt_stop_and_copy(struct ckpt *c, enum ckpt_kind kind)
{
    uint64_t cow0;
    int rc = start_checkpoint(c, kind, &cow0); /* the program is stopped while the gate is shut */
    if (rc != 0)
        return rc;
    for (size_t s = 0; s < c->nslots;) {
        size_t idx0 = page_of_slot(c, s), n = 1;
        while (s + n < c->nslots && page_of_slot(c, s + n) == idx0 + n)
            n++;
        if (save_pages(c, idx0, s, n) != 0)
            atomic_store(&c->error, -EXO_EIO);
        s += n;
    }
    for (size_t s = 0; s < c->nslots; s++)
        atomic_store(&c->state[page_of_slot(c, s)], PG_DONE);
    /* Saved pages are clean again: protect them to see their next write. */
    if ((c->flags & CKPT_TRACK) && atomic_load(&c->error) == 0 && (rc = protect_set(c)) != 0)
        atomic_store(&c->error, rc);
    atomic_store(&c->beginning, 0);
    rc = finish_checkpoint(c);
    c->st.last_begin_ns = c->st.last_total_ns;
    c->st.last_cow_copies = cow0;
    return rc;
}

void ckpt_get_stats(const struct ckpt *c, struct ckpt_stats *out)
{
    struct ckpt *m = (struct ckpt *)c; /* atomics are read through a non-const pointer */
    *out = c->st;
    out->last_cow_copies = atomic_load(&m->cow) - c->st.last_cow_copies;
    out->traps = atomic_load(&m->traps);
    out->dirty_traps = atomic_load(&m->dirty_traps);
    out->handler_ns = atomic_load(&m->handler_ns);
}

exo_vm_engine ckpt_engine(const struct ckpt *c)
{
    return exo_vm_region_engine(c->region);
}

/* A directory may hold an older chain: number the new files after it, so that none of its
 * files is overwritten before a new manifest replaces it. */
static void continue_numbering(struct ckpt *c)
{
    char path[PATH_MAX], line[256];
    snprintf(path, sizeof path, "%s/MANIFEST", c->dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    unsigned long long seq;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "ckpt-%llu.dat", &seq) == 1 && seq >= c->next_seq)
            c->next_seq = seq + 1;
    fclose(f);
}

int ckpt_create(void *base, size_t len, const char *dir, const struct ckpt_options *opt,
                struct ckpt **out)
{
    *out = NULL;
    size_t ps = exo_vm_page_size();
    if (!base || len == 0 || len % ps || (uintptr_t)base % ps)
        return exomem_set_error(EXO_EALIGN, "ckpt: region %p+%zu is not page-aligned", base, len);
    struct ckpt *c = calloc(1, sizeof *c);
    if (!c)
        return exomem_set_error(EXO_ENOMEM, "ckpt: out of memory");
    if (snprintf(c->dir, sizeof c->dir, "%s", dir) >= (int)sizeof c->dir) {
        free(c);
        return exomem_set_error(EXO_ENAMETOOLONG, "ckpt: directory name too long");
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        int e = errno;
        free(c);
        return exomem_set_error(EXO_EIO, "ckpt: cannot create %s: %s", dir, strerror(e));
    }
    c->base = base, c->len = len, c->ps = ps, c->npages = len / ps, c->fd = -1;
    c->flags = opt ? opt->flags : 0;
    size_t words = (c->npages + 63) / 64;
    c->dirty = calloc(words, sizeof *c->dirty);
    c->state = calloc(c->npages, sizeof *c->state);
    if (!c->dirty || !c->state) {
        size_t npages = c->npages;
        free(c->dirty), free(c->state), free(c);
        return exomem_set_error(EXO_ENOMEM, "ckpt: page maps for %zu pages", npages);
    }
    continue_numbering(c);
    exo_vm_options vo = {.engine = opt ? opt->engine : EXO_VM_ENGINE_AUTO,
                         .handler = on_write_fault, .arg = c};
    int rc = exo_vm_region_create(base, len, &vo, &c->region);
    if (rc != 0) {
        free(c->dirty), free(c->state), free(c);
        return rc;
    }
    *out = c;
    return 0;
}

int ckpt_destroy(struct ckpt *c)
{
    if (!c)
        return 0;
    int rc = ckpt_wait(c);
    int rc2 = exo_vm_region_destroy(c->region);
    free(c->index), free(c->chain), free(c->dirty), free(c->state), free(c);
    return rc ? rc : rc2;
}

/* ---- restore ---- */

/* Apply one checkpoint file to the region; `kind` is what the chain says it must be. */
static int apply_file(const char *path, char *base, size_t len, size_t ps, int kind)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return exomem_set_error(EXO_ECORRUPT, "ckpt: chain file %s: %s", path, strerror(errno));
    struct file_header h;
    struct stat sb;
    uint64_t *index = NULL;
    int rc = 0;
    if (app_pread_all(fd, &h, sizeof h, 0) != 0 || fstat(fd, &sb) != 0 ||
        h.magic != FILE_MAGIC || h.header_hash != header_hash(&h) || h.kind != (uint32_t)kind) {
        rc = exomem_set_error(EXO_ECORRUPT, "ckpt: %s is not a valid checkpoint file", path);
    } else if (h.version != FILE_VERSION) {
        rc = exomem_set_error(EXO_EVERSION, "ckpt: %s has format version %u", path, h.version);
    } else if (h.region_len != len) {
        rc = exomem_set_error(EXO_ESIZE, "ckpt: %s is of a %llu-byte region, not %zu", path,
                      (unsigned long long)h.region_len, len);
    } else if (h.npages > len / ps || (uint64_t)sb.st_size != h.data_off + h.npages * ps ||
               (kind == CKPT_FULL && h.npages != len / ps)) {
        rc = exomem_set_error(EXO_ECORRUPT, "ckpt: %s is truncated or has a bad page count", path);
    }
    if (rc == 0 && kind == CKPT_INCREMENTAL) {
        index = malloc(h.npages ? h.npages * sizeof *index : 1);
        if (!index)
            rc = exomem_set_error(EXO_ENOMEM, "ckpt: index of %s", path);
        else if (app_pread_all(fd, index, h.npages * sizeof *index, sizeof h) != 0 ||
                 hash_bytes(index, h.npages * sizeof *index) != h.index_hash)
            rc = exomem_set_error(EXO_ECORRUPT, "ckpt: %s has a damaged page index", path);
        for (uint64_t i = 0; rc == 0 && i < h.npages; i++)
            if (index[i] >= len / ps || (i > 0 && index[i] <= index[i - 1]))
                rc = exomem_set_error(EXO_ECORRUPT, "ckpt: %s has a damaged page index", path);
    }
    for (uint64_t s = 0; rc == 0 && s < h.npages;) {
        uint64_t idx0 = index ? index[s] : s, n = 1;
        while (s + n < h.npages && (index ? index[s + n] : s + n) == idx0 + n && n < 4096)
            n++;
        if (app_pread_all(fd, base + idx0 * ps, n * ps, h.data_off + s * ps) != 0)
            rc = exomem_set_error(EXO_ECORRUPT, "ckpt: %s: short read", path);
        s += n;
    }
    free(index);
    close(fd);
    return rc;
}

int ckpt_restore(const char *dir, void *base, size_t len, unsigned upto)
{
    size_t ps = exo_vm_page_size();
    if (!base || len == 0 || len % ps || (uintptr_t)base % ps)
        return exomem_set_error(EXO_EALIGN, "ckpt: region %p+%zu is not page-aligned", base, len);
    char path[PATH_MAX], line[PATH_MAX];
    snprintf(path, sizeof path, "%s/MANIFEST", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return exomem_set_error(EXO_ENOENT, "ckpt: no manifest %s: %s", path, strerror(errno));
    size_t mlen = 0;
    int rc = 0;
    if (!fgets(line, sizeof line, f) || sscanf(line, MANIFEST_HEAD " %zu", &mlen) != 1)
        rc = exomem_set_error(EXO_ECORRUPT, "ckpt: %s is not a checkpoint manifest", path);
    else if (mlen != len)
        rc = exomem_set_error(EXO_ESIZE, "ckpt: the chain in %s is of a %zu-byte region, not %zu",
                      dir, mlen, len);
    unsigned n = 0;
    while (rc == 0 && (upto == 0 || n < upto) && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (strchr(line, '/') || line[0] == 0) {
            rc = exomem_set_error(EXO_ECORRUPT, "ckpt: bad manifest entry '%s'", line);
            break;
        }
        char file[PATH_MAX + 8];
        snprintf(file, sizeof file, "%s/%s", dir, line);
        rc = apply_file(file, base, len, ps, n == 0 ? CKPT_FULL : CKPT_INCREMENTAL);
        n++;
    }
    fclose(f);
    if (rc == 0 && n == 0)
        rc = exomem_set_error(EXO_ECORRUPT, "ckpt: the manifest in %s lists no checkpoint", dir);
    return rc;
}
