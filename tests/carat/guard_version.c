/* Versioned loops and functions (GuardVersion.cpp): code whose accesses reach a bounded
 * range from a base (a 32-bit index that may wrap, as in bzip2's mainGtU) runs without
 * their guards only after one check that the whole range lies in the fast path; otherwise
 * its guarded copy runs. test_carat.sh checks the plugin's counts for this module, and:
 *   (no argument)  with the default region both give the right answers (the copies
 *                  without guards run);
 *   loop           one region ending inside a block: the run length's loop reads past
 *                  it and must be stopped at "the versioned read";
 *   weigh          a loop that calls a function that calls nothing reads past it, with
 *                  a second region (no fast path; it holds the stack the call needs):
 *                  stopped at "the versioned weighing";
 *   function       the same for the call-free comparison, at "the versioned compare";
 *   near           a call-free function whose reach from its argument is at most 4 KiB
 *                  (its entry check is one compare with the fast path's limit), called 4
 *                  bytes before the end of the one region (near_end): stopped at "the
 *                  versioned sum".
 * With the default region (no argument), a block mapped within 4 GiB of the top of user
 * space and a null pointer the loop never reads through: their reaches run past the top and
 * below the bottom, where every access faults, so the runtime's reach is open there
 * (exo_carat_fast_reach_base, _reach) and the copy without guards runs; with the
 * one-compare fast path closed for the call, a guarded copy would take the slow path at
 * each read (the guards' count tells which ran). */
#include "carat_check.h"

#include <exomem/carat.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

/* Built with the sanitizers (clang says so through __has_feature), the loops hold the
 * sanitizers' calls and are not copied. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(undefined_behavior_sanitizer)
#define SANITIZED 1
#endif
#endif

/* A loop with a data-dependent exit and an unsigned index that may wrap: no trip count to
 * merge over, but every block[i] lies in [block, block + 4 GiB). The call into the runtime
 * before the loop (it could change the regions) keeps the function from being versioned
 * whole, so the loop itself is. */
static __attribute__((noinline)) unsigned run_length(const unsigned char *block, unsigned i)
{
    if (exo_carat_region_lookup((uintptr_t)block, 1) == 0)
        return 0;
    unsigned start = i;
    unsigned char c = block[i];
    while (block[i] == c)   /* the versioned read */
        i++;
    return i - start;
}

/* A call to a function of the module that calls nothing cannot change the regions: the
 * loop that makes it is versioned all the same. */
static __attribute__((noinline)) unsigned weight(unsigned char c)
{
    return c == 'a' ? 1 : c == 'c' ? 3 : 2;
}

static __attribute__((noinline)) unsigned weigh(const unsigned char *block, unsigned i)
{
    if (exo_carat_region_lookup((uintptr_t)block, 1) == 0)
        return 0;
    unsigned w = 0;
    while (block[i] != 'b')   /* the versioned weighing */
        w += weight(block[i++]);
    return w;
}

/* No call: versioned whole (four compares at block[i1 + k] and block[i2 + k]). */
static __attribute__((noinline)) int compare4(const unsigned char *block, unsigned i1,
                                              unsigned i2)
{
    for (unsigned k = 0; k < 4; k++)
        if (block[i1 + k] != block[i2 + k])   /* the versioned compare */
            return block[i1 + k] > block[i2 + k];
    return 0;
}

/* Eight bytes from p: a reach of at most 4 KiB, checked at entry like an inline guard, by
 * its first byte against the fast path's limit. */
static __attribute__((noinline)) unsigned sum8(const unsigned char *p)
{
    unsigned s = 0;
    for (unsigned k = 0; k < 8; k++)
        s += p[k] * (k + 1);   /* the versioned sum */
    return s;
}

/* The block in this frame, so that one region, from the bottom of the address space to the
 * block's middle, holds the deeper frames' stack too (the call guards), and the fast path
 * is open and ends 4 bytes into sum8's reach. */
static __attribute__((noinline)) int near_end(void)
{
    unsigned char local[8192] __attribute__((aligned(4096)));
    memset(local, 'a', sizeof local);
    uintptr_t b = (uintptr_t)local;
    struct exo_carat_region r = { 4096, b, EXO_CARAT_READ | EXO_CARAT_WRITE | EXO_CARAT_EXEC };
    CHECK(exo_carat_set_regions(&r, 1) == 0);
    CHECK(sum8(local + 4000) == 'a' * 36);   /* inside: the copy without guards */
    return (int)sum8(local + 4092);          /* local[4096] is its fifth byte */
}

/* A loop from two bases, reaching [block, block + 4 GiB) and [weights, weights + 16 GiB);
 * weights may be null, and is then never read. Nothing else guarded (the call into the
 * runtime keeps the function from being versioned whole). */
static __attribute__((noinline)) unsigned count_x(const unsigned char *block,
                                                  const unsigned *weights)
{
    if (exo_carat_region_lookup((uintptr_t)block, 1) == 0)
        return 0;
    unsigned i = 0, w = 0;
    while (block[i] == 'x') {   /* the versioned count */
        if (weights)
            w += weights[i];
        i++;
    }
    return i + w;
}

#define USER_TOP ((uintptr_t)1 << 47)

