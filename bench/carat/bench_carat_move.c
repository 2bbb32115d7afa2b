/* bench_carat_move: what moving one live allocation costs, step by step (CARAT, Table 3),
 * built with exomem-cc so that its pointer stores are tracked like a program's.
 *
 * An allocation of S bytes is pointed to by E slots (a heap array of pointers into it,
 * stored one by one: E escapes); while T other threads spin over their own data, it is
 * moved M times. Printed per configuration: the median time of each step of
 * struct exo_carat_move_cost, their total, and the pointers patched. The paper's column
 * "Page Expand" has no counterpart (moves are of whole allocations).
 */
#include <exomem/carat.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_int stop_spinning;

static void *spinner(void *arg)
{
    volatile long *counter = arg;
    while (!atomic_load(&stop_spinning))
        (*counter)++;
    return NULL;
}

static int by_value(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, by_value);
    return v[n / 2];
}

static void measure(size_t size, int escapes, int threads, int moves)
{
    char *block = malloc(size);
    char **slots = malloc(sizeof(char *) * (size_t)escapes);
    if (!block || !slots) {
        fprintf(stderr, "bench_carat_move: out of memory\n");
        exit(1);
    }
    memset(block, 1, size);
    for (int i = 0; i < escapes; i++)
        slots[i] = block + (size_t)i % size;   /* each store is one escape */
    atomic_store(&stop_spinning, 0);
    pthread_t t[8];
    static long counters[8];
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, spinner, &counters[i]);

    enum { STOP, FIND, PATCH, REGS, COPY, RESUME, TOTAL, STEPS };
    static const char *names[STEPS] = { "stop", "find", "patch_escapes", "patch_registers",
                                        "copy", "resume", "total" };
    uint64_t *v[STEPS];
    for (int s = 0; s < STEPS; s++)
        v[s] = malloc(sizeof(uint64_t) * (size_t)moves);
    uint64_t patched = 0;
    for (int m = 0; m < moves; m++) {
        struct exo_carat_move_cost c;
        void *to;
        if (exo_carat_move(block, &to, &c) != 0) {
            fprintf(stderr, "bench_carat_move: move: %s\n", exomem_last_error());
            exit(1);
        }
        v[STOP][m] = c.stop_ns;
        v[FIND][m] = c.find_ns;
        v[PATCH][m] = c.patch_ns;
        v[REGS][m] = c.register_ns;
        v[COPY][m] = c.copy_ns;
        v[RESUME][m] = c.resume_ns;
        v[TOTAL][m] = c.stop_ns + c.find_ns + c.patch_ns + c.register_ns + c.copy_ns +
                      c.resume_ns;
        patched = c.patched;
    }
    atomic_store(&stop_spinning, 1);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < escapes; i++)   /* every slot followed the block */
        if (slots[i] != block + (size_t)i % size) {
            fprintf(stderr, "bench_carat_move: slot %d was not patched\n", i);
            exit(1);
        }
    for (int s = 0; s < STEPS; s++) {
        printf("{\"name\":\"carat_move_%s\",\"unit\":\"us\",\"value\":%.3f,\"params\":"
               "{\"bytes\":%zu,\"escapes\":%d,\"threads\":%d,\"patched\":%llu}}\n",
               names[s], (double)median(v[s], moves) / 1000.0, size, escapes, threads,
               (unsigned long long)patched);
        free(v[s]);
    }
    fflush(stdout);
    free(slots);
    free(block);
}

int main(int argc, char **argv)
{
    bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    int moves = quick ? 20 : 200;
    static const size_t sizes[] = { 64, 4096, 1 << 20 };
    static const int escapes[] = { 1, 100, 10000 };
    static const int threads[] = { 0, 1, 3 };
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (size_t e = 0; e < sizeof escapes / sizeof escapes[0]; e++)
            for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
                if (quick && s == 1 && t == 1)
                    continue;
                measure(sizes[s], escapes[e], threads[t], moves);
            }
    return 0;
}
