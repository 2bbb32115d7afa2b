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
 *   next ones onto the ring made then, and all are found and counted exactly;
 * - with the argument `strays`: stores of pointers to another thread's pending blocks into
 *   a slot that is not 8-byte aligned (a packed struct's field: the runtime's escape sets,
 *   not the shadow). One such block is moved, and the slot leads to the copy; then that
 *   thread makes and frees blocks while this one stores pointers to them as fast as it
 *   can. The escape sets the runtime made for them all go when the blocks do: the table's
 *   memory is what it was after the same rounds without the stores.
 * Built with -I src. */
#include "carat_check.h"
#include "os/os.h"

#include <exomem/carat.h>
#include <exomem/error.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
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

/* A pointer at an odd address: its store calls the runtime (an unaligned escape). */
struct __attribute__((packed)) odd_slot {
    char tag;
    char *to;
};

#define STRAY_ROUNDS 100000
static char *_Atomic stray_current;
static _Atomic int stray_round, stray_taken;   /* the round published, and taken */
static _Atomic int stray_done;

/* STRAY_ROUNDS blocks made, published in stray_current, and freed as soon as the main
 * thread has taken the pointer (with_stores), as its store of it begins. Both sides yield
 * while they wait: with both threads on one processor (a loaded machine), a hand-over by
 * spinning alone took a time slice each, and 100,000 of them did not end in two minutes. */
static void stray_rounds(bool with_stores)
{
    for (int i = 0; i < STRAY_ROUNDS; i++) {
        char *p = malloc(64);
        CHECK(p != NULL);
        atomic_store(&stray_current, p);
        atomic_store(&stray_round, i + 1);
        while (with_stores && atomic_load(&stray_taken) != i + 1)
            exo_os_yield();   /* on one processor, spinning would wait out a time slice */
        atomic_store(&stray_current, NULL);
        free(p);
    }
}

static void *stray_worker(void *arg)
{
    (void)arg;
    char *kept = malloc(100);   /* pending on this thread's ring while the main thread moves it */
    CHECK(kept != NULL);
    memset(kept, 7, 100);
    atomic_store(&stray_current, kept);
    reach(1);
    wait_for(2);
    atomic_store(&stray_current, NULL);
    free(kept);
    stray_rounds(false);   /* with no stores: the table's indexes grow to what the rounds need */
    atomic_store(&stray_round, 0);
    reach(3);
    wait_for(4);
    stray_rounds(true);
    atomic_store(&stray_done, 1);
    return NULL;
}

static void strays(void)
{
    char *holder = malloc(1 + sizeof(struct odd_slot));
    CHECK(holder != NULL);
    struct odd_slot *odd = (struct odd_slot *)(void *)(holder + 1);
    odd->to = NULL;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, stray_worker, NULL) == 0);
    wait_for(1);

    char *kept = atomic_load(&stray_current);
    odd->to = kept + 10;
    void *to;
    int rc = exo_carat_move(kept, &to, NULL);
    if (rc)
        fprintf(stderr, "pending_blocks: move: %s\n", exomem_last_error());
    CHECK(rc == 0);
    CHECK(odd->to == (char *)to + 10 && odd->to[0] == 7);
    reach(2);
    wait_for(3);
    struct exo_carat_stats before, after;
    exo_carat_get_stats(&before);
    reach(4);

    uint64_t stores = 0;
    int taken = 0;
    while (!atomic_load(&stray_done)) {
        int round = atomic_load(&stray_round);
        char *p = atomic_load(&stray_current);
        if (round != taken && p) {
            atomic_store(&stray_taken, taken = round);
            odd->to = p;
            __asm__ volatile("" : : "r"(odd) : "memory");   /* each store made, not only the last */
            stores++;
        } else {
            exo_os_yield();
        }
    }
    CHECK(pthread_join(t, NULL) == 0);
    exo_carat_get_stats(&after);
    odd->to = NULL;
    free(holder);
    if (after.table_bytes != before.table_bytes)
        fprintf(stderr, "pending_blocks strays: table bytes %llu before, %llu after\n",
                (unsigned long long)before.table_bytes, (unsigned long long)after.table_bytes);
    CHECK(stores == STRAY_ROUNDS);
    CHECK(after.table_bytes == before.table_bytes);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "strays") == 0) {
        strays();
        printf("pending_blocks strays: ok\n");
        return 0;
    }
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
