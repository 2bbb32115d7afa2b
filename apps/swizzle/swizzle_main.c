/* swizzle: lookups in a persistent search tree much larger than the address window they
 * go through (pointer swizzling at page-fault time). Builds the store if asked, then runs
 * sessions of random lookups, each as long as the window has room, and checks every
 * answer. Prints one JSON line; exits 1 on a wrong answer.
 *
 *   swizzle --store PATH [--build NODES] [--window-mib W] [--budget-mib B] [--lookups N]
 */
#include "swizzle.h"

#include <exomem/exomem.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

int main(int argc, char **argv)
{
    const char *path = NULL;
    uint64_t build = 0, window_mib = 16, budget_mib = 4, lookups = 20000;
    static const struct option opts[] = {
        {"store", required_argument, NULL, 's'}, {"build", required_argument, NULL, 'n'},
        {"window-mib", required_argument, NULL, 'w'}, {"budget-mib", required_argument, NULL, 'b'},
        {"lookups", required_argument, NULL, 'l'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 's': path = optarg; break;
        case 'n': build = strtoull(optarg, NULL, 10); break;
        case 'w': window_mib = strtoull(optarg, NULL, 10); break;
        case 'b': budget_mib = strtoull(optarg, NULL, 10); break;
        case 'l': lookups = strtoull(optarg, NULL, 10); break;
        case 'h':
            printf("usage: swizzle --store PATH [--build NODES] [--window-mib W] "
                   "[--budget-mib B] [--lookups N]\n");
            return 0;
        default: return 2;
        }
    }
    if (!path)
        return 2;
    if (build && swz_build_tree(path, build) != 0) {
        fprintf(stderr, "swizzle: %s\n", exomem_last_error());
        return 1;
    }
    struct stat st;
    if (stat(path, &st) != 0)
        return 1;
    uint64_t nodes = build ? build : (uint64_t)st.st_size / sizeof(struct swz_node);
    uint64_t done = 0, bad = 0, sessions = 0, faults = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint64_t rng = 2463534242u;
    while (done < lookups) {
        swz *s;
        if (swz_open(path, window_mib << 20, budget_mib << 20, &s) != 0) {
            fprintf(stderr, "swizzle: %s\n", exomem_last_error());
            return 1;
        }
        sessions++;
        /* A lookup reserves at most two window pages per level: stop with room for one. */
        while (done < lookups && swz_window_free(s) > 128) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            uint64_t key = (rng % nodes) * 2;
            struct swz_node *n = swz_tree_find(swz_root(s), key);
            bad += !n || n->value != key * 3;
            done++;
        }
        struct swz_stats ss;
        swz_get_stats(s, &ss);
        faults += ss.faults;
        swz_close(s);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("{\"store_mib\":%.0f,\"window_mib\":%llu,\"lookups\":%llu,\"sessions\":%llu,"
           "\"faults\":%llu,\"lookups_per_s\":%.0f,\"bad\":%llu}\n",
           (double)st.st_size / (1 << 20), (unsigned long long)window_mib,
           (unsigned long long)done, (unsigned long long)sessions,
           (unsigned long long)faults, (double)done / secs, (unsigned long long)bad);
    return bad ? 1 : 0;
}
