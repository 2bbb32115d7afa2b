/* The application-level pager (exomem/pager.h): what is written before an eviction reads
 * back after it, for every policy, store, page-table structure, unit and delivery, with
 * several threads faulting at once; a budget of one frame; a 64 GiB region on this
 * smaller machine; discard and flush; bad arguments refused with clear errors. Store
 * failures are in test_pager_failures.c. */
#include "harness.h"
#include "pager_fixture.h"

#include <exomem/pager.h>
#include <string.h>
#include <unistd.h>

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)
#define GIB ((size_t)1 << 30)

static char store_path[512];

static exo_pager_store *new_store(int kind)
{
    exo_pager_store *s = NULL;
    if (kind == 0) {
        unlink(store_path);
        CHECK_OK(exo_pager_store_file(store_path, &s));
    } else {
        CHECK_OK(exo_pager_store_memory(kind == 1 ? EXO_PAGER_LZ4
                                        : kind == 2 ? EXO_PAGER_ZSTD : EXO_PAGER_PLAIN, &s));
    }
    return s;
}

static const char *store_name(int kind)
{
    static const char *names[] = {"file", "memory-lz4", "memory-zstd", "memory"};
    return names[kind];
}

/* One configuration over a fresh store of kind store_kind. */
static void one_config(exo_pager_policy policy, int store_kind, exo_pager_table table,
                       size_t unit, exo_pager_delivery delivery, size_t units, size_t frames)
{
    exo_pager_store *s = new_store(store_kind);
    pager_one_config(s, store_name(store_kind), policy, table, unit, delivery, units, frames);
    CHECK_OK(exo_pager_store_close(s));
}

static void every_config(void)
{
    exo_pager_policy policies[] = {EXO_PAGER_FIFO, EXO_PAGER_CLOCK, EXO_PAGER_LRU,
                                   EXO_PAGER_MRU};
    exo_pager_table tables[] = {EXO_PAGER_TABLE_RADIX, EXO_PAGER_TABLE_HASH,
                                EXO_PAGER_TABLE_VECTOR};
    int n = 0;
    for (int d = 0; d < 2; d++)
        for (int pi = 0; pi < 4; pi++)
            for (int sk = 0; sk < 4; sk++)
                for (int ti = 0; ti < 3; ti++) {
                    exo_pager_delivery del = d ? EXO_PAGER_SIGBUS : EXO_PAGER_THREADS;
                    one_config(policies[pi], sk, tables[ti], 4 * KIB, del, 96, 16);
                    n++;
                }
    /* 2 MiB units: fewer, bigger. */
    for (int d = 0; d < 2; d++)
        for (int pi = 0; pi < 4; pi++)
            for (int sk = 0; sk < 4; sk++) {
                exo_pager_delivery del = d ? EXO_PAGER_SIGBUS : EXO_PAGER_THREADS;
                one_config(policies[pi], sk, EXO_PAGER_TABLE_RADIX, 2 * MIB, del, 12, 3);
                n++;
            }
    /* A budget of one frame. */
    for (int d = 0; d < 2; d++)
        for (int pi = 0; pi < 4; pi++) {
            one_config(policies[pi], 1, EXO_PAGER_TABLE_HASH, 4 * KIB,
                       d ? EXO_PAGER_SIGBUS : EXO_PAGER_THREADS, 32, 1);
            n++;
        }
    fprintf(stderr, "every configuration: %d regions written, evicted and read back\n", n);
}

/* ---- several threads at once ---- */

static void many_threads(exo_pager_delivery delivery, exo_pager_policy policy)
{
    exo_pager_store *s = new_store(1);
    pager_many_threads(s, delivery, policy);
    CHECK_OK(exo_pager_store_close(s));
}

/* ---- a region far larger than this machine's memory ---- */

static void larger_than_ram(void)
{
    exo_pager_store *s = new_store(1);
    exo_pager_options o = {.size = 64 * GIB, .budget = 4 * MIB, .store = s,
                           .table = EXO_PAGER_TABLE_RADIX};
    exo_pager *p;
    CHECK_OK(exo_pager_create(&o, &p));
    uint64_t *base = exo_pager_base(p);
    /* Two words in each of 4,096 units spread over all 64 GiB: far more units than frames. */
    for (uint64_t round = 1; round <= 2; round++)
        for (size_t off = 0; off < o.size; off += 16 * MIB) {
            base[off / 8] = pager_stamp(off, round);
            base[(off + 4 * KIB - 8) / 8] = ~pager_stamp(off, round);
        }
    for (size_t off = 0; off < o.size; off += 16 * MIB)
        CHECK(base[off / 8] == pager_stamp(off, 2) &&
              base[(off + 4 * KIB - 8) / 8] == ~pager_stamp(off, 2));
    exo_pager_stats st;
    CHECK_OK(exo_pager_get_stats(p, &st));
    CHECK(st.resident_bytes <= 4 * MIB);
    CHECK(st.evictions >= 4096);
    CHECK_OK(exo_pager_destroy(p));
    CHECK_OK(exo_pager_store_close(s));
}

