/* Protection regions and the guards' slow path. The set is an immutable sorted array
 * published through one atomic pointer, so a guard reads a consistent set without a lock;
 * a replaced set is kept (never freed) because a guard may still be reading it. With a
 * single readable and writable region (of at least EXO_CARAT_FAST_MIN_SPAN bytes), inline
 * guards compare against exo_carat_fast_base/span and never call in; otherwise every guard
 * comes here and searches the array. */
#include "carat/carat_internal.h"
#include "carat/carat_mem.h"
#include "os/os.h"
#include "os/os_vm.h"
#include "internal.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#define USER_LO ((uintptr_t)4096)
#define USER_HI ((uintptr_t)1 << 47)
#define MAX_REGIONS 65536

struct region_set {
    size_t n;
    struct exo_carat_region r[];
};

static struct {
    size_t n;
    struct exo_carat_region r[1];
} default_storage = { 1, { { USER_LO, USER_HI - USER_LO,
                             EXO_CARAT_READ | EXO_CARAT_WRITE | EXO_CARAT_EXEC } } };
static _Atomic(struct region_set *) current;
static pthread_mutex_t set_lock = PTHREAD_MUTEX_INITIALIZER;

EXO_API uintptr_t exo_carat_fast_base = USER_LO, exo_carat_fast_span = USER_HI - USER_LO;
EXO_API uintptr_t exo_carat_fast_limit = USER_HI - USER_LO - EXO_CARAT_FAST_MIN_SPAN;
/* Closed (0) until the start-up below has read how low the kernel maps: guards that run
 * before it take the slow path, which is exact. */
EXO_API uintptr_t exo_carat_fast_end;
/* The fast path's own until the start-up below has read how low the kernel maps and asked
 * the processor about 5-level paging. */
EXO_API uintptr_t exo_carat_fast_reach_base = USER_LO, exo_carat_fast_reach = USER_HI - USER_LO;

/* The lowest address the kernel maps for a process without CAP_SYS_RAWIO; 0 if unknown. */
static uintptr_t lowest_mappable;

/* Does every address from USER_HI up fault (non-canonical, or the kernel's)? Not where
 * the kernel runs 5-level paging, whose user space reaches 2^56 for a program that asks
 * for a mapping there (a processor with LA57 under a kernel with 4-level paging faults
 * there, so the kernel is asked, not the processor), nor where user space is wider than
 * 2^47 anyway. Set at start-up. */
static bool top_faults;

static bool no_user_memory_above_top(void)
{
    bool can;
    return exo_os_can_map_at(USER_HI, &can) == 0 && !can;   /* unknown: it may not */
}

/* Can nothing below region r be mapped (it starts at or below the lowest address the
 * kernel maps), so that an access below it faults as a page fault would? set_lock held. */
static bool nothing_mappable_below(const struct exo_carat_region *r)
{
    return lowest_mappable && r->base <= lowest_mappable;
}

/* exo_carat_fast_reach_base and _reach for a fast path on region r (carat.h): open below
 * it when nothing below it can be mapped, above it when nothing above it can be. The reach
 * first, then the base, as for the fast path. set_lock held. */
static void open_reach(const struct exo_carat_region *r)
{
    bool bottom = nothing_mappable_below(r);
    bool top = top_faults && r->base + r->len >= USER_HI;
    uintptr_t base = bottom ? (uintptr_t)0 - EXO_CARAT_FAST_OPEN : r->base;
    uintptr_t reach = top ? (bottom ? 2 * EXO_CARAT_FAST_OPEN : EXO_CARAT_FAST_OPEN)
                          : r->base + r->len - base;
    __atomic_store_n(&exo_carat_fast_reach, reach, __ATOMIC_RELEASE);
    __atomic_store_n(&exo_carat_fast_reach_base, base, __ATOMIC_RELEASE);
}

/* The one-compare fast path (carat.h: exo_carat_fast_end) of a set with a fast path: open
 * when nothing below its region can be mapped, so that an access below it that passes
 * faults as a page fault would. set_lock held. */
