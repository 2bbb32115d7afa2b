/* What the pager tests share (pager_fixture.h). */
#include "pager_fixture.h"
#include "harness.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#define KIB ((size_t)1 << 10)
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

/* EXO_PAGER_CUSTOM's victim callback in pager_one_config: FIFO chooses. */
static size_t fifo_victim(void *arg)
{
    (void)arg;
    return SIZE_MAX;
}

exo_pager_stats pager_one_config(exo_pager_store *s, const char *store_name,
                                 exo_pager_policy policy, exo_pager_table table, size_t unit,
                                 exo_pager_delivery delivery, size_t units, size_t frames)
{
    exo_pager_options o = {.size = units * unit, .budget = frames * unit, .unit = unit,
                           .policy = policy, .table = table, .delivery = delivery,
                           .threads = 2, .store = s};
    if (policy == EXO_PAGER_CUSTOM)
        o.callbacks.victim = fifo_victim;
    exo_pager *p;
    CHECK_OK(exo_pager_create(&o, &p));
    uint64_t *base = exo_pager_base(p);
    for (uint64_t round = 1; round <= 2; round++) {
        pager_write_all(base, o.size, unit, round);
        pager_check_all(base, o.size, unit, round);
    }
    exo_pager_stats st;
    CHECK_OK(exo_pager_get_stats(p, &st));
    if (st.resident_bytes > o.budget || st.evictions == 0 || st.writebacks == 0 ||
        st.store_reads == 0) {
        fprintf(stderr, "%s/%s/%s/%zuK/%s: resident %llu of %zu, %llu evictions, %llu "
                "write-backs, %llu store reads\n", exo_pager_policy_name(policy),
                store_name, exo_pager_table_name(table), unit >> 10,
                delivery == EXO_PAGER_SIGBUS ? "sigbus" : "threads",
                (unsigned long long)st.resident_bytes, o.budget,
                (unsigned long long)st.evictions, (unsigned long long)st.writebacks,
                (unsigned long long)st.store_reads);
        exit(1);
    }
    CHECK_OK(exo_pager_destroy(p));
    return st;
}

struct worker {
    uint64_t *base;
    size_t unit, units, first, count;
    unsigned seed;
};

/* Each thread owns units [first, first+count) and keeps a counter in each. */
static void *worker_main(void *arg)
{
    struct worker *w = arg;
    for (int i = 0; i < 4000; i++) {
        w->seed = w->seed * 1103515245u + 12345u;
        size_t u = w->first + (w->seed >> 8) % w->count;
        w->base[u * w->unit / 8 + (w->seed & 7)] += 1;
    }
    return NULL;
}

void pager_many_threads(exo_pager_store *s, exo_pager_delivery delivery,
                        exo_pager_policy policy)
{
    enum { THREADS = 4, PER = 24 };
    exo_pager_options o = {.size = THREADS * PER * 4 * KIB, .budget = 12 * 4 * KIB,
                           .policy = policy, .delivery = delivery, .threads = 3, .store = s};
    exo_pager *p;
    CHECK_OK(exo_pager_create(&o, &p));
    struct worker w[THREADS];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (struct worker){exo_pager_base(p), 4 * KIB, THREADS * PER, (size_t)i * PER, PER,
                               (unsigned)i + 1};
        CHECK_OK(pthread_create(&t[i], NULL, worker_main, &w[i]));
    }
    for (int i = 0; i < THREADS; i++)
        CHECK_OK(pthread_join(t[i], NULL));
    uint64_t total = 0;
    for (size_t u = 0; u < THREADS * PER; u++)
        for (int k = 0; k < 8; k++)
            total += ((uint64_t *)exo_pager_base(p))[u * 512 + (size_t)k];
    CHECK_EQ(total, THREADS * 4000);
    exo_pager_stats st;
    CHECK_OK(exo_pager_get_stats(p, &st));
    CHECK(st.evictions > 0 && st.writebacks > 0);
    CHECK_OK(exo_pager_destroy(p));
}

/* ---- a store that fails ---- */

static sigjmp_buf escape;
static volatile sig_atomic_t bus_errors;