/* A page within 4 GiB of the top of user space, or NULL if every place tried is taken. */
static unsigned char *map_near_top(void)
{
    for (uintptr_t below = (uintptr_t)1 << 31; below < ((uintptr_t)1 << 32);
         below += (uintptr_t)1 << 27) {
        void *p = mmap((void *)(USER_TOP - below), 4096, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (p == (void *)(USER_TOP - below))
            return p;
        if (p != MAP_FAILED)
            munmap(p, 4096);   /* a kernel without MAP_FIXED_NOREPLACE put it elsewhere */
    }
    return NULL;
}

/* The versioned loop over a page near the top, with a null second base: the copy without
 * guards runs when the reach is open at both ends (unless the kernel lets this process map
 * below 4096, or the processor has 5-level paging). */
static void near_top(void)
{
    unsigned char *top = map_near_top();
    if (!top) {
        printf("guard_version: no page near the top of user space: not checked\n");
        return;
    }
    memset(top, 'x', 4095);
    top[4095] = 'y';
    int open = exo_carat_fast_reach_base == (uintptr_t)0 - EXO_CARAT_FAST_OPEN &&
               exo_carat_fast_reach >= 2 * EXO_CARAT_FAST_OPEN;
    uintptr_t end = exo_carat_fast_end;
    struct exo_carat_stats before, after;
    exo_carat_get_stats(&before);
    exo_carat_fast_end = 0;   /* every one-compare guard takes the exact slow path */
    unsigned n = count_x(top, NULL);
    exo_carat_fast_end = end;
    exo_carat_get_stats(&after);
    CHECK(n == 4095);
#if defined(SANITIZED)
    (void)open;
#else
    if (open)
        CHECK(after.guard_slow == before.guard_slow);
    else
        CHECK(after.guard_slow >= before.guard_slow + 4095);
#endif
    unsigned weights[4096];
    for (unsigned k = 0; k < 4096; k++)
        weights[k] = k;
    CHECK(count_x(top, weights) == 4095 + 4095 * 4094 / 2);
    munmap(top, 4096);
}

/* Computed gotos take their targets from a table of block addresses, which would still
 * name the original blocks from a copy: neither this call-free function nor its dispatch
 * loop is copied. */
static __attribute__((noinline)) unsigned threaded(const unsigned char *code)
{
    static const void *const ops[] = { &&add, &&dbl, &&end };
    unsigned acc = 0, i = 0;
    goto *ops[code[i]];
add:
    acc += code[i + 1] + code[i + 2] + code[i + 3];
    i += 4;
    goto *ops[code[i]];
dbl:
    acc *= 2;
    i += 1;
    goto *ops[code[i]];
end:
    return acc;
}

static const unsigned char program[] = { 0, 1, 2, 3, 1, 0, 4, 5, 6, 1, 2 };   /* 54 */

int main(int argc, char **argv)
{
    unsigned char *block = aligned_alloc(4096, 8192);
    CHECK(block);
    memset(block, 'a', 8192);
    block[8000] = 'b';
    block[100] = 'c';
    const char *mode = argc > 1 ? argv[1] : "";
    if (!*mode) {
        CHECK(threaded(program) == 54);
        CHECK(run_length(block, 200) == 7800);
        CHECK(weigh(block, 90) == 7910 + 2);   /* 7909 'a's and one 'c' */
        CHECK(compare4(block, 99, 98) == 1);   /* "ca" > "aa" */
        CHECK(compare4(block, 98, 99) == 0 && compare4(block, 200, 300) == 0);
        CHECK(sum8(block + 96) == 'a' * 36 + ('c' - 'a') * 5);   /* block[100] is p[4] */
        near_top();
        printf("guard_version: %u %d\n", run_length(block, 8000), compare4(block, 96, 97));
        free(block);   /* or LeakSanitizer finds it unless a stale copy lies about */
        return 0;
    }
    /* The bytes from block + 4096 to block + 8192 refused. "loop": one region, from the
     * bottom of the address space to there (the fast path is open, but no base's 4 GiB
     * reach fits in it); the others: that region and one from the block's end up, which
     * holds the stack (no fast path at all). */
    uintptr_t b = (uintptr_t)block;
    const int all = EXO_CARAT_READ | EXO_CARAT_WRITE | EXO_CARAT_EXEC;
    struct exo_carat_region r[2] = {
        { 4096, b, all }, { b + 8192, ((uintptr_t)1 << 47) - b - 8192, all },
    };
    if (strcmp(mode, "near") == 0)
        return near_end();
    CHECK(exo_carat_set_regions(r, strcmp(mode, "loop") == 0 ? 1 : 2) == 0);
    CHECK(exo_carat_region_lookup(b + 4095, 1) != 0 && exo_carat_region_lookup(b + 4096, 1) == 0);
    if (strcmp(mode, "loop") == 0)
        return (int)run_length(block, 200);         /* reads on to block[4096] */
    if (strcmp(mode, "weigh") == 0)
        return (int)weigh(block, 300);
    if (strcmp(mode, "function") == 0) {
        CHECK(threaded(program) == 54);             /* no fast path: nothing skips a guard */
        return compare4(block, 4094, 4090);         /* block[4096] is its third pair */
    }
    return 2;
}
