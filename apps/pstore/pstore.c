/* The persistent store: file format, recovery, mapping at the recorded address, DIRTY-driven
 * commits through a redo log (see pstore.h).
 *
 * Log file (FILE.log), empty when no commit is in progress:
 *   struct log_header              which store, how many pages, where the data starts
 *   struct log_entry [npages]      page number and checksum of each page, ascending
 *   page images [npages]           from data_off, page-aligned
 *   struct log_commit              the commit record: written and synced only after
 *                                  everything above is durable
 * The file itself is touched only after the commit record is durable, so a log without a
 * valid commit record can be dropped, and one with it can be replayed (replay is
 * idempotent: a crash during replay replays again).
 */
#include "pstore_int.h"
#include <exomem/error.h>
#include "app_io.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOG_MAGIC UINT64_C(0x31474f4c54535045)    /* "EPSTLOG1" */
#define COMMIT_MAGIC UINT64_C(0x31544d4d4f435045) /* "EPCOMMT1" */
#define MIN_SIZE (UINT64_C(256) << 10)

struct log_header {
    uint64_t magic;
    uint64_t base;
    uint64_t size;
    uint64_t npages;
    uint64_t data_off;
    uint64_t hash; /* of the fields above */
};

struct log_entry {
    uint64_t page;
    uint64_t sum; /* checksum of the page image */
};

struct log_commit {
    uint64_t magic;
    uint64_t npages;
    uint64_t body_hash; /* of the header and the entries */
    uint64_t hash;      /* of the fields above */
};

/* A 64-bit checksum, a word at a time. */
static uint64_t hash64(const void *p, size_t n, uint64_t h)
{
    const unsigned char *b = p;
    for (; n >= 8; b += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, b, 8);
        h = (h ^ w) * UINT64_C(0x9e3779b97f4a7c15);
        h ^= h >> 29;
    }
    for (; n; n--, b++)
        h = (h ^ *b) * UINT64_C(0x100000001b3);
    return h;
}

#define HSEED UINT64_C(0x243f6a8885a308d3)

static uint64_t header_hash(const struct pstore_header *h)
{
    return hash64(h, offsetof(struct pstore_header, hash), HSEED);
}

/* Read and check the file header. */
static int read_header(int fd, const char *path, struct pstore_header *h)
{
    struct stat sb;
    if (app_pread_all(fd, h, sizeof *h, 0) != 0 || fstat(fd, &sb) != 0)
        return exomem_set_error(EXO_ECORRUPT, "pstore %s: cannot read the header", path);
    if (h->magic != PSTORE_MAGIC || h->hash != header_hash(h))
        return exomem_set_error(EXO_ECORRUPT, "pstore %s: not a store (bad magic or header checksum)",
                        path);
    if (h->version != PSTORE_VERSION)
        return exomem_set_error(EXO_EVERSION, "pstore %s: format version %u", path, h->version);
    if (h->page_size != exo_vm_page_size() || h->base % h->page_size ||
        h->size % h->page_size || h->size < MIN_SIZE || (uint64_t)sb.st_size != h->size)
        return exomem_set_error(EXO_ECORRUPT, "pstore %s: size %llu or base %#llx is inconsistent "
                        "(file has %lld bytes)", path, (unsigned long long)h->size,
                        (unsigned long long)h->base, (long long)sb.st_size);
    return 0;
}

/* ---- recovery ---- */

static int discard_log(int lfd, struct pstore_stats *st)
{
    st->recovered = -1;
    if (ftruncate(lfd, 0) != 0 || fsync(lfd) != 0)
        return exomem_set_error(EXO_EIO, "pstore: cannot empty the log: %s", strerror(errno));
    return 0;
}

/* Replay a complete log into the file, drop an incomplete one, refuse a corrupt one. */
static int recover(int fd, int lfd, const char *log_path, const struct pstore_header *sh,
                   struct pstore_stats *st)
{
    struct stat sb;
    if (fstat(lfd, &sb) != 0)
        return exomem_set_error(EXO_EIO, "pstore %s: %s", log_path, strerror(errno));
    st->recovered = 0;
    if (sb.st_size == 0)
        return 0;
    size_t ps = sh->page_size;
    uint64_t total = sh->size / ps;
    struct log_header lh;
    struct log_commit lc;
    if (app_pread_all(lfd, &lh, sizeof lh, 0) != 0 || lh.magic != LOG_MAGIC ||
        lh.hash != hash64(&lh, offsetof(struct log_header, hash), HSEED) ||
        lh.npages > total || lh.data_off % ps)
        return discard_log(lfd, st); /* torn before anything was durable */
    uint64_t end = lh.data_off + lh.npages * ps;
    if ((uint64_t)sb.st_size < end + sizeof lc ||
        app_pread_all(lfd, &lc, sizeof lc, (off_t)end) != 0 || lc.magic != COMMIT_MAGIC || lc.npages != lh.npages ||
        lc.hash != hash64(&lc, offsetof(struct log_commit, hash), HSEED))
        return discard_log(lfd, st); /* no commit record: the file was not touched */

