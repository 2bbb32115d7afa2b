/* bench_app_swizzle: extending addressability by pointer swizzling at page-fault time
 * (apps/swizzle), against the way without it: the whole store mapped, every pointer
 * decoded in software on each use.
 *
 * A persistent search tree (256 MiB; --quick 64 MiB), random lookups. Peers:
 *   swizzle    through a window 1/16 of the store, in sessions (each as long as the window
 *              has room), pointers swizzled once per page read in; the cost of opening and
 *              closing sessions included
 *   decode     the store file mmap'd whole (needs address space for all of it), each hop
 *              decoding the persistent pointer (base + offset)
 * and, to show what a swizzled pointer costs once its page is in, 10 lookups repeated
 * inside one session (warm). Output: lookups per second (decode is the baseline) and the
 * address space each needs.
 */
#include "bench_util.h"

#include "swizzle.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define MIB ((uint64_t)1 << 20)

static char path[] = "/var/tmp/exomem-bench-swizzle-XXXXXX";

static void remove_store(void)
{
    unlink(path);
}

static uint64_t next_key(uint64_t *rng, uint64_t nodes)
{
    *rng ^= *rng << 13, *rng ^= *rng >> 7, *rng ^= *rng << 17;
    return (*rng % nodes) * 2;
}

/* The decoding lookup: the store mapped at base, pointers decoded on every hop. */
static const uint64_t *decode_find(const char *base, uint64_t key)
{
    uint64_t at = 0; /* the root: page 0, offset 0 */
    for (;;) {
        const uint64_t *n = (const uint64_t *)(base + at);
        if (n[0] == key)
            return n;
        uint64_t p = key < n[0] ? n[2] : n[3];
        if (!p)
            return NULL;
        at = p & ~SWZ_TAG; /* page << 12 | offset: the byte offset */
    }
}

/* One lookup of `key` by the decoding way (ctx: the mapped store) or through the window
 * (ctx: the session): 1 if the value found is wrong or missing. */
static int decode_wrong(void *ctx, uint64_t key)
{
    const uint64_t *n = decode_find(ctx, key);
    return !n || n[1] != key * 3;
}

static int swizzled_wrong(void *ctx, uint64_t key)
{
    const struct swz_node *n = swz_tree_find(swz_root(ctx), key);
    return !n || n->value != key * 3;
}

/* Seconds for `count` lookups of the same 10 keys over and over (the second of two passes:
 * the first brings their pages in); wrong answers are added to *bad. */
static double warm_seconds(int (*wrong)(void *, uint64_t), void *ctx, uint64_t nodes,
                           uint64_t count, uint64_t *bad)
{
    uint64_t t0 = 0;
    for (int pass = 0; pass < 2; pass++) {
        uint64_t rng = 7;
        t0 = bench_now_ns();
        for (uint64_t i = 0; i < count; i++) {
            if (i % 10 == 0)
                rng = 7;
            *bad += (uint64_t)wrong(ctx, next_key(&rng, nodes));
        }
    }
    return (double)(bench_now_ns() - t0) / 1e9;
}

