/* bench_app_pstore: the persistent store's commit (apps/pstore) against writing the whole
 * heap.
 *
 *   pstore_commit            commit after writing k distinct random pages of the heap: DIRTY,
 *                            redo log with checksums, two fsyncs, apply, fsync (ms)
 *   pstore_commit_bytes      bytes that commit wrote (log + file)
 *   pstore_whole_heap_write  the baseline: what a store that cannot tell dirty pages must do,
 *                            write the whole heap image and fsync it (not even atomic) (ms)
 *   pstore_msync_shared      reference: the same k pages written through a MAP_SHARED
 *                            mapping and msync(MS_SYNC) of the whole heap: the kernel's own
 *                            dirty tracking, but not atomic (a crash can leave a mix) (ms)
 * Params: heap_mib, dirty_pages, engine (the DIRTY engine). Files live in a temporary
 * directory under /tmp (a real file system, so fsync costs what it costs), removed at the
 * end. --quick: a 64 MiB heap and one repeat.
 */
#include "bench_util.h"
#include "pstore.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define STORE_BASE UINT64_C(0x390000000000)

static struct {
    int repeats;
    bool quick;
} opt = {3, false};

static char dir[64];

static void remove_dir(void)
{
    if (dir[0])
        bench_remove_tree(dir);
}

static void emit(const char *name, const char *unit, double v, const char *params,
                 const char *baseline, const char *baseline_params)
{
    printf("{\"name\":\"%s\",\"unit\":\"%s\",\"value\":%.3f,\"params\":{%s}", name, unit, v,
           params);
    if (baseline)
        printf(",\"baseline\":\"%s\",\"baseline_params\":{%s}", baseline, baseline_params);
    printf("}\n");
    fflush(stdout);
}

/* k distinct pages of [0, n): a stride coprime with n from a random start. */
static size_t nth_page(size_t i, size_t n, uint64_t start)
{
    return (size_t)((start + (uint64_t)i * 7919u) % n);
}

static double whole_heap_write(const char *path, const void *image, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        perror("bench_app_pstore: baseline file");
        exit(1);
    }
    uint64_t t0 = bench_now_ns();
    for (size_t off = 0; off < len;) {
        ssize_t w = pwrite(fd, (const char *)image + off, len - off, (off_t)off);
        if (w <= 0) {
            perror("bench_app_pstore: pwrite");
            exit(1);
        }
        off += (size_t)w;
    }
    if (fsync(fd) != 0)
        perror("bench_app_pstore: fsync");
    double ms = (double)(bench_now_ns() - t0) / 1e6;
    close(fd);
    return ms;
}

static double msync_shared(const char *path, size_t len, size_t k, uint64_t start)
{
    int fd = open(path, O_RDWR);
    char *m = fd < 0 ? MAP_FAILED : mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        perror("bench_app_pstore: shared mapping");
        exit(1);
    }
    size_t ps = exo_vm_page_size(), n = len / ps;
    for (size_t i = 0; i < k; i++)
        m[nth_page(i, n, start) * ps + 17] += 1;
    uint64_t t0 = bench_now_ns();
    if (msync(m, len, MS_SYNC) != 0)
        perror("bench_app_pstore: msync");
    double ms = (double)(bench_now_ns() - t0) / 1e6;
    munmap(m, len);
    close(fd);
    return ms;
}

static void one_engine(exo_vm_engine engine, size_t heap_mib)
{
    size_t len = heap_mib << 20, ps = exo_vm_page_size();
    char path[128], whole[128];
    snprintf(path, sizeof path, "%s/store-%s.db", dir, exo_vm_engine_name(engine));
    snprintf(whole, sizeof whole, "%s/whole-%s.img", dir, exo_vm_engine_name(engine));
    TRY(pstore_create(path, STORE_BASE, len));
    struct pstore *p;
    struct pstore_options o = {.engine = engine};
    TRY(pstore_open(path, &o, &p));
    size_t big_len = len - (2u << 20);
    char *big = pstore_malloc(p, big_len, NULL);
    if (!big) {
        fprintf(stderr, "bench_app_pstore: no room for the array\n");
        exit(1);
    }
    memset(big, 1, big_len); /* the heap has content, and the file gets it */
    TRY(pstore_commit(p));
    size_t big_pages = big_len / ps - 1;
    char *first = (char *)(((uintptr_t)big + ps - 1) / ps * ps);

    char base_params[96];
    snprintf(base_params, sizeof base_params, "\"heap_mib\":%zu,\"engine\":\"%s\"", heap_mib,
             exo_vm_engine_name(engine));
    for (int rep = 0; rep < opt.repeats; rep++)
        emit("pstore_whole_heap_write", "ms", whole_heap_write(whole, pstore_base(p), len),
             base_params, NULL, NULL);

    static const size_t ks_full[] = {1, 16, 256, 4096, 16384}, ks_quick[] = {1, 64, 1024};
    const size_t *ks = opt.quick ? ks_quick : ks_full;
    size_t nks = opt.quick ? 3 : 5;
    uint64_t start = 12345;
    for (size_t ki = 0; ki < nks; ki++) {
        size_t k = ks[ki];
        char params[160];
        snprintf(params, sizeof params, "%s,\"dirty_pages\":%zu", base_params, k);
        for (int rep = 0; rep < opt.repeats; rep++) {
            start = start * 6364136223846793005u + 1442695040888963407u;
            for (size_t i = 0; i < k; i++)
                first[nth_page(i, big_pages, start >> 20) * ps + (size_t)rep] += 1;
            uint64_t t0 = bench_now_ns();
            TRY(pstore_commit(p));
            double ms = (double)(bench_now_ns() - t0) / 1e6;
            struct pstore_stats st;
            pstore_get_stats(p, &st);
            if (st.last_commit_pages < k || st.last_commit_pages > k + 2) {
                fprintf(stderr, "bench_app_pstore: %zu pages written, %llu committed\n", k,
                        (unsigned long long)st.last_commit_pages);
                exit(1);
            }
            emit("pstore_commit", "ms", ms, params, "pstore_whole_heap_write", base_params);
            emit("pstore_commit_bytes", "bytes", (double)st.last_commit_bytes, params, NULL, NULL);
            emit("pstore_msync_shared", "ms", msync_shared(whole, len, k, start >> 20), params,
                 "pstore_whole_heap_write", base_params);
        }
    }
    pstore_close(p);
    unlink(path);
    unlink(whole);
    char log[160];
    snprintf(log, sizeof log, "%s.log", path);
    unlink(log);
}

int main(int argc, char **argv)
{
    opt.quick = bench_parse_args(argc, argv, &opt.repeats, 1, NULL);
    snprintf(dir, sizeof dir, "/tmp/exomem-bench-pstore-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("bench_app_pstore: mkdtemp");
        return 1;
    }
    atexit(remove_dir);
    exo_vm_engine engines[] = {EXO_VM_ENGINE_SIGNAL, EXO_VM_ENGINE_UFFD};
    for (size_t e = 0; e < 2; e++) {
        const char *why = NULL;
        if (exo_vm_engine_supported(engines[e], EXO_VM_TRACK_DIRTY, &why) != 0) {
            printf("{\"name\":\"skip\",\"params\":{\"engine\":\"%s\"},\"reason\":\"%s\"}\n",
                   exo_vm_engine_name(engines[e]), why ? why : "not supported");
            continue;
        }
        one_engine(engines[e], opt.quick ? 64 : 256);
    }
    return 0;
}
