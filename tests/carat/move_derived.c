/* Addresses derived from a block but outside it (a base just before an array for 1-based
 * indexing, a bound just past its end), as optimised loops keep them in registers and
 * stack slots: no patching by value can recognise them, so a move that finds one is
 * refused with EXO_EAGAIN and changes nothing; once they are gone the move goes ahead. (Ones
 * inside the block's own malloc chunk are patched instead, unless the thread holding them
 * is stopped in the C library: where this thread waits for its move depends on the build,
 * so those are not tested here.) */
#include "carat_check.h"

#include <exomem/carat.h>
#include <stdint.h>

static int *global_array;
static char *popular[3], *plain;

/* The worst case (most escapes) is kept as escapes come in, and found again by a walk
 * when it is freed. */
static void check_worst(void)
{
    char *a = malloc(32), *b = malloc(32);
    CHECK(a && b);
    plain = a;
    for (int i = 0; i < 3; i++)
        popular[i] = b;
    CHECK(exo_carat_worst_allocation() == b);
    for (int i = 0; i < 3; i++)
        popular[i] = NULL;
    free(b);
    void *w = exo_carat_worst_allocation();
    CHECK(w != b && w != NULL);
    plain = NULL;
    free(a);
}

static long sum(const int *a, int n)
{
    long s = 0;
    for (int i = 0; i < n; i++)
        s += a[i];
    return s;
}

int main(void)
{
    global_array = malloc(64 * sizeof(int));
    CHECK(global_array);
    for (int i = 0; i < 64; i++)
        global_array[i] = i;
    int *const at_start = global_array;

    /* Held in stack slots (volatile), as a spilled loop base or bound would be; outside the
     * block's own malloc chunk (header and unused tail), where they would be patched. */
    volatile uintptr_t before = (uintptr_t)global_array - 64;
    CHECK(exo_carat_move(global_array, NULL, NULL) == -EXO_EAGAIN);
    CHECK(global_array == at_start && sum(global_array, 64) == 2016);
    before = 0;

    volatile uintptr_t past_end = (uintptr_t)global_array + 64 * sizeof(int) + 40;
    CHECK(exo_carat_move(global_array, NULL, NULL) == -EXO_EAGAIN);
    CHECK(global_array == at_start);
    past_end = 0;

#if defined(__x86_64__)
    /* In a callee-saved register across the call: exo_carat_move spills every one into its
     * own frame, which its check reads (the frames of its wait below are skipped). */
    {
        register uintptr_t in_r12 __asm__("r12") = (uintptr_t)global_array - 64;
        __asm__ volatile("" : "+r"(in_r12));
        int rc = exo_carat_move(global_array, NULL, NULL);
        __asm__ volatile("" : "+r"(in_r12));
        in_r12 = 0;   /* or it stays there, and refuses the move below */
        __asm__ volatile("" : "+r"(in_r12));
        CHECK(rc == -EXO_EAGAIN);
        CHECK(global_array == at_start);
    }
    const uint64_t refusals = 3;
#else
    const uint64_t refusals = 2;
#endif

    /* Far from the block: not taken for a derived address. */
    volatile uintptr_t far = (uintptr_t)global_array + (64u << 20);
    void *nb;
    CHECK(exo_carat_move(global_array, &nb, NULL) == 0);
    CHECK(global_array == nb && sum(global_array, 64) == 2016);
    (void)before;
    (void)past_end;
    (void)far;

    struct exo_carat_stats st;
    exo_carat_get_stats(&st);
    CHECK(st.moves == 1 && st.moves_refused == refusals);
    CHECK(st.refused_by[EXO_CARAT_REFUSED_DERIVED] == refusals);   /* each under its cause */
    free(global_array);
    /* Last: the freed blocks it leaves behind, and their addresses in dead stack words,
     * would otherwise sit next to global_array and refuse its move (a false alarm, but
     * this test counts refusals). */
    check_worst();
    printf("move_derived: ok\n");
    return 0;
}
