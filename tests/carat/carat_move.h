/* The move tests' two ways to move a block: one that must be done at once, and one that
 * tries again while moves are refused for now. Built by exomem-cc with the runtime. */
#ifndef CARAT_MOVE_H
#define CARAT_MOVE_H
#include "carat_check.h"

#include <exomem/carat.h>
#include <exomem/error.h>

/* p's block, moved: its new address. A move refused for any reason stops the test with
 * the runtime's own message and the caller's line. */
#define carat_must_move(p) carat_must_move_at((p), __FILE__, __LINE__)

static inline void *carat_must_move_at(void *p, const char *file, int line)
{
    void *to = NULL;
    int rc = exo_carat_move(p, &to, NULL);
    if (rc) {
        fprintf(stderr, "%s:%d: move of %p refused: %s\n", file, line, p, exomem_last_error());
        exit(1);
    }
    CHECK(to != NULL);
    return to;
}

/* p's block, moved within tries attempts: its new address, or NULL if every one was
 * refused for now (-EXO_EAGAIN: a stopped thread held an address the move could not
 * patch). Any other error stops the test: for tests whose threads are busy on the block. */
static inline void *carat_move_retrying(void *p, int tries)
{
    for (int i = 0; i < tries; i++) {
        void *to = NULL;
        int rc = exo_carat_move(p, &to, NULL);
        if (rc == 0)
            return to;
        if (rc != -EXO_EAGAIN) {
            fprintf(stderr, "move of %p failed: %s\n", p, exomem_last_error());
            exit(1);
        }
    }
    return NULL;
}
#endif
