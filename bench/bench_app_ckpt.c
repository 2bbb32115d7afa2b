/* bench_app_ckpt: concurrent checkpointing (apps/ckpt) against stop-and-copy.
 *
 * A region of size_mib is filled. The program (this thread) writes to a working set of
 * write_pct% of the region's pages, spread over it: between checkpoints it writes each of
 * those pages once; while a checkpoint is copied it keeps writing one word into a random
 * page of the working set, then doing about a microsecond of other work, timing every
 * store. Per configuration (size_mib, engine, write_pct) and repeat:
 *   ckpt_full_stop_copy_pause     program stopped while the whole region is written (ms);
 *                                 the baseline of the pauses below
 *   ckpt_full_concurrent_pause    ckpt_begin (write-protect) + the time the mutator's stores
 *                                 spent in traps while the copier ran (ms)
 *   ckpt_full_concurrent_longest  the longest single stop the mutator saw (ms): ckpt_begin or
 *                                 one trapped store
 *   ckpt_full_concurrent_begin    ckpt_begin alone: write-protecting the region (ms)
 *   ckpt_no_checkpoint_stalls     the noise floor: the mutator's stores over 1 us when it
 *                                 runs as long with no checkpoint (preemption, interrupts)
 *   ckpt_incr_concurrent_pause    the same for an incremental checkpoint, after the mutator
 *                                 wrote its working set once
 *   ckpt_incr_stop_copy_pause     stop-and-copy of such an increment
 *   ckpt_full_bytes, ckpt_incr_bytes   bytes each checkpoint wrote (incr: baseline full)
 * Each increment holds just the working set: what the mutator wrote during the full
 * concurrent checkpoint is flushed by an unmeasured incremental checkpoint first. A store
 * counts as trapped when it took over 1 us (an untrapped one takes well under 0.1).
 * Checkpoint files go to the run's private registry directory in /dev/shm (removed at the
 * end however the run ends), so this measures the mechanism, not a disk. The signal engine
 * runs up to 256 MiB only: its per-page protection splits the mapping, one VMA per run of
 * dirty pages, and 1 GiB at 10% would come near the kernel's map count limit. 1 GiB runs
 * once per write_pct whatever --repeats says (a full copy takes seconds). --quick: 64 MiB,
 * one repeat.
 */
#include "bench_util.h"
#include "ckpt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define STALL_NS 1000

static struct {
    int repeats;
    bool quick;
} opt = {3, false};

static char dir[256];
static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* What the mutator saw while a checkpoint was copied. */
struct stalls {
    uint64_t total_ns, longest_ns, trapped, stores;
};

static volatile uint64_t sink;

/* The program's working set: write_pct% of the region's pages, spread over it (a stride
 * coprime with the page count from a fixed start). All its writes go there. */
static size_t hot_page(size_t i, size_t npages)
{
    return (size_t)((12345 + (uint64_t)i * 7919u) % npages);
}

static void mutate(struct ckpt *c, uint64_t deadline, char *region, size_t npages, size_t hot,
                   struct stalls *s);

/* Run the mutator until the checkpoint is complete: a store into a random page of the
 * working set, then about a microsecond of other work. */
static void mutate_until_done(struct ckpt *c, char *region, size_t npages, size_t hot,
                              struct stalls *s)
{
    mutate(c, 0, region, npages, hot, s);
}

/* The mutator, until the checkpoint c is complete or (c NULL) until `deadline`. */
static void mutate(struct ckpt *c, uint64_t deadline, char *region, size_t npages, size_t hot,
                   struct stalls *s)
{
    size_t ps = exo_vm_page_size();
    *s = (struct stalls){0};
    while (c ? !ckpt_done(c) : bench_now_ns() < deadline) {
        uint64_t r = rng();
        char *at = region + hot_page(r % hot, npages) * ps + ((r >> 40) % ps & ~(size_t)7);
        uint64_t t0 = bench_now_ns();
        *(volatile uint64_t *)(void *)at = r;
        uint64_t d = bench_now_ns() - t0;
        s->stores++;
        if (d > STALL_NS) {
            s->trapped++;
            s->total_ns += d;
            if (d > s->longest_ns)
                s->longest_ns = d;
        }
        uint64_t x = r;
        for (int i = 0; i < 300; i++)
            x = x * 6364136223846793005u + 1442695040888963407u;
        sink = x;
    }
}

/* One interval of the program: every page of the working set written once. */
static void write_hot(char *region, size_t npages, size_t hot)
{
    size_t ps = exo_vm_page_size();
    for (size_t i = 0; i < hot; i++)
        region[hot_page(i, npages) * ps + rng() % ps] += 1;
}

