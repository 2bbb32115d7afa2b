/* exomem_heap_probe: checks, from inside a program run by `exomem run --heap-segment`, that
 * the whole malloc family is served from the heap segment [EXOMEM_HEAP_BASE, +SIZE).
 *
 *   exomem_heap_probe            malloc family, 4 threads, fork (copy-on-write heap), a
 *                                request larger than the segment; exit 0 when all is well
 *   exomem_heap_probe --exhaust  allocate 1 MiB blocks until malloc fails; exit 0 when it
 *                                fails with ENOMEM before more than the segment was handed out
 *   exomem_heap_probe --forks N  fork N children that each must see the parent's heap (its
 *                                header and a filled block) without writing it; prints
 *                                "forks: N of N saw the heap"
 *
 * Each failed check prints "probe: FAIL ..." on stderr; the exit status is 1 if any failed.
 */
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static uintptr_t seg_lo, seg_hi;
static int failures;
static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;

#define CHECK(cond)                                                                          \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            pthread_mutex_lock(&fail_lock);                                                  \
            fprintf(stderr, "probe: FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);           \
            failures++;                                                                      \
            pthread_mutex_unlock(&fail_lock);                                                \
        }                                                                                    \
    } while (0)

/* Does the whole block [p, p+n) lie inside the heap segment? */
static int in_segment(const void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p;
    return p && a >= seg_lo && a <= seg_hi && n <= seg_hi - a;
}

static void check_family(void)
{
    char *a = malloc(100);
    CHECK(in_segment(a, 100));
    CHECK(malloc_usable_size(a) >= 100);
    memset(a, 'a', 100);

    int *z = calloc(1000, sizeof *z);
    CHECK(in_segment(z, 1000 * sizeof *z));
    int zero = 1;
    for (int i = 0; i < 1000; i++)
        zero &= z[i] == 0;
    CHECK(zero);

    a = realloc(a, 100000);   /* grows, keeps the contents */
    CHECK(in_segment(a, 100000));
    CHECK(a && a[0] == 'a' && a[99] == 'a');
    a = realloc(a, 10);
    CHECK(in_segment(a, 10) && a[9] == 'a');

    void *p = NULL;
    CHECK(posix_memalign(&p, 4096, 5000) == 0);
    CHECK(in_segment(p, 5000) && (uintptr_t)p % 4096 == 0);
    CHECK(posix_memalign(&p, 3, 10) == EINVAL);   /* not a power of two */

    void *b = aligned_alloc(64, 640);
    CHECK(in_segment(b, 640) && (uintptr_t)b % 64 == 0);
    void *c = memalign(256, 1000);
    CHECK(in_segment(c, 1000) && (uintptr_t)c % 256 == 0);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void *v = valloc(10);
    CHECK(in_segment(v, 10) && (uintptr_t)v % page == 0);
    void *pv = pvalloc(page + 1);
    CHECK(in_segment(pv, 2 * page) && (uintptr_t)pv % page == 0);
    CHECK(malloc_usable_size(pv) >= 2 * page);

    /* Larger than the segment: NULL with ENOMEM; a failed realloc keeps the block. */
    errno = 0;
    CHECK(malloc(seg_hi - seg_lo + 1) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(realloc(a, seg_hi - seg_lo) == NULL && errno == ENOMEM);
    CHECK(a[0] == 'a' && a[9] == 'a');
    errno = 0;
    volatile size_t huge = SIZE_MAX / 2;
    CHECK(calloc(huge, 4) == NULL && errno == ENOMEM);

    free(a);
    free(z);
    free(p);
    free(b);
    free(c);
    free(v);
    free(pv);
    free(NULL);
}

/* One thread: blocks of varied sizes, each filled with its own byte and verified before it
 * is freed, so that two threads handed overlapping memory would be noticed. */
static void *churn(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    enum { SLOTS = 64, ROUNDS = 20000 };
    unsigned char *blk[SLOTS] = {0};
    size_t len[SLOTS] = {0};
    unsigned char tag[SLOTS] = {0};
    for (int r = 0; r < ROUNDS; r++) {
        int s = (int)(rand_r(&seed) % SLOTS);
        if (blk[s]) {
            int ok = 1;
            for (size_t i = 0; i < len[s]; i += 1 + len[s] / 64)
                ok &= blk[s][i] == tag[s];
            ok &= blk[s][len[s] - 1] == tag[s];
            CHECK(ok);
            free(blk[s]);
        }
        len[s] = 1 + rand_r(&seed) % (r % 7 == 0 ? 65536 : 512);
        tag[s] = (unsigned char)rand_r(&seed);
        blk[s] = r % 5 == 0 ? calloc(1, len[s]) : malloc(len[s]);
        CHECK(in_segment(blk[s], len[s]));
        if (blk[s])
            memset(blk[s], tag[s], len[s]);
        else
            len[s] = 0;
    }
    for (int s = 0; s < SLOTS; s++)
        free(blk[s]);
    return NULL;
}

static void check_threads(void)
{
    pthread_t t[4];
    for (uintptr_t i = 0; i < 4; i++)
        CHECK(pthread_create(&t[i], NULL, churn, (void *)(i + 1)) == 0);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
}

/* A forked child works on a copy of the heap: its writes and allocations leave the
 * parent's blocks alone. */
static void check_fork(void)
{
    char *shared = malloc(4096);
    CHECK(in_segment(shared, 4096));
    if (!shared)
        return;
    memset(shared, 'P', 4096);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        int ok = shared[0] == 'P' && shared[4095] == 'P';
        memset(shared, 'C', 4096);
        free(shared);
        for (int i = 0; i < 1000; i++) {
            char *q = malloc(1000);
            ok &= in_segment(q, 1000);
            if (q)
                memset(q, 'c', 1000);
        }
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(shared[0] == 'P' && shared[4095] == 'P');
    char *after = malloc(1000);   /* the parent's heap is still sound */
    CHECK(in_segment(after, 1000));
    free(after);
    free(shared);
}

/* N forked children each read a block the parent filled, and the heap's first bytes: a child
 * that fork() left without the heap's pages sees zeros instead (docs/launcher.md). The
 * children do not write, so no page is copied and N can be large even on 1 GiB pages. */
static void check_forks(int n)
{
    char *block = malloc(1 << 16);
    CHECK(in_segment(block, 1 << 16));
    if (!block)
        return;
    memset(block, 'F', 1 << 16);
    uint64_t head;
    memcpy(&head, (const void *)seg_lo, sizeof head);
    CHECK(head != 0);
    int saw = 0;
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid < 0) {
            CHECK(pid >= 0);
            break;
        }
        if (pid == 0) {
            uint64_t child_head;
            memcpy(&child_head, (const void *)seg_lo, sizeof child_head);
            _exit(child_head == head && block[0] == 'F' && block[(1 << 16) - 1] == 'F' ? 0 : 1);
        }
        int status = 0;
        CHECK(waitpid(pid, &status, 0) == pid);
        saw += WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    CHECK(saw == n);
    printf("forks: %d of %d saw the heap\n", saw, n);
    free(block);
}

/* Fill the segment with 1 MiB blocks: malloc must fail with ENOMEM, not hand out more. */
static void exhaust(void)
{
    size_t got = 0;
    for (;;) {
        errno = 0;
        char *p = malloc(1 << 20);
        if (!p)
            break;
        CHECK(in_segment(p, 1 << 20));
        p[0] = p[(1 << 20) - 1] = 1;
        got += 1 << 20;
    }
    CHECK(errno == ENOMEM);
    CHECK(got > 0 && got <= seg_hi - seg_lo);
    printf("ENOMEM after %zu MiB\n", got >> 20);
}

int main(int argc, char **argv)
{
    const char *base = getenv("EXOMEM_HEAP_BASE"), *size = getenv("EXOMEM_HEAP_SIZE");
    if (!base || !size) {
        fprintf(stderr, "probe: run me under 'exomem run --heap-segment SIZE'\n");
        return 2;
    }
    seg_lo = (uintptr_t)strtoull(base, NULL, 0);
    seg_hi = seg_lo + (uintptr_t)strtoull(size, NULL, 0);
    if (argc > 1 && !strcmp(argv[1], "--exhaust")) {
        exhaust();
    } else if (argc > 2 && !strcmp(argv[1], "--forks")) {
        check_forks(atoi(argv[2]));
    } else {
        check_family();
        check_threads();
        check_fork();
    }
    if (!failures && argc <= 1)
        printf("probe: ok\n");
    return failures ? 1 : 0;
}
