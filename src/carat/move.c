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
 * Addresses derived from the block but outside it, and the C library's own chunk addresses,
 * are told apart in move_derived.c: a move that meets one it cannot patch is refused. */
#include "carat/carat_internal.h"
#include "carat/carat_mem.h"
#include "carat/mappings.h"
#include "carat/move_patch.h"
#include "carat/shadow.h"
#include "os/os.h"
#include "internal.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <cpuid.h>
#include <ucontext.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

/* Can the 8 bytes at slot be read and written, as the program's? Inside a live tracked
 * allocation they can. A slot that lay in one when the runtime heard of
 * it (was_in_alloc) and lies in none now is freed memory: malloc's links, or pages unmapped
 * and mapped again for the runtime's own tables, where a word may well equal the value.
 * Elsewhere (TLS, memory of an uninstrumented library) only if a writable mapping holds
 * them. Unknown (the mappings unreadable): no. */
static bool slot_usable(uintptr_t slot, bool was_in_alloc)
{
    const struct alloc *a = exo_carat_alloc_table_find(&exo_carat.table, slot);
    if (a && slot + 8 <= a->base + a->size)
        return true;
    uintptr_t lo, hi;
    return !was_in_alloc && exo_carat_mappings_find(slot, &lo, &hi);
}

/* w, which holds v, gets v's address in the copy. */
CARAT_NO_ASAN static void shift_word(struct patch *p, uintptr_t *w, uintptr_t v)
{
    v += (uintptr_t)p->delta;
    memcpy(w, &v, sizeof v);
    p->patched++;
}

/* Words are read and written with memcpy (a slot in a packed struct may be unaligned), and
 * without AddressSanitizer's checks: stacks and stale slots hold poisoned bytes that the
 * program itself may never read, and reading them here is deliberate. */
CARAT_NO_ASAN static void patch_word(struct patch *p, uintptr_t *w)
{
    uintptr_t v;
    memcpy(&v, w, sizeof v);
    if (p->check) {
        bool refuse = v - p->base >= p->size ? exo_carat_derived_from_block(p, v)
                                             : exo_carat_next_chunk_in_libc(p, v);
        if (refuse && !p->derived++)
            p->derived_value = v;
        return;
    }
    /* The block and its own chunk (the check pass refused the move if a thread stopped in
     * libc held the chunk's edges). */
    if (exo_carat_in_own_chunk(p, v) && !exo_carat_owned_by_block_before(p, v))
        shift_word(p, w, v);
}

/* A word that may hold a pointer into the block but no address derived from it: patched
 * if it lies inside the block, never a reason to refuse the move. */
CARAT_NO_ASAN static void patch_pointer_only(struct patch *p, uintptr_t *w)
{
    uintptr_t v;
    memcpy(&v, w, sizeof v);
    if (!p->check && v - p->base < p->size)
        shift_word(p, w, v);
}

/* The escapes of the block: each slot that still holds the pointer it was last known to
 * hold is patched. Lying in the block is not enough: a slot may have been overwritten since
 * by data that kept most of its bits, a narrower store over part of it (a union's tag byte
 * over the low byte of a pointer member, as in Lua's UpVal, whose closed value's type tag
 * overlays the open list's back pointer), or a stale slot in freed memory that a new
 * object reuses with a field of its own. Every pointer store and copy the plugin
 * instruments tells the runtime the exact value.
 *
 * The slots are read through the kernel first (exo_os_read_self), a batch at a time, not
 * directly: a tracked block freed by code the plugin never saw still counts as live, and
 * glibc may have unmapped it (a big block is a mapping of its own); reading its slots would
 * kill the process in the middle of a move. An unreadable slot is left alone. Where the
 * kernel refuses such reads altogether, the slots are read directly, as they were before. */
#define PATCH_BATCH 256

/* Known to hold it or not, the slot's expected value follows the block: a copy whose hook
 * ran before this move writes the patched source into it after. */
static void follow_block(const struct patch *p, struct escape_slot *e)
{
    *e = escape_slot_make(e->slot, escape_value(e) + (uintptr_t)p->delta, escape_in_alloc(e));
}

/* Patch the slots of e[0..n) that hold their recorded value, then let each follow the
 * block (after the compare, which needs the value from before the move). */
