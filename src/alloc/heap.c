/* A heap inside one memory region, with absolute pointers (see heap.h).
 *
 * Layout: [header][prologue footer][chunk][chunk]...[epilogue header]. Every chunk starts at
 * an address that is 8 mod 16 with a one-word header tag and ends with an identical footer
 * tag, so its payload (chunk + 8) is 16-aligned and both neighbours can be found from it.
 * A tag is the chunk size (a multiple of 16) | TAG_MARK | TAG_INUSE. Free chunks keep two
 * links after the header (next at +8, prev at +16) and sit in one of NBINS segregated,
 * doubly linked, LIFO lists: exact 16-byte classes below SMALL_LIMIT, then a few classes
 * per power of two (see bin_of). A bitmap of non-empty lists finds the next usable list fast.
 *
 * Thread caches (thread_cache.c) keep freed chunks of up to EXO_HEAP_STASH_MAX bytes without
 * the mutex: such a chunk stays "in use" for its neighbours (its footer is unchanged), but
 * its header carries TAG_STASHED and its payload the owning process (pid and start time)
 * and the cache's link. A live-chunk check fails on it, so it cannot be freed twice; the
 * stats count it as free; chunks of a process that died are given back when the heap runs
 * out of space or a dead mutex holder is recovered (reclaim_dead).
 *
 * Crash safety: a process may die (SIGKILL) while holding the mutex. The chunk HEADERS are
 * the source of truth and every change is ordered so that a walk over them from the first
 * chunk always sees a valid tiling: a new chunk's tags are written before the one store to
 * the old chunk's header that makes it part of the tiling. Footers and free lists may be
 * stale after a death; the next locker rebuilds them from a header walk.
 */
#include "alloc/heap.h"
#include "alloc/heap_layout.h"
#include "internal.h"
#include "os/os.h"

#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

/* Exact bins below 1 KiB; 16 bins per power of two up to 64 KiB (where most requests of
 * typical programs fall, so first-fit scans stay short); 4 per power of two beyond. */
static unsigned bin_of(size_t size)
{
    if (size < SMALL_LIMIT)
        return (unsigned)(size >> 4);
    unsigned lg = 63u - (unsigned)__builtin_clzll(size);
    unsigned i;
    if (lg < 16)
        i = 64u + (lg - 10u) * 16u + (unsigned)((size >> (lg - 4u)) & 15u);
    else
        i = 160u + (lg - 16u) * 4u + (unsigned)((size >> (lg - 2u)) & 3u);
    return i < NBINS ? i : NBINS - 1;
}

static inline char *link_next(const char *c) { return (char *)(uintptr_t)W(c + 8); }
static inline char *link_prev(const char *c) { return (char *)(uintptr_t)W(c + 16); }

/* Is c (from the header's bins or a free chunk's links, which anyone who may write the
 * segment can damage) a free chunk of this heap whose links stay inside it? Checked before
 * the heap follows such a pointer, so damage gives an error or a rebuild, never a wild
 * access. */
/* Could c be a chunk of this heap: inside it, where chunks start (8 past 16-alignment)? */
static bool chunk_place_ok(const struct exo_heap *h, const char *c)
{
    return ((uintptr_t)c & 15) == 8 && c >= h->first && c < h->end;
}

static bool free_chunk_ok(const struct exo_heap *h, const char *c)
{
    if (!chunk_place_ok(h, c) || !tag_fits(h, c, W(c)) || tag_inuse(W(c)))
        return false;
    const char *next = link_next(c), *prev = link_prev(c);
    return (!next || chunk_place_ok(h, next)) && (!prev || chunk_place_ok(h, prev));
}

static void bin_insert(struct exo_heap *h, char *c, size_t size)
{
    unsigned i = bin_of(size);
    char *head = h->bins[i];
    if (head && !free_chunk_ok(h, head))
        head = NULL;   /* a damaged list is dropped; rebuild() finds its chunks again */
    W(c + 8) = (uintptr_t)head;
    W(c + 16) = 0;
    if (head)
        W(head + 16) = (uintptr_t)c;
    else
        h->binmap[i / 64] |= UINT64_C(1) << (i % 64);
    h->bins[i] = c;
}

