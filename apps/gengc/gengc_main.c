/* gengc: run the binary-trees mutator (with pointer stores into old objects) on the
 * generational collector, remembered set from DIRTY (--dirty ENGINE: uffd, signal,
 * softdirty, auto) or from a card-marking write barrier (--cards), and print the times.
 *
 *   gengc [--cards | --dirty ENGINE] [--nursery KIB] [--old MIB] [--depth N] [--verify]
 */
#include "gengc.h"

#include <exomem/error.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static exo_vm_engine engine_named(const char *s)
{
    for (int e = EXO_VM_ENGINE_AUTO; e <= EXO_VM_ENGINE_SOFTDIRTY; e++)
        if (!strcmp(s, exo_vm_engine_name((exo_vm_engine)e)))
            return (exo_vm_engine)e;
    return (exo_vm_engine)-1;
}

int main(int argc, char **argv)
{
    struct gengc_config cfg = {.nursery_bytes = 1u << 20, .old_bytes = 64u << 20,
                               .rs = GENGC_RS_DIRTY, .engine = EXO_VM_ENGINE_AUTO};
    struct lh_bintrees_params p = {4, 14, 16, 1024, 1, 64, 3, 8};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--cards"))
            cfg.rs = GENGC_RS_CARDS;
        else if (!strcmp(a, "--dirty") && v && (int)engine_named(v) >= 0 && ++i)
            cfg.rs = GENGC_RS_DIRTY, cfg.engine = engine_named(v);
        else if (!strcmp(a, "--verify"))
            cfg.verify_each_gc = 1;
        else if (!strcmp(a, "--nursery") && v && atoi(v) > 0 && ++i)
            cfg.nursery_bytes = (size_t)atoi(v) << 10;
        else if (!strcmp(a, "--old") && v && atoi(v) > 0 && ++i)
            cfg.old_bytes = (size_t)atoi(v) << 20;
        else if (!strcmp(a, "--depth") && v && atoi(v) >= 6 && atoi(v) <= 20 && ++i)
            p.max_depth = atoi(v), p.long_depth = atoi(v) + 2;
        else {
            fprintf(stderr, "usage: gengc [--cards | --dirty uffd|signal|softdirty|auto] "
                            "[--nursery KIB] [--old MIB] [--depth N] [--verify]\n");
            return 2;
        }
    }
    gengc_heap *h;
    int rc = gengc_create(&cfg, &h);
    if (rc) {
        fprintf(stderr, "gengc: %s: %s\n", exomem_strerror(rc), exomem_last_error());
        return 1;
    }
    struct lh_heap_if hi;
    gengc_heap_if(h, &hi);
    struct lh_bintrees_result res;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (lh_bintrees_run(&hi, &p, &res) != 0) {
        fprintf(stderr, "gengc: the heap is too small for this mutator\n");
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double run = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
    gengc_minor(h);
    long bad = gengc_verify(h);
    struct gengc_stats st;
    gengc_get_stats(h, &st);
    printf("remembered set: %s%s%s\n"
           "%llu trees (%llu bad), digest %016llx\n"
           "run %.1f ms: mutator %.1f ms, %llu minor collections %.1f ms (remembered set "
           "%.1f ms, %llu KiB scanned), %llu major %.1f ms\n"
           "heap verification: %ld bad pointers\n",
           cfg.rs == GENGC_RS_CARDS ? "card-marking write barrier" : "DIRTY, engine ",
           cfg.rs == GENGC_RS_CARDS ? "" : exo_vm_engine_name(gengc_engine(h)), "",
           (unsigned long long)res.trees, (unsigned long long)res.bad_checks,
           (unsigned long long)res.digest, run, run - (st.minor_ns + st.major_ns) / 1e6,
           (unsigned long long)st.minor, st.minor_ns / 1e6, st.rs_ns / 1e6,
           (unsigned long long)(st.rs_bytes >> 10), (unsigned long long)st.major,
           st.major_ns / 1e6, bad);
    gengc_destroy(h);
    return res.bad_checks || bad || st.verify_errors ? 1 : 0;
}
