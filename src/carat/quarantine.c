/* The quarantine of moved blocks' old copies (EXOMEM_CARAT_QUARANTINE=n), a debugging aid
 * for programs whose moves go wrong. Without it, the old copy is freed once the threads
 * resume, and a pointer the move did not patch (a store the runtime never heard of) reads
 * and writes whatever malloc puts there next: the fault shows up much later as heap
 * corruption somewhere else (SQLite's fuzzcheck under 10,000 moves a second). With it, the
 * last n old copies stay allocated and filled with FILL, whose words are not canonical
 * addresses: a read through a missed pointer gets FILL (a pointer loaded from there faults
 * at its first use), and a write is found at the next move, which reports the copy, the
 * offset and the word written. The memory of n blocks is held meanwhile.
 *
 * Everything runs in the mover thread during a move, with the world stopped and the
 * runtime's lock held (no stdio then: a stopped thread may hold its lock); findings are
 * printed by exo_carat_quarantine_report after the threads resume. */
#include "carat/carat_internal.h"
#include "carat/carat_mem.h"
#include "internal.h"

#include <stdio.h>
#include <string.h>

#define FILL 0xca
#define FILL_WORD 0xcacacacacacacacaull
#define MAX_FINDINGS 8

struct kept {
    uintptr_t old, span, now;   /* the old copy, its length, where the block went */
    const char *site;
};

static struct {
    struct kept *ring;
    uint32_t cap, next;
    struct {
        struct kept k;
        uintptr_t offset, word;
    } found[MAX_FINDINGS];
    uint32_t nfound, missed;    /* findings kept for the report, and those beyond */
} q;

/* The first byte of k's copy that is not FILL, or k->span. */
CARAT_NO_ASAN static uintptr_t first_written(const struct kept *k)
{
    const unsigned char *b = (const unsigned char *)k->old;
    uintptr_t off = 0;
    for (; off + 8 <= k->span; off += 8) {
        uint64_t w;
        memcpy(&w, b + off, 8);
        if (w != FILL_WORD)
            break;
    }
    for (; off < k->span; off++)
        if (b[off] != FILL)
            return off;
    return k->span;
}

/* Look at every kept copy; a written one is recorded for the report and filled again, so
 * that each write is reported once. */
static void check_kept(void)
{
    for (uint32_t i = 0; i < q.cap; i++) {
        struct kept *k = &q.ring[i];
        if (!k->old)
            continue;
        uintptr_t off = first_written(k);
        if (off == k->span)
            continue;
        atomic_fetch_add_explicit(&exo_carat.count.stale_writes, 1, memory_order_relaxed);
        if (q.nfound < MAX_FINDINGS) {
            uint64_t word = 0;
            memcpy(&word, (const void *)(k->old + (off & ~(uintptr_t)7)),
                   k->span - (off & ~(uintptr_t)7) >= 8 ? 8 : 1);
            q.found[q.nfound].k = *k;
            q.found[q.nfound].offset = off;
            q.found[q.nfound].word = word;
            q.nfound++;
        } else {
            q.missed++;
        }
        memset((void *)k->old, FILL, k->span);
    }
}

void *exo_carat_quarantine_keep(uintptr_t old, uintptr_t span, uintptr_t now, const char *site)
{
    uint32_t want = exo_config()->carat_quarantine;   /* at most 4096 (config.c) */
    if (!want)
        return (void *)old;
    if (!q.ring) {
        q.ring = exo_carat_mem_alloc(want * sizeof *q.ring);
        if (!q.ring)
            return (void *)old;   /* no memory for the list: the copy is freed as usual */
        q.cap = want;
    }
    check_kept();
    struct kept *slot = &q.ring[q.next];
    void *evicted = (void *)slot->old;   /* NULL until the ring is full */
    *slot = (struct kept){ old, span, now, site };
    q.next = (q.next + 1) % q.cap;
    memset((void *)old, FILL, span);
    return evicted;
}

void exo_carat_quarantine_report(void)
{
    for (uint32_t i = 0; i < q.nfound; i++) {
        const struct kept *k = &q.found[i].k;
        fprintf(stderr, "exomem carat: a write through a pointer a move missed: the old copy of "
                "the %lu-byte allocation from %s, moved from %#lx to %#lx, was written at "
                "offset %lu (word %#llx)\n", (unsigned long)k->span,
                k->site ? k->site : "an unknown site", (unsigned long)k->old,
                (unsigned long)k->now, (unsigned long)q.found[i].offset,
                (unsigned long long)q.found[i].word);
    }
    if (q.missed)
        fprintf(stderr, "exomem carat: and %u more such writes\n", q.missed);
    q.nfound = 0;
    q.missed = 0;
}