/* Unlink free chunk c, which was inserted with this size. */
static void bin_remove(struct exo_heap *h, char *c, size_t size)
{
    char *next = link_next(c), *prev = link_prev(c);
    if (prev) {
        W(prev + 8) = (uintptr_t)next;
    } else {
        unsigned i = bin_of(size);
        h->bins[i] = next;
        if (!next)
            h->binmap[i / 64] &= ~(UINT64_C(1) << (i % 64));
    }
    if (next)
        W(next + 16) = (uintptr_t)prev;
}

/* First non-empty bin at or after i, or NBINS. */
static unsigned next_nonempty(const struct exo_heap *h, unsigned i)
{
    for (unsigned w = i / 64; w < NBINS / 64; w++) {
        uint64_t m = h->binmap[w];
        if (w == i / 64)
            m &= ~UINT64_C(0) << (i % 64);
        if (m)
            return w * 64 + (unsigned)__builtin_ctzll(m);
    }
    return NBINS;
}

/* Unlink and return a free chunk of at least `need` bytes, or NULL. Exact small bins are
 * O(1); the request's own large bin is searched first-fit; any chunk of a higher bin fits.
 * A damaged list sets *damaged and gives NULL. */
static char *take_fit(struct exo_heap *h, size_t need, bool *damaged)
{
    unsigned i = bin_of(need);
    unsigned steps = 0;
    for (char *c = h->bins[i]; c; c = link_next(c)) {
        if (!free_chunk_ok(h, c) || ++steps > (size_t)(h->end - h->first) / MIN_CHUNK) {
            *damaged = true;
            return NULL;
        }
        size_t sz = tag_size(W(c));
        if (sz >= need) {
            bin_remove(h, c, sz);
            return c;
        }
        if (i < SMALL_LIMIT / 16)
            break;
    }
    i = next_nonempty(h, i + 1);
    if (i >= NBINS)
        return NULL;
    char *c = h->bins[i];
    if (!free_chunk_ok(h, c)) {
        *damaged = true;
        return NULL;
    }
    bin_remove(h, c, tag_size(W(c)));
    return c;
}

/* take_fit(), rebuilding the free lists from the chunk headers once if they are damaged;
 * -EXO_ECORRUPT in *rc when even the headers are. */
static int rebuild(struct exo_heap *h);

static char *take_fit_or_rebuild(struct exo_heap *h, size_t need, int *rc)
{
    bool damaged = false;
    char *c = take_fit(h, need, &damaged);
    if (!damaged)
        return c;
    if (rebuild(h) != 0) {
        *rc = -EXO_ECORRUPT;   /* the chunk headers themselves are damaged */
        return NULL;
    }
    damaged = false;
    c = take_fit(h, need, &damaged);
    if (damaged)
        *rc = -EXO_ECORRUPT;
    return c;
}

/* Make the unlinked free chunk c an allocation of `need` bytes; a tail big enough to be a
 * chunk goes back to the bins (its next neighbour is in use: free chunks never touch). */
static void carve(struct exo_heap *h, char *c, size_t need)
{
    size_t sz = tag_size(W(c));
    if (sz - need >= MIN_CHUNK) {
        char *rest = c + need;
        set_tags(rest, sz - need, false);
        set_tags(c, need, true);
        bin_insert(h, rest, sz - need);
    } else {
        set_tags(c, sz, true);
    }
}

/* Put chunk c, whose header is already marked free, into the bins, merged with free
 * neighbours. */
static void release(struct exo_heap *h, char *c)
{
    size_t sz = tag_size(W(c));
    uint64_t nt = W(c + sz);
    if (!tag_inuse(nt)) {
        bin_remove(h, c + sz, tag_size(nt));
        sz += tag_size(nt);
    }
    uint64_t pt = W(c - 8);
    if (!tag_inuse(pt)) {
        c -= tag_size(pt);
        bin_remove(h, c, tag_size(pt));
        sz += tag_size(pt);
    }
    set_tags(c, sz, false);
    bin_insert(h, c, sz);
}

/* The chunk of user pointer p if p is a live allocation of h, else NULL. */
static char *live_chunk(const struct exo_heap *h, const void *p)
{
    uintptr_t u = (uintptr_t)p;
    if ((u & 15) || u < (uintptr_t)h->first + 8 || u >= (uintptr_t)h->end)
        return NULL;
    char *c = (char *)p - 8;
    uint64_t t = W(c);
    if (!tag_inuse(t) || !tag_fits(h, c, t) || W(c + tag_size(t) - 8) != t)
        return NULL;
    return c;
}

