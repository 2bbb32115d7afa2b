/* samjmp's record store: a VAS of segments (raw pointers) or an mmap'd file (offsets); see
 * store.h. */
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SJ_MAGIC UINT64_C(0x31504d4a4d41534a) /* "JSAMJMP1" little-endian */
#define SJ_VERSION 2
#define GIB (UINT64_C(1) << 30)
/* The mmap store reserves this much address space so that its file can grow in place. */
#define SJ_MMAP_RESERVE (UINT64_C(64) << 30)
/* Where the header's allocation area starts in chunk 0. */
#define SJ_HDR_BYTES ((sizeof(struct sj_header) + 63) & ~(size_t)63)

static const char *const stage_cmd[SJ_NSTAGES] = { "load", "sort", "index" };

static int check_name(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > EXOMEM_NAME_MAX - 8) /* room for ".c<chunk>" */
        return exomem_set_error(EXO_EBADNAME, "store name '%s': 1 to %d characters", name,
                                EXOMEM_NAME_MAX - 8);
    return 0;
}

static void chunk_name(char *out, size_t cap, const char *store, unsigned i)
{
    snprintf(out, cap, "%s.c%u", store, i);
}

static void ro_name(char *out, size_t cap, const char *store)
{
    snprintf(out, cap, "%s.ro", store);
}

static void mmap_path(char *out, size_t cap, const char *dir, const char *store)
{
    snprintf(out, cap, "%s/%s.sjm", dir, store);
}

static void init_header(struct sj_store *s, uint64_t chunk_size, uint64_t stride, sj_ref first)
{
    struct sj_header *h = s->h;
    memset(h, 0, sizeof *h);
    h->version = SJ_VERSION;
    h->kind = s->kind;
    h->chunk_size = chunk_size;
    h->stride = stride;
    h->first = first;
    h->nchunks = 1;
    h->cur_chunk = 0;
    h->cur_used = SJ_HDR_BYTES;
    /* The magic goes last: a header without it is taken as never written. */
    atomic_thread_fence(memory_order_release);
    h->magic = SJ_MAGIC;
}

static int check_header(const struct sj_store *s)
{
    const struct sj_header *h = s->h;
    if (h->magic != SJ_MAGIC || h->version != SJ_VERSION || h->kind != (uint32_t)s->kind ||
        h->chunk_size == 0 || h->nchunks == 0 || h->cur_chunk >= h->nchunks ||
        h->cur_used > h->chunk_size)
        return exomem_set_error(EXO_ECORRUPT, "store '%s': not a samjmp store of this kind "
                                "and version", s->name);
    return 0;
}

/* ---- VAS stores: chunk i is segment "<name>.c<i>" at first + i GiB ---- */

/* Make (or find, after a run that died while adding it) chunk i and list it in the VAS and,
 * when the process is switched in, in its attachment too. */
static int vas_add_chunk(struct sj_store *s, unsigned i, uint64_t base, uint64_t size)
{
    char sn[EXOMEM_NAME_MAX + 16];
    chunk_name(sn, sizeof sn, s->name, i);
    segid_t sid;
    int rc = seg_find(sn, &sid);
    if (rc == -EXO_ENOENT) {
        /* NORESERVE: the first switch-in populates the chunk anyway. */
        struct seg_opts o = { .page_size = SEG_PAGE_4K, .flags = SEG_NORESERVE };
        rc = seg_alloc_ex(sn, base, size, 0600, &o, &sid);
    }
    if (rc)
        return rc;
    rc = seg_attach(s->vid, sid, SEG_RDWR);
    if (rc && rc != -EXO_EEXIST)
        return rc;
    rc = seg_attach(s->ro_vid, sid, SEG_RDONLY);
    if (rc && rc != -EXO_EEXIST)
        return rc;
    if (s->vh != VAS_HOME) {
        rc = seg_attach_local(s->vh, sid, SEG_RDWR);
        if (rc && rc != -EXO_EEXIST)
            return rc;
    }
    return 0;
}

/* Find (or, for a writer, make) VAS `name`. */
static int find_vas(const char *name, int make, const char *store, vasid_t *vid, int *made)
{
    int rc = vas_find(name, vid);
    if (rc == -EXO_ENOENT && make) {
        rc = vas_create(name, 0600, vid);
        *made = rc == 0;
    }
    if (rc == -EXO_ENOENT)
        return exomem_set_error(EXO_ENOENT, "no store '%s': run samjmp load first", store);
    return rc;
}

