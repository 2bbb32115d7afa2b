/* Moving a live heap allocation (the paper's Figure 8, at allocation rather than page
 * granularity): with the world stopped, patch every escaped pointer into it, every register
 * of a stopped thread and every word of their stacks that points into it, copy it to a new
 * block, and free the old block once the threads run again.
 *
 * Pointers are patched only where they can be read safely: a logged escape slot is read only
 * if it lies in a writable mapping (the slot may belong to memory freed since), and only
 * rewritten if it still holds the very pointer the runtime last heard it was given (the
 * escape set keeps it with the slot): a word that merely points into the allocation may be
 * data written over part of an old pointer. Stacks are scanned conservatively: a
 * word that happens to equal an address inside the allocation is changed too (as in
 * conservative garbage collectors; docs/carat.md).
 *
 * Optimised code also keeps addresses derived from a block but outside it: a base 8 bytes
 * before an array for 1-based indexing, a loop bound just past its end (LLVM's loop
 * strength reduction makes them freely, more so around guards' range checks), and programs
 * store one-past-the-end pointers. Those that fall in the block's own malloc chunk (its
 * 16-byte header, and its unused tail up to malloc_usable_size) can only be the block's, and
 * are patched like pointers into it, except in a thread stopped inside the C library, whose
 * malloc holds chunk addresses of its own. Any other address within DERIVED_REACH bytes of
 * the block and outside every other tracked allocation cannot be told from a pointer to the
 * neighbouring memory: a move first looks for them in every stopped thread and is refused
 * (nothing changed) when it finds one; the mover tries again at its next tick. */
#include "carat/carat_internal.h"
#include "carat/carat_mem.h"
#include "os/os.h"
#include "internal.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <cpuid.h>
#include <ucontext.h>

#define MAX_RANGES 65536
#define MAPS_BUF (8u << 20)

static uintptr_t *ranges;     /* writable mappings at the time of the move: [lo, hi) pairs */
static int nranges;
static char *maps_buf;

/* The writable mappings are read from /proc/self/maps only when a move needs them (about
 * 40 us): for a slot outside every tracked allocation, or a stack not seen before. */
static bool maps_loaded;

static int load_maps(void)
{
    if (maps_loaded)
        return 0;
    int nr = exo_os_writable_ranges(ranges, MAX_RANGES, maps_buf, MAPS_BUF);
    if (nr < 0)
        return nr;
    nranges = nr;
    maps_loaded = true;
    return 0;
}

/* The writable range holding [a, a + 8), or -1. */
static int range_of(uintptr_t a)
{
    int lo = 0, hi = nranges - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (a < ranges[2 * mid])
            hi = mid - 1;
        else if (a >= ranges[2 * mid + 1])
            lo = mid + 1;
        else
            return a + 8 <= ranges[2 * mid + 1] ? mid : -1;
    }
    return -1;
}

/* Can the 8 bytes at slot be read and written, as the program's? Inside a live tracked
 * allocation they can. A slot that lay in one when the runtime heard of it (in_alloc) and
 * lies in none now is freed memory: malloc's links, or pages unmapped and mapped again for
 * the runtime's own tables, where a word may well equal the value. Elsewhere (TLS, memory of
 * an uninstrumented library) only if a writable mapping holds them. Unknown (the mappings
 * unreadable): no. */
static bool slot_usable(uintptr_t slot, bool in_alloc)
{
    const struct alloc *a = exo_carat_alloc_table_find(&exo_carat.table, slot);
    if (a && slot + 8 <= a->base + a->size)
        return true;
    return !in_alloc && load_maps() == 0 && range_of(slot) >= 0;
}

/* The C library's code, found once before the first stop (dl_iterate_phdr takes the
 * loader's lock, which a stopped thread may hold). */
static uintptr_t libc_lo, libc_hi;

static void find_libc(void)
{
    static bool done;
    if (done)
        return;
    done = true;
    if (exo_os_code_segment((const void *)malloc, &libc_lo, &libc_hi) != 0)
        libc_lo = libc_hi = 0;
}

