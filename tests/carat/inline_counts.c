/* What the plugin hooks, and how (test_carat.sh checks its counts and its IR):
 * - two escape sites: the store of a heap pointer into heap memory (into_heap), and of a
 *   pointer into a global (observe);
 * - no escape site for a store into a stack object of the function, escaping or not, even
 *   through a phi of two of them (a move scans the thread's stack), nor for a stored stack
 *   address (stack objects never move);
 * - the escape appended to the log inline (the hook only on the rare path), and the
 *   escaping stack objects registered and released inline.
 * Run, it checks that the inline paths reached the runtime: the heap store is counted
 * against its block, and a stack object is found while its frame lives and counted once
 * released. */
#include "carat_check.h"

#include <exomem/carat.h>
#include <stdint.h>
#include <string.h>

struct node {
    struct node *next;
    long value;
};

__attribute__((noinline)) void into_heap(struct node *a, struct node *b) { a->next = b; }

/* Keeps what it is given, so that the arrays below escape. */
void *volatile seen;
__attribute__((noinline)) void observe(void *p) { seen = p; }

__attribute__((noinline)) int into_stack(struct node *heap, int which)
{
    struct node *a[4], *b[4];
    observe(a);
    observe(b);
    struct node **s = which ? a : b;   /* a select (or phi) of two stack objects */
    s[which & 3] = heap;               /* no hook: a stack object */
    a[0] = heap;                       /* no hook */
    struct node local = { 0, 1 }, *lp = &local;
    observe(&lp);
    lp->next = &local;                 /* no hook: stores a stack address into the stack */
    struct exo_carat_alloc_info info;
    int found = exo_carat_alloc_find(&a[1], &info) == 0 && info.kind == EXO_CARAT_STACK &&
                info.base == (uintptr_t)a;
    return found + (a[0] == heap) + (lp->next == &local);
}

int main(void)
{
    struct node *x = malloc(sizeof *x), *y = malloc(sizeof *y);
    CHECK(x && y);
    memset(x, 0, sizeof *x);
    into_heap(x, y);
    struct exo_carat_alloc_info info;
    CHECK(exo_carat_alloc_find(y, &info) == 0 && info.escapes == 1);
    struct exo_carat_stats before, after;
    exo_carat_get_stats(&before);
    CHECK(into_stack(y, 1) == 3);
    CHECK(into_stack(y, 0) == 3);
    exo_carat_get_stats(&after);
    /* five stack objects a call (a, b, local, lp, info), each counted once its frame
     * returned */
    CHECK(after.stack_objects_total - before.stack_objects_total == 10);
    CHECK(exo_carat_alloc_find(y, &info) == 0 && info.escapes == 1);
    free(x);
    free(y);
    return 0;
}
