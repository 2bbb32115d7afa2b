/* guardheap: the heap's reservation, growth and fault handler (see guardheap.h). */
#include "guardheap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define GH_DEFAULT_MAX (64u << 20)

static size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

int gh_commit_to(guardheap *h, const char *end)
{
    char *heap_end = h->base + h->max_bytes;
    if (end <= h->limit)
        return 0;
    if (end > heap_end) {
        errno = ENOMEM;
        return -EXO_ENOMEM;
    }
    size_t want = round_up((size_t)(end - h->base), h->grow_bytes);
    char *new_limit = h->base + want;
    if (new_limit > heap_end)
        new_limit = heap_end;
    /* book-keeping first: with the uffd engine the faulting thread runs on as soon as the
     * page is writable, and may read the counters */
    char *old_limit = h->limit;
    h->limit = new_limit;
    h->grows++;
    int rc = exo_vm_protect(h->region, old_limit, (size_t)(new_limit - old_limit), EXO_VM_READWRITE);
    if (rc != 0) {
        h->limit = old_limit;
        h->grows--;
    }
    return rc;
}

/* TRAP: a store into the guard inside max_bytes grows the heap and resumes; anything else
 * (past max_bytes, or a page we never protected) is somebody else's fault: decline. */
static exo_vm_action gh_on_fault(exo_vm_fault *fault, void *arg)
{
    guardheap *h = arg;
    char *addr = fault->addr;
    if (addr < h->limit || addr >= h->base + h->max_bytes)
        return EXO_VM_DECLINE;
    h->faults++; /* before the commit: see gh_commit_to */
    if (gh_commit_to(h, addr + 1) != 0) {
        h->faults--;
        return EXO_VM_DECLINE;
    }
    return EXO_VM_RESUME;
}

void *gh_alloc_large(guardheap *h, size_t size)
{
    size_t need = GH_HEADER + round_up(size, 16);
    char *p = h->top, *heap_end = h->base + h->max_bytes;
    if (size > h->max_bytes || p > heap_end || (size_t)(heap_end - p) < need)
        return NULL;
    if (h->mode == GH_CHECK && gh_commit_to(h, p + need) != 0)
        return NULL;
    h->top = p + need;
    *(volatile uint64_t *)p = 0; /* class 0: large, never reused */
    return p + GH_HEADER;
}

int gh_create(const gh_options *opt, guardheap **out)
{
    size_t page = exo_vm_page_size();
    gh_options o = opt ? *opt : (gh_options){0};
    if (!o.max_bytes)
        o.max_bytes = GH_DEFAULT_MAX;
    if (!o.grow_bytes)
        o.grow_bytes = page;
    if (!o.initial_bytes)
        o.initial_bytes = o.grow_bytes;
    if (!out || o.grow_bytes % page || o.initial_bytes % page || o.max_bytes % page ||
        o.initial_bytes > o.max_bytes || (o.mode != GH_GUARD && o.mode != GH_CHECK)) {
        errno = EINVAL;
        return -EXO_EINVAL;
    }
    if (o.engine == EXO_VM_ENGINE_AUTO)
        o.engine = EXO_VM_ENGINE_SIGNAL;

    guardheap *h = calloc(1, sizeof *h);
    if (!h) {
        errno = ENOMEM;
        return -EXO_ENOMEM;
    }
    /* max_bytes of heap, then a zone that stays protected forever: a small object that
     * starts inside the heap ends inside it, and the next header store then lands in the
     * zone, which the handler declines. */
    size_t zone = round_up(GH_HEADER + GH_SMALL_MAX, page);
    h->map_bytes = o.max_bytes + zone;
    void *mem = mmap(NULL, h->map_bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) {
        free(h);
        errno = ENOMEM;
        return -EXO_ENOMEM;
    }
    h->base = h->top = h->limit = mem;
    h->max_bytes = o.max_bytes;
    h->grow_bytes = o.grow_bytes;
    h->initial_bytes = o.initial_bytes;
    h->mode = o.mode;
    h->guard_access = o.engine == EXO_VM_ENGINE_UFFD ? EXO_VM_READONLY : EXO_VM_NOACCESS;

    exo_vm_options vo = { .engine = o.engine, .handler = gh_on_fault, .arg = h };
    int rc = exo_vm_region_create(mem, h->map_bytes, &vo, &h->region);
    if (rc == 0)
        rc = exo_vm_protect(h->region, mem, h->map_bytes, h->guard_access);
    if (rc == 0) {
        rc = gh_commit_to(h, h->base + o.initial_bytes);
        h->grows = 0; /* the initial commit is not growth */
    }
    if (rc != 0) {
        int saved = errno;
        if (h->region)
            exo_vm_region_destroy(h->region);
        munmap(mem, h->map_bytes);
        free(h);
        errno = saved;
        return rc;
    }
    *out = h;
    return 0;
}

int gh_reset(guardheap *h)
{
    char *keep = h->base + h->initial_bytes;
    if (h->limit > keep) {
        int rc = exo_vm_protect(h->region, keep, (size_t)(h->limit - keep), h->guard_access);
        if (rc != 0)
            return rc;
        h->limit = keep;
    }
    h->top = h->base;
    memset(h->free_list, 0, sizeof h->free_list);
    h->faults = h->grows = 0;
    return 0;
}

int gh_destroy(guardheap *h)
{
    if (!h)
        return 0;
    int rc = exo_vm_region_destroy(h->region);
    munmap(h->base, h->map_bytes);
    free(h);
    return rc;
}

gh_stats gh_get_stats(const guardheap *h)
{
    return (gh_stats){ .faults = h->faults, .grows = h->grows,
                       .committed = (size_t)(h->limit - h->base),
                       .used = (size_t)(h->top - h->base) };
}