static void one_config(long size_mib, exo_vm_engine engine, int pct)
{
    size_t len = (size_t)size_mib << 20, npages = len / exo_vm_page_size();
    size_t hot = npages * (size_t)pct / 100;
    char params[160];
    snprintf(params, sizeof params, "\"size_mib\":%ld,\"engine\":\"%s\",\"write_pct\":%d",
             size_mib, exo_vm_engine_name(engine), pct);
    int repeats = size_mib >= 1024 ? 1 : opt.repeats;
    for (int rep = 0; rep < repeats; rep++) {
        char *region = mmap(NULL, len, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        if (region == MAP_FAILED) {
            perror("bench_app_ckpt: mmap");
            exit(1);
        }
        for (size_t i = 0; i < len; i += 64)
            region[i] = (char)i;
        struct ckpt *c;
        struct ckpt_options o = {.engine = engine, .flags = CKPT_TRACK};
        TRY(ckpt_create(region, len, dir, &o, &c));
        struct ckpt_stats st;
        struct stalls s;

        uint64_t t0 = bench_now_ns();
        TRY(ckpt_stop_and_copy(c, CKPT_FULL));
        double stop_ms = (double)(bench_now_ns() - t0) / 1e6;
        bench_emit("ckpt_full_stop_copy_pause", "ms", stop_ms, params, NULL, NULL);

        t0 = bench_now_ns();
        TRY(ckpt_begin(c, CKPT_FULL));
        uint64_t begin_ns = bench_now_ns() - t0;
        mutate_until_done(c, region, npages, hot, &s);
        TRY(ckpt_wait(c));
        ckpt_get_stats(c, &st);
        char note[160];
        snprintf(note, sizeof note, "%llu of %llu stores trapped; copy took %.1f ms",
                 (unsigned long long)s.trapped, (unsigned long long)s.stores,
                 (double)st.last_total_ns / 1e6);
        bench_emit("ckpt_full_concurrent_pause", "ms", (double)(begin_ns + s.total_ns) / 1e6,
                   params, "ckpt_full_stop_copy_pause", note);
        bench_emit("ckpt_full_concurrent_longest", "ms",
                   (double)(begin_ns > s.longest_ns ? begin_ns : s.longest_ns) / 1e6, params,
                   "ckpt_full_stop_copy_pause", NULL);
        bench_emit("ckpt_full_concurrent_begin", "ms", (double)begin_ns / 1e6, params,
                   "ckpt_full_stop_copy_pause", NULL);
        /* The noise floor: the same mutator for as long, with no checkpoint running; its
         * "stalls" are preemptions and interrupts (the working set stays unprotected). */
        TRY(ckpt_stop_and_copy(c, CKPT_INCREMENTAL));
        write_hot(region, npages, hot);
        mutate(NULL, bench_now_ns() + st.last_total_ns, region, npages, hot, &s);
        snprintf(note, sizeof note, "%llu of %llu stores over 1 us",
                 (unsigned long long)s.trapped, (unsigned long long)s.stores);
        bench_emit("ckpt_no_checkpoint_stalls", "ms", (double)s.total_ns / 1e6, params,
                   "ckpt_full_stop_copy_pause", note);
        bench_emit("ckpt_full_bytes", "bytes", (double)st.last_bytes, params, NULL, NULL);

        /* The increments below hold only write_pct% of the pages: flush what the mutator
         * wrote during the full checkpoint first. */
        TRY(ckpt_stop_and_copy(c, CKPT_INCREMENTAL));
        write_hot(region, npages, hot);
        t0 = bench_now_ns();
        TRY(ckpt_stop_and_copy(c, CKPT_INCREMENTAL));
        bench_emit("ckpt_incr_stop_copy_pause", "ms", (double)(bench_now_ns() - t0) / 1e6,
                   params, "ckpt_full_stop_copy_pause", NULL);

        write_hot(region, npages, hot);
        t0 = bench_now_ns();
        TRY(ckpt_begin(c, CKPT_INCREMENTAL));
        begin_ns = bench_now_ns() - t0;
        mutate_until_done(c, region, npages, hot, &s);
        TRY(ckpt_wait(c));
        ckpt_get_stats(c, &st);
        snprintf(note, sizeof note, "%llu dirty pages; %llu of %llu stores trapped",
                 (unsigned long long)st.last_pages, (unsigned long long)s.trapped,
                 (unsigned long long)s.stores);
        bench_emit("ckpt_incr_concurrent_pause", "ms", (double)(begin_ns + s.total_ns) / 1e6,
                   params, "ckpt_full_stop_copy_pause", note);
        bench_emit("ckpt_incr_bytes", "bytes", (double)st.last_bytes, params, "ckpt_full_bytes",
                   NULL);
        TRY(ckpt_destroy(c));
        munmap(region, len);
    }
}

static int measure_all(void);

int main(int argc, char **argv)
{
    opt.quick = bench_parse_args(argc, argv, &opt.repeats, 1, NULL);
    return bench_run_in_private_registry(measure_all);
}

/* In the worker: the checkpoint files live inside the private registry directory, which the
 * parent removes however the worker ends. */
static int measure_all(void)
{
    snprintf(dir, sizeof dir, "%s/ckpt", bench_root());
    if (mkdir(dir, 0700) != 0) {
        perror("bench_app_ckpt: mkdir");
        return 1;
    }
    static const long sizes[] = {64, 256, 1024};
    static const int pcts[] = {1, 10};
    exo_vm_engine engines[] = {EXO_VM_ENGINE_SIGNAL, EXO_VM_ENGINE_UFFD};
    for (size_t e = 0; e < 2; e++) {
        const char *why = NULL;
        if (exo_vm_engine_supported(engines[e], 0, &why) != 0) {
            printf("{\"name\":\"skip\",\"params\":{\"engine\":\"%s\"},\"reason\":\"%s\"}\n",
                   exo_vm_engine_name(engines[e]), why ? why : "not supported");
            continue;
        }
        for (size_t s = 0; s < (opt.quick ? 1 : 3); s++) {
            if (engines[e] == EXO_VM_ENGINE_SIGNAL && sizes[s] > 256)
                continue;
            for (size_t p = 0; p < 2; p++)
                one_config(sizes[s], engines[e], pcts[p]);
        }
    }
    return 0;
}
