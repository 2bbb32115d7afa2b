/* The in-segment heap's format, for heap.c only: the header at the segment's base and the
 * boundary tags of its chunks (see heap.c's opening comment for the whole layout). */
#ifndef EXOMEM_HEAP_LAYOUT_H
#define EXOMEM_HEAP_LAYOUT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HEAP_MAGIC UINT64_C(0x5041454821584f45)  /* a formatted heap */
#define HEAP_BUSY UINT64_C(0x474e495454414d46)   /* being formatted by another thread */
#define HEAP_VERSION 1

#define NBINS 320
#define SMALL_LIMIT 1024   /* chunk sizes below this have exact-size bins */
#define MIN_CHUNK 32       /* header, two links, footer */
#define OVERHEAD 16        /* header + footer */

#define TAG_INUSE UINT64_C(1)
#define TAG_MARK UINT64_C(6)      /* fixed bits that garbage rarely has */
#define TAG_LOW UINT64_C(15)
#define TAG_STASHED (UINT64_C(1) << 63)   /* header only: in a thread cache */

/* Words of heap metadata may overlay user data of earlier chunks: allow any aliasing. */
typedef uint64_t __attribute__((may_alias)) word_t;
#define W(p) (*(word_t *)(void *)(p))

struct exo_heap {
    uint64_t magic;
    uint32_t version;
    uint32_t header_size;
    uint64_t base;
    uint64_t size;
    char *first;                /* first chunk */
    char *end;                  /* epilogue tag: one past the last chunk */
    void *root;
    uint64_t owner_deaths;
    uint64_t rebuilds;
    pthread_mutex_t lock;
    uint64_t binmap[NBINS / 64];
    char *bins[NBINS];
};

#define MIN_REGION (sizeof(struct exo_heap) + 16 + MIN_CHUNK + 32)

/* Stores before this become visible (to a crash) before stores after it. */
static inline void commit_order(void)
{
    atomic_signal_fence(memory_order_seq_cst);
}

static inline size_t tag_size(uint64_t t) { return (size_t)(t & ~(TAG_LOW | TAG_STASHED)); }
static inline bool tag_stashed(uint64_t t) { return (t & TAG_STASHED) != 0; }
static inline bool tag_inuse(uint64_t t) { return (t & TAG_INUSE) != 0; }
static inline bool tag_marked(uint64_t t) { return (t & (TAG_LOW & ~TAG_INUSE)) == TAG_MARK; }
static inline uint64_t make_tag(size_t size, bool inuse) { return size | TAG_MARK | inuse; }

/* Write c's footer, then its header (the header store is what the tiling sees). */
static inline void set_tags(char *c, size_t size, bool inuse)
{
    uint64_t t = make_tag(size, inuse);
    W(c + size - 8) = t;
    commit_order();
    W(c) = t;
}

/* Is t a plausible tag for a chunk at c (size in bounds)? */
static inline bool tag_fits(const struct exo_heap *h, const char *c, uint64_t t)
{
    size_t sz = tag_size(t);
    return tag_marked(t) && sz >= MIN_CHUNK && sz <= (size_t)(h->end - c);
}

#endif
