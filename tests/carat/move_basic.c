/* Moves of heap allocations reached through every kind of place a pointer can be: a
 * global, another heap block, a stack variable whose address escapes, a register, the
 * moved block itself (self pointers), and through realloc and free afterwards. */
#include "carat_check.h"

#include <exomem/carat.h>
#include <stdbool.h>
#include <malloc.h>
#include <stdint.h>
#include <string.h>

struct node {
    struct node *next;
    struct node *self;
    long value;
};

static struct node *global_head;
static char *global_text;

static void use_stack_slot(struct node **slot) { (*slot)->value += 0; }

int main(void)
{
    struct node *nodes[8];
    for (int i = 0; i < 8; i++) {
        struct node *n = malloc(sizeof *n);
        CHECK(n);
        n->value = i;
        n->self = n;
        n->next = global_head;
        global_head = n;
        nodes[i] = n;
    }
    global_text = strdup("moved text stays the same");
    struct node *on_stack = nodes[3];
    use_stack_slot(&on_stack);   /* its address escapes: a tracked stack object */

    struct exo_carat_alloc_info info;
    /* The escaping stack object is known to its own thread (kept per thread). */
    CHECK(exo_carat_alloc_find(&on_stack, &info) == 0);
    CHECK(info.kind == EXO_CARAT_STACK && info.base == (uintptr_t)&on_stack);
    CHECK(exo_carat_alloc_find(nodes[3], &info) == 0);
    CHECK(info.base == (uintptr_t)nodes[3] && info.size == malloc_usable_size(nodes[3]));
    CHECK(info.kind == EXO_CARAT_HEAP);
    /* nodes[4]->next and its own self. Not the nodes[] slot nor on_stack (stack words: a
     * move scans the stacks), nor global_head (it points at nodes[7] since). */
    CHECK(info.escapes == 2);

    /* Move node 3: every path to it must lead to the new copy. */
    struct node *old = nodes[3];
    /* Kept scrambled: a plain copy of the address would be patched too (stack words that
     * look like pointers into the block are changed, docs/carat.md). */
    volatile uintptr_t old_scrambled = (uintptr_t)old ^ 0x5a5a5a5a5a5a5a5aull;
    void *nb;
    struct exo_carat_move_cost cost;
    CHECK(exo_carat_move(old, &nb, &cost) == 0);
    CHECK((uintptr_t)nb != (old_scrambled ^ 0x5a5a5a5a5a5a5a5aull));
    CHECK(cost.patched >= 3);
    CHECK(nodes[3] == nb);                 /* stack array slot */
    CHECK(on_stack == nb);                 /* escaping stack object */
    CHECK(nodes[4]->next == nb);           /* heap slot */
    CHECK(nodes[3]->self == nb);           /* a pointer inside the block to itself */
    CHECK(nodes[3]->value == 3);
    CHECK(old == nb);                      /* a local: register or stack word */
    CHECK(exo_carat_alloc_find(nb, &info) == 0 && info.base == (uintptr_t)nb);

    /* The list still reads 7..0 through the global. */
    long expect = 7;
    for (struct node *n = global_head; n; n = n->next, expect--)
        CHECK(n->value == expect && n->self == n);
    CHECK(expect == -1);

    /* The string moved with a pointer held only in a global. */
    char *text_before = global_text;
    CHECK(exo_carat_move(global_text, &nb, NULL) == 0);
    CHECK(global_text == nb && strcmp(global_text, "moved text stays the same") == 0);
    (void)text_before;

    /* A moved block is still the allocator's: realloc and free work on it. */
    global_text = realloc(global_text, 4096);
    CHECK(global_text && strcmp(global_text, "moved text stays the same") == 0);
    free(global_text);

    /* A program may use the whole block malloc gave it (SQLite sizes its buffers by
     * malloc_usable_size): a move keeps every usable byte. */
    unsigned char *odd = malloc(100);
    CHECK(odd);
    size_t usable = malloc_usable_size(odd);
    CHECK(usable >= 100);
    for (size_t i = 0; i < usable; i++)
        odd[i] = (unsigned char)(i * 7 + 1);
    CHECK(exo_carat_move(odd, &nb, NULL) == 0 && odd == nb);
    CHECK(malloc_usable_size(odd) >= usable);
    for (size_t i = 0; i < usable; i++)
        CHECK(odd[i] == (unsigned char)(i * 7 + 1));
    free(odd);

    /* realloc in place (glibc shrinks a block where it is): the pointers stored to it
     * earlier stay known, and a move patches them. */
    char *shrunk = malloc(512);
    CHECK(shrunk);
    strcpy(shrunk, "shrunk in place");
    global_text = shrunk;
    char *same = realloc(shrunk, 64);
    CHECK(same);
    bool in_place = same == shrunk;
    if (in_place) {
        CHECK(exo_carat_alloc_find(same, &info) == 0 && info.size == malloc_usable_size(same) &&
              info.escapes >= 1);
        CHECK(exo_carat_move(same, &nb, NULL) == 0);
        CHECK(global_text == nb && strcmp(global_text, "shrunk in place") == 0);
        same = nb;
    } else {
        printf("move_basic: realloc moved the block: in-place case not tested\n");
    }
    free(same);
    global_text = NULL;

    /* Nothing to move: not an allocation, a stack object, a global. */
    long local = 0;
    CHECK(exo_carat_move((void *)&local, NULL, NULL) == -EXO_ENOENT);
    CHECK(exo_carat_move((void *)&global_head, NULL, NULL) == -EXO_ENOENT);
    CHECK(exo_carat_move((void *)16, NULL, NULL) == -EXO_ENOENT);

    for (struct node *n = global_head, *next; n; n = next) {
        next = n->next;
        free(n);
    }
    struct exo_carat_stats st;
    exo_carat_get_stats(&st);
    CHECK(st.moves == (in_place ? 4u : 3u));
    printf("move_basic: ok (%lu pointers patched in the first move)\n",
           (unsigned long)cost.patched);
    return 0;
}
