/* A guarded, tracked shared library (built from this file with -DCARAT_LIB -fPIC -shared)
 * loaded by a program built from it without: the library reaches the runtime's globals
 * through the GOT (the program's copy of the runtime), the program directly. The pointer
 * the library stores is an escape the runtime hears of; a move patches it; its guarded
 * reads see the moved block. test_carat.sh builds the program as a PIE and as a
 * non-PIE one. */
#include "carat_check.h"

#include <exomem/carat.h>
#include <string.h>

struct holder {
    char *text;
    unsigned long sum;
};

unsigned long lib_hold(struct holder *h, char *text);
unsigned long lib_sum(const struct holder *h);

#ifdef CARAT_LIB
unsigned long lib_hold(struct holder *h, char *text)
{
    h->text = text;   /* an escape, logged by the library's inline append */
    return lib_sum(h);
}

unsigned long lib_sum(const struct holder *h)
{
    unsigned long s = 0;
    for (const char *p = h->text; *p; p++)
        s = s * 31 + (unsigned char)*p;
    return s;
}
#else
static struct holder *volatile held;

int main(void)
{
    held = malloc(sizeof *held);
    char *text = malloc(64);
    CHECK(held && text);
    strcpy(text, "moved by the runtime, read by the library");
    unsigned long before = lib_hold(held, text);
    text = NULL;
    void *to = NULL;
    CHECK(exo_carat_move(held->text, &to, NULL) == 0);
    CHECK(held->text == to);          /* the library's escape was patched */
    CHECK(lib_sum(held) == before);   /* and its guarded reads find the block there */
    free(held->text);
    free(held);
    printf("shared_lib: ok\n");
    return 0;
}
#endif
