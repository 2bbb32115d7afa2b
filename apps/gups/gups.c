/* HPCC RandomAccess (GUPS) updates and verification; see gups.h. */
#include "gups.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

/* a * b in GF(2)[x] / (x^64 + x^2 + x + 1), the field the stream steps in (a step is a
 * multiplication by x): Horner's rule over the bits of b. */
static uint64_t field_mul(uint64_t a, uint64_t b)
{
    uint64_t r = 0;
    for (int bit = 63; bit >= 0; bit--) {
        r = gups_step(r);
        if ((b >> bit) & 1)
            r ^= a;
    }
    return r;
}

uint64_t gups_starts(int64_t n)
{
    n %= GUPS_PERIOD;
    if (n < 0)
        n += GUPS_PERIOD;
    /* x^n by square-and-multiply; multiplying by x is one step. */
    uint64_t r = 1;
    for (int bit = 62; bit >= 0; bit--) {
        r = field_mul(r, r);
        if (((uint64_t)n >> bit) & 1)
            r = gups_step(r);
    }
    return r;
}

uint64_t gups_updates(unsigned log2)
{
    return UINT64_C(4) << log2;
}

void gups_init(uint64_t *table, unsigned log2)
{
    gups_init_part(table, 0, UINT64_C(1) << log2);
}

void gups_init_part(uint64_t *part, uint64_t lo, uint64_t len)
{
    for (uint64_t i = 0; i < len; i++)
        part[i] = lo + i;
}

/* The update loop, specialised by the compiler for checked and unchecked access. */
static inline __attribute__((always_inline)) void
update_loop(uint64_t *table, uint64_t mask, uint64_t first, uint64_t count, bool checked,
            uint64_t lo, uint64_t len, bool *out_of_bounds)
{
    uint64_t ran[GUPS_STREAMS];
    uint64_t per = count / GUPS_STREAMS, rem = count % GUPS_STREAMS;
    /* Sub-stream j covers positions off_j+1 .. off_j+per (+1 for the first rem streams). */
    for (uint64_t j = 0; j < GUPS_STREAMS; j++)
        ran[j] = gups_starts((int64_t)(first + j * per + (j < rem ? j : rem)));
    bool oob = false;
    for (uint64_t i = 0; i < per; i++) {
        for (int j = 0; j < GUPS_STREAMS; j++) {
            uint64_t v = gups_step(ran[j]);
            ran[j] = v;
            uint64_t idx = v & mask;
            if (checked && idx - lo >= len) {
                oob = true;
                continue;
            }
            table[idx] ^= v;
        }
    }
    for (uint64_t j = 0; j < rem; j++) {
        uint64_t v = gups_step(ran[j]);
        uint64_t idx = v & mask;
        if (checked && idx - lo >= len) {
            oob = true;
            continue;
        }
        table[idx] ^= v;
    }
    if (oob)
        *out_of_bounds = true;
}

void gups_update_range(uint64_t *table, unsigned log2, uint64_t first, uint64_t count,
                       const struct gups_bounds *bounds, bool *out_of_bounds)
{
    uint64_t mask = (UINT64_C(1) << log2) - 1;
    if (bounds)
        update_loop(table, mask, first, count, true, bounds->base, bounds->len, out_of_bounds);
    else
        update_loop(table, mask, first, count, false, 0, 0, NULL);
}

struct part {
    uint64_t *table;
    unsigned log2;
    uint64_t first, count;
    const struct gups_bounds *bounds;
    bool out_of_bounds;
    pthread_t thread;
};

static void *run_part(void *arg)
{
    struct part *p = arg;
    gups_update_range(p->table, p->log2, p->first, p->count, p->bounds, &p->out_of_bounds);
    return NULL;
}

int gups_run(uint64_t *table, unsigned log2, unsigned threads, const struct gups_bounds *bounds,
             bool *out_of_bounds)
{
    return gups_run_count(table, log2, gups_updates(log2), threads, bounds, out_of_bounds);
}

int gups_run_count(uint64_t *table, unsigned log2, uint64_t total, unsigned threads,
                   const struct gups_bounds *bounds, bool *out_of_bounds)
{
    if (threads == 0 || threads > total) {
        errno = EINVAL;
        return -1;
    }
    struct part *parts = calloc(threads, sizeof *parts);
    if (!parts)
        return -1;
    for (unsigned t = 0; t < threads; t++) {
        parts[t] = (struct part){ .table = table, .log2 = log2, .bounds = bounds,
                                  .first = total * t / threads,
                                  .count = total * (t + 1) / threads - total * t / threads };
    }
    unsigned started = 1;
    int rc = 0;
    for (; started < threads; started++) {
        int err = pthread_create(&parts[started].thread, NULL, run_part, &parts[started]);
        if (err) {
            errno = err;
            rc = -1;
            break;
        }
    }
    run_part(&parts[0]); /* the caller is thread 0 */
    for (unsigned t = 1; t < started; t++)
        pthread_join(parts[t].thread, NULL);
    for (unsigned t = 0; t < started; t++)
        if (parts[t].out_of_bounds)
            *out_of_bounds = true;
    free(parts);
    return rc;
}

uint64_t gups_verify(uint64_t *table, unsigned log2)
{
    return gups_verify_count(table, log2, gups_updates(log2));
}

uint64_t gups_verify_count(uint64_t *table, unsigned log2, uint64_t total)
{
    return gups_verify_part(table, log2, total, 0, UINT64_C(1) << log2);
}

uint64_t gups_verify_part(uint64_t *part, unsigned log2, uint64_t total, uint64_t lo,
                          uint64_t len)
{
    uint64_t mask = (UINT64_C(1) << log2) - 1;
    uint64_t v = 1;
    for (uint64_t i = 0; i < total; i++) {
        v = gups_step(v);
        uint64_t off = (v & mask) - lo; /* wraps to a huge value below lo */
        if (off < len)
            part[off] ^= v;
    }
    uint64_t errors = 0;
    for (uint64_t i = 0; i < len; i++)
        errors += part[i] != lo + i;
    return errors;
}

bool gups_passes_count(uint64_t errors, uint64_t updates)
{
    return errors * 400 <= updates;
}

bool gups_passes(uint64_t errors, unsigned log2)
{
    return errors * 100 <= (UINT64_C(1) << log2);
}
