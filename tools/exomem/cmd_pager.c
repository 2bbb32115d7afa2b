/* `exomem pager stats PID [--json]`: the live counters of another process's pager regions
 * (exo_pager_list: each region publishes them in the registry while it lives). */
#include "commands.h"

#include <exomem/pager.h>
#include <inttypes.h>
#include <stdlib.h>

const struct cli_cmd pager_cmd = {
    "pager", "SUBCOMMAND [ARGS]",
    "Look at application-level pager regions (docs/pager.md).",
    "",
};

static const struct cli_cmd pager_stats_cmd = {
    "pager stats", "PID [--json]",
    "Show the counters of a running process's pager regions.",
    "Every exo_pager region publishes its counters in the registry ($EXOMEM_ROOT, the\n"
    "process's) while it lives; this reads them: faults, fills from the store, evictions,\n"
    "write-backs, store errors, resident and dirty bytes, and the fault latency\n"
    "histogram (median and 99th percentile). Run it with the process's EXOMEM_ROOT.\n"
    "Exit status 3 when the process has no region (or does not exist).\n\n"
    "Options:\n"
    "  --json          one JSON object: {\"pid\": PID, \"regions\": [...]}\n\n"
    "Example:\n"
    "  exomem pager stats 4242\n",
};

#define MAX_REGIONS 64

/* The latency (ns) under which fraction q of the timed faults fell: the upper bound of the
 * histogram bucket where the count crosses q. 0 when nothing was timed; *timed gets how
 * many faults were. */
static uint64_t latency_quantile(const exo_pager_stats *s, double q, uint64_t *timed)
{
    *timed = 0;
    for (int i = 0; i < EXO_PAGER_LATENCY_BUCKETS; i++)
        *timed += s->latency[i];
    int b = exo_pager_latency_bucket(s, q);
    return b < 0 ? 0 : UINT64_C(2) << b;
}

static void print_bytes(FILE *out, uint64_t b)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    fprintf(out, u ? "%.1f %s" : "%.0f %s", v, units[u]);
}

static void print_text(const exo_pager_info *r, size_t i, FILE *out)
{
    const exo_pager_stats *s = &r->stats;
    fprintf(out, "region %zu: %#" PRIx64 ", size ", i + 1, r->base);
    print_bytes(out, r->size);
    fprintf(out, ", unit ");
    print_bytes(out, r->unit);
    fprintf(out, ", policy %s, table %s, ", exo_pager_policy_name(r->policy), exo_pager_table_name(r->table));
    if (r->delivery == EXO_PAGER_SIGBUS)
        fprintf(out, "delivery sigbus");
    else
        fprintf(out, "delivery threads (%u)", r->threads);
    fprintf(out, ", store %s\n  budget ", r->store);
    print_bytes(out, s->budget_bytes);
    fprintf(out, ", resident ");
    print_bytes(out, s->resident_bytes);
    fprintf(out, ", dirty ");
    print_bytes(out, s->dirty_bytes);
    fprintf(out, ", page table ");
    print_bytes(out, s->table_bytes);
    fprintf(out, "\n  faults %" PRIu64 " (write faults %" PRIu64 ", zero fills %" PRIu64
            ", store reads %" PRIu64 ", read-ahead %" PRIu64 ")\n  evictions %" PRIu64
            ", write-backs %" PRIu64 ", store errors %" PRIu64 "\n",
            s->faults, s->write_faults, s->zero_fills, s->store_reads, s->readaheads,
            s->evictions, s->writebacks, s->store_errors);
    uint64_t timed, p50 = latency_quantile(s, 0.5, &timed), p99 = latency_quantile(s, 0.99, &timed);
    if (timed)
        fprintf(out, "  fault latency: median < %.1f us, p99 < %.1f us (%" PRIu64 " timed)\n",
                (double)p50 / 1e3, (double)p99 / 1e3, timed);
}

