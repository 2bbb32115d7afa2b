/* bench_carat_guards: what a multi-region guard costs (CARAT, Figure 4).
 *
 * A guard checks an address against the process's protection regions. With one region the
 * check is two compares inline; with more, the runtime searches its sorted array
 * (exo_carat_region_lookup, binary search), or the compiler can lay the search out as a
 * tree of ifs with the bounds as constants (generated at build time, bench/gen/). Measured
 * per guard, for 1 to 1024 regions, on two address streams: random addresses inside the
 * regions (the paper's worst case) and a strided walk through them (its best case).
 * Baseline of each row: the one-region inline compare on the same stream.
 */
#include <exomem/carat.h>
#include "bench_util.h"
#include "carat_regions.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ADDRS 4096   /* a stream small enough to stay in cache: the guard is what we time */

static uintptr_t addrs[ADDRS];

static void make_stream(int n, bool random)
{
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < ADDRS; i++) {
        if (random) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            addrs[i] = CARAT_REGION_BASE(x % (uint64_t)n) + (x >> 20) % (CARAT_REGION_LEN - 8);
        } else {   /* 64-byte steps, moving to the next region every 256 addresses */
            int r = (i / 256) % n;
            addrs[i] = CARAT_REGION_BASE(r) + (uint64_t)(i % 256) * 64;
        }
    }
}

static volatile uintptr_t fast_lo = CARAT_REGION_BASE(0),
                          fast_hi = CARAT_REGION_BASE(0) + CARAT_REGION_LEN * 2 * CARAT_MAX_REGIONS;

/* ns per guard of one method over the stream, rounds times. */
static double run(int method, int k, long rounds, long *sink)
{
    long ok = 0;
    uint64_t t0 = bench_now_ns();
    for (long r = 0; r < rounds; r++)
        for (int i = 0; i < ADDRS; i++) {
            uintptr_t a = addrs[i];
            switch (method) {
            case 0:   /* the one-region inline check a guard compiles to */
                ok += a >= fast_lo && a + 8 <= fast_hi;
                break;
            case 1:
                ok += exo_carat_region_lookup(a, 8) != 0;
                break;
            default:
                ok += carat_iftrees[k](a, 8) != 0;
                break;
            }
        }
    uint64_t t1 = bench_now_ns();
    *sink += ok;
    return (double)(t1 - t0) / ((double)rounds * ADDRS);
}

static void emit(const char *name, double ns, int n, bool random, const char *baseline)
{
    char params[128], bparams[128];
    snprintf(params, sizeof params, "\"regions\":%d,\"pattern\":\"%s\"", n,
             random ? "random" : "strided");
    snprintf(bparams, sizeof bparams, "\"regions\":1,\"pattern\":\"%s\"",
             random ? "random" : "strided");
    bench_emit_against(name, "ns", ns, params, baseline, baseline ? bparams : NULL, NULL);
}

int main(int argc, char **argv)
{
    int repeats = 5;
    bool quick = bench_parse_args(argc, argv, &repeats, 2, NULL);
    long rounds = quick ? 100 : 1000;
    static struct exo_carat_region regions[CARAT_MAX_REGIONS];
    long sink = 0;
    for (int rep = 0; rep < repeats; rep++)
        for (int pattern = 0; pattern < 2; pattern++) {
            bool random = pattern == 0;
            make_stream(1, random);
            emit("carat_guard_inline", run(0, 0, rounds, &sink), 1, random, NULL);
            for (int k = 0, n = 1; n <= CARAT_MAX_REGIONS; k++, n *= 2) {
                for (int i = 0; i < n; i++)
                    regions[i] = (struct exo_carat_region){ CARAT_REGION_BASE(i),
                                                            CARAT_REGION_LEN, CARAT_RIGHTS };
                TRY(exo_carat_set_regions(regions, (size_t)n));
                make_stream(n, random);
                emit("carat_guard_binary", run(1, k, rounds, &sink), n, random,
                     "carat_guard_inline");
                emit("carat_guard_iftree", run(2, k, rounds, &sink), n, random,
                     "carat_guard_inline");
            }
        }
    TRY(exo_carat_set_regions(NULL, 0));
    if (sink == 0)
        bench_die("no address passed its guard", -EXO_EINVAL);
    return 0;
}
