/* A replacement policy the application writes (EXO_PAGER_CUSTOM): an index that must stay
 * in memory while a table many times the budget is scanned past it. The policy knows what
 * the kernel cannot: units below INDEX_UNITS are the index. It evicts the data unit filled
 * most recently (a scan will not need it again soon) and an index unit only when nothing
 * else is resident. */
#include <exomem/exomem.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define UNIT EXO_PAGER_UNIT_4K
#define INDEX_UNITS 8
#define DATA_UNITS 248
#define FRAMES 32

/* The policy's own view of what is resident: a stack of data units in fill order. */
struct scan_aware {
    size_t data[FRAMES];
    size_t ndata;
    size_t index_fills;  /* how often an index unit had to be read in */
};

static void filled(void *arg, size_t unit, int write)
{
    (void)write;
    struct scan_aware *s = arg;
    if (unit < INDEX_UNITS)
        s->index_fills++;
    else if (s->ndata < FRAMES)
        s->data[s->ndata++] = unit;
}

static size_t victim(void *arg)
{
    struct scan_aware *s = arg;
    return s->ndata ? s->data[s->ndata - 1] : SIZE_MAX; /* SIZE_MAX: let FIFO choose */
}

static void evicted(void *arg, size_t unit)
{
    struct scan_aware *s = arg;
    for (size_t i = 0; i < s->ndata; i++)
        if (s->data[i] == unit) {
            memmove(&s->data[i], &s->data[i + 1], (s->ndata - i - 1) * sizeof s->data[0]);
            s->ndata--;
            break;
        }
}

int main(void)
{
    exo_pager_store *store;
    struct scan_aware policy = {.ndata = 0, .index_fills = 0};
    if (exo_pager_store_memory(EXO_PAGER_LZ4, &store) != 0)
        return 1;
    exo_pager_options opt = {
        .size = (INDEX_UNITS + DATA_UNITS) * UNIT,
        .budget = FRAMES * UNIT,
        .policy = EXO_PAGER_CUSTOM,
        .callbacks = {.filled = filled, .victim = victim, .evicted = evicted, .arg = &policy},
        .store = store,
    };
    exo_pager *pager;
    if (exo_pager_create(&opt, &pager) != 0) {
        fprintf(stderr, "exo_pager_create: %s\n", exomem_last_error());
        return 77; /* no userfaultfd here */
    }
    uint64_t *mem = exo_pager_base(pager);
    const size_t words = UNIT / sizeof *mem;
    for (size_t u = 0; u < INDEX_UNITS; u++)       /* build the index */
        mem[u * words] = u + 1;
    uint64_t sum = 0;
    for (int pass = 0; pass < 3; pass++)            /* scan the table, consulting the index */
        for (size_t u = INDEX_UNITS; u < INDEX_UNITS + DATA_UNITS; u++) {
            mem[u * words] = u;
            sum += mem[(u % INDEX_UNITS) * words];
        }
    exo_pager_stats st;
    exo_pager_get_stats(pager, &st);
    /* Each index unit was read in once and never again; the data units kept from the first
     * pass (the oldest fills, which the policy never evicts) save faults in later passes. */
    printf("faults %llu, evictions %llu, index units filled %zu times (of %d), sum %llu\n",
           (unsigned long long)st.faults, (unsigned long long)st.evictions,
           policy.index_fills, INDEX_UNITS, (unsigned long long)sum);
    int ok = policy.index_fills == INDEX_UNITS && st.faults < INDEX_UNITS + 3 * DATA_UNITS &&
             sum == 3 * DATA_UNITS * 9 / 2;
    exo_pager_destroy(pager);
    exo_pager_store_close(store);
    return ok ? 0 : 1;
}
