/* Allocation and escape sites the plugin must find (test_carat.sh checks its counts):
 * four allocations (malloc, calloc, strdup, realloc), two frees, one stack object whose
 * address escapes, and pointer stores into a global and into heap memory. */
#include <stdlib.h>
#include <string.h>

struct pair {
    struct pair *other;
    char *name;
};

struct pair *keep;
void observe(int *p);

int main(int argc, char **argv)
{
    struct pair *a = malloc(sizeof *a);
    struct pair *b = calloc(1, sizeof *b);
    if (!a || !b)
        return 1;
    a->other = b;            /* escape into the heap */
    b->name = strdup(argv[0]);
    keep = a;                /* escape into a global */
    char *grown = realloc(b->name, 64);
    if (grown)
        b->name = grown;
    int local = argc;
    observe(&local);         /* a stack object whose address escapes */
    free(b->name);
    free(b);
    return local == 0;
}

/* Keeps the address: the stack object escapes. */
int *last_seen;
__attribute__((noinline)) void observe(int *p)
{
    last_seen = p;
    *p += 1;
}
