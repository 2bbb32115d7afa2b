/* VAS: one segment per window, each in its own VAS at the same base, and one heap segment
 * in every VAS holding the pending batches; a window change is vas_switch() (gupswin.h). */
#include "gupswin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gupswin_vas {
    struct gupswin_config cfg;
    uint64_t *window;  /* the windows' common base */
    segid_t heap;
    segid_t seg[GUPSWIN_MAX_WINDOWS];
    vasid_t vas[GUPSWIN_MAX_WINDOWS];
    vhandle_t handle[GUPSWIN_MAX_WINDOWS];
    unsigned made;     /* windows whose segment, VAS and attachment exist */
    unsigned current;
    uint64_t *pending; /* in the heap segment */
    unsigned *fill;
};

static int vas_apply(void *ctx, unsigned w, const uint64_t *values, unsigned count,
                     struct gupswin_result *res)
{
    struct gupswin_vas *v = ctx;
    if (w != v->current) {
        uint64_t t0 = gupswin_now_ns();
        int rc = vas_switch(v->handle[w]);
        if (rc)
            return rc;
        res->change_ns += gupswin_now_ns() - t0;
        res->changes++;
        v->current = w;
    }
    /* values live in the heap segment, which every window's VAS has at the same address. */
    gupswin_apply(v->window, v->cfg.window_log2, values, count);
    return 0;
}

/* One window: its segment, its VAS (window + heap), attached and filled with its indexes. */
static int make_window(struct gupswin_vas *v, const char *prefix, unsigned w, uint64_t base)
{
    char name[EXOMEM_NAME_MAX + 1];
    uint64_t len = UINT64_C(1) << v->cfg.window_log2;
    int rc;
    snprintf(name, sizeof name, "%s-w%u", prefix, w);
    if ((rc = seg_alloc(name, base, len * sizeof(uint64_t), 0600, &v->seg[w])) != 0)
        return rc;
    snprintf(name, sizeof name, "%s-v%u", prefix, w);
    if ((rc = vas_create(name, 0600, &v->vas[w])) != 0)
        goto fail_seg;
    if ((rc = seg_attach(v->vas[w], v->seg[w], SEG_RDWR)) != 0 ||
        (rc = seg_attach(v->vas[w], v->heap, SEG_RDWR)) != 0 ||
        (rc = vas_ctl(VAS_CTL_SET_HEAP, v->vas[w], &v->heap)) != 0 ||
        (rc = vas_attach(v->vas[w], &v->handle[w])) != 0)
        goto fail_vas;
    if ((rc = vas_switch(v->handle[w])) != 0)
        goto fail_detach;
    v->current = w;
    gups_init_part(v->window, (uint64_t)w * len, len);
    v->made = w + 1;
    return 0;
fail_detach:
    vas_detach(v->handle[w]);
fail_vas:
    vas_delete(v->vas[w]);
fail_seg:
    seg_delete(v->seg[w]);
    return rc;
}

int gupswin_vas_open(const struct gupswin_config *cfg, const char *prefix, uint64_t window_base,
                     uint64_t heap_base, struct gupswin_vas **out)
{
    int rc = gupswin_check(cfg);
    if (rc)
        return rc;
    struct gupswin_vas *v = calloc(1, sizeof *v);
    if (!v)
        return exomem_set_error(EXO_ENOMEM, "gupswin vas: out of memory");
    v->cfg = *cfg;
    v->window = (uint64_t *)(uintptr_t)window_base;
    char name[EXOMEM_NAME_MAX + 1];
    snprintf(name, sizeof name, "%s-heap", prefix);
    /* The pending batches, their counters and the heap's own header: well under 2 MiB. */
    if ((rc = seg_alloc(name, heap_base, UINT64_C(2) << 20, 0600, &v->heap)) != 0) {
        free(v);
        return rc;
    }
    for (unsigned w = 0; w < cfg->windows; w++)
        if ((rc = make_window(v, prefix, w, window_base)) != 0)
            goto fail;
    if ((rc = vas_switch(v->handle[0])) != 0)
        goto fail;
    v->current = 0;
    v->pending = seg_malloc(v->heap, sizeof(uint64_t) * cfg->windows * cfg->batch);
    v->fill = seg_malloc(v->heap, sizeof(unsigned) * cfg->windows);
    if (!v->pending || !v->fill) {
        rc = seg_heap_last_code();
        goto fail;
    }
    *out = v;
    return 0;
fail:
    gupswin_vas_close(v);
    return rc;
}

struct gupswin_design gupswin_vas_design(struct gupswin_vas *v, uint64_t **pending,
                                         unsigned **fill)
{
    *pending = v->pending;
    *fill = v->fill;
    return (struct gupswin_design){ .apply = vas_apply, .ctx = v };
}

uint64_t gupswin_vas_verify(struct gupswin_vas *v, uint64_t updates)
{
    uint64_t errors = 0, len = UINT64_C(1) << v->cfg.window_log2;
    unsigned log2 = gupswin_table_log2(&v->cfg);
    for (unsigned w = 0; w < v->cfg.windows; w++) {
        if (vas_switch(v->handle[w]) != 0)
            return UINT64_MAX;
        v->current = w;
        errors += gups_verify_part(v->window, log2, updates, (uint64_t)w * len, len);
    }
    if (vas_switch(v->handle[0]) != 0)
        return UINT64_MAX;
    v->current = 0;
    return errors;
}

int gupswin_vas_close(struct gupswin_vas *v)
{
    if (!v)
        return 0;
    int first = 0, rc;
#define KEEP_FIRST(expr) do { if ((rc = (expr)) != 0 && first == 0) first = rc; } while (0)
    KEEP_FIRST(vas_switch(VAS_HOME));
    for (unsigned w = v->made; w-- > 0;) {
        KEEP_FIRST(vas_detach(v->handle[w]));
        KEEP_FIRST(vas_delete(v->vas[w]));
        KEEP_FIRST(seg_delete(v->seg[w]));
    }
    KEEP_FIRST(seg_delete(v->heap));
#undef KEEP_FIRST
    free(v);
    return first;
}
