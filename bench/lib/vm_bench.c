/* Helpers for bench_vm; see vm_bench.h. */
#include "vm_bench.h"
#include "bench_util.h"
#include "os/os_vm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <exomem/error.h>

vmb_rng vmb_rng_seeded(uint64_t seed)
{
    vmb_rng r = { seed ? seed : 0x9e3779b97f4a7c15ull };
    return r;
}

uint64_t vmb_rng_below(vmb_rng *r, uint64_t n)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return (r->s * 0x2545f4914f6cdd1dull >> 11) % n;
}

int vmb_pick_pages(vmb_rng *r, size_t npages, size_t k, size_t *out)
{
    uint64_t *taken = calloc((npages + 63) / 64, sizeof *taken);
    if (!taken)
        return -1;
    for (size_t i = 0; i < k; i++) {
        size_t p;
        do /* rejection: fine while k is well below npages, and exact for k == npages too */
            p = (size_t)vmb_rng_below(r, npages);
        while (taken[p / 64] >> (p % 64) & 1 && k * 2 < npages);
        if (taken[p / 64] >> (p % 64) & 1) { /* dense: next free page after p */
            while (taken[p / 64] >> (p % 64) & 1)
                p = (p + 1) % npages;
        }
        taken[p / 64] |= 1ull << (p % 64);
        out[i] = p;
    }
    free(taken);
    return 0;
}

void *vmb_map_populated(size_t bytes)
{
    char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    madvise(p, bytes, MADV_NOHUGEPAGE); /* the primitives work in base pages: measure those */
    if (madvise(p, bytes, MADV_POPULATE_WRITE) != 0) /* older kernels: touch every page */
        for (size_t off = 0; off < bytes; off += 4096)
            p[off] = 1;
    return p;
}

long vmb_count_mappings(void)
{
    long n = exo_os_map_count();
    return n < 0 ? -1 : n;
}

const char *vmb_json_escape(const char *s, char *buf, size_t size)
{
    size_t o = 0;
    for (; s && *s && o + 7 < size; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            buf[o++] = '\\';
            buf[o++] = (char)c;
        } else if (c < 0x20) {
            o += (size_t)snprintf(buf + o, size - o, "\\u%04x", c);
        } else {
            buf[o++] = (char)c;
        }
    }
    buf[o] = '\0';
    return buf;
}

void vmb_skip(const char *params, const char *reason)
{
    char esc[1024];
    printf("{\"name\":\"skip\",\"params\":{%s},\"reason\":\"%s\"}\n", params,
           vmb_json_escape(reason, esc, sizeof esc));
    fflush(stdout);
}

void vmb_emit(const char *name, const char *unit, double value, const char *params,
              const char *note)
{
    char esc[1024];
    printf("{\"name\":\"%s\",\"unit\":\"%s\",\"value\":%.6g,\"params\":{%s}", name, unit, value,
           params);
    if (note)
        printf(",\"note\":\"%s\"", vmb_json_escape(note, esc, sizeof esc));
    printf("}\n");
    fflush(stdout);
}

#define ADD1                                                                                   \
    x += k;                                                                                    \
    __asm__ volatile("" : "+r"(x));
#define ADD5 ADD1 ADD1 ADD1 ADD1 ADD1
#define ADD20 ADD5 ADD5 ADD5 ADD5

/* Nanoseconds per add over `turns` turns of 20 dependent adds, the compiler kept from folding
 * them. */
static double add_run(long turns)
{
    uint64_t x = 1, k = 3;
    __asm__ volatile("" : "+r"(k));
    uint64_t t0 = bench_now_ns();
    for (long i = 0; i < turns; i++) {
        ADD20
    }
    double ns = (double)(bench_now_ns() - t0) / ((double)turns * 20.0);
    __asm__ volatile("" : : "r"(x));
    return ns;
}

double vmb_add_ns(long turns)
{
    /* The fastest of ten slices: being descheduled can only add time, never take it away. */
    double best = add_run(turns / 10 + 1);
    for (int i = 1; i < 10; i++) {
        double ns = add_run(turns / 10 + 1);
        best = ns < best ? ns : best;
    }
    return best;
}

double vmb_loadavg(void)
{
    double load = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &load) != 1)
            load = -1;
        fclose(f);
    }
    return load;
}

/* MemAvailable in bytes, or 0 if unknown. */
size_t vmb_mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[128];
    size_t kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %zu kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib * 1024;
}

static int failures;

int vmb_failure_count(void)
{
    return failures;
}

bool vmb_failed(const char *params, const char *what)
{
    failures++;
    char msg[512];
    snprintf(msg, sizeof msg, "%s: %s", what, exomem_last_error());
    vmb_skip(params, msg);
    return false;
}
