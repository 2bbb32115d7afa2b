/* HPCC RandomAccess (apps/gups): the stream generator against plain stepping, verification
 * of exact and threaded runs, detection of corrupted tables and skipped updates, and the
 * bounds-checked update loop. */
#include "harness.h"

#include "../apps/gups/gups.h"

#include <string.h>

/* The stream value after n single steps from 1, computed the slow, obvious way. */
static uint64_t stepped(uint64_t n)
{
    uint64_t v = 1;
    for (uint64_t i = 0; i < n; i++)
        v = (v << 1) ^ ((int64_t)v < 0 ? 0x7 : 0);
    return v;
}

static void test_stream(void)
{
    static const uint64_t ks[] = { 0, 1, 2, 63, 64, 65, 127, 1000, 4097, 123457 };
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        CHECK_EQ(gups_starts((int64_t)ks[i]), stepped(ks[i]));
    CHECK_EQ(stepped(64), 0x7); /* x^64 = x^2 + x + 1: the top bit fell out once */
    CHECK_EQ(gups_starts(GUPS_PERIOD), 1);
    CHECK_EQ(gups_starts(GUPS_PERIOD + 77), stepped(77));
    CHECK_EQ(gups_step(gups_starts(-1)), 1);
    CHECK_EQ(gups_starts(-5), gups_starts(GUPS_PERIOD - 5));
}

static uint64_t *make_table(unsigned log2)
{
    uint64_t *t = malloc(sizeof(uint64_t) << log2);
    CHECK(t != NULL);
    gups_init(t, log2);
    return t;
}

/* The stream itself, applied serially, must give the same table as any split into parts. */
static void test_runs_verify(unsigned log2)
{
    uint64_t size = UINT64_C(1) << log2;
    uint64_t *a = make_table(log2), *b = make_table(log2);
    bool oob = false;
    CHECK_OK(gups_run(a, log2, 1, NULL, &oob));
    CHECK(!oob);
    /* The run changed the table, and equals the serial stream applied update by update. */
    uint64_t v = 1, changed = 0;
    for (uint64_t i = 0; i < gups_updates(log2); i++) {
        v = gups_step(v);
        b[v & (size - 1)] ^= v;
    }
    CHECK(memcmp(a, b, sizeof(uint64_t) << log2) == 0);
    for (uint64_t i = 0; i < size; i++)
        changed += a[i] != i;
    CHECK(changed > size / 2);
    CHECK_EQ(gups_verify(a, log2), 0);
    CHECK(gups_passes(0, log2));

    /* Two threads: races may lose a few updates, but far fewer than 1%. */
    gups_init(a, log2);
    CHECK_OK(gups_run(a, log2, 2, NULL, &oob));
    uint64_t errors = gups_verify(a, log2);
    CHECK(gups_passes(errors, log2));

    /* Uneven parts (sizes not multiples of the 128 sub-streams) still cover the stream
     * exactly once: the same table as the serial stream. */
    gups_init(a, log2);
    gups_update_range(a, log2, 0, 1001, NULL, NULL);
    gups_update_range(a, log2, 1001, 77, NULL, NULL);
    gups_update_range(a, log2, 1078, gups_updates(log2) - 1078, NULL, NULL);
    CHECK(memcmp(a, b, sizeof(uint64_t) << log2) == 0);
    CHECK_EQ(gups_verify(a, log2), 0);
    free(a);
    free(b);
}


/* `updates` updates on a fresh table, then `damaged` entries spoiled: what verification of
 * that run counts. */
