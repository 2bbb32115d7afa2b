/* Data-compression paging (apps/comppage): a table of text records 16 times the memory
 * budget survives eviction into compressed memory and back, with two threads updating it at
 * once; text compresses (lz4 over 2x, zstd at least as well), random bytes do not and still
 * come back exact, zero pages cost nothing; the budget holds; bad options are refused. */
#include "harness.h"

#include "comppage.h"
#include "records.h"

#include <exomem/vm.h>
#include <pthread.h>
#include <string.h>

#define MIB ((size_t)1 << 20)

struct updater {
    char *table;
    uint64_t first, count, *version;
    int bad;
};

static void *update(void *arg)
{
    struct updater *u = arg;
    uint64_t rng = u->first * 7919 + 1;
    for (int k = 0; k < 10000; k++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        uint64_t i = u->first + rng % u->count;
        char *rec = u->table + i * COMPPAGE_RECORD;
        u->bad += !comppage_record_ok(rec, i, u->version[i]);
        comppage_record(i, ++u->version[i], rec);
    }
    return NULL;
}

static double records_round_trip(enum comppage_codec codec)
{
    const uint64_t records = 64 * MIB / COMPPAGE_RECORD;
    struct comppage_opts o = {.size = 64 * MIB, .budget = 4 * MIB, .codec = codec};
    comppage *a;
    CHECK_OK(comppage_open(&o, &a));
    char *table = comppage_base(a);
    uint64_t *version = calloc(records, sizeof *version);
    CHECK(version != NULL);
    for (uint64_t i = 0; i < records; i++)
        comppage_record(i, 0, table + i * COMPPAGE_RECORD);
    struct updater u[2] = {{table, 0, records / 2, version, 0},
                           {table, records / 2, records / 2, version, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, update, &u[i]) == 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    CHECK_EQ(u[0].bad + u[1].bad, 0);
    for (uint64_t i = 0; i < records; i++)
        CHECK(comppage_record_ok(table + i * COMPPAGE_RECORD, i, version[i]));
    struct comppage_stats st;
    CHECK_OK(comppage_stats(a, &st));
    CHECK(st.evictions > 0 && st.faults > 0 && st.pages_compressed > 0);
    CHECK(st.compressed_bytes < st.pages_compressed * 4096 / 2);
    free(version);
    CHECK_OK(comppage_close(a));
    return st.ratio;
}

static void incompressible_and_zero(void)
{
    struct comppage_opts o = {.size = 16 * MIB, .budget = MIB};
    comppage *a;
    CHECK_OK(comppage_open(&o, &a));
    uint64_t *w = comppage_base(a);
    size_t words = 8 * MIB / 8; /* the first half random, the second half never written */
    uint64_t x = 1;
    for (size_t i = 0; i < words; i++)
        w[i] = (x = x * 6364136223846793005u + 1442695040888963407u);
    for (size_t i = words; i < 2 * words; i += 512)
        CHECK_EQ(w[i], 0); /* read only: zero pages, nothing to keep */
    x = 1;
    for (size_t i = 0; i < words; i++)
        CHECK(w[i] == (x = x * 6364136223846793005u + 1442695040888963407u));
    struct comppage_stats st;
    CHECK_OK(comppage_stats(a, &st));
    CHECK(st.ratio > 0.9 && st.ratio < 1.1); /* random data does not compress */
    CHECK(st.compressed_bytes <= 8 * MIB + 8 * MIB / 16); /* zero pages took nothing */
    CHECK_OK(comppage_close(a));
}

static void refused(void)
{
    comppage *a;
    struct comppage_opts o = {.size = 16 * MIB, .budget = MIB, .codec = 9};
    CHECK_ERR(comppage_open(&o, &a), EXO_EINVAL);
    o = (struct comppage_opts){.size = 0, .budget = MIB};
    CHECK_ERR(comppage_open(&o, &a), EXO_EINVAL);
    o = (struct comppage_opts){.size = 16 * MIB, .budget = 100};
    CHECK_ERR(comppage_open(&o, &a), EXO_EINVAL);
    CHECK_ERR(comppage_open(NULL, &a), EXO_EINVAL);
    struct comppage_stats st;
    CHECK_ERR(comppage_stats(NULL, &st), EXO_EINVAL);
    CHECK_OK(comppage_close(NULL));
}

int main(void)
{
    test_root_setup();
    const char *why = NULL;
    if (exo_vm_engine_supported(EXO_VM_ENGINE_UFFD, 0, &why) != 0)
        SKIP("userfaultfd is not usable here: %s\n", why ? why : "?");
    refused();
    double lz4 = records_round_trip(COMPPAGE_LZ4);
    double zstd = records_round_trip(COMPPAGE_ZSTD);
    CHECK(lz4 > 2.0);
    CHECK(zstd >= lz4);
    incompressible_and_zero();
    printf("test_comppage: ok (compression ratio of the records: lz4 %.2f, zstd %.2f)\n", lz4,
           zstd);
    return 0;
}