/* ---- discard, flush, hints ---- */

static void discard_flush_hints(void)
{
    exo_pager_store *s = new_store(0);
    exo_pager_options o = {.size = 64 * 4 * KIB, .budget = 8 * 4 * KIB, .store = s};
    exo_pager *p;
    CHECK_OK(exo_pager_create(&o, &p));
    char *base = exo_pager_base(p);
    memset(base, 'a', o.size);                     /* everything written, most evicted */
    CHECK_OK(exo_pager_discard(p, base + 4 * KIB, 2 * 4 * KIB));
    CHECK(base[4 * KIB] == 0 && base[3 * 4 * KIB - 1] == 0); /* discarded: zeros */
    CHECK(base[0] == 'a' && base[3 * 4 * KIB] == 'a');       /* neighbours kept */
    /* Flush leaves units resident and clean: a DONTNEED afterwards writes nothing. */
    memset(base + 60 * 4 * KIB, 'b', 4 * 4 * KIB);
    CHECK_OK(exo_pager_flush(p));
    exo_pager_stats before, after;
    CHECK_OK(exo_pager_get_stats(p, &before));
    CHECK_EQ(before.dirty_bytes, 0);
    CHECK_OK(exo_pager_advise(p, base + 60 * 4 * KIB, 4 * 4 * KIB, EXO_PAGER_DONTNEED, 0));
    CHECK_OK(exo_pager_get_stats(p, &after));
    CHECK_EQ(after.writebacks, before.writebacks);
    CHECK_EQ(after.evictions, before.evictions + 4);
    CHECK(base[63 * 4 * KIB] == 'b');
    /* WILLNEED fills without faults; PIN keeps units through any amount of paging. */
    CHECK_OK(exo_pager_advise(p, base, 4 * 4 * KIB, EXO_PAGER_DONTNEED, 0));
    CHECK_OK(exo_pager_get_stats(p, &before));
    CHECK_OK(exo_pager_advise(p, base, 4 * 4 * KIB, EXO_PAGER_WILLNEED, 0));
    CHECK_OK(exo_pager_advise(p, base, 2 * 4 * KIB, EXO_PAGER_PIN, 0));
    CHECK_ERR(exo_pager_advise(p, base, 8 * 4 * KIB, EXO_PAGER_PIN, 0), EXO_ENOMEM);
    for (int i = 0; i < 3; i++)
        for (size_t off = 8 * 4 * KIB; off < o.size; off += 4 * KIB)
            CHECK(base[off + 7] != 'z');
    CHECK_OK(exo_pager_get_stats(p, &after));
    CHECK_EQ(after.readaheads, before.readaheads + 4);
    uint64_t faults = after.faults;
    CHECK(base[0] == 'a' && base[4 * KIB] == 0); /* pinned: no fault */
    CHECK_OK(exo_pager_get_stats(p, &after));
    CHECK_EQ(after.faults, faults);
    CHECK_OK(exo_pager_advise(p, base, 2 * 4 * KIB, EXO_PAGER_UNPIN, 0));
    /* SEQUENTIAL: a fault fills the next units too. */
    CHECK_OK(exo_pager_advise(p, base, o.size, EXO_PAGER_SEQUENTIAL, 3));
    CHECK_OK(exo_pager_advise(p, base + 40 * 4 * KIB, 8 * 4 * KIB, EXO_PAGER_DONTNEED, 0));
    CHECK_OK(exo_pager_get_stats(p, &before));
    CHECK(base[40 * 4 * KIB] == 'a');
    CHECK(base[41 * 4 * KIB] == 'a' && base[43 * 4 * KIB] == 'a');
    CHECK_OK(exo_pager_get_stats(p, &after));
    CHECK_EQ(after.faults, before.faults + 1);
    CHECK_EQ(after.readaheads, before.readaheads + 3);
    CHECK_OK(exo_pager_destroy(p));
    CHECK_OK(exo_pager_store_close(s));
}

/* ---- what a file store keeps ---- */

