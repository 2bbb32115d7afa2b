/* Per-thread caches of freed chunks (thread_cache.h).
 *
 * Each cache has one list per 16-byte size class, linked through the stashed chunks
 * themselves (heap.c keeps the link and the owner in the payload). A list holds at most
 * CLASS_CAP chunks: past that, half of it goes back to the heap under one lock. (Taking more
 * chunks of the size on a miss, under the same lock, measured no faster here.) Caches of
 * heaps that are not visible are kept (their chunks are untouchable until the segment is
 * visible again); a thread that exits, or the process at exit, gives back what is visible.
 * A fork child forgets its copy of the caches: their chunks belong to the parent. */
#include "alloc/thread_cache.h"
#include "internal.h"
#include "os/os.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define NCLASSES (EXO_HEAP_STASH_MAX / 16 + 1)
#define CLASS_CAP 16
#define CACHES 4          /* heaps cached per thread */

struct cache {
    struct exo_heap *h;   /* NULL: unused */
    segid_t sid;
    void *lists[NCLASSES];
    uint8_t count[NCLASSES];
};

struct thread_caches {
    struct cache c[CACHES];
    unsigned last;
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_key_t key;
static uint64_t owner;   /* this process: pid << 32 | low bits of its start time */
/* Initial-exec: no __tls_get_addr() call on the fast path. */
static _Thread_local struct thread_caches *mine __attribute__((tls_model("initial-exec")));

/* Without its start time another process could not tell this one alive, and might take
 * back its cached chunks: then nothing is cached (owner 0). */
static void set_owner(void)
{
    int pid = exo_os_pid();
    uint64_t start = 0;
    if (exo_os_process_start(pid, &start) == 0)
        owner = (uint64_t)(uint32_t)pid << 32 | (uint32_t)start;
    else
        owner = 0;
}

static void give_back(struct cache *c)
{
    for (unsigned k = 0; k < NCLASSES; k++) {
        if (c->lists[k])
            exo_heap_unstash_free(c->h, c->lists[k], owner, UINT32_MAX, NULL);
        c->lists[k] = NULL;
        c->count[k] = 0;
    }
}

/* Give back the caches of t whose heaps are visible and writable in v. */
static void give_back_visible(struct thread_caches *t, const struct exo_view *v)
{
    for (unsigned i = 0; i < CACHES; i++) {
        struct cache *c = &t->c[i];
        for (unsigned k = 0; c->h && k < v->nsegs; k++) {   /* no exo_fail() on a miss */
            const struct exo_view_seg *vs = &v->segs[k];
            if (vs->sid == c->sid && vs->writable && (uintptr_t)c->h == vs->base) {
                give_back(c);
                c->h = NULL;
            }
        }
    }
}

static void thread_exit(void *arg)
{
    mine = NULL;   /* a later destructor that allocates gets a fresh cache */
    struct exo_view v;
    if (exo_view_enter_locked(&v, false) == 0) {
        give_back_visible(arg, &v);
        exo_view_leave(&v);
    }
    free(arg);   /* chunks of heaps not visible now stay stashed until this process is gone */
}

static void process_exit(void)
{
    if (!mine)
        return;
    struct exo_view v;
    if (exo_view_enter_locked(&v, true) == 0) {   /* never wait at exit */
        give_back_visible(mine, &v);
        exo_view_leave(&v);
    }
}

static void after_fork_child(void)
{
    set_owner();
    if (mine)
        memset(mine, 0, sizeof *mine);
}

static void init(void)
{
    set_owner();
    pthread_key_create(&key, thread_exit);
    pthread_atfork(NULL, NULL, after_fork_child);
    atexit(process_exit);
}

static bool cache_empty(const struct cache *c)
{
    for (unsigned k = 0; k < NCLASSES; k++)
        if (c->lists[k])
            return false;
    return true;
}

/* The calling thread's cache for h, made (in a free slot, or over an empty cache or one
 * whose heap is visible and can take its chunks back) when it has none; NULL when every
 * slot holds chunks of a heap not visible now, or out of memory. */
static struct cache *cache_of(const struct exo_view *v, struct exo_heap *h, segid_t sid)
{
    struct thread_caches *t = mine;
    if (t) {
        if (!owner)
            return NULL;   /* a fork child that could not name itself */
        struct cache *c = &t->c[t->last];
        if (c->h == h && c->sid == sid)
            return c;
    } else {
        pthread_once(&once, init);
        if (!owner || !(t = calloc(1, sizeof *t)))
            return NULL;
        pthread_setspecific(key, t);
        mine = t;
    }
    struct cache *spare = NULL;
    for (unsigned i = 0; i < CACHES; i++) {
        struct cache *c = &t->c[i];
        if (c->h == h && c->sid == sid) {
            t->last = i;
            return c;
        }
        if (!c->h && !spare)
            spare = c;
    }
    if (!spare) {
        give_back_visible(t, v);   /* caches of heaps this call could reach */
        for (unsigned i = 0; i < CACHES && !spare; i++)
            if (!t->c[i].h || cache_empty(&t->c[i]))
                spare = &t->c[i];
        if (!spare)
            return NULL;
    }
    spare->h = h;
    spare->sid = sid;
    t->last = (unsigned)(spare - t->c);
    return spare;
}

/* The heap had no room: if this thread's cache of h holds chunks, give them back (they may
 * merge into room) and try once more. */
static void *retry_uncached(struct exo_heap *h, segid_t sid, size_t size, int *code)
{
    if (code && *code != -EXO_ENOMEM)
        return NULL;
    struct thread_caches *t = mine;
    for (unsigned i = 0; t && i < CACHES; i++) {
        struct cache *c = &t->c[i];
        if (c->h == h && c->sid == sid && !cache_empty(c)) {
            give_back(c);
            return exo_heap_malloc(h, size, code);
        }
    }
    return NULL;
}

void *exo_tcache_malloc(const struct exo_view *v, struct exo_heap *h, segid_t sid,
                        size_t size, int *code)
{
    size_t need = exo_heap_chunk_size(h, size);
    struct cache *c;
    void *p;
    if (need <= EXO_HEAP_STASH_MAX && (c = cache_of(v, h, sid)) != NULL) {
        unsigned k = (unsigned)(need / 16);
        p = c->lists[k];
        if (p) {
            void *next;
            if (exo_heap_unstash(h, p, owner, &next)) {
                c->lists[k] = next;
                c->count[k]--;
                if (code)
                    *code = 0;
                return p;
            }
            c->lists[k] = NULL;   /* damaged (someone wrote over it): leave it to reclaim */
            c->count[k] = 0;
        }
    }
    p = exo_heap_malloc(h, size, code);
    return p ? p : retry_uncached(h, sid, size, code);
}

int exo_tcache_free(const struct exo_view *v, struct exo_heap *h, segid_t sid, void *p)
{
    struct cache *c = cache_of(v, h, sid);
    if (!c)
        return exo_heap_free(h, p);
    size_t chunk;
    int rc = exo_heap_stash(h, p, owner, c->lists, &chunk);
    if (rc == 0)
        return exo_heap_free(h, p);
    if (rc < 0)
        return rc;
    unsigned k = (unsigned)(chunk / 16);
    if (++c->count[k] > CLASS_CAP) {
        void *rest;
        if (exo_heap_unstash_free(h, c->lists[k], owner, CLASS_CAP / 2, &rest) == 0) {
            c->lists[k] = rest;
            c->count[k] -= CLASS_CAP / 2;
        } else {
            c->lists[k] = NULL;
            c->count[k] = 0;
        }
    }
    return 0;
}

void exo_tcache_flush(struct exo_heap *h, segid_t sid)
{
    struct thread_caches *t = mine;
    for (unsigned i = 0; t && i < CACHES; i++) {
        if (t->c[i].h == h && t->c[i].sid == sid) {
            give_back(&t->c[i]);
            t->c[i].h = NULL;
        }
    }
}