CARAT_NO_ASAN static void patch_batch(struct patch *p, struct escape_slot **e, uint32_t n)
{
    /* addr set: gcc cannot tell n is in range */
    uintptr_t addr[PATCH_BATCH] = { 0 }, word[PATCH_BATCH];
    bool ok[PATCH_BATCH];
    if (n == 0)
        return;
    for (uint32_t k = 0; k < n; k++)
        addr[k] = e[k]->slot;
    if (exo_os_read_self(addr, word, ok, n) != 0)
        for (uint32_t k = 0; k < n; k++) {
            memcpy(&word[k], (const void *)addr[k], sizeof word[k]);
            ok[k] = true;
        }
    for (uint32_t k = 0; k < n; k++) {
        if (ok[k] && word[k] == escape_value(e[k]))
            patch_word(p, (uintptr_t *)addr[k]);
        follow_block(p, e[k]);
    }
}

/* Is value, in slot, glibc's own link rather than a pointer of the program's? Outside
 * every live allocation (in freed memory, or an uninstrumented library's), the address of
 * the next malloc chunk (the block's last 8 bytes) is a link in a free chunk far more often
 * than a pointer of the program: a stale slot recorded in a block's uninitialised tail,
 * freed since, held exactly that again as a large free chunk's bk_nextsize, and patching it
 * corrupted malloc's lists (SQLite's fuzzcheck). Such a slot is left alone, whether the
 * escape sets or the shadow name it. */
static bool malloc_link(const struct patch *p, uintptr_t slot, uintptr_t value)
{
    return value == p->base + p->size - 8 &&
           !exo_carat_alloc_table_holds(&exo_carat.table, slot);
}

CARAT_NO_ASAN static void patch_escapes(struct patch *p, struct alloc *a)
{
    struct escape_set *s = &a->escapes;
    struct escape_slot *batch[PATCH_BATCH];
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->cap; i++) {
        struct escape_slot *e = &s->slots[i];
        uintptr_t value = escape_value(e);
        if (!e->slot || !exo_carat_in_own_chunk(p, value))   /* header and one past the end too */
            continue;
        if (!slot_usable(e->slot, escape_in_alloc(e)) || malloc_link(p, e->slot, value)) {
            follow_block(p, e);
            continue;
        }
        batch[n++] = e;
        if (n == PATCH_BATCH) {
            patch_batch(p, batch, n);
            n = 0;
        }
    }
    patch_batch(p, batch, n);
}

/* A slot whose shadow word points into the block's own chunk (shadow.h; its header too, a
 * base for 1-based indexing, unless the block before owns that address): patched if it
 * still holds that very value and is not glibc's link (malloc_link), and its shadow
 * follows the block either way (a thread stopped between the shadow store and its own
 * store writes the patched register there next). The slot lies in a writable mapping of
 * this stop: it can be read. */
CARAT_NO_ASAN static void patch_shadow_slot(uintptr_t slot, uintptr_t *shadow, void *arg)
{
    struct patch *p = arg;
    uintptr_t v = *shadow, word;
    if (v < p->base && exo_carat_owned_by_block_before(p, v))
        return;
    memcpy(&word, (const void *)slot, sizeof word);
    if (word == v && !malloc_link(p, slot, v))
        patch_word(p, (uintptr_t *)slot);
    *shadow = v + (uintptr_t)p->delta;
}

/* The slots the shadow knows, over every writable mapping (loaded by the caller before
 * anything was patched). */
