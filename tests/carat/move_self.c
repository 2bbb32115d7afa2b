/* A big block full of pointers to itself (SQLite's sorter keeps its records, linked to each
 * other, in one buffer of megabytes): every one is a slot of the block's own escape set, at
 * an address that changes by the same amount in a move. Moves must stay quick: the set is
 * rebuilt in one pass, and hashed so that shifted addresses do not pile up on each other
 * (the 2 MB buffer once made a move spin for minutes). */
#include "carat_check.h"

#include <exomem/carat.h>
#include <exomem/error.h>
#include <stdint.h>

#define NODES (1u << 17)   /* 128 Ki nodes of 16 bytes: 2 MiB, 256 Ki pointers */

struct node {
    struct node *next;
    struct node *self;
};

static struct node *head;

int main(void)
{
    struct node *n = malloc(NODES * sizeof *n);
    CHECK(n);
    for (uint32_t i = 0; i < NODES; i++) {
        n[i].next = &n[(i * 40503u + 1) % NODES];   /* scattered through the block */
        n[i].self = &n[i];
    }
    head = n;
    for (int m = 0; m < 4; m++) {
        void *to;
        struct exo_carat_move_cost cost;
        int rc = exo_carat_move(head, &to, &cost);
        if (rc)
            fprintf(stderr, "move_self: %s\n", exomem_last_error());
        CHECK(rc == 0);
        CHECK(to == head);
        /* The copy phase includes moving the escape set's 256 Ki inner slots. */
        CHECK(cost.copy_ns < 1000000000ull);
    }
    n = head;
    for (uint32_t i = 0; i < NODES; i++) {
        CHECK(n[i].self == &n[i]);
        CHECK(n[i].next == &n[(i * 40503u + 1) % NODES]);
    }
    free(n);
    puts("move_self: ok");
    return 0;
}