/* Are the tags around live chunk c sound enough to merge with? */
static bool neighbours_sound(const struct exo_heap *h, const char *c)
{
    const char *n = c + tag_size(W(c));
    uint64_t nt = W(n);
    if (n == h->end ? nt != make_tag(0, true) : !tag_fits(h, n, nt))
        return false;
    uint64_t pt = W(c - 8);
    if (c == h->first)
        return pt == make_tag(0, true);
    size_t psz = tag_size(pt);
    if (!tag_marked(pt) || psz < MIN_CHUNK || psz > (size_t)(c - h->first))
        return false;
    return tag_inuse(pt) || W(c - psz) == pt;   /* a free one is about to be merged */
}

/* Chunk size for a request of n bytes; false when no chunk of h could ever hold it. */
static bool chunk_need(const struct exo_heap *h, size_t n, size_t *need)
{
    if (n > (size_t)(h->end - h->first))
        return false;
    size_t sz = (n + OVERHEAD + 15) & ~(size_t)15;
    *need = sz < MIN_CHUNK ? MIN_CHUNK : sz;
    return true;
}

/* ---- consistency check and repair ---- */

/* Walk the tiling by headers only; 0 if it reaches the epilogue exactly. */
static int walk_headers(const struct exo_heap *h)
{
    if (W(h->first - 8) != make_tag(0, true) || W(h->end) != make_tag(0, true))
        return -EXO_ECORRUPT;
    for (char *c = h->first; c != h->end; c += tag_size(W(c)))
        if (!tag_fits(h, c, W(c)))
            return -EXO_ECORRUPT;
    return 0;
}

static int check_locked(const struct exo_heap *h, struct seg_heap_stats *st)
{
    struct seg_heap_stats s = {.heap_bytes = (uint64_t)(h->end - h->first)};
    if (walk_headers(h))
        return -EXO_ECORRUPT;
    bool prev_free = false;
    uint64_t stashed = 0, stashed_bytes = 0;
    for (char *c = h->first; c != h->end; c += tag_size(W(c))) {
        uint64_t t = W(c);
        if (W(c + tag_size(t) - 8) != (t & ~TAG_STASHED) || (!tag_inuse(t) && prev_free))
            return -EXO_ECORRUPT;   /* torn tags, or two free neighbours not merged */
        prev_free = !tag_inuse(t);
        if (tag_stashed(t)) {
            stashed_bytes += tag_size(t);
            stashed++;
        } else if (prev_free) {
            s.free_bytes += tag_size(t);
            s.free_chunks++;
        } else {
            s.used_bytes += tag_size(t);
            s.allocations++;
        }
    }
    uint64_t listed = 0, listed_bytes = 0;
    for (unsigned i = 0; i < NBINS; i++) {
        bool bit = (h->binmap[i / 64] >> (i % 64)) & 1;
        if (bit != (h->bins[i] != NULL))
            return -EXO_ECORRUPT;
        char *prev = NULL;
        for (char *c = h->bins[i]; c; prev = c, c = link_next(c)) {
            if (!chunk_place_ok(h, c) || ++listed > s.free_chunks)
                return -EXO_ECORRUPT;
            uint64_t t = W(c);
            if (tag_inuse(t) || !tag_fits(h, c, t) || bin_of(tag_size(t)) != i ||
                link_prev(c) != prev)
                return -EXO_ECORRUPT;
            listed_bytes += tag_size(t);
        }
    }
    if (listed != s.free_chunks || listed_bytes != s.free_bytes)
        return -EXO_ECORRUPT;
    s.free_chunks += stashed;   /* free for the application, only not in the free lists */
    s.free_bytes += stashed_bytes;
    if (st)
        *st = s;
    return 0;
}

