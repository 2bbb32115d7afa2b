/* Moves while threads run: four threads each keep a ring of heap nodes and walk and
 * update it; the runtime's mover moves the allocation with the most escapes a few thousand
 * times a second. Every walk must find its ring intact (the right length, the right sums),
 * whichever node was moved under it. */
#include "carat_check.h"

#include <exomem/carat.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#define THREADS 4
#define NODES 64

struct node {
    struct node *next;
    long value;
    long pad[4];
};

static atomic_int stop;
static struct node *rings[THREADS];   /* a global slot per ring: a hot escape */

static void *worker(void *arg)
{
    long id = (long)(intptr_t)arg;
    struct node *first = NULL, *prev = NULL;
    for (int i = 0; i < NODES; i++) {
        struct node *n = malloc(sizeof *n);
        CHECK(n);
        n->value = id * 1000 + i;
        n->next = NULL;
        if (prev)
            prev->next = n;
        else
            first = n;
        prev = n;
    }
    prev->next = first;
    rings[id] = first;
    long rounds = 0;
    while (!atomic_load(&stop)) {
        long sum = 0, count = 0;
        struct node *n = rings[id];
        do {
            sum += n->value;
            n->value += 1;
            n = n->next;
            count++;
        } while (n != rings[id]);
        CHECK(count == NODES);
        long base = id * 1000 * NODES + NODES * (NODES - 1) / 2;
        CHECK(sum == base + rounds * NODES);
        rounds++;
        /* Churn: replace one node now and then, so allocations come and go. */
        struct node *victim = rings[id]->next;
        struct node *fresh = malloc(sizeof *fresh);
        CHECK(fresh);
        *fresh = *victim;
        rings[id]->next = fresh;
        free(victim);
    }
    struct node *n = rings[id]->next;
    while (n != rings[id]) {
        struct node *next = n->next;
        free(n);
        n = next;
    }
    free(rings[id]);
    return (void *)rounds;
}

int main(void)
{
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i) == 0);
    CHECK(exo_carat_mover_start(2000) == 0);
    CHECK(exo_carat_mover_start(10) == -EXO_EEXIST);
    /* A move stops this thread with a signal too: nanosleep returns early (EINTR, as with
     * any signal), so sleep until the clock says a second has passed. */
    struct timespec d = {1, 0};
    while (nanosleep(&d, &d) != 0)
        ;
    exo_carat_mover_stop();
    atomic_store(&stop, 1);
    long rounds = 0;
    for (int i = 0; i < THREADS; i++) {
        void *r;
        pthread_join(t[i], &r);
        rounds += (long)(intptr_t)r;
    }
    struct exo_carat_stats st;
    exo_carat_get_stats(&st);
    CHECK(st.moves > 0);
    CHECK(rounds > 0);
    printf("move_threads: ok (%lu moves, %ld ring walks)\n", (unsigned long)st.moves, rounds);
    return 0;
}