/* Where each thread's stack mapping ends, kept across moves: a thread's stack does not move
 * while it lives. Checked against the stack pointer before use (a thread id can be reused). */
#define STACK_CACHE 256
static struct { pid_t tid; uintptr_t lo, hi; } stacks[STACK_CACHE];

static bool stack_of(pid_t tid, uintptr_t sp, uintptr_t *lo, uintptr_t *hi)
{
    unsigned h = (unsigned)tid % STACK_CACHE;
    if (stacks[h].tid == tid && sp >= stacks[h].lo && sp < stacks[h].hi) {
        *lo = stacks[h].lo;
        *hi = stacks[h].hi;
        return true;
    }
    if (load_maps() != 0)
        return false;
    int r = range_of(sp & ~(uintptr_t)7);
    if (r < 0)
        return false;
    stacks[h].tid = tid;
    *lo = stacks[h].lo = ranges[2 * r];
    *hi = stacks[h].hi = ranges[2 * r + 1];
    return true;
}

#define DERIVED_REACH 512

/* One pass over pointer-holding words: with check set, count the derived addresses
 * (above) instead of patching. */
struct patch {
    uintptr_t base, size;
    intptr_t delta;
    uint64_t patched;
    uintptr_t own_lo, own_hi;  /* the block's malloc chunk: header, block, unused tail */
    bool in_libc;              /* the words being visited are a thread's stopped in libc */
    bool check;
    uint64_t derived;          /* check: words found near the block, outside it */
    uintptr_t derived_value;   /* the first of them, for the error message */
};

/* Is v, outside the block, an address derived from it? Near it, and neither inside nor one
 * past the end of another tracked allocation. Called with the runtime's lock held. */
static bool derived_from_block(const struct patch *p, uintptr_t v)
{
    if (v - p->own_lo < p->own_hi - p->own_lo)
        return p->in_libc;               /* the block's own chunk: patched, unless in malloc */
    if (v + DERIVED_REACH - p->base >= p->size + 2 * DERIVED_REACH)
        return false;                    /* far from the block (or v < DERIVED_REACH) */
    if (exo_carat_alloc_table_find(&exo_carat.table, v))
        return false;
    const struct alloc *before = exo_carat_alloc_table_find(&exo_carat.table, v - 1);
    return !before || before->base == p->base;
}

/* Words are read and written with memcpy (a slot in a packed struct may be unaligned), and
 * without AddressSanitizer's checks: stacks and stale slots hold poisoned bytes that the
 * program itself may never read, and reading them here is deliberate. */
CARAT_NO_ASAN static void patch_word(struct patch *p, uintptr_t *w)
{
    uintptr_t v;
    memcpy(&v, w, sizeof v);
    if (p->check) {
        if (v - p->base >= p->size && derived_from_block(p, v) && !p->derived++)
            p->derived_value = v;
        return;
    }
    /* The block and its own chunk (the check pass refused the move if a thread stopped in
     * libc held the chunk's edges). */
    if (v - p->own_lo < p->own_hi - p->own_lo) {
        v += (uintptr_t)p->delta;
        memcpy(w, &v, sizeof v);
        p->patched++;
    }
}

/* Does the slot still hold the pointer it was last known to hold? Lying in the block is not
 * enough: a slot may have been overwritten since by data that kept most of its bits, a
 * narrower store over part of it (a union's tag byte over the low byte of a pointer member,
 * as in Lua's UpVal, whose closed value's type tag overlays the open list's back pointer),
 * or a stale slot in freed memory that a new object reuses with a field of its own. Every
 * pointer store and copy the plugin instruments tells the runtime the exact value. */
CARAT_NO_ASAN static bool holds(uintptr_t slot, uintptr_t value)
{
    uintptr_t v;
    memcpy(&v, (const void *)slot, sizeof v);
    return v == value;
}

