/* Data-compression paging on the pager (comppage.h): an area is a pager region over the
 * pager's compressed memory store. */
#include "comppage.h"

#include <exomem/exomem.h>
#include <stdlib.h>

struct comppage {
    exo_pager *pager;
    exo_pager_store *store;
    size_t unit;
};

int comppage_open(const struct comppage_opts *opts, comppage **out)
{
    if (!opts || !out)
        return exomem_set_error(EXO_EINVAL, "comppage_open: opts or out is NULL");
    enum comppage_codec codec = opts->codec ? opts->codec : COMPPAGE_LZ4;
    if (codec != COMPPAGE_LZ4 && codec != COMPPAGE_ZSTD)
        return exomem_set_error(EXO_EINVAL, "comppage_open: unknown codec %d", (int)codec);
    comppage *a = calloc(1, sizeof *a);
    if (!a)
        return exomem_set_error(EXO_ENOMEM, "comppage_open: out of memory");
    int rc = exo_pager_store_memory(codec == COMPPAGE_LZ4 ? EXO_PAGER_LZ4 : EXO_PAGER_ZSTD,
                                    &a->store);
    if (rc) {
        free(a);
        return rc;
    }
    exo_pager_options o = {.size = opts->size, .budget = opts->budget,
                           .policy = opts->policy ? opts->policy : EXO_PAGER_CLOCK,
                           .delivery = EXO_PAGER_SIGBUS, .store = a->store};
    if ((rc = exo_pager_create(&o, &a->pager)) != 0) {
        exo_pager_store_close(a->store);
        free(a);
        return rc;
    }
    a->unit = EXO_PAGER_UNIT_4K;
    *out = a;
    return 0;
}

void *comppage_base(comppage *a)
{
    return a ? exo_pager_base(a->pager) : NULL;
}

int comppage_stats(comppage *a, struct comppage_stats *out)
{
    if (!a || !out)
        return exomem_set_error(EXO_EINVAL, "comppage_stats: area or out is NULL");
    exo_pager_stats st;
    int rc = exo_pager_get_stats(a->pager, &st);
    uint64_t bytes = 0, units = 0;
    if (!rc)
        rc = exo_pager_store_usage(a->store, &bytes, &units);
    if (rc)
        return rc;
    int b = exo_pager_latency_bucket(&st, 0.5);
    double median = b < 0 ? 0 : (double)(UINT64_C(3) << b) / 2e3; /* the bucket's middle, us */
    *out = (struct comppage_stats){
        .pages_compressed = units, .compressed_bytes = bytes,
        .ratio = bytes ? (double)(units * a->unit) / (double)bytes : 0,
        .faults = st.faults, .evictions = st.evictions, .fault_median_us = median};
    return 0;
}

int comppage_close(comppage *a)
{
    if (!a)
        return 0;
    int rc = exo_pager_destroy(a->pager);
    int rc2 = exo_pager_store_close(a->store);
    free(a);
    return rc ? rc : rc2;
}