static void open_fast_end(const struct region_set *now)
{
    if (nothing_mappable_below(&now->r[0]))
        __atomic_store_n(&exo_carat_fast_end,
                         now->r[0].base + now->r[0].len - EXO_CARAT_FAST_MIN_SPAN,
                         __ATOMIC_RELEASE);
}

static struct region_set *regions_now(void)
{
    struct region_set *s = atomic_load_explicit(&current, memory_order_acquire);
    return s ? s : (struct region_set *)&default_storage;
}

static int by_base(const void *a, const void *b)
{
    const struct exo_carat_region *x = a, *y = b;
    return x->base < y->base ? -1 : x->base > y->base;
}

EXO_API int exo_carat_set_regions(const struct exo_carat_region *regions, size_t n)
{
    if (n > MAX_REGIONS)
        return exo_fail(EXO_EINVAL, "%zu regions: at most %d", n, MAX_REGIONS);
    struct region_set *s = NULL;
    if (n) {
        pthread_mutex_lock(&exo_carat.lock);   /* carat_mem is the table's */
        s = exo_carat_mem_alloc(sizeof *s + n * sizeof s->r[0]);
        pthread_mutex_unlock(&exo_carat.lock);
        if (!s)
            return exo_fail(EXO_ENOMEM, "no memory for %zu regions", n);
        s->n = n;
        for (size_t i = 0; i < n; i++)
            s->r[i] = regions[i];
        qsort(s->r, n, sizeof s->r[0], by_base);
        for (size_t i = 0; i < n; i++) {
            const struct exo_carat_region *r = &s->r[i];
            const char *bad = NULL;
            if (!r->len || r->base + r->len < r->base)
                bad = "empty or wraps around";
            else if (r->rights & ~(EXO_CARAT_READ | EXO_CARAT_WRITE | EXO_CARAT_EXEC))
                bad = "unknown rights";
            else if (i + 1 < n && r->base + r->len > s->r[i + 1].base)
                bad = "overlaps the next region";
            if (bad) {
                int rc = exo_fail(EXO_EINVAL, "region %#" PRIxPTR "+%#" PRIxPTR ": %s",
                                  r->base, r->len, bad);
                pthread_mutex_lock(&exo_carat.lock);
                exo_carat_mem_free(s, sizeof *s + n * sizeof s->r[0]);
                pthread_mutex_unlock(&exo_carat.lock);
                return rc;
            }
        }
    }
    pthread_mutex_lock(&set_lock);
    /* Close the fast path first, so no guard passes on the old range under the new set
     * (the base first: with it closed, no span lets a real address through), and open it
     * span first (a new span with the closed base passes nothing). */
    __atomic_store_n(&exo_carat_fast_end, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&exo_carat_fast_base, EXO_CARAT_FAST_CLOSED, __ATOMIC_RELEASE);
    __atomic_store_n(&exo_carat_fast_span, EXO_CARAT_FAST_MIN_SPAN, __ATOMIC_RELEASE);
    __atomic_store_n(&exo_carat_fast_reach_base, EXO_CARAT_FAST_CLOSED, __ATOMIC_RELEASE);
    __atomic_store_n(&exo_carat_fast_reach, EXO_CARAT_FAST_MIN_SPAN, __ATOMIC_RELEASE);
    __atomic_store_n(&exo_carat_fast_limit, 0, __ATOMIC_RELEASE);
    atomic_store_explicit(&current, s, memory_order_release);
    const struct region_set *now = regions_now();
    const int rw = EXO_CARAT_READ | EXO_CARAT_WRITE;
    if (now->n == 1 && (now->r[0].rights & rw) == rw && now->r[0].len >= EXO_CARAT_FAST_MIN_SPAN) {
        __atomic_store_n(&exo_carat_fast_span, now->r[0].len, __ATOMIC_RELEASE);
        __atomic_store_n(&exo_carat_fast_limit, now->r[0].len - EXO_CARAT_FAST_MIN_SPAN,
                         __ATOMIC_RELEASE);
        __atomic_store_n(&exo_carat_fast_base, now->r[0].base, __ATOMIC_RELEASE);
        open_fast_end(now);
        open_reach(&now->r[0]);
    }
    pthread_mutex_unlock(&set_lock);
    return 0;
}