CARAT_NO_ASAN static void patch_escapes(struct patch *p, struct alloc *a)
{
    struct escape_set *s = &a->escapes;
    for (uint32_t i = 0; i < s->cap; i++) {
        struct escape_slot *e = &s->slots[i];
        if (!e->slot || e->value - p->base > p->size)   /* one past the end too */
            continue;
        if (slot_usable(e->slot, e->in_alloc) && holds(e->slot, e->value))
            patch_word(p, (uintptr_t *)e->slot);
        /* Known to hold it or not, the slot's expected value follows the block: a copy
         * whose hook ran before this move writes the patched source into it after. */
        e->value += (uintptr_t)p->delta;
    }
}

/* Vector registers: memcpy and struct copies carry pointers (and their own cursors) through
 * them. The SSE registers are in the signal frame's legacy area; the rest of the AVX and
 * AVX-512 registers in its XSAVE area, at the offsets CPUID gives for each component, when
 * the frame says it holds them. Every 8-byte lane is treated as a possible pointer. */
#if defined(__x86_64__)
#define FPXS_MAGIC 0x46505853u      /* the kernel's mark of an extended signal frame */
#define XSAVE_HEADER 512            /* xstate_bv: which components the area holds */
static const unsigned vector_components[] = { 2, 6, 7 };  /* YMM_Hi128, ZMM_Hi256, Hi16_ZMM */

CARAT_NO_ASAN static void patch_vectors(struct patch *p, ucontext_t *uc)
{
    char *fp = (char *)uc->uc_mcontext.fpregs;
    if (!fp)
        return;
    for (int i = 0; i < 16; i++) {
        uint32_t *x = uc->uc_mcontext.fpregs->_xmm[i].element;
        patch_word(p, (uintptr_t *)x);
        patch_word(p, (uintptr_t *)(x + 2));
    }
    uint32_t magic, extended_size;
    memcpy(&magic, fp + 464, 4);            /* struct _fpx_sw_bytes in the legacy area */
    memcpy(&extended_size, fp + 468, 4);
    if (magic != FPXS_MAGIC)
        return;
    uint64_t present;
    memcpy(&present, fp + XSAVE_HEADER, 8);
    for (size_t c = 0; c < sizeof vector_components / sizeof vector_components[0]; c++) {
        unsigned comp = vector_components[c], size, offset, ecx, edx;
        if (!(present & (1ull << comp)) || !__get_cpuid_count(0xd, comp, &size, &offset,
                                                               &ecx, &edx))
            continue;
        if (!size || offset + size > extended_size)
            continue;
        for (unsigned off = 0; off + 8 <= size; off += 8)
            patch_word(p, (uintptr_t *)(fp + offset + off));
    }
}
#endif

/* Registers and stack of one stopped thread. The scan starts 128 bytes below its stack
 * pointer (the x86-64 red zone, live data of a leaf function) and ends at the end of the
 * mapping that holds the stack (thread stacks end with the thread's TLS block, which is
 * scanned too: thread-local pointers). */
CARAT_NO_ASAN static void patch_thread(struct patch *p, pid_t tid, ucontext_t *uc)
{
#if defined(__x86_64__)
    greg_t *g = uc->uc_mcontext.gregs;
    p->in_libc = (uintptr_t)g[REG_RIP] - libc_lo < libc_hi - libc_lo;
    static const int regs[] = { REG_RAX, REG_RBX, REG_RCX, REG_RDX, REG_RSI, REG_RDI,
                                REG_RBP, REG_R8, REG_R9, REG_R10, REG_R11, REG_R12,
                                REG_R13, REG_R14, REG_R15 };
    for (size_t i = 0; i < sizeof regs / sizeof regs[0]; i++)
        patch_word(p, (uintptr_t *)&g[regs[i]]);
    patch_vectors(p, uc);
    uintptr_t rsp = (uintptr_t)g[REG_RSP] & ~(uintptr_t)7, lo, hi;
    if (!stack_of(tid, rsp, &lo, &hi))
        return;
    uintptr_t from = rsp - 128 < lo ? lo : rsp - 128;   /* the red zone, within the stack */
    /* The signal frame (below the red zone, or on an alternate stack) is not scanned: its
     * register copy is patched above; the rest is the kernel's. */
    for (uintptr_t w = from; w + 8 <= hi; w += 8)
        if (w < (uintptr_t)uc || w >= (uintptr_t)(uc + 1))
            patch_word(p, (uintptr_t *)w);
#else
    (void)p;
    (void)tid;
    (void)uc;
#endif
}