static int vas_open(struct sj_store *s, const struct sj_where *w, enum sj_mode mode)
{
    int create = mode == SJ_CREATE, ro_made = 0, made = 0;
    char ro[EXOMEM_NAME_MAX + 16];
    ro_name(ro, sizeof ro, s->name);
    int rc = s->readonly ? find_vas(ro, 0, s->name, &s->vid, &made)
                         : find_vas(s->name, create, s->name, &s->vid, &made);
    /* A writer makes the readers' VAS too, also for a store that lacks it. */
    if (rc == 0 && !s->readonly)
        rc = find_vas(ro, 1, s->name, &s->ro_vid, &ro_made);
    if (rc)
        return rc;
    char sn[EXOMEM_NAME_MAX + 16];
    chunk_name(sn, sizeof sn, s->name, 0);
    segid_t sid;
    uint64_t base = w->base, chunk = w->chunk_size;
    rc = seg_find(sn, &sid);
    if (rc == 0) { /* an existing chunk 0 decides, also for a header never written */
        struct seg_info si;
        if ((rc = seg_ctl(sid, SEG_CTL_INFO, &si)))
            return rc;
        base = si.base;
        chunk = si.size;
    } else if (rc != -EXO_ENOENT || !create) {
        return rc == -EXO_ENOENT ? exomem_set_error(EXO_ENOENT, "store '%s' has no chunk 0: "
                                                    "run samjmp load", s->name) : rc;
    }
    if (base % GIB)
        return exomem_set_error(EXO_EALIGN, "store '%s': base 0x%llx is not 1 GiB-aligned",
                                s->name, (unsigned long long)base);
    if (rc == -EXO_ENOENT && (rc = vas_add_chunk(s, 0, base, chunk)))
        return rc;
    if ((rc = vas_attach(s->vid, &s->vh)))
        return rc;
    if ((rc = vas_switch(s->vh))) { /* waits for a stage that has the store switched in */
        vas_detach(s->vh);
        s->vh = VAS_HOME;
        return rc;
    }
    s->delta = 0;
    s->h = (struct sj_header *)(uintptr_t)base;
    if (s->h->magic == 0 && create)
        init_header(s, chunk, GIB, base);
    for (unsigned i = 0; ro_made && s->h->magic != 0 && i < s->h->nchunks; i++) {
        segid_t ci;
        chunk_name(sn, sizeof sn, s->name, i);
        if ((rc = seg_find(sn, &ci)) || ((rc = seg_attach(s->ro_vid, ci, SEG_RDONLY)) &&
                                         rc != -EXO_EEXIST))
            return rc;
    }
    chunk_name(sn, sizeof sn, s->name, 0);
    if (s->h->magic != 0 && s->h->chunk_size != chunk)
        return exomem_set_error(EXO_ECORRUPT, "store '%s': header says %llu-byte chunks, "
                                "segment %s has %llu bytes", s->name,
                                (unsigned long long)s->h->chunk_size, sn,
                                (unsigned long long)chunk);
    return 0;
}

/* ---- mmap stores: chunk i is bytes [i*chunk, (i+1)*chunk) of one file ---- */

static int map_file_part(struct sj_store *s, uint64_t off, uint64_t len)
{
    if (off + len > s->reserved)
        return exomem_set_error(EXO_ENOMEM, "store '%s': file past its %llu GiB reservation",
                                s->name, (unsigned long long)(s->reserved >> 30));
    void *p = mmap(s->map + off, len, PROT_READ | (s->readonly ? 0 : PROT_WRITE),
                   MAP_SHARED | MAP_FIXED, s->fd, (off_t)off);
    if (p == MAP_FAILED)
        return exomem_set_error(-errno, "store '%s': mmap: %s", s->name, strerror(errno));
    /* As the paper's mmap variant: keep the data out of core dumps. */
    (void)madvise(p, len, MADV_DONTDUMP);
    return 0;
}