/* At start-up, before main: whether the top of user space faults, and how low the kernel
 * maps; then the default set's reach and one-compare fast path (unless the program set
 * regions already). If the sysctl cannot be read, that fast path stays closed: the
 * plugin's one-compare guards then all take the exact slow path (slow, never wrong). */
__attribute__((constructor(101))) static void open_default_fast_end(void)
{
    pthread_mutex_lock(&set_lock);
    top_faults = no_user_memory_above_top();
    bool defaults = !atomic_load_explicit(&current, memory_order_acquire);
    uint64_t lowest;
    if (exo_os_lowest_map_addr(&lowest) == 0) {
        lowest_mappable = (uintptr_t)lowest;
        if (defaults)
            open_fast_end(regions_now());
    }
    if (defaults)
        open_reach(&regions_now()->r[0]);
    pthread_mutex_unlock(&set_lock);
}

/* A program built with guards only never starts the rest of the runtime (exo_carat_init),
 * and its guards' slow-path count would go unreported. */
__attribute__((constructor(102))) static void report_guards(void)
{
    exo_carat_report_at_exit();
}

/* The region holding addr, or NULL. */
static const struct exo_carat_region *region_at(const struct region_set *s, uintptr_t addr)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {                /* the last region starting at or below addr */
        size_t mid = (lo + hi) / 2;
        if (s->r[mid].base <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!lo || addr - s->r[lo - 1].base >= s->r[lo - 1].len)
        return NULL;
    return &s->r[lo - 1];
}

/* Walk [addr, end) through regions that touch end to end, as long as each gives the rights
 * in `need`; *common gets the rights all the regions walked give. Returns where the walk
 * stopped: end (or past it) when every byte is covered, else the first byte not covered. */
static uintptr_t walk_regions(uintptr_t addr, uintptr_t end, int need, int *common)
{
    const struct region_set *s = regions_now();
    *common = EXO_CARAT_READ | EXO_CARAT_WRITE | EXO_CARAT_EXEC;
    for (uintptr_t at = addr; at < end;) {
        const struct exo_carat_region *r = region_at(s, at);
        if (!r || (r->rights & need) != need)
            return at;
        *common &= r->rights;
        at = r->base + r->len;
        if (at == 0)                 /* a region that ends at the top of the address space */
            break;
    }
    return end;
}

/* A range may run through several regions that touch (a coalesced guard over two fields, a
 * memcpy): it has the rights all of them give. */
EXO_API int exo_carat_region_lookup(uintptr_t addr, uintptr_t len)
{
    uintptr_t end = addr + (len ? len : 1);
    int common;
    if (end <= addr || walk_regions(addr, end, 0, &common) != end)
        return 0;
    return common;
}

/* The first byte of [addr, addr+len) that no region gives `access` to (addr if none). */
static uintptr_t first_refused(uintptr_t addr, uintptr_t len, int access)
{
    uintptr_t end = addr + (len ? len : 1);
    int common;
    uintptr_t at = end > addr ? walk_regions(addr, end, access, &common) : addr;
    return at < end ? at : addr;
}

static const char *access_name(int access)
{
    return access & EXO_CARAT_WRITE ? "write" : access & EXO_CARAT_EXEC ? "call" : "read";
}

/* Say what was refused, as precisely as the runtime knows it. A check may cover several
 * accesses (coalesced guards, ranges): the allocation named is that of its first refused
 * byte. */
