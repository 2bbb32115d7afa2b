/* The one-compare guards (exo_carat_fast_end, carat.h): open for the default region, which
 * starts no higher than the kernel maps (vm.mmap_min_addr); closed (0) for a single region
 * that starts above it, where every guard takes the slow path's exact check and a
 * violation below the region is still reported; open again for a region from the bottom.
 *   (no argument)  the checks above, and guarded accesses that must pass;
 *   below          one region above the block: a guarded read of the block, below the
 *                  region, must be reported at "the read below" (SIGSEGV);
 *   null           a guarded read of address 16, below every region: with one compare it
 *                  faults in the hardware (SIGSEGV, no report); built with
 *                  -carat-guard-one-compare=false (and -DTWO_SIDED) the guard reports it
 *                  first;
 *   field          one region from the bottom; a guarded read of a field 8 bytes past the
 *                  region's end, through a base inside it (a guard that compares the base,
 *                  Guards.cpp): reported at "the field read" with the field's own address,
 *                  which the program prints first ("field at 0x...").
 * With one compare, a field inside the region read through a base at most the limit needs
 * no slow path even when the field itself lies in the fast path's last 4 KiB. */
#include "carat_check.h"

#include <exomem/carat.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define USER_TOP ((uintptr_t)1 << 47)

static __attribute__((noinline)) int read_at(const volatile int *p)
{
    return *p;   /* the read below */
}

/* A field at the end of a page-sized record: base + 4088, within the 4 KiB a one-compare
 * guard of its base covers. */
struct record {
    char pad[4088];
    int field;
};

static __attribute__((noinline)) int read_field(const volatile struct record *r)
{
    return r->field;   /* the field read */
}

/* vm.mmap_min_addr, or 0 if it cannot be read. */
static uintptr_t lowest_mappable(void)
{
    FILE *f = fopen("/proc/sys/vm/mmap_min_addr", "r");
    unsigned long v = 0;
    if (f) {
        if (fscanf(f, "%lu", &v) != 1)
            v = 0;
        fclose(f);
    }
    return v;
}

/* Does every address from 2^47 up fault? On x86-64, unless the kernel runs 5-level paging,
 * which it lists as the flag la57 in /proc/cpuinfo (only then: under a kernel with 4-level
 * paging the flag is gone even where the processor has it). The runtime asks the kernel
 * another way (a probe mapping), so this is a check of it, not a copy. */
static int top_faults(void)
{
#if defined(__x86_64__)
    FILE *f = fopen("/proc/cpuinfo", "r");
    CHECK(f);
    static char line[1 << 15];   /* the flags line is long */
    int la57 = 0, flags = 0;
    while (!flags && fgets(line, sizeof line, f)) {
        if (strncmp(line, "flags", 5) != 0)
            continue;
        flags = 1;
        la57 = strstr(line, " la57 ") || strstr(line, " la57\n");
    }
    fclose(f);
    CHECK(flags);
    return !la57;
#else
    return 0;
#endif
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    const int all = EXO_CARAT_READ | EXO_CARAT_WRITE | EXO_CARAT_EXEC;
    uintptr_t lowest = lowest_mappable();
    if (lowest >= 4096)   /* the default region [4096, 2^47) starts no higher */
        CHECK(exo_carat_fast_end == USER_TOP - EXO_CARAT_FAST_MIN_SPAN);
    else
        CHECK(exo_carat_fast_end == 0);
    /* The versioned code's reach (carat.h): open at the bottom where the one compare is,
     * and at the top of user space unless the processor has 5-level paging. */
    const uintptr_t open = EXO_CARAT_FAST_OPEN, below = (uintptr_t)0 - open;
    int top_open = top_faults();
    if (lowest >= 4096)
        CHECK(exo_carat_fast_reach_base == below &&
              exo_carat_fast_reach == (top_open ? 2 * open : USER_TOP + open));
    else
        CHECK(exo_carat_fast_reach_base == 4096 &&
              exo_carat_fast_reach == (top_open ? open : USER_TOP - 4096));
    int *block = malloc(2 * 4096);
    CHECK(block);
    block[0] = 7;
    CHECK(read_at(block) == 7);
    if (strcmp(mode, "null") == 0)
        return read_at((const volatile int *)16);
    uintptr_t b = (uintptr_t)block;

    /* One region from the block's second page up: above what the kernel maps. */
    uintptr_t hi = (b + 4096) & ~(uintptr_t)4095;
    struct exo_carat_region above = { hi, USER_TOP - hi, all };
    CHECK(exo_carat_set_regions(&above, 1) == 0);
    CHECK(exo_carat_fast_end == 0 && exo_carat_fast_base == hi);
    CHECK(exo_carat_fast_reach_base == hi &&   /* above the lowest mappable: closed below */
          exo_carat_fast_reach == (top_open ? open : USER_TOP - hi));
    if (strcmp(mode, "below") == 0)
        return read_at(block);   /* below the region: reported */
    struct exo_carat_stats before, after;
    exo_carat_get_stats(&before);
    (void)read_at((const volatile int *)(hi + 8));   /* the block's, inside: let through */
    exo_carat_get_stats(&after);
#ifndef TWO_SIDED   /* built with -carat-guard-one-compare=false: the fast path lets it */
    CHECK(after.guard_slow > before.guard_slow);
#endif

    /* One region from the bottom again, ending at the block's second page. */
    struct exo_carat_region low = { 4096, hi - 4096, all };
    CHECK(exo_carat_set_regions(&low, 1) == 0);
    CHECK(exo_carat_fast_end == (lowest >= 4096 ? hi - EXO_CARAT_FAST_MIN_SPAN : 0));
    if (lowest >= 4096)   /* below the top: closed above the region's end */
        CHECK(exo_carat_fast_reach_base == below && exo_carat_fast_reach == hi + open);
    else
        CHECK(exo_carat_fast_reach_base == 4096 && exo_carat_fast_reach == hi - 4096);
    /* The record that ends 4 bytes before the region does (its field is the block's), and
     * the one 16 bytes further, whose field lies past the region's end. */
    const volatile struct record *last = (const volatile struct record *)(hi - 4096);
    const volatile struct record *past = (const volatile struct record *)(hi - 4096 + 16);
    if (strcmp(mode, "field") == 0) {
        fprintf(stderr, "field at %p\n", (void *)&past->field);
        return read_field(past);   /* outside: reported */
    }
    *(volatile int *)(hi - 8) = 9;
    exo_carat_get_stats(&before);
    CHECK(read_field(last) == 9);
    exo_carat_get_stats(&after);
#ifndef TWO_SIDED
    if (lowest >= 4096)   /* the base is at the limit: the fast path holds the field */
        CHECK(after.guard_slow == before.guard_slow);
#endif
    CHECK(exo_carat_set_regions(NULL, 0) == 0);
    CHECK(exo_carat_fast_end == (lowest >= 4096 ? USER_TOP - EXO_CARAT_FAST_MIN_SPAN : 0));
    CHECK(exo_carat_fast_reach_base == (lowest >= 4096 ? below : 4096));
    CHECK(read_at(block) == 7);
    free(block);
    printf("guard_fast_end: ok (vm.mmap_min_addr %lu)\n", (unsigned long)lowest);
    return 0;
}