static int mmap_open(struct sj_store *s, const struct sj_where *w, enum sj_mode mode)
{
    int create = mode == SJ_CREATE;
    char path[4096];
    mmap_path(path, sizeof path, w->mmap_dir, s->name);
    s->fd = open(path, (s->readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC | (create ? O_CREAT : 0),
                 0600);
    if (s->fd < 0)
        return errno == ENOENT
                   ? exomem_set_error(EXO_ENOENT, "no store %s: run samjmp load first", path)
                   : exomem_set_error(-errno, "%s: %s", path, strerror(errno));
    while (flock(s->fd, s->readonly ? LOCK_SH : LOCK_EX) != 0) /* waits for other stages */
        if (errno != EINTR)
            return exomem_set_error(-errno, "%s: flock: %s", path, strerror(errno));
    struct stat st;
    if (fstat(s->fd, &st) != 0)
        return exomem_set_error(-errno, "%s: %s", path, strerror(errno));
    uint64_t size = (uint64_t)st.st_size;
    if (size < SJ_HDR_BYTES) {
        if (!create)
            return exomem_set_error(EXO_ECORRUPT, "%s: too short for a store", path);
        size = w->chunk_size;
        if (ftruncate(s->fd, (off_t)size) != 0)
            return exomem_set_error(-errno, "%s: ftruncate: %s", path, strerror(errno));
    }
    s->reserved = SJ_MMAP_RESERVE;
    void *r = mmap(NULL, s->reserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (r == MAP_FAILED)
        return exomem_set_error(-errno, "reserving address space: %s", strerror(errno));
    s->map = r;
    int rc = map_file_part(s, 0, size);
    if (rc)
        return rc;
    s->delta = (uintptr_t)s->map;
    s->h = (struct sj_header *)s->map;
    if (s->h->magic == 0 && create)
        init_header(s, size, size, 0);
    return 0;
}

static void release(struct sj_store *s)
{
    if (s->kind == SJ_VAS) {
        if (s->vh != VAS_HOME) {
            vas_switch(VAS_HOME);
            vas_detach(s->vh);
        }
        s->vh = VAS_HOME;
    } else {
        if (s->map)
            munmap(s->map, s->reserved);
        if (s->fd >= 0)
            close(s->fd); /* drops the flock */
        s->map = NULL;
        s->fd = -1;
    }
    s->h = NULL;
}

int sj_open(struct sj_store *s, const char *name, const struct sj_where *w, enum sj_mode mode)
{
    memset(s, 0, sizeof *s);
    s->fd = -1;
    s->vh = VAS_HOME;
    s->kind = w->mmap_dir ? SJ_MMAP : SJ_VAS;
    s->readonly = mode == SJ_READ;
    int create = mode == SJ_CREATE;
    int rc = check_name(name);
    if (rc)
        return rc;
    snprintf(s->name, sizeof s->name, "%s", name);
    if (create && (w->chunk_size == 0 || w->chunk_size > GIB || w->chunk_size % 4096))
        return exomem_set_error(EXO_EINVAL, "chunk size %llu: a multiple of 4 KiB up to 1 GiB",
                                (unsigned long long)w->chunk_size);
    rc = s->kind == SJ_VAS ? vas_open(s, w, mode) : mmap_open(s, w, mode);
    if (rc == 0 && s->h->magic == 0)
        rc = exomem_set_error(EXO_ENOENT, "store '%s' was never set up: run samjmp load", name);
    if (rc == 0)
        rc = check_header(s);
    if (rc == 0 && s->kind == SJ_MMAP) {
        /* Map the chunks another process added beyond what the file size said at first. */
        struct stat st;
        uint64_t want = (uint64_t)s->h->nchunks * s->h->chunk_size;
        if (fstat(s->fd, &st) == 0 && (uint64_t)st.st_size < want)
            rc = exomem_set_error(EXO_ECORRUPT, "store '%s': file shorter than its chunks", name);
        else if (want > s->h->chunk_size)
            rc = map_file_part(s, 0, want);
    }
    if (rc) {
        int keep = errno;
        release(s);
        errno = keep;
    }
    return rc;
}

void sj_close(struct sj_store *s)
{
    release(s);
}

int sj_drop(const char *name, const struct sj_where *w)
{
    int rc = check_name(name);
    if (rc)
        return rc;
    if (w->mmap_dir) {
        char path[4096];
        mmap_path(path, sizeof path, w->mmap_dir, name);
        if (unlink(path) != 0)
            return errno == ENOENT ? exomem_set_error(EXO_ENOENT, "no store %s", path)
                                   : exomem_set_error(-errno, "%s: %s", path, strerror(errno));
        return 0;
    }
    int found = 0;
    char ro[EXOMEM_NAME_MAX + 16];
    ro_name(ro, sizeof ro, name);
    const char *vases[2] = { name, ro };
    for (int k = 0; k < 2; k++) {
        vasid_t vid;
        if ((rc = vas_find(vases[k], &vid)) == 0) {
            if ((rc = vas_delete(vid)))
                return rc;
            found = 1;
        } else if (rc != -EXO_ENOENT) {
            return rc;
        }
    }
    /* Chunks by name, also one a dead load made but never listed in the VAS. */
    for (unsigned i = 0; i < VAS_SEGS_MAX; i++) {
        char sn[EXOMEM_NAME_MAX + 16];
        chunk_name(sn, sizeof sn, name, i);
        segid_t sid;
        if (seg_find(sn, &sid) != 0)
            continue;
        if ((rc = seg_delete(sid)))
            return rc;
        found = 1;
    }
    return found ? 0 : exomem_set_error(EXO_ENOENT, "no store '%s'", name);
}

int sj_require(struct sj_store *s, enum sj_stage st)
{
    if (atomic_load_explicit(&s->h->mark[st].done, memory_order_acquire))
        return 0;
    return exomem_set_error(EXO_EINVAL, "store '%s' has no complete %s stage: run samjmp %s "
                            "first", s->name, stage_cmd[st], stage_cmd[st]);
}

int sj_stage_begin(struct sj_store *s, enum sj_stage st)
{
    struct sj_header *h = s->h;
    if (st > SJ_LOAD) {
        int rc = sj_require(s, st - 1);
        if (rc)
            return rc;
    }
    for (int k = st; k < SJ_NSTAGES; k++)
        atomic_store_explicit(&h->mark[k].done, 0, memory_order_release);
    if (st == SJ_LOAD) {
        h->cur_chunk = 0;
        h->cur_used = SJ_HDR_BYTES;
    } else {
        h->cur_chunk = h->mark[st - 1].chunk;
        h->cur_used = h->mark[st - 1].used;
    }
    return 0;
}

void sj_stage_done(struct sj_store *s, enum sj_stage st)
{
    struct sj_header *h = s->h;
    h->mark[st].chunk = h->cur_chunk;
    h->mark[st].used = h->cur_used;
    atomic_store_explicit(&h->mark[st].done, 1, memory_order_release);
}

static int add_chunk(struct sj_store *s, unsigned i)
{
    struct sj_header *h = s->h;
    int rc;
    if (s->kind == SJ_VAS) {
        if (i >= VAS_SEGS_MAX)
            return exomem_set_error(EXO_ENOMEM, "store '%s': %d chunks of %llu MiB are full",
                                    s->name, VAS_SEGS_MAX,
                                    (unsigned long long)(h->chunk_size >> 20));
        rc = vas_add_chunk(s, i, h->first + (uint64_t)i * h->stride, h->chunk_size);
    } else {
        uint64_t end = (uint64_t)(i + 1) * h->chunk_size;
        if (ftruncate(s->fd, (off_t)end) != 0)
            return exomem_set_error(-errno, "store '%s': ftruncate: %s", s->name,
                                    strerror(errno));
        rc = map_file_part(s, (uint64_t)i * h->chunk_size, h->chunk_size);
    }
    if (rc == 0)
        h->nchunks = i + 1;
    return rc;
}

sj_ref sj_alloc(struct sj_store *s, uint64_t size)
{
    struct sj_header *h = s->h;
    size = (size + 7) & ~UINT64_C(7);
    if (size > h->chunk_size - SJ_HDR_BYTES) {
        exomem_set_error(EXO_ENOMEM, "store '%s': %llu bytes do not fit a chunk of %llu MiB "
                         "(load with a larger --chunk-mib)", s->name, (unsigned long long)size,
                         (unsigned long long)(h->chunk_size >> 20));
        return 0;
    }
    if (h->cur_used + size > h->chunk_size) {
        unsigned next = h->cur_chunk + 1;
        if (next >= h->nchunks && add_chunk(s, next) != 0)
            return 0;
        h->cur_chunk = next;
        h->cur_used = 0;
    }
    sj_ref r = h->first + (uint64_t)h->cur_chunk * h->stride + h->cur_used;
    h->cur_used += size;
    return r;
}

int sj_info(struct sj_store *s, FILE *out)
{
    const struct sj_header *h = s->h;
    uint64_t used = (uint64_t)h->cur_chunk * h->chunk_size + h->cur_used;
    fprintf(out, "kind\t%s\nchunks\t%u\nchunk_bytes\t%llu\nused_bytes\t%llu\nrecords\t%llu\n",
            s->kind == SJ_VAS ? "vas" : "mmap", h->nchunks, (unsigned long long)h->chunk_size,
            (unsigned long long)used, (unsigned long long)h->n_recs);
    for (int k = 0; k < SJ_NSTAGES; k++)
        fprintf(out, "%s\t%s\n", stage_cmd[k],
                atomic_load_explicit(&h->mark[k].done, memory_order_acquire) ? "done"
                                                                             : "not done");
    return 0;
}
