/* The process's writable mappings as a move reads them: a sorted list of [lo, hi) pairs,
 * read from /proc/self/maps only when a move needs it (for a slot outside every tracked
 * allocation, a stack not seen before, the shadow's scan), and the stacks' mappings
 * remembered across moves. */
#include "carat/mappings.h"
#include "carat/carat_mem.h"
#include "os/os.h"
#include "internal.h"

#define MAX_RANGES 65536
#define MAPS_BUF (8u << 20)

static uintptr_t *ranges;     /* [lo, hi) pairs, in address order */
static int nranges;
static char *maps_buf;        /* the text of /proc/self/maps, read into it */
static bool loaded;

int exo_carat_mappings_reserve(void)
{
    if (!maps_buf)
        maps_buf = exo_carat_mem_alloc(MAPS_BUF);
    if (!ranges)
        ranges = exo_carat_mem_alloc(2 * MAX_RANGES * sizeof *ranges);
    return maps_buf && ranges ? 0 : -EXO_ENOMEM;
}

void exo_carat_mappings_stale(void)
{
    loaded = false;
}

int exo_carat_mappings_load(void)
{
    if (loaded)
        return 0;
    if (exo_carat_mappings_reserve() != 0)
        return -EXO_ENOMEM;
    int nr = exo_os_writable_ranges(ranges, MAX_RANGES, maps_buf, MAPS_BUF);
    if (nr < 0)
        return nr;
    nranges = nr;
    loaded = true;
    return 0;
}

bool exo_carat_mappings_find(uintptr_t a, uintptr_t *lo, uintptr_t *hi)
{
    if (exo_carat_mappings_load() != 0)
        return false;
    int l = 0, h = nranges - 1;
    while (l <= h) {
        int mid = (l + h) / 2;
        if (a < ranges[2 * mid]) {
            h = mid - 1;
        } else if (a >= ranges[2 * mid + 1]) {
            l = mid + 1;
        } else {
            if (a + 8 > ranges[2 * mid + 1])
                return false;
            *lo = ranges[2 * mid];
            *hi = ranges[2 * mid + 1];
            return true;
        }
    }
    return false;
}

const uintptr_t *exo_carat_mappings_all(int *n)
{
    if (exo_carat_mappings_load() != 0) {
        *n = 0;
        return NULL;
    }
    *n = nranges;
    return ranges;
}

#define STACK_CACHE 256
static struct { pid_t tid; uintptr_t lo, hi; } stacks[STACK_CACHE];

bool exo_carat_mappings_stack(pid_t tid, uintptr_t sp, uintptr_t *lo, uintptr_t *hi)
{
    unsigned h = (unsigned)tid % STACK_CACHE;
    if (stacks[h].tid == tid && sp >= stacks[h].lo && sp < stacks[h].hi) {
        *lo = stacks[h].lo;
        *hi = stacks[h].hi;
        return true;
    }
    if (!exo_carat_mappings_find(sp & ~(uintptr_t)7, lo, hi))
        return false;
    stacks[h].tid = tid;
    stacks[h].lo = *lo;
    stacks[h].hi = *hi;
    return true;
}