/* Escapes still in the threads' logs (not yet in the table): a slot logged with a value
 * inside the block is patched like a slot of its escape set. Their threads are stopped
 * outside the runtime, so their logs are quiet. */
CARAT_NO_ASAN static void patch_logged(struct patch *p)
{
    for (struct carat_thread *t = exo_carat.threads; t; t = t->next)
        for (uint32_t i = 0; i < t->n; i++)
            if (t->log[i].value - p->base <= p->size && slot_usable(t->log[i].slot, false) &&
                holds(t->log[i].slot, t->log[i].value))
                patch_word(p, (uintptr_t *)t->log[i].slot);
}

/* After the copy, the logs speak of the new block: a logged slot inside the old block is at
 * the same offset of the new one, and so is a logged value (its slot was patched, or will
 * be written with the patched register). */
static void rebase_logs(const struct patch *p)
{
    for (struct carat_thread *t = exo_carat.threads; t; t = t->next)
        for (uint32_t i = 0; i < t->n; i++) {
            if (t->log[i].slot - p->base < p->size)
                t->log[i].slot += (uintptr_t)p->delta;
            if (t->log[i].value - p->base <= p->size)   /* one past the end too */
                t->log[i].value += (uintptr_t)p->delta;
        }
}

/* Keep the escape map right after the copy: slots that were inside the old block are now
 * at the same offset in the new one, and the new block's pointers are escapes of theirs. */
static void rekey_inner_slots(struct alloc *a, struct patch *p)
{
    struct escape_set *s = &a->escapes;
    struct escape_slot moved[64];
    int nmoved;
    do {
        nmoved = 0;
        for (uint32_t i = 0; i < s->cap && nmoved < 64; i++)
            if (s->slots[i].slot && s->slots[i].slot - p->base < p->size)
                moved[nmoved++] = s->slots[i];
        for (int i = 0; i < nmoved; i++) {
            exo_carat_escape_set_remove(s, moved[i].slot);
            exo_carat_escape_set_add(&exo_carat.table, s, moved[i].slot + (uintptr_t)p->delta,
                                     moved[i].value, moved[i].in_alloc);
        }
    } while (nmoved == 64);
}

