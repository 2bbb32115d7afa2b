/* The allocation table under churn: blocks of 1 byte to 64 KiB (small ones in page bitmaps,
 * some straddling a page boundary; big ones in the tree) made, grown, shrunk and freed in
 * a random order, and after every step "which allocation holds this address" answered
 * right for the start, the last byte and a random byte of live blocks. */
#include "carat_check.h"

#include <exomem/carat.h>
#include <malloc.h>
#include <stdint.h>
#include <string.h>

#define SLOTS 4096
#define STEPS 200000   /* unless given (argv[1]) */

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t next(void)   /* Knuth's MMIX LCG, high bits: deterministic runs */
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return rng >> 17;
}

static char *block[SLOTS];
static size_t size_of[SLOTS];

static size_t pick_size(void)
{
    switch (next() % 8) {
    case 0: return 1 + next() % 16;
    case 1: return 4000 + next() % 200;              /* one or two pages */
    case 2: return 4097 + next() % 60000;            /* the tree */
    default: return 16 + next() % 240;
    }
}

static void check_holds(int i, size_t off)
{
    struct exo_carat_alloc_info info;
    CHECK(exo_carat_alloc_find(block[i] + off, &info) == 0);
    CHECK(info.base == (uintptr_t)block[i] && info.kind == EXO_CARAT_HEAP);
    CHECK(info.size >= size_of[i]);
}

/* The byte after block i's usable bytes (all malloc gave it, which the table tracks) is never
 * taken for one of its own, though it may share its last 16-byte granule (the page index
 * marks whole granules). */
static void check_past(int i)
{
    struct exo_carat_alloc_info info;
    if (exo_carat_alloc_find(block[i] + malloc_usable_size(block[i]), &info) == 0)
        CHECK(info.base != (uintptr_t)block[i]);
}

int main(int argc, char **argv)
{
    /* Fewer steps when asked: with escapes kept in the shadow every query scans it. */
    long steps = argc > 1 ? atol(argv[1]) : STEPS, finds = 0;
    for (long step = 0; step < steps; step++) {
        int i = (int)(next() % SLOTS);
        uint64_t what = next() % 10;
        if (!block[i]) {
            size_of[i] = pick_size();
            block[i] = malloc(size_of[i]);
            CHECK(block[i]);
            memset(block[i], (int)i, size_of[i]);
        } else if (what < 3) {
            size_t n = pick_size();
            char *p = realloc(block[i], n);
            CHECK(p);
            block[i] = p;
            size_of[i] = n;
        } else if (what < 6) {
            free(block[i]);
            block[i] = NULL;
            continue;
        }
        check_holds(i, 0);
        check_holds(i, size_of[i] - 1);
        check_holds(i, next() % size_of[i]);
        check_past(i);
        int j = (int)(next() % SLOTS);   /* and some other live block */
        if (block[j])
            check_holds(j, next() % size_of[j]);
        finds += 4;
    }
    struct exo_carat_stats st;
    exo_carat_get_stats(&st);
    long live = 0;
    for (int i = 0; i < SLOTS; i++)
        if (block[i]) {
            live++;
            free(block[i]);
        }
    CHECK(st.allocations >= (uint64_t)live);
    printf("table_stress: ok (%ld steps, %ld lookups, %ld blocks live at the end, table %lu "
           "bytes at its largest)\n", steps, finds, live,
           (unsigned long)st.table_peak_bytes);
    return 0;
}
