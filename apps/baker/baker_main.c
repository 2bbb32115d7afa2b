/* baker: run the binary-trees mutator on Baker's concurrent copying collector (or, with
 * --stw, the stop-the-world baseline) and print what happened: collections, faults, pauses.
 *
 *   baker [--stw] [--no-thread] [--semispace MIB] [--headroom PCT] [--depth N] [--verify]
 */
#include "baker.h"

#include <exomem/error.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    struct baker_config cfg = {.semispace_bytes = 48u << 20, .mode = BAKER_CONCURRENT,
                               .max_pauses = 1u << 20};
    struct lh_bintrees_params p = {4, 14, 16, 128, 4, 64, 1, 12};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--stw"))
            cfg.mode = BAKER_STW;
        else if (!strcmp(a, "--no-thread"))
            cfg.no_thread = 1;
        else if (!strcmp(a, "--verify"))
            cfg.verify_each_gc = 1;
        else if (!strcmp(a, "--semispace") && v && atoi(v) > 0 && ++i)
            cfg.semispace_bytes = (size_t)atoi(v) << 20;
        else if (!strcmp(a, "--headroom") && v && atoi(v) > 0 && atoi(v) < 100 && ++i)
            cfg.headroom_pct = (unsigned)atoi(v);
        else if (!strcmp(a, "--depth") && v && atoi(v) >= 6 && atoi(v) <= 20 && ++i)
            p.max_depth = atoi(v), p.long_depth = atoi(v) + 2;
        else {
            fprintf(stderr, "usage: baker [--stw] [--no-thread] [--semispace MIB] "
                            "[--headroom PCT] [--depth N] [--verify]\n");
            return 2;
        }
    }
    baker_heap *h;
    int rc = baker_create(&cfg, &h);
    if (rc) {
        fprintf(stderr, "baker: %s: %s\n", exomem_strerror(rc), exomem_last_error());
        return 1;
    }
    struct lh_heap_if hi;
    baker_heap_if(h, &hi);
    struct lh_bintrees_result res;
    if (lh_bintrees_run(&hi, &p, &res) != 0) {
        fprintf(stderr, "baker: the heap is too small for this mutator\n");
        return 1;
    }
    long bad = baker_verify(h);
    struct baker_stats st;
    baker_get_stats(h, &st);
    size_t n;
    uint64_t *s = baker_pauses_sorted(h, &n);
    if (!s)
        return 1;
    printf("%s collector: %llu trees (%llu bad), %llu flips, %llu faults, %llu MiB copied\n"
           "pauses: %zu, median %.1f us, p99 %.1f us, max %.1f us, total %.1f ms\n"
           "longest pause by kind: flip %.1f us, fault %.1f us, assist %.1f us, wait %.1f us\n"
           "page scans: %llu by faults, %llu by the thread, %llu assists, %llu finishing\n"
           "heap verification: %ld bad pointers\n",
           cfg.mode == BAKER_STW ? "stop-the-world" : "concurrent",
           (unsigned long long)res.trees, (unsigned long long)res.bad_checks,
           (unsigned long long)st.flips, (unsigned long long)st.faults,
           (unsigned long long)(st.bytes_copied >> 20), n, n ? s[n / 2] / 1e3 : 0.0,
           n ? s[n * 99 / 100] / 1e3 : 0.0, n ? s[n - 1] / 1e3 : 0.0,
           st.pause_total_ns / 1e6, st.max_flip_ns / 1e3, st.max_fault_ns / 1e3,
           st.max_assist_ns / 1e3, st.max_wait_ns / 1e3, (unsigned long long)st.fault_scans,
           (unsigned long long)st.thread_scans, (unsigned long long)st.assist_scans,
           (unsigned long long)st.sync_scans, bad);
    free(s);
    baker_destroy(h);
    return res.bad_checks || bad || st.verify_errors ? 1 : 0;
}