static void patch_shadow(struct patch *p)
{
    int n;
    const uintptr_t *ranges = exo_carat_shadow_on ? exo_carat_mappings_all(&n) : NULL;
    if (ranges)
        exo_carat_shadow_visit(ranges, n, p->own_lo, p->own_hi - 1, patch_shadow_slot, p);
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

/* The words of a stopped thread's stack mapping that are not the program's own. A thread
 * the C library started has, at the top of that mapping, its descriptor (struct pthread,
 * from the thread pointer up) and below it the static TLS blocks, the runtime's
 * exo_carat_tls among them. Their words hold the mapping's own edges (the descriptor's
 * stack block, which is where the mapping starts, and the runtime's stack bounds, where it
 * ends), and a block mapped right above or below is one whose header or one-past-the-end
 * address equals one of them. Patched as such (minimap2, moving kalloc's 8 MiB cores
 * while its threads map reads), the runtime's stack end moved below its stack start: the
 * inline escape filter then took every heap slot for one in the thread's own stack and
 * dropped its escapes (the next move left those slots at the freed copy), and glibc
 * asserted at the thread's exit over a stack block it no longer recognised. The runtime's
 * words hold no pointer of the program's: never patched. The descriptor holds the
 * program's start argument, result and thread-specific values, which are pointers into
 * blocks, not addresses derived from them: only those are patched. The main thread's
 * descriptor and TLS are not in its stack mapping: nothing to skip. */
static bool runtime_word(const struct carat_parked *pk, uintptr_t w)
{
    return w - pk->runtime_tls < sizeof exo_carat_tls;
}

/* The words of a stack [lo, hi) in use from sp up, with the 128 bytes below it (the x86-64
 * red zone, live data of a leaf function), except the signal frame [skip_lo, skip_hi) and
 * the words of pk's that are not the program's (runtime_word; its descriptor, from its
 * thread pointer to hi when that lies in the stack, pointers only). */
CARAT_NO_ASAN static void patch_stack_words(struct patch *p, const struct carat_parked *pk,
                                            uintptr_t sp, uintptr_t lo, uintptr_t hi,
                                            uintptr_t skip_lo, uintptr_t skip_hi)
{
    uintptr_t descriptor = pk->thread_pointer - lo < hi - lo ? pk->thread_pointer : hi;
    uintptr_t from = sp - 128 < lo ? lo : sp - 128;
    for (uintptr_t w = from; w + 8 <= hi; w += 8) {
        if ((w >= skip_lo && w < skip_hi) || runtime_word(pk, w))
            continue;
        if (w >= descriptor)
            patch_pointer_only(p, (uintptr_t *)w);
        else
            patch_word(p, (uintptr_t *)w);
    }
}

/* The stack pointer a thread had on its own stack when a signal first took it onto its
 * alternate stack [lo, hi) (uc: its context now, somewhere on it): the kernel built that
 * signal's frame at the top, and its saved context names the alternate stack and a stack
 * pointer off it. Nested handlers' frames lie below, with stack pointers on it. Only the
 * part in use is read, from its stack pointer now up (programs may keep a guard page at
 * the bottom). 0 if no such frame is found. */
CARAT_NO_ASAN static uintptr_t entry_sp(const ucontext_t *uc, uintptr_t lo, uintptr_t hi)
{
    uintptr_t used = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
    if (used < lo || hi - used < sizeof(ucontext_t))
        return 0;
    for (uintptr_t w = (hi - sizeof(ucontext_t)) & ~(uintptr_t)7; w >= used; w -= 8) {
        const ucontext_t *f = (const ucontext_t *)w;
        if (f->uc_stack.ss_sp != uc->uc_stack.ss_sp || f->uc_stack.ss_size != uc->uc_stack.ss_size)
            continue;
        uintptr_t sp = (uintptr_t)f->uc_mcontext.gregs[REG_RSP];
        if (sp - lo >= hi - lo)
            return sp;
    }
    return 0;
}

/* The program's frames of a thread stopped on its alternate signal stack, on its own stack:
 * from the stack pointer its first signal frame there saved (entry_sp) to the end of the
 * mapping. That pointer is checked against an address the stop knew in the thread's own
 * stack (world.c: one seen before, or its registered end), when there is one: if the two
 * are in different mappings, the whole of the known one is scanned (the words below its
 * stack pointer are dead, and patching them changes nothing). Neither found: the move is
 * refused. */
CARAT_NO_ASAN static void patch_own_stack(struct patch *p, const struct carat_parked *pk,
                                          uintptr_t alt_lo, uintptr_t alt_hi)
{
    uintptr_t sp = entry_sp(pk->ucontext, alt_lo, alt_hi) & ~(uintptr_t)7;
    uintptr_t lo, hi, known_lo, known_hi;
    bool found = sp && exo_carat_mappings_find(sp, &lo, &hi);
    bool known = pk->own_stack &&
                 exo_carat_mappings_find(pk->own_stack & ~(uintptr_t)7, &known_lo, &known_hi);
    if (!found || (known && known_lo != lo)) {
        if (!known) {
            p->stack_unknown = true;
            return;
        }
        sp = lo = known_lo;
        hi = known_hi;
    }
    patch_stack_words(p, pk, sp, lo, hi, 0, 0);
}

/* Registers and stack of one stopped thread. The scan starts in the red zone below its stack
 * pointer and ends at the end of the mapping that holds the stack (thread stacks end with
 * the thread's TLS block, which is scanned too: thread-local pointers). A thread stopped
 * inside a handler on its alternate signal stack (the program's, or AddressSanitizer's)
 * has that handler's frames, and the context it interrupted, there, and the program's
 * frames on its own stack: both are scanned. */
CARAT_NO_ASAN static void patch_thread(struct patch *p, const struct carat_parked *pk)
{
#if defined(__x86_64__)
    ucontext_t *uc = pk->ucontext;
    greg_t *g = uc->uc_mcontext.gregs;
    /* The thread that asked for this move waits in the C library (pthread_cond_wait), not
     * in malloc: its words are the program's, as old chunk addresses in its stack are no
     * malloc state (they refused moves of move_qsort's buffer one run in two). */
    p->in_libc = exo_carat_in_libc_code((uintptr_t)g[REG_RIP]) && pk->tid != p->requester;
    uintptr_t rsp = (uintptr_t)g[REG_RSP] & ~(uintptr_t)7, lo, hi;
    if (pk->on_alternate_stack) {
        lo = (uintptr_t)uc->uc_stack.ss_sp;
        hi = lo + uc->uc_stack.ss_size;
    } else if (!exo_carat_mappings_stack(pk->tid, rsp, &lo, &hi)) {
        lo = hi = 0;
    }
    /* The thread that asked for this move: exo_carat_move spilled every callee-saved
     * register into its own frame, so the caller's words all lie from its stack pointer
     * there up. The check for derived addresses reads only those; below are the runtime's
     * and the C library's frames of the wait, whose stale words (the C library's chunk
     * addresses next to the block, from calls long returned) refused exo_carat_move in
     * move_derived one run in 250, every retry alike. They, and the registers, are still
     * patched like any other thread's. */
    bool caller_only = p->check && pk->tid == p->requester && p->requester_floor &&
                       !pk->on_alternate_stack && p->requester_floor - lo < hi - lo;
    uintptr_t busy = p->check && !caller_only ? exo_carat_libc_register_in_block(p, g) : 0;
    if (busy && !p->libc_busy)
        p->libc_busy = busy;
    if (!caller_only) {
        static const int regs[] = { REG_RAX, REG_RBX, REG_RCX, REG_RDX, REG_RSI, REG_RDI,
                                    REG_RBP, REG_R8, REG_R9, REG_R10, REG_R11, REG_R12,
                                    REG_R13, REG_R14, REG_R15 };
        for (size_t i = 0; i < sizeof regs / sizeof regs[0]; i++)
            patch_word(p, (uintptr_t *)&g[regs[i]]);
        patch_vectors(p, uc);
    } else if (p->requester_floor > rsp + 128) {
        rsp = p->requester_floor + 128;   /* the scan starts 128 bytes below (red zone) */
    }
    if (lo == hi)
        return;
    /* The signal frame (below the red zone, or on an alternate stack) is not scanned: its
     * register copy is patched above; the rest is the kernel's. */
    patch_stack_words(p, pk, rsp, lo, hi, (uintptr_t)uc, (uintptr_t)(uc + 1));
    if (pk->on_alternate_stack)
        patch_own_stack(p, pk, lo, hi);
#else
    (void)p;
    (void)pk;
#endif
}

/* A log entry a stopped thread had half written (exo_carat_claim_inflight) holds the value
 * it is about to store, which the move patches in its registers: that word follows. */
static void patch_partial_entries(struct patch *p)
{
    for (struct carat_thread *t = exo_carat.threads; t; t = t->next)
        if (t->partial)
            patch_word(p, &t->partial->value);
}

/* Keep the escape map right after the copy: slots that were inside the old block are now
 * at the same offset in the new one, and the new block's pointers are escapes of theirs.
 * One pass over the set (a block of 2 MB holds 250,000 pointers to itself); without memory
 * for it, a few slots at a time. */
static void rekey_inner_slots(struct alloc *a, struct patch *p)
{
    struct escape_set *s = &a->escapes;
    if (exo_carat_escape_set_rekey(s, p->base, p->size, p->delta) == 0)
        return;
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
                                     escape_value(&moved[i]), escape_in_alloc(&moved[i]),
                                     false);
        }
    } while (nmoved == 64);
}

