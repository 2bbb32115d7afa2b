/* The file store served through io_uring: the same file and layout as the plain file store
 * (store_file.h; store_file.c keeps the end, holes, usage and discard), with each read and
 * write submitted to a ring and waited for.
 *
 * Rings. A ring is used by one caller at a time. The store keeps a small pool of them: a
 * caller takes the ring it used last if that one is free (a thread-local hint, so a thread
 * keeps to "its" ring and the ring's lines stay in its cache), else any free one, else makes
 * a new one, up to MAX_RINGS; when every ring is busy and no more can be made, it waits for
 * one. So there is a ring per thread calling at the same time, and no more: a pager region
 * serialises its store calls under its lock, so one region's threads normally share a
 * single ring. The rings are made lazily (the first by the constructor, so that a kernel
 * without io_uring is told there) and freed at close.
 *
 * SIGBUS delivery: taking a ring is atomics and an initial-exec thread-local; making one is
 * io_uring_setup and mmap, and I/O is io_uring_enter, which liburing calls itself without
 * allocating (os_uring.h). So the store is usable from the pager's SIGBUS handler. */
#include "pager/store_file.h"
#include "internal.h"
#include "os/os.h"
#include "os/os_uring.h"

#include <stdlib.h>
#include <string.h>

#define MAX_RINGS 64     /* as many as a region has handler threads at most */
#define DEFAULT_DEPTH 4  /* requests a ring has room for (one is in flight at a time) */
#define MAX_DEPTH 4096

struct ring_slot {
    struct io_uring ring;
    atomic_bool busy;     /* a caller uses it */
} __attribute__((aligned(64)));

struct uring_store {
    struct file_store file; /* first: the file layout (store_file.h) */
    unsigned depth;
    atomic_uint nrings;     /* slots[0, nrings) hold a ring */
    atomic_bool growing;    /* a caller is making slots[nrings] */
    atomic_bool no_more;    /* making a ring failed: share the ones there are */
    struct ring_slot slots[MAX_RINGS];
};

/* The slot this thread used last (in whichever store): where it looks first. */
static __thread unsigned last_slot __attribute__((tls_model("initial-exec")));

/* Make the ring of slot n (n == nrings) and take it, unless another caller is making one,
 * or making rings failed before. NULL when the caller should look again. */
static struct ring_slot *grow(struct uring_store *u, unsigned n)
{
    if (n >= MAX_RINGS || atomic_load(&u->no_more) || atomic_exchange(&u->growing, true))
        return NULL;
    struct ring_slot *got = NULL;
    if (atomic_load(&u->nrings) == n) {
        if (exo_os_ring_open(&u->slots[n].ring, u->depth) == 0) {
            atomic_store(&u->slots[n].busy, true);
            atomic_store(&u->nrings, n + 1);
            got = &u->slots[n];
            last_slot = n;
        } else {
            atomic_store(&u->no_more, true); /* out of descriptors or memory: go on with fewer */
        }
    }
    atomic_store(&u->growing, false);
    return got;
}

/* A ring for this caller alone until put back. Waits (yielding) only when every ring is
 * busy and no more can be made. */
static struct ring_slot *take(struct uring_store *u)
{
    for (;;) {
        unsigned n = atomic_load(&u->nrings);
        unsigned first = last_slot < n ? last_slot : 0;
        for (unsigned i = 0; i < n; i++) {
            unsigned k = first + i < n ? first + i : first + i - n;
            struct ring_slot *r = &u->slots[k];
            if (!atomic_load_explicit(&r->busy, memory_order_relaxed) &&
                !atomic_exchange(&r->busy, true)) {
                last_slot = k;
                return r;
            }
        }
        struct ring_slot *r = grow(u, n);
        if (r)
            return r;
        exo_os_yield();
    }
}

static void put(struct ring_slot *r)
{
    atomic_store(&r->busy, false);
}

static long uring_read_some(struct file_store *f, void *buf, size_t len, off_t off)
{
    struct ring_slot *r = take((struct uring_store *)f);
    long n = exo_os_ring_pread_some(&r->ring, f->fd, buf, len, off);
    put(r);
    return n;
}

static int uring_write_all(struct file_store *f, const void *buf, size_t len, off_t off)
{
    struct ring_slot *r = take((struct uring_store *)f);
    int rc = exo_os_ring_pwrite_all(&r->ring, f->fd, buf, len, off);
    put(r);
    return rc;
}

static void uring_fini(struct file_store *f)
{
    struct uring_store *u = (struct uring_store *)f;
    unsigned n = atomic_load(&u->nrings);
    for (unsigned i = 0; i < n; i++)
        exo_os_ring_close(&u->slots[i].ring);
}

static const struct file_io uring_io = {uring_read_some, uring_write_all, uring_fini};

unsigned exo_pager_uring_rings(exo_pager_store *s)
{
    return atomic_load(&((struct uring_store *)s)->nrings);
}

/* Why io_uring_setup refused (errno ENOSYS or EPERM), for the constructor's message. */
static const char *unavailable_reason(int err)
{
    if (err == ENOSYS)
        return "this kernel is built without io_uring (CONFIG_IO_URING)";
    switch (exo_os_ring_disabled()) {
    case 2: return "the sysctl kernel.io_uring_disabled is 2: disabled for every process";
    case 1: return "the sysctl kernel.io_uring_disabled is 1: only processes with "
                   "CAP_SYS_ADMIN or in the group kernel.io_uring_group may use it";
    default: return "not allowed to this process (a seccomp filter, as container runtimes "
                    "install, or a security module)";
    }
}

EXO_API int exo_pager_store_file_uring(const char *path, unsigned queue_depth,
                                       exo_pager_store **out)
{
    exo_clear_error();
    if (!path || !out)
        return exo_fail(EXO_EINVAL, "exo_pager_store_file_uring: path or out is NULL");
    if (queue_depth > MAX_DEPTH)
        return exo_fail(EXO_EINVAL, "file-uring store %s: queue depth %u is above %u", path,
                        queue_depth, MAX_DEPTH);
    struct uring_store *u = aligned_alloc(_Alignof(struct uring_store), sizeof *u);
    if (!u)
        return exo_fail(EXO_ENOMEM, "file-uring store %s: out of memory", path);
    memset(u, 0, sizeof *u);
    u->depth = queue_depth ? queue_depth : DEFAULT_DEPTH;
    /* The first ring before the file: a kernel without io_uring leaves no file behind. */
    int rc = exo_os_ring_open(&u->slots[0].ring, u->depth);
    if (rc == -EXO_ENOTSUP) {
        int err = errno;
        free(u);
        return exo_fail(EXO_ENOTSUP, "file-uring store %s: io_uring is not available: "
                        "io_uring_setup failed with %s; %s (exo_pager_store_file does the "
                        "same without it)", path, strerror(err), unavailable_reason(err));
    }
    if (rc) {
        int err = errno;
        free(u);
        return exo_fail(-rc, "file-uring store %s: cannot make an io_uring: %s", path,
                        strerror(err));
    }
    atomic_store(&u->nrings, 1);
    if ((rc = exo_pager_file_store_open(&u->file, path, "file-uring", &uring_io)) != 0) {
        exo_os_ring_close(&u->slots[0].ring);
        free(u);
        return rc;
    }
    *out = &u->file.base;
    return 0;
}