    /* The commit record is there: the log must be whole, else the file may be half-way. */
    if (lh.base != sh->base || lh.size != sh->size)
        return exomem_set_error(EXO_ECORRUPT, "pstore %s: the log is of another store", log_path);
    size_t ebytes = lh.npages * sizeof(struct log_entry);
    struct log_entry *e = malloc(ebytes ? ebytes : 1);
    char *page = malloc(ps);
    int rc = 0;
    if (!e || !page) {
        rc = exomem_set_error(EXO_ENOMEM, "pstore: recovery buffers");
    } else if (app_pread_all(lfd, e, ebytes, sizeof lh) != 0 ||
               hash64(e, ebytes, hash64(&lh, sizeof lh, HSEED)) != lc.body_hash) {
        rc = exomem_set_error(EXO_ECORRUPT, "pstore %s: committed log with a damaged page list",
                      log_path);
    }
    /* Verify every page before the file gets any of them; then apply. */
    for (int pass = 0; pass < 2 && rc == 0; pass++) {
        for (uint64_t i = 0; i < lh.npages && rc == 0; i++) {
            if (e[i].page >= total || (i && e[i].page <= e[i - 1].page)) {
                rc = exomem_set_error(EXO_ECORRUPT, "pstore %s: bad page number in the log", log_path);
            } else if (app_pread_all(lfd, page, ps, lh.data_off + i * ps) != 0 ||
                       hash64(page, ps, HSEED) != e[i].sum) {
                rc = exomem_set_error(EXO_ECORRUPT, "pstore %s: page %llu of a committed log fails its "
                              "checksum; refusing to open", log_path,
                              (unsigned long long)e[i].page);
            } else if (pass == 1 && app_pwrite_all(fd, page, ps, e[i].page * ps) != 0) {
                rc = exomem_set_error(EXO_EIO, "pstore: replay: %s", strerror(errno));
            }
        }
    }
    free(e);
    free(page);
    if (rc != 0)
        return rc;
    if (fsync(fd) != 0)
        return exomem_set_error(EXO_EIO, "pstore: fsync: %s", strerror(errno));
    if (ftruncate(lfd, 0) != 0 || fsync(lfd) != 0)
        return exomem_set_error(EXO_EIO, "pstore: cannot empty the log: %s", strerror(errno));
    st->recovered = 1;
    return 0;
}

/* ---- open, close, create ---- */

static void free_store(struct pstore *p)
{
    if (p->region)
        exo_vm_region_destroy(p->region);
    if (p->base)
        munmap(p->base, p->size);
    if (p->log_fd >= 0)
        close(p->log_fd);
    if (p->fd >= 0)
        close(p->fd); /* drops the lock */
    free(p->pending), free(p->path), free(p->log_path), free(p);
}

