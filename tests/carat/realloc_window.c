/* A realloc that moves its block frees the old one inside the C library, before the
 * plugin's hook after the call forgets it. Another thread's malloc can hand that memory
 * out in between, and the hook must not then forget the new block (its record) nor clear
 * the shadow of what that thread stored there (src/carat/realloc_window.c).
 *
 * One arena (M_ARENA_MAX 1) and blocks too big for glibc's per-thread caches, so that the
 * main thread's malloc gets the block the other thread's realloc just freed: a thread
 * reallocs a block it cannot grow in place, over and over; this one allocates blocks of the
 * same size, stores a pointer into each, waits a little (for the other thread's hook to
 * have run) and checks that its block is still known with its base, and, with the shadow,
 * that the pointer's shadow word is still there. It runs until 1,000 of its blocks were
 * ones the other thread had just freed, or 10 seconds. Before the fix, with the escape
 * log, 1.4-8.5% of those blocks were lost, and with the shadow shadow words in 2 runs of 3.
 * Built with -I src (the shadow's word is read through the runtime's header). */
#include "carat/shadow.h"
#include "carat_check.h"

#include <exomem/carat.h>
#include <exomem/error.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#define BLOCK 2000      /* above glibc's tcache sizes, below its mmap threshold */
#define WANTED 1000     /* blocks that must have come from the other thread's realloc */
#define SECONDS 10

static atomic_int stop;
static void *target;                /* a tracked block both threads store pointers to */
static _Atomic(char *) last_freed;  /* the block the other thread's realloc is about to free */

static void *reallocer(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        void **x = malloc(BLOCK);
        CHECK(x);
        void *wall = malloc(64);   /* x cannot grow in place: realloc moves it */
        CHECK(wall);
        x[0] = target;
        atomic_store(&last_freed, (char *)x);
        void **y = realloc(x, 2 * BLOCK);
        CHECK(y && y[0] == target);
        free(wall);
        free(y);
    }
    return NULL;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(void)
{
    mallopt(M_ARENA_MAX, 1);
    target = malloc(100);
    CHECK(target);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, reallocer, NULL) == 0);
    long rounds = 0, hits = 0, lost = 0, shadow_lost = 0;
    double end = now() + SECONDS;
    while (hits < WANTED && (rounds % 1024 || now() < end)) {
        void **b = malloc(BLOCK);
        CHECK(b);
        b[1] = target;
        char *freed = atomic_load(&last_freed);
        if ((char *)b >= freed && (char *)b < freed + BLOCK)
            hits++;
        for (volatile int k = 0; k < 200; k++)   /* the other thread's hook runs meanwhile */
            ;
        struct exo_carat_alloc_info info;
        if (exo_carat_alloc_find(b, &info) != 0 || info.base != (uintptr_t)b) {
            if (lost++ < 3)
                fprintf(stderr, "realloc_window: block %p not known: %s\n", (void *)b,
                        exomem_last_error());
        }
        if (exo_carat_shadow_on &&
            *exo_carat_shadow_word((uintptr_t)&b[1]) != (uintptr_t)target)
            shadow_lost++;
        free(b);
        rounds++;
    }
    atomic_store(&stop, 1);
    CHECK(pthread_join(th, NULL) == 0);
    printf("realloc_window: %ld blocks, %ld from the other thread's realloc; %ld lost, "
           "%ld shadow words lost\n", rounds, hits, lost, shadow_lost);
    if (hits == 0)
        puts("realloc_window: no block came from the other thread's realloc: nothing checked");
    CHECK(lost == 0 && shadow_lost == 0);
    free(target);
    return 0;
}