/* Installed before any pager region, so that the pager's own SIGBUS handler chains to it
 * for the faults it cannot serve. */
static void on_sigbus(int sig, siginfo_t *si, void *ctx)
{
    (void)sig, (void)si, (void)ctx;
    bus_errors++;
    siglongjmp(escape, 1);
}

int pager_read_faults(volatile const char *p, char *out)
{
    if (sigsetjmp(escape, 1))
        return 1;
    *out = *p;
    return 0;
}

static void check_units(const char *base, int first, int count)
{
    for (int u = first; u < first + count; u++)
        for (size_t i = 0; i < UNIT; i += 512)
            if (base[(size_t)u * UNIT + i] != (char)('A' + u)) {
                fprintf(stderr, "unit %d byte %zu: %d, expected %c\n", u, i,
                        base[(size_t)u * UNIT + i], 'A' + u);
                exit(1);
            }
}

void pager_failures_scenario(exo_pager_store *s, exo_pager_delivery delivery)
{
    exo_pager_options o = {.size = 16 * UNIT, .budget = 4 * UNIT, .delivery = delivery,
                           .store = s};
    exo_pager *p;
    CHECK_OK(exo_pager_create(&o, &p));
    char *base = exo_pager_base(p);
    alarm(30);

    /* 1. A fill the store cannot serve: SIGBUS, the reason, and the unit back later. */
    for (int u = 0; u < 8; u++)
        memset(base + (size_t)u * UNIT, 'A' + u, UNIT); /* units 0-3 go to the store */
    CHECK_OK(exo_pager_flush(p)); /* 4-7 clean: making room needs no write */
    CHECK_OK(exo_pager_store_fail(s, 1000));
    char c = 0;
    int before = bus_errors;
    CHECK(pager_read_faults(base, &c));
    CHECK_EQ(bus_errors, before + 1);
    CHECK(strstr(exo_pager_last_failure(p), "store read of unit 0") != NULL);
    CHECK(pager_read_faults(base, &c)); /* still failing: SIGBUS again, not a hang */
    exo_pager_stats st;
    CHECK_OK(exo_pager_get_stats(p, &st));
    CHECK(st.store_errors >= 3);
    CHECK_OK(exo_pager_store_fail(s, 0));
    CHECK_OK(exo_pager_advise(p, base, UNIT, EXO_PAGER_WILLNEED, 0));
    CHECK(!pager_read_faults(base, &c));
    CHECK_EQ(c, 'A');
    check_units(base, 0, 8);

    /* 2. Write-backs that fail: the dirty units stay resident, nothing is lost, and the
     * fault that needed a frame gets SIGBUS. */
    CHECK_OK(exo_pager_advise(p, base, o.size, EXO_PAGER_DONTNEED, 0));
    for (int u = 0; u < 4; u++)
        memset(base + (size_t)u * UNIT, 'A' + u, UNIT); /* four dirty units fill the budget */
    CHECK_OK(exo_pager_store_fail(s, 1000));
    CHECK(pager_read_faults(base + 9 * UNIT, &c));
    CHECK(strstr(exo_pager_last_failure(p), "store") != NULL);
    CHECK_OK(exo_pager_get_stats(p, &st));
    CHECK_EQ(st.dirty_bytes, 4 * UNIT);
    check_units(base, 0, 4); /* resident: no fault needed, and unchanged */
    CHECK_ERR(exo_pager_flush(p), EXO_EIO);
    CHECK_OK(exo_pager_store_fail(s, 0));
    CHECK_OK(exo_pager_advise(p, base + 9 * UNIT, UNIT, EXO_PAGER_WILLNEED, 0));
    CHECK(!pager_read_faults(base + 9 * UNIT, &c));
    CHECK_EQ(c, 0); /* never written */
    CHECK_OK(exo_pager_advise(p, base, o.size, EXO_PAGER_DONTNEED, 0)); /* all to the store */
    check_units(base, 0, 8);
    alarm(0);
    CHECK_OK(exo_pager_destroy(p));
}

void pager_failures_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    CHECK_OK(sigaction(SIGBUS, &sa, NULL));
}

int pager_bus_errors(void)
{
    return (int)bus_errors;
}