int main(int argc, char **argv)
{
    int repeats = 3;
    bool quick = bench_parse_args(argc, argv, &repeats, 1, NULL);
    uint64_t store_bytes = quick ? 64 * MIB : 256 * MIB, lookups = quick ? 5000 : 20000;
    uint64_t nodes = store_bytes / sizeof(struct swz_node), window = store_bytes / 16;
    int fd = mkstemp(path);
    if (fd < 0)
        bench_die("mkstemp", -EXO_EIO);
    close(fd);
    atexit(remove_store); /* also when bench_die exits */
    TRY(swz_build_tree(path, nodes));
    char params[160];
    for (int r = 0; r < repeats; r++) {
        /* decode: the whole store mapped */
        fd = open(path, O_RDONLY);
        char *map = mmap(NULL, store_bytes, PROT_READ, MAP_SHARED, fd, 0);
        close(fd);
        if (map == MAP_FAILED)
            bench_die("mmap", -EXO_ENOMEM);
        uint64_t rng = 7, bad = 0, t0 = bench_now_ns();
        for (uint64_t i = 0; i < lookups; i++)
            bad += (uint64_t)decode_wrong(map, next_key(&rng, nodes));
        double decode_s = (double)(bench_now_ns() - t0) / 1e9;
        /* decode-warm: the same 10 keys again and again, for swizzle-warm below */
        uint64_t warm = lookups * 10;
        double decode_warm_s = warm_seconds(decode_wrong, map, nodes, warm, &bad);
        munmap(map, store_bytes);
        snprintf(params, sizeof params, "\"peer\":\"decode-warm\",\"store_mib\":%llu",
                 (unsigned long long)(store_bytes / MIB));
        bench_emit("swizzle_lookups", "lookups/s", (double)warm / decode_warm_s, params, NULL,
                   "10 keys repeated, pointers decoded on each hop");
        snprintf(params, sizeof params, "\"peer\":\"decode\",\"store_mib\":%llu",
                 (unsigned long long)(store_bytes / MIB));
        bench_emit("swizzle_lookups", "lookups/s", (double)lookups / decode_s, params, NULL,
                   "whole store mapped, pointers decoded on each hop");

        /* swizzle: sessions through the window */
        uint64_t done = 0, sessions = 0;
        rng = 7;
        t0 = bench_now_ns();
        while (done < lookups) {
            swz *s;
            TRY(swz_open(path, window, window / 4, &s));
            sessions++;
            for (; done < lookups && swz_window_free(s) > 128; done++)
                bad += (uint64_t)swizzled_wrong(s, next_key(&rng, nodes));
            TRY(swz_close(s));
        }
        double swz_s = (double)(bench_now_ns() - t0) / 1e9;
        snprintf(params, sizeof params, "\"peer\":\"swizzle\",\"store_mib\":%llu,"
                 "\"window_mib\":%llu,\"sessions\":%llu", (unsigned long long)(store_bytes / MIB),
                 (unsigned long long)(window / MIB), (unsigned long long)sessions);
        printf("{\"name\":\"swizzle_lookups\",\"unit\":\"lookups/s\",\"value\":%.1f,\"params\":{%s},"
               "\"baseline\":\"swizzle_lookups\",\"baseline_params\":{\"peer\":\"decode\","
               "\"store_mib\":%llu}}\n", (double)lookups / swz_s, params,
               (unsigned long long)(store_bytes / MIB));

        /* warm: one session, the same 10 keys again and again (their pages fit the window and
         * the budget) */
        swz *s;
        TRY(swz_open(path, window, window / 4, &s));
        double warm_s = warm_seconds(swizzled_wrong, s, nodes, warm, &bad);
        TRY(swz_close(s));
        snprintf(params, sizeof params, "\"peer\":\"swizzle-warm\",\"store_mib\":%llu",
                 (unsigned long long)(store_bytes / MIB));
        printf("{\"name\":\"swizzle_lookups\",\"unit\":\"lookups/s\",\"value\":%.1f,\"params\":{%s},"
               "\"baseline\":\"swizzle_lookups\",\"baseline_params\":{\"peer\":\"decode-warm\","
               "\"store_mib\":%llu}}\n", (double)warm / warm_s, params,
               (unsigned long long)(store_bytes / MIB));
        if (bad)
            bench_die("a lookup found the wrong value", -EXO_EIO);
    }
    snprintf(params, sizeof params, "\"peer\":\"swizzle\"");
    bench_emit("swizzle_address_space_mib", "MiB", (double)window / MIB, params, NULL,
               "the window");
    snprintf(params, sizeof params, "\"peer\":\"decode\"");
    bench_emit("swizzle_address_space_mib", "MiB", (double)store_bytes / MIB, params, NULL,
               "the whole store");
    return 0;
}
