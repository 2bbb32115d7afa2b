/* comppage: a demonstration of data-compression paging. A table of text records four times
 * the memory budget is written, then updated at random; pages that leave the budget are
 * compressed in memory. Prints one JSON line: records, compression ratio, faults,
 * updates per second; exits 1 if a record read back wrong.
 *
 *   comppage [--records N] [--budget-mib M] [--updates U] [--zstd]
 */
#include "comppage.h"
#include "records.h"

#include <exomem/exomem.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    uint64_t records = 262144, updates = 200000, budget_mib = 16;
    enum comppage_codec codec = COMPPAGE_LZ4;
    static const struct option opts[] = {
        {"records", required_argument, NULL, 'r'}, {"budget-mib", required_argument, NULL, 'b'},
        {"updates", required_argument, NULL, 'u'}, {"zstd", no_argument, NULL, 'z'},
        {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'r': records = strtoull(optarg, NULL, 10); break;
        case 'b': budget_mib = strtoull(optarg, NULL, 10); break;
        case 'u': updates = strtoull(optarg, NULL, 10); break;
        case 'z': codec = COMPPAGE_ZSTD; break;
        case 'h':
            printf("usage: comppage [--records N] [--budget-mib M] [--updates U] [--zstd]\n");
            return 0;
        default: return 2;
        }
    }
    size_t size = (records * COMPPAGE_RECORD + 4095) / 4096 * 4096;
    struct comppage_opts o = {.size = size, .budget = budget_mib << 20, .codec = codec};
    comppage *a;
    int rc = comppage_open(&o, &a);
    if (rc) {
        fprintf(stderr, "comppage: %s (%s)\n", exomem_strerror(rc), exomem_last_error());
        return 1;
    }
    char *table = comppage_base(a);
    uint64_t *version = calloc(records, sizeof *version);
    if (!version)
        return 1;
    for (uint64_t i = 0; i < records; i++)
        comppage_record(i, 0, table + i * COMPPAGE_RECORD);
    double t0 = now_s();
    uint64_t rng = 88172645463325252u, bad = 0;
    for (uint64_t k = 0; k < updates; k++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        uint64_t i = rng % records;
        char *rec = table + i * COMPPAGE_RECORD;
        bad += !comppage_record_ok(rec, i, version[i]);
        comppage_record(i, ++version[i], rec);
    }
    double secs = now_s() - t0;
    struct comppage_stats st;
    comppage_stats(a, &st);
    printf("{\"records\":%llu,\"bytes\":%zu,\"budget_mib\":%llu,\"codec\":\"%s\",\"ratio\":%.2f,"
           "\"faults\":%llu,\"fault_median_us\":%.1f,\"updates_per_s\":%.0f,\"bad\":%llu}\n",
           (unsigned long long)records, size, (unsigned long long)budget_mib,
           codec == COMPPAGE_LZ4 ? "lz4" : "zstd", st.ratio, (unsigned long long)st.faults,
           st.fault_median_us, (double)updates / secs, (unsigned long long)bad);
    free(version);
    comppage_close(a);
    return bad ? 1 : 0;
}