/* Rebuild footers and free lists from the headers, merging free neighbours. */
static int rebuild(struct exo_heap *h)
{
    if (walk_headers(h))
        return -EXO_ECORRUPT;
    memset(h->bins, 0, sizeof h->bins);
    memset(h->binmap, 0, sizeof h->binmap);
    char *run = NULL;   /* start of the current run of free chunks */
    for (char *c = h->first;; ) {
        uint64_t t = c == h->end ? make_tag(0, true) : W(c);
        if (!tag_inuse(t) && run) {
            W(run) = make_tag((size_t)(c - run) + tag_size(t), false);
        } else if (!tag_inuse(t)) {
            run = c;
        } else if (run) {
            set_tags(run, (size_t)(c - run), false);
            bin_insert(h, run, (size_t)(c - run));
            run = NULL;
        }
        if (c == h->end)
            break;
        if (tag_inuse(t))
            W(c + tag_size(t) - 8) = t & ~TAG_STASHED;
        c += tag_size(t);
    }
    h->rebuilds++;
    return check_locked(h, NULL);
}

/* Is the process named by a stash owner word (exo_heap_stash) still running? */
static bool owner_alive(uint64_t owner)
{
    uint64_t start;
    int pid = (int)(owner >> 32);
    return pid > 0 && exo_os_process_start(pid, &start) == 0 && (uint32_t)start == (uint32_t)owner;
}

/* Give the stashed chunks of processes that are gone back to the free lists (lock held).
 * Returns how many. Stashed chunks of live processes, this one's included, are not
 * touched: their caches may hand them out any moment without the mutex. */
static size_t reclaim_dead(struct exo_heap *h)
{
    if (walk_headers(h))
        return 0;
    uint64_t alive[8] = {0}, dead[8] = {0};   /* owners seen: /proc is read once each */
    size_t n = 0;
    for (char *c = h->first; c != h->end; c += tag_size(W(c))) {
        uint64_t t = W(c);
        if (!tag_stashed(t))
            continue;
        uint64_t owner = W(c + 8);
        unsigned k = (unsigned)(owner * 0x9e3779b97f4a7c15u >> 61);
        bool gone = owner == dead[k] ? true : owner == alive[k] ? false : !owner_alive(owner);
        *(gone ? &dead[k] : &alive[k]) = owner;
        if (gone) {
            set_tags(c, tag_size(t), false);
            n++;
        }
    }
    if (n)
        rebuild(h);   /* merges the new free chunks with their neighbours and lists them */
    return n;
}

/* Take the heap's mutex; if its last holder died, make the heap consistent first. */
static int heap_lock(struct exo_heap *h)
{
    int rc = pthread_mutex_lock(&h->lock);
    if (rc == 0)
        return 0;
    if (rc != EOWNERDEAD)
        return -EXO_ECORRUPT;   /* ENOTRECOVERABLE: an earlier repair failed */
    h->owner_deaths++;
    if (check_locked(h, NULL) != 0 && rebuild(h) != 0) {
        /* Unlocking without pthread_mutex_consistent() marks the mutex unrecoverable. */
        pthread_mutex_unlock(&h->lock);
        return -EXO_ECORRUPT;
    }
    reclaim_dead(h);   /* the dead holder's thread caches, most likely */
    pthread_mutex_consistent(&h->lock);
    return 0;
}

/* ---- opening ---- */

/* Where the chunks of a heap over [base, base+size) begin and end. */
static void layout(uintptr_t base, size_t size, char **first, char **end)
{
    *first = (char *)(((base + sizeof(struct exo_heap) + 15) & ~(uintptr_t)15) + 8);
    *end = (char *)(((base + size) & ~(uintptr_t)15) - 8);
}

static void heap_format(struct exo_heap *h, char *base, size_t size)
{
    h->version = HEAP_VERSION;
    h->header_size = sizeof *h;
    h->base = (uintptr_t)base;
    h->size = size;
    layout((uintptr_t)base, size, &h->first, &h->end);
    W(h->first - 8) = make_tag(0, true);   /* prologue: an in-use "footer" before the first */
    W(h->end) = make_tag(0, true);
    set_tags(h->first, (size_t)(h->end - h->first), false);
    bin_insert(h, h->first, (size_t)(h->end - h->first));
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&h->lock, &a);
    pthread_mutexattr_destroy(&a);
}

static bool header_zero(const struct exo_heap *h)
{
    const unsigned char *b = (const unsigned char *)h;
    for (size_t i = 0; i < sizeof *h; i++)
        if (b[i])
            return false;
    return true;
}

