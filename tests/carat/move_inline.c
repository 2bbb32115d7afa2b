/* Pointers stored through the plugin's inline escape append (no call, no "in the runtime"
 * bracket) while another thread moves their block thousands of times. A move stops the
 * storing thread wherever it is, now and then half-way through an append (its value
 * written, or value and slot, but not yet counted): the mover must count a whole entry as
 * logged and patch a lone value like a register (exo_carat_claim_inflight). A pointer a
 * move missed keeps the old block's address, which the checks below find. (A lost escape is
 * usually written over again before the next move needs it: move_inflight.c stages those
 * cases exactly.) */
#include "carat_check.h"

#include <exomem/carat.h>
#include <exomem/error.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define NSLOTS 4096
#define MOVES 1000

struct shared {
    char *block;            /* the block that moves (a heap slot: its escape is logged) */
    char **slots;           /* heap slots the worker keeps storing pointers into it in */
};

static atomic_int stop, failed;

/* Not inlined: its store is the inline append's, and a stop may land anywhere in it. */
__attribute__((noinline)) static void put(char **slot, char *v) { *slot = v; }

static bool all_in(char **slots, const char *block)
{
    for (int k = 0; k < NSLOTS; k++)
        if (slots[k] && (uintptr_t)(slots[k] - block) >= 64)
            return false;
    return true;
}

static void *worker(void *arg)
{
    struct shared *s = arg;
    char *block = s->block;   /* in a register or this stack: patched by every move */
    for (unsigned long i = 0; !atomic_load_explicit(&stop, memory_order_relaxed); i++) {
        unsigned k = (unsigned)(i % NSLOTS);
        put(&s->slots[k], block + i % 64);
        if ((uintptr_t)(s->slots[k] - block) >= 64 || (k == 0 && !all_in(s->slots, block))) {
            atomic_store(&failed, 1);
            break;
        }
    }
    return NULL;
}

int main(void)
{
    struct shared *s = malloc(sizeof *s);
    CHECK(s);
    s->block = malloc(128);
    s->slots = calloc(NSLOTS, sizeof *s->slots);
    CHECK(s->block && s->slots);
    memset(s->block, 'b', 128);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, worker, s) == 0);
    int done = 0;
    for (int m = 0; m < MOVES && !atomic_load(&failed); m++) {
        void *to;
        int rc = exo_carat_move(s->block, &to, NULL);
        if (rc == 0)
            done++;
        else if (rc != -EXO_EAGAIN) {
            fprintf(stderr, "move_inline: %s\n", exomem_last_error());
            CHECK(0);
        }
    }
    atomic_store(&stop, 1);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(!atomic_load(&failed));
    CHECK(all_in(s->slots, s->block));
    CHECK(s->block[0] == 'b' && s->block[127] == 'b');
    CHECK(done > MOVES / 2);
    /* Every store was logged: the block's escape set knows its slots (the ones that still
     * point into it, at least one). */
    struct exo_carat_alloc_info info;
    CHECK(exo_carat_alloc_find(s->block, &info) == 0 && info.escapes >= 1);
    printf("move_inline: %d moves\n", done);
    return 0;
}