static void report(uintptr_t addr, uintptr_t len, int access, const char *site, int have)
{
    char alloc[240] = "in no tracked allocation", first[64] = "";
    uintptr_t bad = first_refused(addr, len, access);
    if (bad != addr)
        snprintf(first, sizeof first, "first refused byte %#" PRIxPTR " ", bad);
    pthread_mutex_lock(&exo_carat.lock);
    exo_carat_flush_own();
    struct alloc *a = exo_carat_alloc_table_find(&exo_carat.table, bad);
    if (a)
        snprintf(alloc, sizeof alloc, "%sat offset %" PRIuPTR " of the %" PRIuPTR
                 "-byte %s allocation from %s", first, bad - a->base, a->size,
                 a->kind == EXO_CARAT_HEAP ? "heap" : a->kind == EXO_CARAT_GLOBAL ? "global"
                 : "stack", a->site ? a->site : "?");
    else if (bad != addr)
        snprintf(alloc, sizeof alloc, "%sin no tracked allocation", first);
    pthread_mutex_unlock(&exo_carat.lock);
    fprintf(stderr, "exomem carat: guard violation: %s of %" PRIuPTR " bytes at %#" PRIxPTR
            " (%s) at %s: %s\n", access_name(access), len, addr, alloc, site ? site : "?",
            have ? "the region does not allow it" : "no protection region holds it");
}

EXO_API void exo_carat_guard_slow(uintptr_t addr, uintptr_t len, int access, const char *site)
{
    atomic_fetch_add_explicit(&exo_carat.count.guard_slow, 1, memory_order_relaxed);
    for (;;) {
        int have = exo_carat_region_lookup(addr, len);
        if ((have & access) == access)
            return;
        /* As a page fault would: a handler may change the regions and return, and the
         * access is checked again; without one the process dies of SIGSEGV. */
        carat_enter();
        report(addr, len, access, site, have);
        carat_leave();
        exo_os_signal_thread(exo_os_gettid(), SIGSEGV);
    }
}

/* exo_carat_guard_slow for the inline guards, with LLVM's preserve_most convention: it
 * keeps every general-purpose register but r11 (the arguments come in rdi, rsi, rdx, rcx,
 * as for the C function). A call that clobbers nothing makes the cold slow path free for
 * the hot code around it: with the C convention every value live across a guard had to
 * sit in one of the six callee-saved registers or be moved out of the way of the call.
 * Entered with rsp 8 past a 16-byte boundary (the call's return address); nine pushes
 * align it for the call. */
#if defined(__x86_64__)
__asm__(".pushsection .text\n"
        ".globl exo_carat_guard_slow_pm\n"
        ".type exo_carat_guard_slow_pm, @function\n"
        "exo_carat_guard_slow_pm:\n"
        ".cfi_startproc\n"
        "pushq %rax\n.cfi_adjust_cfa_offset 8\n"
        "pushq %rcx\n.cfi_adjust_cfa_offset 8\n"
        "pushq %rdx\n.cfi_adjust_cfa_offset 8\n"
        "pushq %rsi\n.cfi_adjust_cfa_offset 8\n"
        "pushq %rdi\n.cfi_adjust_cfa_offset 8\n"
        "pushq %r8\n.cfi_adjust_cfa_offset 8\n"
        "pushq %r9\n.cfi_adjust_cfa_offset 8\n"
        "pushq %r10\n.cfi_adjust_cfa_offset 8\n"
        "pushq %r11\n.cfi_adjust_cfa_offset 8\n"
        "call exo_carat_guard_slow@PLT\n"
        "popq %r11\n.cfi_adjust_cfa_offset -8\n"
        "popq %r10\n.cfi_adjust_cfa_offset -8\n"
        "popq %r9\n.cfi_adjust_cfa_offset -8\n"
        "popq %r8\n.cfi_adjust_cfa_offset -8\n"
        "popq %rdi\n.cfi_adjust_cfa_offset -8\n"
        "popq %rsi\n.cfi_adjust_cfa_offset -8\n"
        "popq %rdx\n.cfi_adjust_cfa_offset -8\n"
        "popq %rcx\n.cfi_adjust_cfa_offset -8\n"
        "popq %rax\n.cfi_adjust_cfa_offset -8\n"
        "ret\n"
        ".cfi_endproc\n"
        ".size exo_carat_guard_slow_pm, .-exo_carat_guard_slow_pm\n"
        ".popsection\n");
#endif