static int region_ok(const void *base, size_t size)
{
    uintptr_t b = (uintptr_t)base;
    if (!base || (b & 15) || size < MIN_REGION || size > UINTPTR_MAX - b)
        return -EXO_EINVAL;
    return 0;
}

static int validate(const struct exo_heap *h, const void *base, size_t size)
{
    char *first, *end;
    layout((uintptr_t)base, size, &first, &end);
    if (h->magic != HEAP_MAGIC || h->version != HEAP_VERSION || h->header_size != sizeof *h ||
        h->base != (uintptr_t)base || h->size != size || h->first != first || h->end != end)
        return -EXO_ECORRUPT;
    return 0;
}

/* Wait for a concurrent formatter to finish; false if it seems to have died. Formatting
 * writes a header and two tags, microseconds of work: 100 ms is ample, and bounds what a
 * header left "formatting" (by a crash, or by anyone who may write the segment) costs each
 * call before it fails with EXO_ECORRUPT. */
static bool wait_formatted(struct exo_heap *h)
{
    for (int i = 0; i < 400; i++) {
        if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != HEAP_BUSY)
            return true;
        exo_os_sleep_ns(250000);
    }
    return false;
}

int exo_heap_open(void *base, size_t size, struct exo_heap **out)
{
    int rc = region_ok(base, size);
    if (rc)
        return rc;
    struct exo_heap *h = base;
    uint64_t m = __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE);
    if (m == 0 && header_zero(h)) {
        uint64_t zero = 0;
        if (__atomic_compare_exchange_n(&h->magic, &zero, HEAP_BUSY, false, __ATOMIC_ACQUIRE,
                                        __ATOMIC_ACQUIRE)) {
            heap_format(h, base, size);
            __atomic_store_n(&h->magic, HEAP_MAGIC, __ATOMIC_RELEASE);
        }
        m = HEAP_BUSY;
    }
    if (m == HEAP_BUSY && !wait_formatted(h))
        return -EXO_ECORRUPT;
    rc = validate(h, base, size);
    if (rc == 0)
        *out = h;
    return rc;
}

int exo_heap_open_ro(const void *base, size_t size, struct exo_heap **out)
{
    int rc = region_ok(base, size);
    if (rc)
        return rc;
    const struct exo_heap *h = base;
    if (header_zero(h)) {
        *out = NULL;
        return 0;
    }
    rc = validate(h, base, size);
    if (rc == 0)
        *out = (struct exo_heap *)(uintptr_t)base;
    return rc;
}

/* ---- allocation ---- */

/* Return p, with *code (if asked for) 0 for success or rc for failure. */
static void *result(int *code, int rc, void *p)
{
    if (code)
        *code = rc;
    return p;
}

static void *fail(int *code, int rc)
{
    return result(code, rc, NULL);
}

/* The chunk size for `size` bytes in *need, then lock the heap: 0, or the error (-EXO_ENOMEM
 * for a size no chunk can hold) with the heap left unlocked. */
static int size_and_lock(struct exo_heap *h, size_t size, size_t *need)
{
    if (!chunk_need(h, size, need))
        return -EXO_ENOMEM;
    return heap_lock(h);
}

void *exo_heap_malloc(struct exo_heap *h, size_t size, int *code)
{
    size_t need = 0;
    int rc = size_and_lock(h, size, &need);
    if (rc)
        return fail(code, rc);
    rc = -EXO_ENOMEM;
    char *c = take_fit_or_rebuild(h, need, &rc);
    if (!c && rc == -EXO_ENOMEM && reclaim_dead(h) > 0)
        c = take_fit_or_rebuild(h, need, &rc);
    if (c)
        carve(h, c, need);
    pthread_mutex_unlock(&h->lock);
    return c ? result(code, 0, c + 8) : fail(code, rc);
}