/* Stores the stopped threads' logs announce into the block itself. A thread may be stopped
 * between such a hook and its store: its slot still holds the old value, the only one the
 * scan of the copy can see, and the announced value (another block's address, kept in that
 * block's set under the slot's old address) would be lost with the old block. Kept before
 * the logs are applied, and told again in the new block's addresses after the scan (newer
 * after older, so the last store of each slot wins, as it will in memory). */
#define INNER_CAP 8192
static struct escape_entry *inner;
static uint32_t ninner;

/* Keep them; false if there are more than INNER_CAP (the move is then refused). */
static bool keep_inner_logged(uintptr_t base, uintptr_t span)
{
    ninner = 0;
    for (struct carat_thread *t = exo_carat.threads; t; t = t->next)
        for (uint32_t i = 0; i < t->n; i++)
            if (t->log[i].slot - base < span) {
                if (ninner == INNER_CAP)
                    return false;
                inner[ninner++] = t->log[i];
            }
    return true;
}

static void note_inner_logged(const struct patch *p)
{
    for (uint32_t i = 0; i < ninner; i++) {
        uintptr_t v = inner[i].value;
        if (v - p->base <= p->size)   /* into the block itself (one past the end too) */
            v += (uintptr_t)p->delta;
        exo_carat_note_escape(inner[i].slot + (uintptr_t)p->delta, v, false);
    }
}