static void file_store_persists(void)
{
    exo_pager_store *s = new_store(0);
    exo_pager_options o = {.size = 32 * 4 * KIB, .budget = 4 * 4 * KIB, .store = s};
    exo_pager *p;
    CHECK_OK(exo_pager_create(&o, &p));
    pager_write_all(exo_pager_base(p), o.size, 4 * KIB, 7);
    CHECK_OK(exo_pager_destroy(p)); /* writes back what is still dirty */
    CHECK_OK(exo_pager_store_close(s));
    CHECK_OK(exo_pager_store_file(store_path, &s));
    o.store = s;
    CHECK_OK(exo_pager_create(&o, &p));
    pager_check_all(exo_pager_base(p), o.size, 4 * KIB, 7);
    CHECK_OK(exo_pager_destroy(p));
    CHECK_OK(exo_pager_store_close(s));
}

/* ---- bad arguments ---- */

static void bad_arguments(void)
{
    exo_pager_store *s = new_store(1), *s2 = new_store(3);
    exo_pager *p = NULL;
    exo_pager_options o = {.size = 16 * 4 * KIB, .budget = 4 * 4 * KIB, .store = s};
    exo_pager_options bad = o;
    bad.budget = 0;
    CHECK_ERR(exo_pager_create(&bad, &p), EXO_EINVAL);
    CHECK(strstr(exomem_last_error(), "budget") != NULL);
    bad = o;
    bad.size = 0;
    CHECK_ERR(exo_pager_create(&bad, &p), EXO_EINVAL);
    bad = o;
    bad.size = 5 * KIB;
    CHECK_ERR(exo_pager_create(&bad, &p), EXO_EINVAL);
    bad = o;
    bad.unit = 8 * KIB;
    CHECK_ERR(exo_pager_create(&bad, &p), EXO_EINVAL);
    CHECK(strstr(exomem_last_error(), "unit") != NULL);
    bad = o;
    bad.store = NULL;
    CHECK_ERR(exo_pager_create(&bad, &p), EXO_EINVAL);
    CHECK(strstr(exomem_last_error(), "store") != NULL);
    bad = o;
    bad.policy = (exo_pager_policy)42;
    CHECK_ERR(exo_pager_create(&bad, &p), EXO_EINVAL);
    bad = o;
    bad.policy = EXO_PAGER_CUSTOM;
    CHECK_ERR(exo_pager_create(&bad, &p), EXO_EINVAL);
    CHECK(strstr(exomem_last_error(), "victim") != NULL);
    bad = o;
    bad.table = (exo_pager_table)9;
    CHECK_ERR(exo_pager_create(&bad, &p), EXO_EINVAL);
    CHECK(p == NULL);
    CHECK_ERR(exo_pager_store_memory((exo_pager_compression)7, &s2), EXO_EINVAL);
    CHECK_ERR(exo_pager_store_file("/nonexistent-dir/x", &s2), EXO_ENOENT);

    CHECK_OK(exo_pager_create(&o, &p));
    CHECK_ERR(exo_pager_create(&o, &p), EXO_EBUSY); /* the store serves a region */
    CHECK_ERR(exo_pager_store_close(s), EXO_EBUSY);
    char *base = exo_pager_base(p);
    CHECK_ERR(exo_pager_advise(p, base - 4 * KIB, 4 * KIB, EXO_PAGER_WILLNEED, 0), EXO_EINVAL);
    CHECK_ERR(exo_pager_advise(p, base, o.size + 1, EXO_PAGER_WILLNEED, 0), EXO_EINVAL);
    CHECK_ERR(exo_pager_advise(p, base, 4 * KIB, (exo_pager_advice)99, 0), EXO_EINVAL);
    CHECK_ERR(exo_pager_discard(p, base + o.size, 4 * KIB), EXO_EINVAL);
    CHECK_OK(exo_pager_destroy(p));
    CHECK_OK(exo_pager_store_close(s));
    CHECK_OK(exo_pager_store_close(s2));
}

int main(void)
{
    const char *root = test_root_setup();
    snprintf(store_path, sizeof store_path, "%s/pager-store", root);
    const char *why = NULL;
    if (exo_vm_engine_supported(EXO_VM_ENGINE_UFFD, 0, &why) != 0)
        SKIP("userfaultfd is not usable here: %s\n", why ? why : "?");
    bad_arguments();
    every_config();
    for (int d = 0; d < 2; d++) {
        many_threads(d ? EXO_PAGER_SIGBUS : EXO_PAGER_THREADS, EXO_PAGER_FIFO);
        many_threads(d ? EXO_PAGER_SIGBUS : EXO_PAGER_THREADS, EXO_PAGER_CLOCK);
    }
    discard_flush_hints();
    file_store_persists();
    larger_than_ram();
    unlink(store_path);
    printf("test_pager: ok\n");
    return 0;
}