static uint64_t capped_run_with_damage(uint64_t *t, unsigned log2, uint64_t updates,
                                       uint64_t damaged)
{
    gups_init(t, log2);
    gups_update_range(t, log2, 0, updates, NULL, NULL);
    for (uint64_t i = 0; i < damaged; i++)
        t[i * 997 % (UINT64_C(1) << log2)] ^= 0x4000;
    return gups_verify_count(t, log2, updates);
}
static void test_detects_errors(void)
{
    unsigned log2 = 16;
    uint64_t size = UINT64_C(1) << log2;
    uint64_t *t = make_table(log2);
    CHECK_OK(gups_run(t, log2, 1, NULL, NULL));
    /* Corrupt 2% of the entries after the run. */
    for (uint64_t i = 0; i < size; i += 50)
        t[i] ^= 1;
    uint64_t errors = gups_verify(t, log2);
    CHECK(errors >= size / 50);
    CHECK(!gups_passes(errors, log2));
    /* A corruption of fewer than 1% passes, as HPCC allows. */
    gups_init(t, log2);
    CHECK_OK(gups_run(t, log2, 1, NULL, NULL));
    t[5] ^= 0x100;
    CHECK_EQ(gups_verify(t, log2), 1);
    CHECK(gups_passes(1, log2));
    /* Skipped updates: only the first half of the stream applied. */
    gups_init(t, log2);
    gups_update_range(t, log2, 0, gups_updates(log2) / 2, NULL, NULL);
    errors = gups_verify(t, log2);
    CHECK(errors > size / 2);
    CHECK(!gups_passes(errors, log2));
    /* A capped run (fewer updates than HPCC's 4 x table, as bench_gups does on big tables):
     * the allowance scales with the updates run, not with the table. 2^12 updates on a 2^16
     * table, then 40 entries damaged: within 1% of the table, but 1% of the updates. */
    uint64_t capped = UINT64_C(1) << 12;
    errors = capped_run_with_damage(t, log2, capped, 40);
    CHECK_EQ(errors, 40);
    CHECK(gups_passes(errors, log2));            /* the table-sized bound let it pass */
    CHECK(!gups_passes_count(errors, capped));   /* the bound bench_gups now uses */
    errors = capped_run_with_damage(t, log2, capped, 10);
    CHECK_EQ(errors, 10);
    CHECK(gups_passes_count(errors, capped));    /* 10 <= 0.25% of 4096 */
    /* One update in the middle of the stream missing: exactly one entry wrong. */
    gups_init(t, log2);
    gups_update_range(t, log2, 0, 777, NULL, NULL);
    gups_update_range(t, log2, 778, gups_updates(log2) - 778, NULL, NULL);
    CHECK_EQ(gups_verify(t, log2), 1);
    free(t);
}

static void test_bounds(void)
{
    unsigned log2 = 18;
    uint64_t size = UINT64_C(1) << log2;
    uint64_t *a = make_table(log2), *b = make_table(log2);
    bool oob = false;
    CHECK_OK(gups_run(a, log2, 1, NULL, NULL));
    struct gups_bounds all = { .base = 0, .len = size };
    CHECK_OK(gups_run(b, log2, 2, &all, &oob));
    CHECK(!oob);
    CHECK_EQ(gups_verify(a, log2), 0);
    CHECK(gups_passes(gups_verify(b, log2), log2)); /* two threads may race */
    gups_init(a, log2);
    gups_init(b, log2);
    CHECK_OK(gups_run(a, log2, 1, NULL, NULL));
    CHECK_OK(gups_run(b, log2, 1, &all, &oob));
    CHECK(!oob);
    CHECK(memcmp(a, b, sizeof(uint64_t) << log2) == 0);

    /* Bounds one entry short at either end: flagged, and those entries never touched. */
    struct gups_bounds short_top = { .base = 0, .len = size - 1 };
    gups_init(b, log2);
    CHECK_OK(gups_run(b, log2, 1, &short_top, &oob));
    CHECK(oob);
    CHECK_EQ(b[size - 1], size - 1);
    struct gups_bounds short_bottom = { .base = 1, .len = size - 1 };
    oob = false;
    gups_init(b, log2);
    CHECK_OK(gups_run(b, log2, 2, &short_bottom, &oob));
    CHECK(oob);
    CHECK_EQ(b[0], 0);
    free(a);
    free(b);
}

int main(void)
{
    test_stream();
    for (unsigned log2 = 16; log2 <= 20; log2 += 2)
        test_runs_verify(log2);
    test_detects_errors();
    test_bounds();
    printf("test_gups: ok\n");
    return 0;
}