int pstore_open(const char *path, const struct pstore_options *opt, struct pstore **out)
{
    *out = NULL;
    struct pstore *p = calloc(1, sizeof *p);
    if (!p)
        return exomem_set_error(EXO_ENOMEM, "pstore: out of memory");
    p->fd = p->log_fd = -1;
    p->ps = exo_vm_page_size();
    p->crash_point = opt ? opt->crash_point : 0;
    p->path = strdup(path);
    if (p->path && asprintf(&p->log_path, "%s.log", path) < 0)
        p->log_path = NULL;
    int rc = 0;
    struct pstore_header h;
    if (!p->path || !p->log_path) {
        rc = exomem_set_error(EXO_ENOMEM, "pstore: out of memory");
    } else if ((p->fd = open(path, O_RDWR | O_CLOEXEC)) < 0) {
        rc = exomem_set_error(errno == ENOENT ? EXO_ENOENT : errno == EACCES ? EXO_EACCES : EXO_EIO,
                      "pstore %s: %s", path, strerror(errno));
    } else if (flock(p->fd, LOCK_EX | LOCK_NB) != 0) {
        rc = exomem_set_error(EXO_EBUSY, "pstore %s: open in another process", path);
    } else if ((rc = read_header(p->fd, path, &h)) == 0) {
        p->log_fd = open(p->log_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (p->log_fd < 0)
            rc = exomem_set_error(EXO_EIO, "pstore %s: %s", p->log_path, strerror(errno));
        else
            rc = recover(p->fd, p->log_fd, p->log_path, &h, &p->st);
    }
    if (rc == 0) {
        p->size = h.size, p->npages = h.size / p->ps;
        void *want = (void *)(uintptr_t)h.base;
        void *m = mmap(want, p->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED_NOREPLACE,
                       p->fd, 0);
        if (m == MAP_FAILED || m != want) {
            int e = errno;
            if (m != MAP_FAILED)
                munmap(m, p->size);
            rc = m == MAP_FAILED && e != EEXIST
                     ? exomem_set_error(EXO_ENOMEM, "pstore %s: mmap at %p: %s", path, want, strerror(e))
                     : exomem_set_error(EXO_EOVERLAP, "pstore %s: its address range %p-%p is taken by "
                                "another mapping in this process; the store's pointers need it",
                                path, want, (char *)want + p->size);
        } else {
            p->base = m;
            p->hdr = m;
        }
    }
    if (rc == 0) { /* track before the first write, so that no change escapes DIRTY */
        exo_vm_options vo = {.engine = opt ? opt->engine : EXO_VM_ENGINE_AUTO,
                             .flags = EXO_VM_TRACK_DIRTY};
        rc = exo_vm_region_create(p->base, p->size, &vo, &p->region);
    }
    if (rc == 0 && !(p->pending = calloc((p->npages + 63) / 64, sizeof *p->pending)))
        rc = exomem_set_error(EXO_ENOMEM, "pstore: dirty map");
    if (rc == 0)
        rc = seg_heap_open(p->base + p->ps, p->size - p->ps, &p->heap);
    if (rc != 0) {
        free_store(p);
        return rc;
    }
    *out = p;
    return 0;
}

int pstore_close(struct pstore *p)
{
    if (p)
        free_store(p);
    return 0;
}

int pstore_create(const char *path, uint64_t base, size_t size)
{
    size_t ps = exo_vm_page_size();
    if (base == 0 || base % ps || size % ps)
        return exomem_set_error(EXO_EALIGN, "pstore: base %#llx or size %zu not page-aligned",
                        (unsigned long long)base, size);
    if (size < MIN_SIZE || base + size < base || base + size > (UINT64_C(1) << 47))
        return exomem_set_error(EXO_ESIZE, "pstore: size %zu (at least %llu) at %#llx", size,
                        (unsigned long long)MIN_SIZE, (unsigned long long)base);
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return exomem_set_error(errno == EEXIST ? EXO_EEXIST : EXO_EIO, "pstore %s: %s", path,
                        strerror(errno));
    struct pstore_header h = {.magic = PSTORE_MAGIC, .version = PSTORE_VERSION,
                              .page_size = (uint32_t)ps, .base = base, .size = size};
    h.hash = header_hash(&h);
    int rc = 0;
    if (ftruncate(fd, (off_t)size) != 0 || app_pwrite_all(fd, &h, sizeof h, 0) != 0 ||
        fsync(fd) != 0)
        rc = exomem_set_error(EXO_EIO, "pstore %s: %s", path, strerror(errno));
    close(fd);
    struct pstore *p = NULL;
    if (rc == 0)
        rc = pstore_open(path, NULL, &p);
    if (rc == 0)
        rc = pstore_kv_init(p);
    if (rc == 0)
        rc = pstore_commit(p);
    pstore_close(p);
    if (rc != 0) {
        char log[4200];
        snprintf(log, sizeof log, "%s.log", path);
        unlink(path);
        unlink(log);
    }
    return rc;
}

/* ---- commit ---- */

static int note_dirty(void *addr, size_t len, void *arg)
{
    struct pstore *p = arg;
    size_t first = (size_t)((char *)addr - p->base) / p->ps, n = len / p->ps;
    for (size_t i = first; i < first + n && i < p->npages; i++)
        p->pending[i / 64] |= UINT64_C(1) << (i % 64);
    return 0;
}

static void crash_if(struct pstore *p, int point)
{
    if (p->crash_point == point)
        raise(SIGKILL);
}

/* Write the pages in runs of adjacent ones: run k covers pages[i..j) of the list. */
static int write_runs(int fd, const struct pstore *p, const struct log_entry *e, uint64_t from,
                      uint64_t to, uint64_t log_data_off)
{
    for (uint64_t i = from; i < to;) {
        uint64_t j = i + 1;
        while (j < to && e[j].page == e[j - 1].page + 1)
            j++;
        uint64_t off = log_data_off ? log_data_off + i * p->ps : e[i].page * p->ps;
        if (app_pwrite_all(fd, p->base + e[i].page * p->ps, (j - i) * p->ps, off) != 0)
            return -1;
        i = j;
    }
    return 0;
}

int pstore_commit(struct pstore *p)
{
    long got = exo_vm_dirty(p->region, note_dirty, p);
    if (got < 0)
        return (int)got;
    uint64_t n = 0, words = (p->npages + 63) / 64;
    for (uint64_t w = 0; w < words; w++)
        n += (uint64_t)__builtin_popcountll(p->pending[w]);
    p->st.last_commit_pages = n;
    p->st.last_commit_bytes = 0;
    if (n == 0)
        return 0;
    size_t ebytes = n * sizeof(struct log_entry);
    struct log_entry *e = malloc(ebytes);
    if (!e)
        return exomem_set_error(EXO_ENOMEM, "pstore: commit list of %llu pages", (unsigned long long)n);
    uint64_t k = 0;
    for (uint64_t w = 0; w < words; w++)
        for (uint64_t bits = p->pending[w]; bits; bits &= bits - 1) {
            uint64_t page = w * 64 + (uint64_t)__builtin_ctzll(bits);
            e[k].page = page;
            e[k++].sum = hash64(p->base + page * p->ps, p->ps, HSEED);
        }
    struct log_header lh = {.magic = LOG_MAGIC, .base = (uint64_t)(uintptr_t)p->base,
                            .size = p->size, .npages = n};
    lh.data_off = (sizeof lh + ebytes + p->ps - 1) / p->ps * p->ps;
    lh.hash = hash64(&lh, offsetof(struct log_header, hash), HSEED);
    struct log_commit lc = {.magic = COMMIT_MAGIC, .npages = n,
                            .body_hash = hash64(e, ebytes, hash64(&lh, sizeof lh, HSEED))};
    lc.hash = hash64(&lc, offsetof(struct log_commit, hash), HSEED);
    uint64_t log_end = lh.data_off + n * p->ps;

    int rc = 0;
    int lfd = p->log_fd, fd = p->fd;
    if (app_pwrite_all(lfd, &lh, sizeof lh, 0) != 0 ||
        app_pwrite_all(lfd, e, ebytes, sizeof lh) != 0 ||
        write_runs(lfd, p, e, 0, n, lh.data_off) != 0 || fsync(lfd) != 0) {
        rc = exomem_set_error(EXO_EIO, "pstore %s: writing the log: %s", p->log_path, strerror(errno));
        if (ftruncate(lfd, 0) != 0) /* nothing committed: keep the pages pending */
            rc = exomem_set_error(EXO_EIO, "pstore %s: %s", p->log_path, strerror(errno));
        free(e);
        return rc;
    }
    crash_if(p, PSTORE_CRASH_BEFORE_RECORD);
    if (app_pwrite_all(lfd, &lc, sizeof lc, log_end) != 0 || fsync(lfd) != 0) {
        rc = exomem_set_error(EXO_EIO, "pstore %s: writing the commit record: %s", p->log_path,
                      strerror(errno));
        free(e);
        return rc; /* the record may or may not be durable: the next open decides */
    }
    crash_if(p, PSTORE_CRASH_BEFORE_APPLY);
    /* Committed. Now the file; a crash from here on is repaired by the replay. */
    if (write_runs(fd, p, e, 0, n / 2, 0) != 0)
        rc = -1;
    crash_if(p, PSTORE_CRASH_MID_APPLY);
    if (rc != 0 || write_runs(fd, p, e, n / 2, n, 0) != 0 || fsync(fd) != 0 ||
        ftruncate(lfd, 0) != 0 || fsync(lfd) != 0)
        rc = exomem_set_error(EXO_EIO, "pstore %s: applying the log: %s (the next open replays it)",
                      p->path, strerror(errno));
    free(e);
    if (rc == 0) {
        memset(p->pending, 0, words * sizeof *p->pending);
        p->st.commits++;
        p->st.last_commit_bytes = log_end + sizeof lc + n * p->ps;
    }
    return rc;
}

/* ---- the rest of the API ---- */

void *pstore_malloc(struct pstore *p, size_t size, int *code)
{
    void *ptr = seg_heap_malloc(p->heap, size);
    if (code)
        *code = ptr ? 0 : seg_heap_last_code();
    return ptr;
}

int pstore_free(struct pstore *p, void *ptr)
{
    return ptr ? seg_heap_free(p->heap, ptr) : 0;
}

void *pstore_root(struct pstore *p)
{
    return p->hdr->root;
}

void pstore_set_root(struct pstore *p, void *root)
{
    p->hdr->root = root;
}

void *pstore_base(const struct pstore *p)
{
    return p->base;
}

size_t pstore_size(const struct pstore *p)
{
    return p->size;
}

uint64_t pstore_checksum(const struct pstore *p)
{
    return hash64(p->base, p->size, HSEED);
}

exo_vm_engine pstore_engine(const struct pstore *p)
{
    return exo_vm_region_engine(p->region);
}

void pstore_get_stats(const struct pstore *p, struct pstore_stats *out)
{
    *out = p->st;
}

int pstore_check(struct pstore *p)
{
    int rc = seg_heap_check(p->heap, NULL);
    return rc ? rc : pstore_kv_check(p);
}
