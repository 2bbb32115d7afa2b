/* Pager regions backed by 2 MiB hugetlb pages (EXO_PAGER_HUGE_PAGES): data written before
 * eviction reads back after, with every policy and both deliveries, while two threads fault
 * at once; the memory really is on 2 MiB pages; every huge page goes back to the pool when the
 * region is destroyed; a pool too small and bad flags are refused with clear errors. Needs
 * root to grow the 2 MiB pool (put back at exit by the fixture); skipped otherwise. */
#include "harness.h"
#include "hugepool_fixture.h"
#include "os/os.h"

#include <exomem/pager.h>
#include <exomem/vm.h>
#include <pthread.h>
#include <string.h>

#define HUGE ((size_t)2 << 20)
#define UNITS 24
#define FRAMES 4

static uint64_t word_of(size_t unit, int round)
{
    return ((uint64_t)unit << 8) | (uint64_t)round;
}

struct reader {
    volatile uint64_t *base;
    size_t first, step;
    int round;
    int bad;
};

/* Read every `step`-th unit from `first`: each must hold what the last round wrote. */
static void *read_units(void *arg)
{
    struct reader *r = arg;
    for (size_t u = r->first; u < UNITS; u += r->step)
        for (size_t off = 0; off < HUGE / 8; off += 4096 / 8)
            if (r->base[u * (HUGE / 8) + off] != word_of(u, r->round) + off)
                r->bad++;
    return NULL;
}

/* KernelPageSize of the mapping that starts at base, from /proc/self/smaps (kB), or 0. */
static long kernel_page_kb(const void *base)
{
    FILE *f = fopen("/proc/self/smaps", "re");
    CHECK(f != NULL);
    char line[512];
    bool in = false;
    long kb = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo;
        if (strchr(line, '-') && sscanf(line, "%lx-", &lo) == 1 && strstr(line, " rw"))
            in = lo == (unsigned long)(uintptr_t)base;
        else if (in && sscanf(line, "KernelPageSize: %ld kB", &kb) == 1)
            break;
    }
    fclose(f);
    return in ? kb : 0;
}

static void one(exo_pager_policy policy, exo_pager_delivery delivery)
{
    long free_before = 0;
    CHECK_OK(exo_os_pool_available(HUGE, NULL, &free_before));
    exo_pager_store *s;
    CHECK_OK(exo_pager_store_memory(EXO_PAGER_LZ4, &s));
    exo_pager_options o = {.size = UNITS * HUGE, .budget = FRAMES * HUGE,
                           .unit = EXO_PAGER_UNIT_2M, .policy = policy, .delivery = delivery,
                           .threads = 2, .store = s, .flags = EXO_PAGER_HUGE_PAGES};
    exo_pager *p;
    CHECK_OK(exo_pager_create(&o, &p));
    volatile uint64_t *base = exo_pager_base(p);
    CHECK(((uintptr_t)base & (HUGE - 1)) == 0);
    for (int round = 1; round <= 2; round++) {
        for (size_t u = 0; u < UNITS; u++)
            for (size_t off = 0; off < HUGE / 8; off += 4096 / 8)
                base[u * (HUGE / 8) + off] = word_of(u, round) + off;
        struct reader r[2] = {{base, 0, 2, round, 0}, {base, 1, 2, round, 0}};
        pthread_t t[2];
        for (int i = 0; i < 2; i++)
            CHECK(pthread_create(&t[i], NULL, read_units, &r[i]) == 0);
        for (int i = 0; i < 2; i++)
            pthread_join(t[i], NULL);
        CHECK_EQ(r[0].bad + r[1].bad, 0);
    }
    CHECK_EQ(kernel_page_kb((const void *)base), 2048);
    exo_pager_stats st;
    CHECK_OK(exo_pager_get_stats(p, &st));
    CHECK(st.evictions > 0 && st.writebacks > 0 && st.store_reads > 0);
    CHECK(st.resident_bytes <= FRAMES * HUGE);
    CHECK_OK(exo_pager_destroy(p));
    CHECK_OK(exo_pager_store_close(s));
    long free_after = 0;
    CHECK_OK(exo_os_pool_available(HUGE, NULL, &free_after));
    CHECK_EQ(free_after, free_before); /* every huge page went back */
}

static void refused(void)
{
    exo_pager_store *s;
    CHECK_OK(exo_pager_store_memory(EXO_PAGER_PLAIN, &s));
    long avail = 0;
    CHECK_OK(exo_os_pool_available(HUGE, NULL, &avail));
    exo_pager_options o = {.size = (size_t)(avail + 1) * HUGE, .budget = (size_t)(avail + 1) * HUGE,
                           .unit = EXO_PAGER_UNIT_2M, .store = s, .flags = EXO_PAGER_HUGE_PAGES};
    exo_pager *p;
    CHECK_ERR(exo_pager_create(&o, &p), EXO_ENOHUGE);
    CHECK(strstr(exomem_last_error(), "nr_hugepages") != NULL);
    o.budget = HUGE;
    o.unit = EXO_PAGER_UNIT_4K;
    CHECK_ERR(exo_pager_create(&o, &p), EXO_EINVAL);
    CHECK(strstr(exomem_last_error(), "2 MiB units") != NULL);
    o.unit = EXO_PAGER_UNIT_2M;
    o.flags = 0x10;
    CHECK_ERR(exo_pager_create(&o, &p), EXO_EINVAL);
    CHECK(strstr(exomem_last_error(), "unknown flags") != NULL);
    CHECK_OK(exo_pager_store_close(s));
}

int main(void)
{
    hp_fixture();
    const char *why = NULL;
    if (exo_vm_engine_supported(EXO_VM_ENGINE_UFFD, 0, &why) != 0)
        SKIP("userfaultfd is not usable here: %s\n", why ? why : "?");
    if (hp_pool_start[0] < 0)
        SKIP("the kernel has no 2 MiB huge page pool\n");
    long avail = 0;
    CHECK_OK(exo_os_pool_available(HUGE, NULL, &avail));
    if (avail < FRAMES + 2 && hp_write_pool(0, hp_read_pool(0) + FRAMES + 2 - avail) != 0)
        SKIP("needs %d free 2 MiB huge pages (root grows the pool); %ld are free\n", FRAMES + 2,
             avail);
    CHECK_OK(exo_os_pool_available(HUGE, NULL, &avail));
    if (avail < FRAMES + 2)
        SKIP("the kernel made only %ld free 2 MiB huge pages (memory fragmented?)\n", avail);
    refused();
    static const exo_pager_policy policies[] = {EXO_PAGER_FIFO, EXO_PAGER_CLOCK, EXO_PAGER_LRU,
                                                EXO_PAGER_MRU};
    for (int d = 0; d < 2; d++)
        for (size_t i = 0; i < sizeof policies / sizeof policies[0]; i++)
            one(policies[i], d ? EXO_PAGER_SIGBUS : EXO_PAGER_THREADS);
    printf("test_pager_huge: ok\n");
    return 0;
}
