/* Helpers for bench_vm (the Appel-Li primitives benchmark): a seeded random generator that a
 * signal handler may call, scattered page choices, populated anonymous memory, the process's
 * mapping count and the JSON lines bench_util does not print (skips, notes with quotes). */
#ifndef EXOMEM_VM_BENCH_H
#define EXOMEM_VM_BENCH_H

#include "bench_util.h"

#include <exomem/vm.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* xorshift64*: deterministic for a seed, no locks and no libc, so async-signal-safe. */
typedef struct vmb_rng {
    uint64_t s;
} vmb_rng;

/* A generator started from `seed` (any value; 0 is mapped to a fixed nonzero state). */
vmb_rng vmb_rng_seeded(uint64_t seed);

/* A number in [0, n), n > 0. */
uint64_t vmb_rng_below(vmb_rng *r, uint64_t n);

/* Fill out[0..k) with k distinct page indexes of [0, npages), in random order (k <= npages).
 * Uses a bitmap of npages bits; returns 0, or -1 when memory runs out. */
int vmb_pick_pages(vmb_rng *r, size_t npages, size_t k, size_t *out);

/* `bytes` of anonymous read-write memory in 4 KiB pages (THP off for it), every page
 * written once so that page tables and pages exist; NULL (errno set) on failure. */
void *vmb_map_populated(size_t bytes);

/* Lines of /proc/self/maps (= the process's mappings), or -1. */
long vmb_count_mappings(void);

/* The JSON string form of s (without quotes) in buf; truncated to fit. */
const char *vmb_json_escape(const char *s, char *buf, size_t size);

/* {"name":"skip","params":{<params>},"reason":"<reason>"} on stdout. */
void vmb_skip(const char *params, const char *reason);

/* One measurement like bench_emit, with the value printed to 6 significant digits and an
 * optional note escaped for JSON. */
void vmb_emit(const char *name, const char *unit, double value, const char *params,
              const char *note);

/* A write that may trap. The compiler fences keep a handler's shared state in order with it,
 * whether the handler runs in a signal or on the uffd engine's thread (which the kernel
 * orders through the fault). */
static inline void vmb_write_page(void *page, uint64_t v)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    *(volatile uint64_t *)page = v;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

/* Milliseconds since t0 (a bench_now_ns() reading). */
static inline double vmb_ms_since(uint64_t t0)
{
    return (double)(bench_now_ns() - t0) / 1e6;
}

/* Nanoseconds per add, from `turns` loop turns of 20 dependent adds in ten slices, the
 * fastest slice (Appel and Li's ADD, which normalises machines). */
double vmb_add_ns(long turns);

/* The 1-minute load average (/proc/loadavg), or -1: other work on the machine inflates
 * trap times, so the report shows it. */
double vmb_loadavg(void);

/* MemAvailable of /proc/meminfo in bytes, or 0 if unknown. */
size_t vmb_mem_available(void);

/* A skip line for params saying "<what>: <exomem_last_error()>". Returns false. */
bool vmb_failed(const char *params, const char *what);
/* How many vmb_failed() there were: a benchmark that had any exits non-zero. */
int vmb_failure_count(void);

/* Emit DIRTY cycles for n engines, engine i on [bases[i], bases[i]+bytes) (populated memory
 * the caller owns): two warm-up cycles, then `cycles` measured ones, each writing the same 1%
 * of the pages (fresh random pages per cycle, fixed seeds) in every region in turn and calling
 * exo_vm_dirty once per region: vm_dirty_cycle = writes + collect, vm_dirty_collect,
 * vm_dirty_writes (ms), and vm_dirty_create once. A skip line for an engine that is missing
 * or whose call fails; the others go on. */
void vmb_bench_dirty(char *const *bases, size_t bytes, const exo_vm_engine *engines, size_t n,
                     int cycles);

#endif
