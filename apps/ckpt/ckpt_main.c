/* ckpt: checkpoint a running writer concurrently and check the restore.
 *
 *   ckpt [--size MiB] [--engine signal|uffd|auto] [--intervals N] [--write-pct P]
 *        [--dir DIR] [--stop-and-copy]
 *
 * A region of --size MiB is filled, then for each interval the program writes to P% of its
 * pages at random, takes a checkpoint (the first full, the others incremental) and keeps
 * writing while the checkpoint is copied. At the end the chain is restored into a fresh
 * mapping and compared with the region as it was when the last checkpoint began. One line
 * per checkpoint on stdout; exit 0 when the restore is bit-exact. Without --dir the
 * checkpoint files go to a temporary directory under /dev/shm that is removed at the end.
 */
#include "ckpt.h"

#include <exomem/error.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "ckpt: %s: %s (%s)\n", what, exomem_strerror(rc), exomem_last_error());
    exit(1);
}

static void remove_dir(const char *dir)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf -- '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "ckpt: could not remove %s\n", dir);
}

int main(int argc, char **argv)
{
    long size_mib = 64, intervals = 4, pct = 5;
    const char *dir = NULL;
    int stop_and_copy = 0;
    exo_vm_engine engine = EXO_VM_ENGINE_AUTO;
    static const struct option longopts[] = {
        {"size", required_argument, NULL, 's'}, {"engine", required_argument, NULL, 'e'},
        {"intervals", required_argument, NULL, 'n'}, {"write-pct", required_argument, NULL, 'p'},
        {"dir", required_argument, NULL, 'd'}, {"stop-and-copy", no_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    for (int ch; (ch = getopt_long(argc, argv, "", longopts, NULL)) != -1;) {
        switch (ch) {
        case 's': size_mib = atol(optarg); break;
        case 'n': intervals = atol(optarg); break;
        case 'p': pct = atol(optarg); break;
        case 'd': dir = optarg; break;
        case 'S': stop_and_copy = 1; break;
        case 'e':
            engine = !strcmp(optarg, "signal") ? EXO_VM_ENGINE_SIGNAL
                     : !strcmp(optarg, "uffd") ? EXO_VM_ENGINE_UFFD : EXO_VM_ENGINE_AUTO;
            break;
        default:
            fprintf(stderr, "usage: ckpt [--size MiB] [--engine signal|uffd|auto] "
                            "[--intervals N] [--write-pct P] [--dir DIR] [--stop-and-copy]\n");
            return ch == 'h' ? 0 : 2;
        }
    }
    if (size_mib <= 0 || intervals <= 0 || pct < 0 || pct > 100) {
        fprintf(stderr, "ckpt: bad --size, --intervals or --write-pct\n");
        return 2;
    }
    char tmpdir[] = "/dev/shm/exomem-ckpt-XXXXXX";
    if (!dir) {
        if (!mkdtemp(tmpdir)) {
            perror("ckpt: mkdtemp");
            return 1;
        }
        dir = tmpdir;
    }
    size_t len = (size_t)size_mib << 20, ps = exo_vm_page_size(), npages = len / ps;
    char *region = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *shadow = malloc(len);
    if (region == MAP_FAILED || !shadow) {
        perror("ckpt: region");
        return 1;
    }
    uint64_t seed = 0x1234567, word = 1;
    for (size_t i = 0; i < len; i += 8)
        memcpy(region + i, &word, 8), word = rng(&seed);

    struct ckpt *c;
    struct ckpt_options o = {.engine = engine, .flags = CKPT_TRACK};
    int rc = ckpt_create(region, len, dir, &o, &c);
    if (rc)
        die("ckpt_create", rc);
    printf("region %ld MiB, engine %s, %ld%% of the pages written per interval, files in %s\n",
           size_mib, exo_vm_engine_name(ckpt_engine(c)), pct, dir);
    size_t per_interval = npages * (size_t)pct / 100;
    for (long i = 0; i < intervals; i++) {
        for (size_t k = 0; k < per_interval; k++) {
            uint64_t r = rng(&seed);
            region[(r % npages) * ps + (r >> 40) % ps] = (char)r;
        }
        memcpy(shadow, region, len); /* what the checkpoint must hold */
        enum ckpt_kind kind = i == 0 ? CKPT_FULL : CKPT_INCREMENTAL;
        uint64_t t0 = now_ns(), writes = 0;
        if (stop_and_copy) {
            rc = ckpt_stop_and_copy(c, kind);
        } else {
            rc = ckpt_begin(c, kind);
            while (rc == 0 && !ckpt_done(c)) { /* the program keeps running */
                uint64_t r = rng(&seed);
                region[(r % npages) * ps + (r >> 40) % ps] = (char)r;
                writes++;
            }
            if (rc == 0)
                rc = ckpt_wait(c);
        }
        if (rc)
            die("checkpoint", rc);
        struct ckpt_stats st;
        ckpt_get_stats(c, &st);
        printf("checkpoint %ld (%s): %llu pages, %llu bytes, begin pause %.3f ms, "
               "complete after %.3f ms, %llu copy-on-write traps, %llu writes meanwhile\n",
               i, kind == CKPT_FULL ? "full" : "incremental", (unsigned long long)st.last_pages,
               (unsigned long long)st.last_bytes, st.last_begin_ns / 1e6,
               (now_ns() - t0) / 1e6, (unsigned long long)st.last_cow_copies,
               (unsigned long long)writes);
    }
    char *restored = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (restored == MAP_FAILED) {
        perror("ckpt: restore mapping");
        return 1;
    }
    if ((rc = ckpt_restore(dir, restored, len, 0)) != 0)
        die("ckpt_restore", rc);
    int same = memcmp(restored, shadow, len) == 0;
    printf("restore of the chain: %s\n", same ? "bit-exact" : "MISMATCH");
    if ((rc = ckpt_destroy(c)) != 0)
        die("ckpt_destroy", rc);
    if (dir == tmpdir)
        remove_dir(tmpdir);
    munmap(restored, len);
    munmap(region, len);
    free(shadow);
    return same ? 0 : 1;
}