void *exo_heap_memalign(struct exo_heap *h, size_t align, size_t size, int *code)
{
    if (align == 0 || (align & (align - 1)))
        return fail(code, -EXO_EINVAL);
    if (align <= 16)
        return exo_heap_malloc(h, size, code);
    size_t need, area = (size_t)(h->end - h->first);
    if (align > area || !chunk_need(h, size, &need) || need > area - align)
        return fail(code, -EXO_ENOMEM);
    int rc = heap_lock(h);
    if (rc)
        return fail(code, rc);
    /* Room for the request plus a front gap that is either 0 or a whole free chunk. */
    rc = -EXO_ENOMEM;
    char *c = take_fit_or_rebuild(h, need + align + MIN_CHUNK, &rc);
    if (!c && rc == -EXO_ENOMEM && reclaim_dead(h) > 0)
        c = take_fit_or_rebuild(h, need + align + MIN_CHUNK, &rc);
    if (c) {
        uintptr_t payload = ((uintptr_t)c + 8 + align - 1) & ~(uintptr_t)(align - 1);
        size_t gap = payload - 8 - (uintptr_t)c;
        if (gap && gap < MIN_CHUNK)
            gap += align;
        if (gap) {
            size_t sz = tag_size(W(c));
            set_tags(c + gap, sz - gap, false);
            set_tags(c, gap, false);
            bin_insert(h, c, gap);
            c += gap;
        }
        carve(h, c, need);
    }
    pthread_mutex_unlock(&h->lock);
    return c ? result(code, 0, c + 8) : fail(code, rc);
}

/* Resize chunk c in place if it can be done; caller holds the lock. */
static bool resize_in_place(struct exo_heap *h, char *c, size_t need)
{
    size_t sz = tag_size(W(c));
    if (need <= sz) {
        if (sz - need >= MIN_CHUNK) {
            char *rest = c + need;
            set_tags(rest, sz - need, false);
            set_tags(c, need, true);
            release(h, rest);
        }
        return true;
    }
    uint64_t nt = W(c + sz);
    if (tag_inuse(nt) || sz + tag_size(nt) < need)
        return false;
    size_t total = sz + tag_size(nt);
    bin_remove(h, c + sz, tag_size(nt));
    if (total - need >= MIN_CHUNK) {
        set_tags(c + need, total - need, false);
        set_tags(c, need, true);
        bin_insert(h, c + need, total - need);
    } else {
        set_tags(c, total, true);
    }
    return true;
}

void *exo_heap_realloc(struct exo_heap *h, void *p, size_t size, int *code)
{
    if (!p)
        return exo_heap_malloc(h, size, code);
    if (size == 0)
        return fail(code, exo_heap_free(h, p));
    size_t need = 0;
    int rc = size_and_lock(h, size, &need);
    if (rc)
        return fail(code, rc);
    char *c = live_chunk(h, p);
    if (!c || !neighbours_sound(h, c)) {
        pthread_mutex_unlock(&h->lock);
        return fail(code, c ? -EXO_ECORRUPT : -EXO_EINVAL);
    }
    size_t old_usable = tag_size(W(c)) - OVERHEAD;
    bool done = resize_in_place(h, c, need);
    pthread_mutex_unlock(&h->lock);
    if (done)
        return result(code, 0, p);
    void *q = exo_heap_malloc(h, size, code);
    if (!q)
        return NULL;
    memcpy(q, p, old_usable);
    exo_heap_free(h, p);
    return q;
}

int exo_heap_free(struct exo_heap *h, void *p)
{
    if (!p)
        return 0;
    int rc = heap_lock(h);
    if (rc)
        return rc;
    char *c = live_chunk(h, p);
    if (!c)
        rc = -EXO_EINVAL;
    else if (!neighbours_sound(h, c))
        rc = -EXO_ECORRUPT;
    if (rc == 0) {
        /* Mark the header free first: a stale copy of p can then never be freed again. */
        W(c) = make_tag(tag_size(W(c)), false);
        release(h, c);
    }
    pthread_mutex_unlock(&h->lock);
    return rc;
}

size_t exo_heap_usable_size(struct exo_heap *h, void *p)
{
    /* No lock: only the owner of a live chunk changes its tags. */
    char *c = p ? live_chunk(h, p) : NULL;
    return c ? tag_size(W(c)) - OVERHEAD : 0;
}

int exo_heap_owns(struct exo_heap *h, const void *p)
{
    return (const char *)p >= h->first && (const char *)p < h->end;
}

/* ---- thread caches ---- */

size_t exo_heap_chunk_size(const struct exo_heap *h, size_t size)
{
    size_t need;
    return chunk_need(h, size, &need) ? need : SIZE_MAX;
}

