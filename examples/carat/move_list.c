/* CARAT in a few lines: build this with exomem-cc, and the runtime knows every allocation
 * and every pointer stored to memory, so it can move a live allocation while another
 * thread walks the list through it.
 *
 *   EXOMEM_CARAT_PARTS=track,escapes,guards exomem-cc -O2 move_list.c -o move_list -lpthread
 */
#include <exomem/carat.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

struct item {
    struct item *next;
    long value;
};

static struct item *list;
static atomic_int ready, done;

static void *walker(void *arg)
{
    long walks = 0;
    while (!atomic_load(&ready))
        ;
    while (!atomic_load(&done)) {
        long sum = 0;
        for (struct item *it = list; it; it = it->next)
            sum += it->value;
        if (sum != 100 * 99 / 2) {
            fprintf(stderr, "the list broke: sum %ld\n", sum);
            exit(1);
        }
        walks++;
    }
    *(long *)arg = walks;
    return NULL;
}

int main(void)
{
    /* The thread first: its C library blocks (the DTV its TLS points into) then do not sit
     * right after a list node, where the runtime could not tell an address into them from
     * one derived from the node and would refuse to move it (docs/carat.md). */
    long walks = 0;
    pthread_t t;
    pthread_create(&t, NULL, walker, &walks);
    for (long v = 0; v < 100; v++) {
        struct item *it = malloc(sizeof *it);
        if (!it)
            return 1;
        it->value = v;
        it->next = list;
        list = it;
    }
    atomic_store(&ready, 1);

    /* Move the allocation with the most escapes, ten times, while the walker runs. */
    struct exo_carat_move_cost cost = {0};
    for (int i = 0, tries = 0; i < 10; i++) {
        void *target = exo_carat_worst_allocation(), *moved_to;
        int rc = exo_carat_move(target, &moved_to, &cost);
        /* EAGAIN: a thread held an address next to the block that could not be told from
         * a derived one (docs/carat.md), or the block changed; nothing moved: try again. */
        if (rc == -EXO_EAGAIN && ++tries < 1000) {
            i--;
            continue;
        }
        if (rc) {
            fprintf(stderr, "move: %s\n", exomem_last_error());
            return 1;
        }
    }
    atomic_store(&done, 1);
    pthread_join(t, NULL);

    struct exo_carat_stats st;
    exo_carat_get_stats(&st);
    printf("%lu moves while the walker went round %ld times; the last one stopped %lu "
           "threads and patched %lu pointers in %lu us\n", (unsigned long)st.moves, walks,
           (unsigned long)cost.threads, (unsigned long)cost.patched,
           (unsigned long)((cost.stop_ns + cost.find_ns + cost.patch_ns + cost.register_ns +
                            cost.copy_ns + cost.resume_ns) / 1000));
    return st.moves == 10 ? 0 : 1;
}
