/* The object heap's shared pieces: the root stack and page-respecting bump allocation. */
#include "lispheap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void lh_store_plain(void *heap, lh_val obj, unsigned i, lh_val v)
{
    (void)heap;
    lh_obj(obj)[1 + i] = v;
}

uint64_t lh_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

_Noreturn void lh_fatal(const char *who, const char *msg)
{
    ssize_t w = write(2, who, strlen(who));
    w = write(2, ": ", 2);
    w = write(2, msg, strlen(msg));
    w = write(2, "\n", 1);
    (void)w;
    abort();
}

size_t lh_root_push(struct lh_roots *r, lh_val v)
{
    if (r->n >= LH_ROOTS_MAX) {
        fprintf(stderr, "lispheap: root stack overflow\n");
        abort();
    }
    r->slot[r->n] = v;
    return r->n++;
}

void lh_root_pop(struct lh_roots *r, size_t k)
{
    r->n = k > r->n ? 0 : r->n - k;
}

static uintptr_t page_floor(uintptr_t a) { return a & ~(uintptr_t)(LH_PAGE - 1); }

char *lh_bump_up(char **top, char *limit, size_t bytes, char **pad_start)
{
    uintptr_t p = (uintptr_t)*top;
    uintptr_t page_end = page_floor(p) + LH_PAGE;
    char *pad = NULL;
    if (p + bytes > page_end) { /* would cross: give up the tail, start the next page */
        if (p != page_floor(p))
            pad = (char *)p;
        p = page_end;
    }
    if (p + bytes > (uintptr_t)limit)
        return NULL;
    if (pad_start)
        *pad_start = pad;
    *top = (char *)(p + bytes);
    return (char *)p;
}

char *lh_bump_down(char **top, char *floor, size_t bytes)
{
    uintptr_t t = (uintptr_t)*top;
    uintptr_t page = page_floor(t - 1); /* the page the byte below top is on */
    uintptr_t p = t - bytes;
    if (p < page)
        p = page - bytes;
    if (p < (uintptr_t)floor || p > t)
        return NULL;
    *top = (char *)p;
    return (char *)p;
}