int exo_carat_move_now(uintptr_t addr, pid_t requester, uintptr_t requester_floor,
                       void **new_base, struct exo_carat_move_cost *cost)
{
    struct exo_carat_move_cost c;
    memset(&c, 0, sizeof c);
    uintptr_t base, size, align;
    pthread_mutex_lock(&exo_carat.lock);
    /* On the mover thread, which allocates nothing the plugin sees: the requester's
     * pending blocks, like every other thread's, are drained by a stopped world. */
    struct alloc *a = exo_carat_alloc_table_find(&exo_carat.table, addr);
    if (!a && exo_carat_pending_any()) {
        /* Perhaps a block another thread allocated since its last drain: only a stopped
         * world lets the runtime index their lists. */
        pthread_mutex_unlock(&exo_carat.lock);
        exo_carat_pending_drain_everyone();
        pthread_mutex_lock(&exo_carat.lock);
        a = exo_carat_alloc_table_find(&exo_carat.table, addr);
    }
    bool heap = a && a->kind == EXO_CARAT_HEAP;
    base = a ? a->base : 0;
    size = a ? a->size : 0;
    align = a ? (uintptr_t)1 << a->align_shift : 0;
    bool pinned = a && a->pinned;
    int no_maps = exo_carat_mappings_reserve();   /* each tried again at the next move */
    if (!inner)
        inner = exo_carat_mem_alloc(INNER_CAP * sizeof *inner);
    pthread_mutex_unlock(&exo_carat.lock);
    if (!heap)
        return exo_fail(EXO_ENOENT, "%#lx is in no tracked heap allocation",
                        (unsigned long)addr);
    if (pinned)
        return exo_fail(EXO_EINUSE, "the %lu-byte allocation at %#lx is pinned: the program "
                        "formatted its address as text (%%p), which no move can patch",
                        (unsigned long)size, (unsigned long)base);
    if (no_maps)
        return exo_fail(EXO_ENOMEM, "no memory for the move's mapping list");
    if (!inner)
        return exo_fail(EXO_ENOMEM, "no memory for the move's list of logged stores");
    exo_carat_find_libc();
    /* The program may use the whole block malloc gave it, not only the size it asked for,
     * and programs rely on it (SQLite sizes its string and value buffers by it, and keeps a
     * block whose rounded new size still fits instead of calling realloc). The table holds
     * each heap block with its usable size (hooks.c's heap_extent), so the copy covers, and
     * keeps, every usable byte: span. Asked for with that size, the new block has the same
     * usable size in glibc (its chunk sizes are the usable size plus 8, in 16-byte steps),
     * which programs that count the usable sizes of their blocks (SQLite's memory
     * statistics) need too. Not malloc_usable_size(base) here: the program runs until the
     * stop, and may have freed the block already; glibc then reports the free chunk it
     * merged into (the heap's whole top, at times), and a new block of the same size at the
     * same address passed the check after the stop. That move copied and patched far past
     * the block (SQLite's fuzzcheck at 10,000 moves a second: "corrupted top size"). */
    uintptr_t span = size;
    bool refused;
    void *dest = exo_carat_copy_place(base, align, span, &refused);
    if (!dest && refused) {
        pthread_mutex_lock(&exo_carat.lock);
        exo_carat_shadow_refused(base);
        pthread_mutex_unlock(&exo_carat.lock);
        atomic_fetch_add(&exo_carat.count.refused_by[EXO_CARAT_REFUSED_NO_COPY], 1);
        return exo_fail(EXO_EAGAIN, "no block for a copy of the %lu-byte allocation at %#lx "
                        "at the same address modulo %lu: nothing moved, try again",
                        (unsigned long)size, (unsigned long)base,
                        (unsigned long)exo_carat_copy_modulo(align));
    }
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
    /* Every thread's pending blocks into the table before it is read: one of them may
     * overlap the block (that freed where the runtime did not see it), and the patching
     * below looks blocks up by address. */
    exo_carat_pending_drain_all();
    a = exo_carat_alloc_table_find(&exo_carat.table, base);
    /* Still the block sized above: nothing frees it while the world is stopped, and a
     * block the program freed and malloc gave out again in its place may differ in usable
     * size from what the table says (freed where the plugin did not see it). */
    if (!a || a->base != base || a->size != size || a->kind != EXO_CARAT_HEAP || a->pinned ||
        malloc_usable_size((void *)base) != span) {
        pthread_mutex_unlock(&exo_carat.lock);
        exo_carat_world_resume();
        free(dest);
        return exo_fail(EXO_EAGAIN, "the allocation at %#lx changed while the world stopped",
                        (unsigned long)base);
    }
    exo_carat_mappings_stale();   /* read again if this move needs them */
    /* The stopped threads' logs go into the table first, in order, so that the escape sets
     * alone say what each slot was last given. Applied after the move's own scan of the
     * new block (as they once were), an old logged store would replace the value the scan
     * found, and the next move would leave that slot unpatched. */
    exo_carat_claim_inflight();
    if (!keep_inner_logged(base, span)) {
        pthread_mutex_unlock(&exo_carat.lock);
        exo_carat_world_resume();
        free(dest);
        atomic_fetch_add(&exo_carat.count.refused_by[EXO_CARAT_REFUSED_LOGGED], 1);
        return exo_fail(EXO_EAGAIN, "more than %d stores into the %lu-byte allocation at %#lx "
                        "are logged and not yet applied: nothing moved, try again",
                        INNER_CAP, (unsigned long)size, (unsigned long)base);
    }
    exo_carat_flush_all();
    /* The block's chunk, as glibc's malloc lays it out: a 16-byte header before it; and the
     * address one past its last usable byte (the next chunk's size field, no block's
     * address), which programs keep as the end of a block they carve up by its usable size
     * (the escape sets keep them too: a value may be base + span). */
    struct patch p = { .base = base, .size = span, .delta = (intptr_t)((uintptr_t)dest - base),
                       .own_lo = base - EXO_CARAT_CHUNK_HEADER, .own_hi = base + span + 1,
                       .requester = requester, .requester_floor = requester_floor,
                       .check = true };
    for (int i = 0; i < nparked; i++)
        if (parked[i].ucontext)
            patch_thread(&p, &parked[i]);
    patch_partial_entries(&p);
    if (p.derived || p.libc_busy || p.stack_unknown) {
        exo_carat_shadow_refused(base);
        pthread_mutex_unlock(&exo_carat.lock);
        exo_carat_world_resume();
        free(dest);
        int why = p.derived ? EXO_CARAT_REFUSED_DERIVED : p.libc_busy ? EXO_CARAT_REFUSED_LIBC
                                                                      : EXO_CARAT_REFUSED_ALTSTACK;
        atomic_fetch_add(&exo_carat.count.refused_by[why], 1);
        if (why == EXO_CARAT_REFUSED_ALTSTACK)
            return exo_fail(EXO_EAGAIN, "a thread stopped on its alternate signal stack (in a "
                            "handler, or a coroutine run there), and its own stack, which may "
                            "hold the allocation's address, is not known: nothing moved, try "
                            "again");
        /* the address a move cannot patch is named before a register of the C library's */
        uintptr_t held = why == EXO_CARAT_REFUSED_DERIVED ? p.derived_value : p.libc_busy;
        long off = held < base ? -(long)(base - held) : (long)(held - base);
        if (why == EXO_CARAT_REFUSED_LIBC)
            return exo_fail(EXO_EAGAIN, "a thread stopped in the C library holds %#lx (offset "
                            "%+ld of the %lu-byte allocation at %#lx) in a register, as its "
                            "memory functions do while they work on a block: nothing moved, "
                            "try again", (unsigned long)held, off, (unsigned long)size,
                            (unsigned long)base);
        return exo_fail(EXO_EAGAIN, "a stopped thread holds %#lx (offset %+ld of the %lu-byte "
                        "allocation at %#lx), an address derived from it or malloc's own, that "
                        "a move cannot patch: nothing moved, try again", (unsigned long)held,
                        off, (unsigned long)size, (unsigned long)base);
    }
    p.check = false;
    p.in_libc = false;
    /* The shadow's scan needs the mappings: read before anything is patched. */
    if (exo_carat_shadow_on && exo_carat_mappings_load() != 0) {
        pthread_mutex_unlock(&exo_carat.lock);
        exo_carat_world_resume();
        free(dest);
        return exo_fail(EXO_EIO, "cannot read this process's mappings for the shadow's scan");
    }
    uint64_t t2 = exo_os_now_ns();
    patch_escapes(&p, a);
    patch_shadow(&p);
    uint64_t t3 = exo_os_now_ns();
    for (int i = 0; i < nparked; i++)
        if (parked[i].ucontext)
            patch_thread(&p, &parked[i]);
    patch_partial_entries(&p);
    uint64_t t4 = exo_os_now_ns();
#if defined(__SANITIZE_ADDRESS__)
    /* AddressSanitizer poisons bytes of a live block that only the C++ runtime reads (the
     * element count in front of an array that new[] made): they are the block's, and go
     * with it. The old block is freed below. */
    __asan_unpoison_memory_region((void *)base, span);
#endif
    memcpy(dest, (void *)base, span);
    /* The copy may have a few usable bytes more than span (a bigger chunk was the best
     * fit): the program may ask malloc and use them, so they are the block's too. */
    uintptr_t dest_usable = malloc_usable_size(dest);
    exo_carat_alloc_table_rebase(&exo_carat.table, a, (uintptr_t)dest,
                                 dest_usable > span ? dest_usable : span);
    rekey_inner_slots(a, &p);
    /* The shadow of the old slots (followed above) is the new block's now; the old block's
     * memory is freed once the threads resume, and holds no pointer. */
    exo_carat_shadow_copy((uintptr_t)dest, base, span);
    exo_carat_shadow_clear((uintptr_t)dest + span, dest_usable > span ? dest_usable - span : 0);
    exo_carat_shadow_clear(base, span);
    exo_carat_shadow_moved(base, (uintptr_t)dest);
    /* The pointers the block holds into other allocations: known at the old slots (every
     * log was applied first), now at the same offsets of the new block. */
    exo_carat_scan_known((uintptr_t)dest, base, span, true);
    note_inner_logged(&p);
    void *release = exo_carat_quarantine_keep(base, span, (uintptr_t)dest, a->site);
    uint64_t t5 = exo_os_now_ns();
    pthread_mutex_unlock(&exo_carat.lock);
    exo_carat_world_resume();
    uint64_t t6 = exo_os_now_ns();
    free(release);
    exo_carat_quarantine_report();

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
