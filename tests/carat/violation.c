/* A guard violation: with the protection regions set to leave out one heap block, a write
 * to it is reported (address, access, allocation, call site) and raises SIGSEGV. With
 * "recover", a SIGSEGV handler gives the access back (default regions) and the program goes
 * on, as it could after a page fault. With "fields", two fields of one struct are read in
 * one block, the first allowed and the second in the left-out block: their coalesced check
 * (16 bytes at the first field) must catch it. */
#include "carat_check.h"

#include <exomem/carat.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

static volatile sig_atomic_t faults;

static void give_back(int sig)
{
    (void)sig;
    faults++;
    exo_carat_set_regions(NULL, 0);
}

struct pair {
    long first, second;
};

static __attribute__((noinline)) long sum_pair(const struct pair *q)
{
    return q->first + q->second;   /* the coalesced read */
}

int main(int argc, char **argv)
{
    int *block = malloc(4096);
    CHECK(block);
    block[0] = 1;
    uintptr_t b = (uintptr_t)block;
    const int all = EXO_CARAT_READ | EXO_CARAT_WRITE | EXO_CARAT_EXEC;
    struct exo_carat_region around[2] = {
        { 4096, b - 4096, all },
        { b + 4096, ((uintptr_t)1 << 47) - b - 4096, all },
    };
    struct exo_carat_region bad[2] = { { 4096, 8192, all }, { 8192, 4096, all } };
    CHECK(exo_carat_set_regions(bad, 2) == -EXO_EINVAL);   /* overlapping */
    CHECK(exo_carat_set_regions(around, 2) == 0);
    CHECK(exo_carat_region_lookup(b, 4) == 0);
    CHECK(exo_carat_region_lookup(b - 8, 8) == all);
    if (argc > 1 && strcmp(argv[1], "fields") == 0)
        return (int)sum_pair((const struct pair *)(b - 8));
    /* Two regions that touch at b: a check across b has the rights both give. */
    struct exo_carat_region touching[2] = {
        { 4096, b - 4096, all }, { b, ((uintptr_t)1 << 47) - b, EXO_CARAT_READ },
    };
    CHECK(exo_carat_set_regions(touching, 2) == 0);
    CHECK(exo_carat_region_lookup(b - 8, 16) == EXO_CARAT_READ);
    volatile long both = sum_pair((const struct pair *)(b - 8));   /* no violation */
    (void)both;
    CHECK(exo_carat_set_regions(around, 2) == 0);
    if (argc > 1 && strcmp(argv[1], "recover") == 0)
        signal(SIGSEGV, give_back);
    block[10] = 42;   /* the guarded write: violation.c, this line */
    CHECK(faults == 1 && block[10] == 42);
    printf("violation: recovered after %d fault\n", (int)faults);
    return 0;
}
