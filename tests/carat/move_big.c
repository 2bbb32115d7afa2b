/* Moves of big blocks in other threads' arenas, as minimap2's kalloc keeps its cores: 8 MiB
 * blocks (and 8 more bytes) malloc'd by worker threads, each from its own arena, after a
 * freed mapping of that size raised glibc's mmap threshold, so that they are carved from
 * the arenas' heaps at whatever address the blocks before left (without it they are
 * mappings of their own, and a worker's arena, mapped right above one, is an address the
 * move must refuse). A move's copy must keep the block's address modulo 256
 * (src/carat/copy_place.c), which 16 tries of a block that big from the mover thread's
 * arena must find. Every move must be done within a few tries, keep the address modulo 256
 * and the contents, and the workers must find their blocks moved through the global slots
 * they published. (In minimap2's suite at 10,000 moves a second, many moves of its cores
 * were refused for want of a copy at the right address; with 30 moves a core instead of
 * 4 this test sees one refusal in 180, so that case needs minimap2's churn of cores.) */
#include "carat_move.h"

#include <exomem/carat.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define WORKERS 2
#define CORES 3                          /* per worker */
#define CORE_BYTES ((8u << 20) + 8)      /* kalloc's core: 8 MiB and its header */
#define MOVES 4                          /* per core */
#define TRIES 4

static unsigned char *cores[WORKERS][CORES];
static pthread_barrier_t published, moved;

static unsigned char pattern(int w, int c, size_t i)
{
    return (unsigned char)(i * 131 + (size_t)w * 17 + (size_t)c * 5);
}

static void *worker(void *arg)
{
    int w = (int)(intptr_t)arg;
    void *odd[CORES];
    for (int c = 0; c < CORES; c++) {
        /* Blocks of odd sizes between the cores, so that they lie at varied addresses
         * modulo 256 (kalloc's own small blocks do the same). */
        odd[c] = malloc(40 + 48 * (size_t)(w * CORES + c));
        CHECK(odd[c]);
        unsigned char *b = malloc(CORE_BYTES);
        CHECK(b);
        for (size_t i = 0; i < CORE_BYTES; i += 4096)
            b[i] = pattern(w, c, i);
        b[CORE_BYTES - 1] = pattern(w, c, CORE_BYTES - 1);
        cores[w][c] = b;
    }
    pthread_barrier_wait(&published);
    pthread_barrier_wait(&moved);
    for (int c = 0; c < CORES; c++) {
        unsigned char *b = cores[w][c];
        for (size_t i = 0; i < CORE_BYTES; i += 4096)
            CHECK(b[i] == pattern(w, c, i));
        CHECK(b[CORE_BYTES - 1] == pattern(w, c, CORE_BYTES - 1));
        free(b);
        free(odd[c]);
    }
    return NULL;
}

/* Every core moved MOVES times, each within TRIES attempts; returns the attempts refused. */
static __attribute__((noinline)) int move_cores(void)
{
    int refused = 0;
    for (int k = 0; k < MOVES; k++)
        for (int w = 0; w < WORKERS; w++)
            for (int c = 0; c < CORES; c++) {
                uintptr_t was = (uintptr_t)cores[w][c];
                void *to = NULL;
                int t = 0;
                while (!to && t++ < TRIES)
                    if (!(to = carat_move_retrying(cores[w][c], 1)))
                        refused++;
                if (!to) {
                    fprintf(stderr, "move_big: core %d of worker %d not moved in %d tries: "
                            "%s\n", c, w, TRIES, exomem_last_error());
                    exit(1);
                }
                CHECK((uintptr_t)to % 256 == was % 256);
                CHECK(cores[w][c] == to);
            }
    return refused;
}

int main(void)
{
    /* A freed mapping of a core's size raises glibc's mmap threshold above it (its dynamic
     * threshold), as kalloc's freed cores do in minimap2. */
    void *volatile raise = malloc(CORE_BYTES + 4096);   /* volatile: clang drops the pair */
    CHECK(raise);
    free(raise);
    pthread_t t[WORKERS];
    CHECK(pthread_barrier_init(&published, NULL, WORKERS + 1) == 0);
    CHECK(pthread_barrier_init(&moved, NULL, WORKERS + 1) == 0);
    for (int w = 0; w < WORKERS; w++)
        CHECK(pthread_create(&t[w], NULL, worker, (void *)(intptr_t)w) == 0);
    pthread_barrier_wait(&published);
    int refused = move_cores();
    pthread_barrier_wait(&moved);
    for (int w = 0; w < WORKERS; w++)
        CHECK(pthread_join(t[w], NULL) == 0);
    printf("move_big: ok, %d moves, %d refused\n", MOVES * WORKERS * CORES, refused);
    return 0;
}
