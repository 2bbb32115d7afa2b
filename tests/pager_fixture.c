/* Implementation of tests/pager_fixture.h. */
#include "pager_fixture.h"
#include "harness.h"

#include <pthread.h>

#define UNIT ((size_t)4 << 10)

uint64_t pager_stamp(uint64_t off, uint64_t round)
{
    uint64_t x = (off + 1) * UINT64_C(0x9E3779B97F4A7C15) ^ (round << 48);
    return x ^ (x >> 31);
}

void pager_write_all(uint64_t *base, size_t size, size_t unit, uint64_t round)
{
    for (size_t off = 0; off < size; off += unit)
        for (size_t w = 0; w < 4; w++) {
            size_t at = off + w * (unit / 4);
            base[at / 8] = pager_stamp(at, round);
        }
}

void pager_check_all(const uint64_t *base, size_t size, size_t unit, uint64_t round)
{
    for (size_t off = 0; off < size; off += unit)
        for (size_t w = 0; w < 4; w++) {
            size_t at = off + w * (unit / 4);
            if (base[at / 8] != pager_stamp(at, round)) {
                fprintf(stderr, "word at offset %zu: %#llx, expected %#llx (round %llu)\n", at,
                        (unsigned long long)base[at / 8],
                        (unsigned long long)pager_stamp(at, round), (unsigned long long)round);
                exit(1);
            }
        }
}

struct worker {
    uint64_t *base;
    size_t first, count;
    unsigned seed;
};

/* Each thread owns units [first, first+count) and keeps a counter in each: increments
 * while other threads' faults evict its units must never be lost. */
static void *worker_main(void *arg)
{
    struct worker *w = arg;
    for (int i = 0; i < 4000; i++) {
        w->seed = w->seed * 1103515245u + 12345u;
        size_t u = w->first + (w->seed >> 8) % w->count;
        w->base[u * UNIT / 8 + (w->seed & 7)] += 1;
    }
    return NULL;
}

void pager_many_threads(exo_pager_store *s, exo_pager_delivery delivery,
                        exo_pager_policy policy)
{
    enum { THREADS = 4, PER = 24 };
    exo_pager_options o = {.size = THREADS * PER * UNIT, .budget = 12 * UNIT,
                           .policy = policy, .delivery = delivery, .threads = 3, .store = s};
    exo_pager *p;
    CHECK_OK(exo_pager_create(&o, &p));
    struct worker w[THREADS];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (struct worker){exo_pager_base(p), (size_t)i * PER, PER, (unsigned)i + 1};
        CHECK_OK(pthread_create(&t[i], NULL, worker_main, &w[i]));
    }
    for (int i = 0; i < THREADS; i++)
        CHECK_OK(pthread_join(t[i], NULL));
    uint64_t total = 0;
    for (size_t u = 0; u < THREADS * PER; u++)
        for (int k = 0; k < 8; k++)
            total += ((uint64_t *)exo_pager_base(p))[u * UNIT / 8 + (size_t)k];
    CHECK_EQ(total, THREADS * 4000);
    exo_pager_stats st;
    CHECK_OK(exo_pager_get_stats(p, &st));
    CHECK(st.evictions > 0 && st.writebacks > 0);
    CHECK_OK(exo_pager_destroy(p));
}