int exo_carat_move_now(uintptr_t addr, void **new_base, struct exo_carat_move_cost *cost)
{
    struct exo_carat_move_cost c;
    memset(&c, 0, sizeof c);
    uintptr_t base, size, align;
    pthread_mutex_lock(&exo_carat.lock);
    struct alloc *a = exo_carat_alloc_table_find(&exo_carat.table, addr);
    bool heap = a && a->kind == EXO_CARAT_HEAP;
    base = a ? a->base : 0;
    size = a ? a->size : 0;
    align = a ? a->align : 0;
    if (!maps_buf) {
        maps_buf = exo_carat_mem_alloc(MAPS_BUF);
        ranges = exo_carat_mem_alloc(2 * MAX_RANGES * sizeof *ranges);
    }
    pthread_mutex_unlock(&exo_carat.lock);
    if (!heap)
        return exo_fail(EXO_ENOENT, "%#lx is in no tracked heap allocation",
                        (unsigned long)addr);
    if (!maps_buf || !ranges)
        return exo_fail(EXO_ENOMEM, "no memory for the move's mapping list");
    find_libc();
    /* The program may use the whole block malloc gave it, not only the size it asked for:
     * malloc_usable_size says how much, and programs rely on it (SQLite sizes its string
     * and value buffers by it, and keeps a block whose rounded new size still fits instead
     * of calling realloc). The copy covers, and keeps, every usable byte: span. Asked for
     * with that size, the new block has the same usable size in glibc (its chunk sizes are
     * the usable size plus 8, in 16-byte steps), which programs that count the usable
     * sizes of their blocks (SQLite's memory statistics) need too. */
    uintptr_t span = malloc_usable_size((void *)base);
    if (span < size)
        span = size;
    void *dest = NULL;
    if (posix_memalign(&dest, align, span))
        dest = NULL;
    if (!dest)
        return exo_fail(EXO_ENOMEM, "no memory for a copy of %lu bytes", (unsigned long)size);

    uint64_t t0 = exo_os_now_ns();
    struct carat_parked *parked;
    int nparked;
    int rc = exo_carat_world_stop(&parked, &nparked, 1000000000ull);
    if (rc) {
        free(dest);
        return rc;
    }
    uint64_t t1 = exo_os_now_ns();
    pthread_mutex_lock(&exo_carat.lock);
    a = exo_carat_alloc_table_find(&exo_carat.table, base);
    if (!a || a->base != base || a->size != size || a->kind != EXO_CARAT_HEAP) {
        pthread_mutex_unlock(&exo_carat.lock);
        exo_carat_world_resume();
        free(dest);
        return exo_fail(EXO_EAGAIN, "the allocation at %#lx changed while the world stopped",
                        (unsigned long)base);
    }
    maps_loaded = false;   /* read again if this move needs them */
    /* The block's chunk, as glibc's malloc lays it out: a 16-byte header before it. */
    struct patch p = { base, span, (intptr_t)((uintptr_t)dest - base), 0, base - 16,
                       base + span, false, true, 0, 0 };
    for (int i = 0; i < nparked; i++)
        if (parked[i].ucontext)
            patch_thread(&p, parked[i].tid, parked[i].ucontext);
    if (p.derived) {
        pthread_mutex_unlock(&exo_carat.lock);
        exo_carat_world_resume();
        free(dest);
        atomic_fetch_add(&exo_carat.count.moves_refused, 1);
        long off = p.derived_value < base ? -(long)(base - p.derived_value)
                                          : (long)(p.derived_value - base);
        return exo_fail(EXO_EAGAIN, "a stopped thread holds %#lx (offset %+ld of the %lu-byte "
                        "allocation at %#lx), an address derived from it that a move cannot "
                        "patch: nothing moved, try again", (unsigned long)p.derived_value,
                        off, (unsigned long)size, (unsigned long)base);
    }
    p.check = false;
    p.in_libc = false;
    uint64_t t2 = exo_os_now_ns();
    patch_escapes(&p, a);
    patch_logged(&p);
    uint64_t t3 = exo_os_now_ns();
    for (int i = 0; i < nparked; i++)
        if (parked[i].ucontext)
            patch_thread(&p, parked[i].tid, parked[i].ucontext);
    uint64_t t4 = exo_os_now_ns();
    memcpy(dest, (void *)base, span);
    exo_carat_alloc_table_rebase(&exo_carat.table, a, (uintptr_t)dest);
    rekey_inner_slots(a, &p);
    rebase_logs(&p);
    exo_carat_flush_all();   /* the stopped threads' logs, now in the new coordinates */
    /* The pointers the block holds into other allocations: known at the old slots (every
     * log is flushed), now at the same offsets of the new block. */
    exo_carat_scan_known((uintptr_t)dest, base, span, true);
    uint64_t t5 = exo_os_now_ns();
    pthread_mutex_unlock(&exo_carat.lock);
    exo_carat_world_resume();
    uint64_t t6 = exo_os_now_ns();
    free((void *)base);

    c.stop_ns = t1 - t0;
    c.find_ns = t2 - t1;
    c.patch_ns = t3 - t2;
    c.register_ns = t4 - t3;
    c.copy_ns = t5 - t4;
    c.resume_ns = t6 - t5;
    c.patched = p.patched;
    c.threads = (uint64_t)nparked;
    atomic_fetch_add(&exo_carat.count.moves, 1);
    atomic_fetch_add(&exo_carat.count.move_ns, t6 - t0);
    if (cost)
        *cost = c;
    if (new_base)
        *new_base = dest;
    return 0;
}
