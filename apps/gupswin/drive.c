/* The update stream through per-window batches, shared by the three designs; see gupswin.h. */
#include "gupswin.h"

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

uint64_t gupswin_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t minor_faults(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (uint64_t)ru.ru_minflt;
}

static unsigned log2_of(unsigned n)
{
    unsigned l = 0;
    while ((1u << l) < n)
        l++;
    return l;
}

unsigned gupswin_table_log2(const struct gupswin_config *cfg)
{
    return cfg->window_log2 + log2_of(cfg->windows);
}

int gupswin_check(const struct gupswin_config *cfg)
{
    if (!cfg || cfg->windows == 0 || cfg->windows > GUPSWIN_MAX_WINDOWS ||
        (cfg->windows & (cfg->windows - 1)))
        return exomem_set_error(EXO_EINVAL, "gupswin: windows must be a power of two, 1..%d",
                                GUPSWIN_MAX_WINDOWS);
    if (cfg->window_log2 < 9 || cfg->window_log2 > 34)
        return exomem_set_error(EXO_EINVAL, "gupswin: a window is 2^9 .. 2^34 words, not 2^%u",
                                cfg->window_log2);
    if (cfg->batch == 0 || cfg->batch > GUPSWIN_MAX_BATCH)
        return exomem_set_error(EXO_EINVAL, "gupswin: a batch is 1..%d updates, not %u",
                                GUPSWIN_MAX_BATCH, cfg->batch);
    return 0;
}

int gupswin_drive(const struct gupswin_config *cfg, const struct gupswin_design *design,
                  uint64_t *pending, unsigned *fill, struct gupswin_result *res)
{
    int rc = gupswin_check(cfg);
    if (rc)
        return rc;
    memset(res, 0, sizeof *res);
    unsigned wlog2 = cfg->window_log2, batch = cfg->batch;
    uint64_t mask = (UINT64_C(1) << gupswin_table_log2(cfg)) - 1;
    for (unsigned w = 0; w < cfg->windows; w++)
        fill[w] = 0;
    uint64_t faults0 = minor_faults(), t0 = gupswin_now_ns();
    uint64_t deadline = cfg->max_ns ? t0 + cfg->max_ns : 0;
    uint64_t v = 1, n = 0, limit = cfg->max_updates ? cfg->max_updates : UINT64_MAX;
    while (n < limit) {
        v = gups_step(v);
        n++;
        unsigned w = (unsigned)((v & mask) >> wlog2);
        uint64_t *mine = pending + (uint64_t)w * batch;
        mine[fill[w]++] = v;
        if (fill[w] < batch)
            continue;
        fill[w] = 0;
        res->batches++;
        if ((rc = design->apply(design->ctx, w, mine, batch, res)) != 0)
            return rc;
        if (deadline && (res->batches & 7) == 0 && gupswin_now_ns() >= deadline)
            break;
    }
    /* What is left: each window's partial batch, so that exactly positions 1..n are applied. */
    for (unsigned w = 0; w < cfg->windows; w++) {
        if (fill[w] == 0)
            continue;
        res->batches++;
        if ((rc = design->apply(design->ctx, w, pending + (uint64_t)w * batch, fill[w], res)) != 0)
            return rc;
        fill[w] = 0;
    }
    res->elapsed_ns = gupswin_now_ns() - t0;
    res->minor_faults = minor_faults() - faults0;
    res->updates = n;
    return 0;
}

void gupswin_params(char *buf, size_t cap, const char *design, const struct gupswin_config *cfg)
{
    snprintf(buf, cap, "\"design\":\"%s\",\"windows\":%u,\"batch\":%u,\"window_bytes\":%llu",
             design, cfg->windows, cfg->batch,
             (unsigned long long)(sizeof(uint64_t) << cfg->window_log2));
}

bool gupswin_emit(FILE *out, const char *design, const struct gupswin_config *cfg,
                  const struct gupswin_result *res, uint64_t errors, const char *note)
{
    char p[256], base[256];
    gupswin_params(p, sizeof p, design, cfg);
    if (errors == UINT64_MAX || !gups_passes_count(errors, res->updates)) {
        fprintf(out, "{\"name\":\"skip\",\"params\":{%s},\"reason\":\"gupswin_failed: "
                "verification found %llu wrong entries after %llu updates\"}\n", p,
                (unsigned long long)errors, (unsigned long long)res->updates);
        fflush(out);
        return false;
    }
    double seconds = (double)res->elapsed_ns / 1e9;
    fprintf(out, "{\"name\":\"gupswin\",\"unit\":\"MUP/s\",\"value\":%.4f,\"params\":{%s}",
            (double)res->updates / seconds / 1e6, p);
    if (strcmp(design, "map") != 0) {
        gupswin_params(base, sizeof base, "map", cfg);
        fprintf(out, ",\"baseline\":\"gupswin\",\"baseline_params\":{%s}", base);
    }
    fprintf(out, ",\"note\":\"%llu updates in %.3f s, %llu batches, %llu window changes, %llu "
            "wrong entries after verification%s%s\"}\n", (unsigned long long)res->updates,
            seconds, (unsigned long long)res->batches, (unsigned long long)res->changes,
            (unsigned long long)errors, note ? "; " : "", note ? note : "");
    fprintf(out, "{\"name\":\"gupswin_changes\",\"unit\":\"changes/s\",\"value\":%.1f,"
            "\"params\":{%s}}\n", (double)res->changes / seconds, p);
    if (res->changes)
        fprintf(out, "{\"name\":\"gupswin_change_time\",\"unit\":\"us\",\"value\":%.3f,"
                "\"params\":{%s}}\n", (double)res->change_ns / 1e3 / (double)res->changes, p);
    /* Everything but the changes, per update: the stream and batching (the same in every
     * design) plus applying the updates, which pays the TLB misses and page walks after a
     * change (this VM has no counters to count them). MP: rank 0's share only. */
    fprintf(out, "{\"name\":\"gupswin_update_time\",\"unit\":\"ns\",\"value\":%.2f,"
            "\"params\":{%s}}\n", (double)(res->elapsed_ns - res->change_ns) /
            (double)res->updates, p);
    fprintf(out, "{\"name\":\"gupswin_faults\",\"unit\":\"faults/kupdate\",\"value\":%.3f,"
            "\"params\":{%s}}\n", 1000.0 * (double)res->minor_faults / (double)res->updates, p);
    fflush(out);
    return true;
}