static void print_json(const exo_pager_info *r, FILE *out)
{
    const exo_pager_stats *s = &r->stats;
    uint64_t timed, p50 = latency_quantile(s, 0.5, &timed), p99 = latency_quantile(s, 0.99, &timed);
    fprintf(out, "{\"base\":%" PRIu64 ",\"size\":%" PRIu64 ",\"unit\":%" PRIu64
            ",\"policy\":\"%s\",\"table\":\"%s\",\"delivery\":\"%s\",\"threads\":%u,"
            "\"store\":\"%s\",\"budget_bytes\":%" PRIu64 ",\"resident_bytes\":%" PRIu64
            ",\"dirty_bytes\":%" PRIu64 ",\"table_bytes\":%" PRIu64 ",\"faults\":%" PRIu64
            ",\"write_faults\":%" PRIu64 ",\"zero_fills\":%" PRIu64 ",\"store_reads\":%" PRIu64
            ",\"readaheads\":%" PRIu64 ",\"evictions\":%" PRIu64 ",\"writebacks\":%" PRIu64
            ",\"store_errors\":%" PRIu64 ",\"latency_timed\":%" PRIu64
            ",\"latency_median_below_ns\":%" PRIu64 ",\"latency_p99_below_ns\":%" PRIu64
            ",\"latency_log2_ns\":[",
            r->base, r->size, r->unit, exo_pager_policy_name(r->policy), exo_pager_table_name(r->table),
            r->delivery == EXO_PAGER_SIGBUS ? "sigbus" : "threads", r->threads, r->store,
            s->budget_bytes, s->resident_bytes, s->dirty_bytes, s->table_bytes, s->faults,
            s->write_faults, s->zero_fills, s->store_reads, s->readaheads, s->evictions,
            s->writebacks, s->store_errors, timed, p50, p99);
    for (int i = 0; i < EXO_PAGER_LATENCY_BUCKETS; i++)
        fprintf(out, "%s%" PRIu64, i ? "," : "", s->latency[i]);
    fprintf(out, "]}");
}

static int run_pager_stats(int argc, char **argv)
{
    bool json = false;
    const struct cli_opt opts[] = {{"json", NULL, &json}};
    const char *pos[1];
    size_t npos;
    int rc = cli_parse(&pager_stats_cmd, argc - 1, argv + 1, opts, 1, pos, 1, 1, &npos);
    if (rc != CLI_CONTINUE)
        return rc;
    char *end;
    long pid = strtol(pos[0], &end, 10);
    if (*end || end == pos[0] || pid <= 0 || pid > INT32_MAX)
        return cli_usage(&pager_stats_cmd, "invalid PID '%s': expected a process id", pos[0]);
    static exo_pager_info regions[MAX_REGIONS];
    size_t count;
    rc = exo_pager_list((int)pid, regions, MAX_REGIONS, &count);
    if (rc == -EXO_ENOENT) {
        fprintf(stderr, "exomem: pager stats: %s (regions are found in the registry of the "
                "process: run with its EXOMEM_ROOT)\n", exomem_last_error());
        return CLI_EXIT_NOTFOUND;
    }
    if (rc)
        return cli_fail(rc, "pager stats of process %ld", pid);
    size_t shown = count < MAX_REGIONS ? count : MAX_REGIONS;
    if (json) {
        printf("{\"pid\":%ld,\"regions\":[", pid);
        for (size_t i = 0; i < shown; i++) {
            fputs(i ? "," : "", stdout);
            print_json(&regions[i], stdout);
        }
        printf("]}\n");
    } else {
        printf("process %ld: %zu pager region%s%s\n", pid, count, count == 1 ? "" : "s",
               count > shown ? " (the first 64 shown)" : "");
        for (size_t i = 0; i < shown; i++)
            print_text(&regions[i], i, stdout);
    }
    return CLI_EXIT_OK;
}

int run_pager(int argc, char **argv)
{
    static const struct cli_sub subs[] = {
        {"stats", &pager_stats_cmd, run_pager_stats},
    };
    return cli_dispatch(&pager_cmd, subs, sizeof subs / sizeof subs[0], argc - 1, argv + 1);
}