int exo_heap_stash(struct exo_heap *h, void *p, uint64_t owner, void *lists[], size_t *chunk)
{
    char *c = live_chunk(h, p);
    if (!c)
        return -EXO_EINVAL;
    uint64_t t = W(c);
    size_t sz = tag_size(t);
    *chunk = sz;
    if (sz > EXO_HEAP_STASH_MAX)
        return 0;
    W((char *)p) = owner;
    W((char *)p + 8) = (uintptr_t)lists[sz / 16];
    /* One winner if two threads free p at once (the loser sees a non-live chunk). */
    uint64_t live = t;
    /* Release: whoever sees the mark (a reclaim in another process) sees the owner too. */
    if (!__atomic_compare_exchange_n((word_t *)(void *)c, &live, t | TAG_STASHED, false,
                                     __ATOMIC_RELEASE, __ATOMIC_RELAXED))
        return -EXO_EINVAL;
    lists[sz / 16] = p;
    return 1;
}

/* The stashed chunk of payload p if owner stashed it, else NULL. */
static char *stashed_chunk(const struct exo_heap *h, void *p, uint64_t owner)
{
    char *c = (char *)p - 8;
    if (!chunk_place_ok(h, c))
        return NULL;
    uint64_t t = W(c);
    if (!tag_stashed(t) || !tag_inuse(t) || !tag_fits(h, c, t) || W((char *)p) != owner ||
        W(c + tag_size(t) - 8) != (t & ~TAG_STASHED))
        return NULL;
    return c;
}

void *exo_heap_unstash(struct exo_heap *h, void *p, uint64_t owner, void **next)
{
    char *c = stashed_chunk(h, p, owner);
    if (!c)
        return NULL;
    *next = (void *)(uintptr_t)W((char *)p + 8);
    __atomic_store_n((word_t *)(void *)c, W(c) & ~TAG_STASHED, __ATOMIC_RELAXED);
    return p;
}

int exo_heap_unstash_free(struct exo_heap *h, void *list, uint64_t owner, unsigned max,
                          void **rest)
{
    int rc = heap_lock(h);
    if (rc)
        return rc;
    void *p = list;
    for (unsigned i = 0; p && i < max && rc == 0; i++) {
        char *c = stashed_chunk(h, p, owner);
        if (!c) {
            rc = -EXO_ECORRUPT;
            break;
        }
        void *next = (void *)(uintptr_t)W((char *)p + 8);
        if (!neighbours_sound(h, c)) {
            rc = -EXO_ECORRUPT;
            break;
        }
        W(c) = make_tag(tag_size(W(c)), false);
        release(h, c);
        p = next;
    }
    pthread_mutex_unlock(&h->lock);
    if (rest)
        *rest = rc ? NULL : p;
    return rc;
}

int exo_heap_set_root(struct exo_heap *h, void *root)
{
    __atomic_store_n(&h->root, root, __ATOMIC_RELEASE);
    return 0;
}

void *exo_heap_get_root(struct exo_heap *h)
{
    return __atomic_load_n(&h->root, __ATOMIC_ACQUIRE);
}

int exo_heap_check(struct exo_heap *h, struct seg_heap_stats *st)
{
    int rc = heap_lock(h);
    if (rc)
        return rc;
    rc = check_locked(h, st);
    pthread_mutex_unlock(&h->lock);
    return rc;
}

int exo_heap_check_nolock(struct exo_heap *h, struct seg_heap_stats *st)
{
    return check_locked(h, st);
}

void exo_heap_recoveries(struct exo_heap *h, uint64_t *owner_deaths, uint64_t *rebuilds)
{
    if (owner_deaths)
        *owner_deaths = __atomic_load_n(&h->owner_deaths, __ATOMIC_RELAXED);
    if (rebuilds)
        *rebuilds = __atomic_load_n(&h->rebuilds, __ATOMIC_RELAXED);
}

int exo_heap_test_hold(struct exo_heap *h, int drop_free_lists)
{
    int rc = heap_lock(h);
    if (rc == 0 && drop_free_lists) {
        memset(h->bins, 0, sizeof h->bins);
        memset(h->binmap, 0, sizeof h->binmap);
    }
    return rc;
}

void exo_heap_header_layout(size_t *header, size_t *lock_offset, size_t *lock_size)
{
    *header = sizeof(struct exo_heap);
    *lock_offset = offsetof(struct exo_heap, lock);
    *lock_size = sizeof(pthread_mutex_t);
}
