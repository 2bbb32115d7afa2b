/* Pending allocations (EXOMEM_CARAT_PARTS=track,shadow): a thread's small heap blocks are
 * tracked without the runtime's lock and put into the table in batches
 * (src/carat/pending.c). Checked:
 * - over more allocations than a thread's window (the oldest quarter is indexed each time
 *   it fills): every live block is found with its usable size, and the counts of
 *   allocations and frees are exact;
 * - another thread's blocks it has not handed to the table yet (it waits, alive): a query
 *   finds them; this thread frees one (gone), shrinks one in place (its new size), and
 *   moves one (the move indexes every thread's list first): the pointer to it in another
 *   of its blocks, and the global array's, lead to the copy;
 * - with the argument `ring-unmapped`: a thread whose ring cannot be mapped (the fault
 *   injected into its first mapping): that block goes into the table under the lock, the
 *   next ones onto the ring made then, and all are found and counted exactly.
 * Built with -I src. */
#include "carat_check.h"
#include "os/os.h"

#include <exomem/carat.h>
#include <exomem/error.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#define WORKER_BLOCKS 64
#define MANY 100000   /* more than a thread's window (CARAT_PENDING_CAP) */

static char *worker_blocks[WORKER_BLOCKS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int stage;   /* 1: the worker's blocks are ready; 2: it may end */

static void wait_for(int s)
{
    pthread_mutex_lock(&lock);
    while (stage < s)
        pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
}

static void reach(int s)
{
    pthread_mutex_lock(&lock);
    stage = s;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
}

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < WORKER_BLOCKS; i++) {
        worker_blocks[i] = malloc(200);
        CHECK(worker_blocks[i] != NULL);
        memset(worker_blocks[i], i, 200);
    }
    *(char **)worker_blocks[1] = worker_blocks[0];   /* an escape, kept in the shadow */
    reach(1);
    wait_for(2);   /* alive until the checks are done: its list is not drained at exit */
    return NULL;
}

static void found(const void *p, size_t usable)
{
    struct exo_carat_alloc_info info;
    int rc = exo_carat_alloc_find(p, &info);
    if (rc)
        fprintf(stderr, "pending_blocks: %p: %s\n", p, exomem_last_error());
    CHECK(rc == 0);
    CHECK(info.base == (uintptr_t)p && info.size == usable && info.kind == EXO_CARAT_HEAP);
}

/* Each of blocks[0..n) is found with its usable size; then all are freed, and the frees
 * counted since `before` come to `frees`. */
static void found_then_freed(char **blocks, int n, const struct exo_carat_stats *before,
                             uint64_t frees)
{
    for (int i = 0; i < n; i++)
        found(blocks[i], malloc_usable_size(blocks[i]));
    for (int i = 0; i < n; i++)
        free(blocks[i]);
    struct exo_carat_stats after;
    exo_carat_get_stats(&after);
    CHECK(after.frees_total - before->frees_total == frees);
}

static void one_thread_window(void)
{
    static char *kept[MANY / 7 + 1];
    struct exo_carat_stats before, after;
    exo_carat_get_stats(&before);
    int nkept = 0;
    for (int i = 0; i < MANY; i++) {
        char *p = malloc(16 + (size_t)(i % 5) * 24);
        CHECK(p != NULL);
        p[0] = (char)i;
        if (i % 7 == 0)
            kept[nkept++] = p;
        else
            free(p);
    }
    exo_carat_get_stats(&after);
    CHECK(after.allocs_total - before.allocs_total == MANY);
    CHECK(after.frees_total - before.frees_total == (uint64_t)(MANY - nkept));
    found_then_freed(kept, nkept, &before, MANY);
}

static void another_threads_blocks(void)
{
    pthread_t t;
    CHECK(pthread_create(&t, NULL, worker, NULL) == 0);
    wait_for(1);

    found(worker_blocks[2], malloc_usable_size(worker_blocks[2]));

    char *gone = worker_blocks[3];
    free(gone);
    CHECK(exo_carat_alloc_find(gone, NULL) != 0);   /* freed by this thread: not tracked */

    char *shrunk = realloc(worker_blocks[4], 24);
    CHECK(shrunk != NULL);
    worker_blocks[4] = shrunk;
    found(shrunk, malloc_usable_size(shrunk));

    char *old = worker_blocks[0];
    void *to;
    int rc = exo_carat_move(old, &to, NULL);
    if (rc)
        fprintf(stderr, "pending_blocks: move: %s\n", exomem_last_error());
    CHECK(rc == 0);
    CHECK(worker_blocks[0] == to);
    CHECK(*(char **)worker_blocks[1] == to);
    CHECK(((char *)to)[5] == 0);
    found(to, malloc_usable_size(to));

    reach(2);
    CHECK(pthread_join(t, NULL) == 0);
    for (int i = 0; i < WORKER_BLOCKS; i++)
        if (i != 3)
            free(worker_blocks[i]);
}

#define UNMAPPED_BLOCKS 1000
static char *unmapped_blocks[UNMAPPED_BLOCKS];

static void *unmapped_worker(void *arg)
{
    (void)arg;
    /* A query registers the thread: its record is mapped now, so the next mapping is its
     * ring's, at its first small block. */
    (void)exo_carat_alloc_find(unmapped_blocks, NULL);
    exo_os_fault_arm(EXO_FAULT_MAP, 1, ENOMEM);
    for (int i = 0; i < UNMAPPED_BLOCKS; i++) {
        unmapped_blocks[i] = malloc(48);
        CHECK(unmapped_blocks[i] != NULL);
    }
    bool fired = exo_os_fault_fired();
    exo_os_fault_disarm();
    CHECK(fired);
    return NULL;
}

static void ring_unmapped(void)
{
    struct exo_carat_stats before, after;
    exo_carat_get_stats(&before);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, unmapped_worker, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);   /* its counts are the table's once it has ended */
    exo_carat_get_stats(&after);
    CHECK(after.allocs_total - before.allocs_total == UNMAPPED_BLOCKS);
    found_then_freed(unmapped_blocks, UNMAPPED_BLOCKS, &before, UNMAPPED_BLOCKS);
    CHECK(exo_carat_alloc_find(unmapped_blocks[0], NULL) != 0);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "ring-unmapped") == 0) {
        ring_unmapped();
        printf("pending_blocks ring-unmapped: ok\n");
        return 0;
    }
    one_thread_window();
    another_threads_blocks();
    printf("pending_blocks: ok\n");
    return 0;
}
