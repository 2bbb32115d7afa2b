/* MAP: the whole table is one memfd; the current window is its piece mapped at one fixed
 * address, replaced with mmap(MAP_FIXED) on every change (see gupswin.h). An application,
 * so it calls mmap itself (apps are not bound to src/os). */
#include "gupswin.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct gupswin_map {
    struct gupswin_config cfg;
    int fd;
    uint64_t *window;  /* the window address */
    size_t window_bytes;
    unsigned current;  /* the window mapped there */
    bool populate;
};

/* Map window w at the window address (replacing what is there). */
static int map_window(struct gupswin_map *m, unsigned w)
{
    int flags = MAP_SHARED | MAP_FIXED | (m->populate ? MAP_POPULATE : 0);
    void *p = mmap(m->window, m->window_bytes, PROT_READ | PROT_WRITE, flags, m->fd,
                   (off_t)((uint64_t)w * m->window_bytes));
    if (p == MAP_FAILED)
        return exomem_set_error(EXO_ENOMEM, "gupswin map: mapping window %u: %s", w,
                                strerror(errno));
    m->current = w;
    return 0;
}

static int map_apply(void *ctx, unsigned w, const uint64_t *values, unsigned count,
                     struct gupswin_result *res)
{
    struct gupswin_map *m = ctx;
    if (w != m->current) {
        uint64_t t0 = gupswin_now_ns();
        int rc = map_window(m, w);
        if (rc)
            return rc;
        res->change_ns += gupswin_now_ns() - t0;
        res->changes++;
    }
    gupswin_apply(m->window, m->cfg.window_log2, values, count);
    return 0;
}

int gupswin_map_open(const struct gupswin_config *cfg, uint64_t addr, bool populate,
                     struct gupswin_map **out)
{
    int rc = gupswin_check(cfg);
    if (rc)
        return rc;
    struct gupswin_map *m = calloc(1, sizeof *m);
    if (!m)
        return exomem_set_error(EXO_ENOMEM, "gupswin map: out of memory");
    m->cfg = *cfg;
    m->populate = populate;
    m->window_bytes = sizeof(uint64_t) << cfg->window_log2;
    m->fd = memfd_create("gupswin-map", MFD_CLOEXEC);
    if (m->fd < 0) {
        free(m);
        return exomem_set_error(EXO_ENOMEM, "gupswin map: memfd_create: %s", strerror(errno));
    }
    if (ftruncate(m->fd, (off_t)(m->window_bytes * cfg->windows)) != 0) {
        rc = exomem_set_error(EXO_ENOMEM, "gupswin map: sizing the table: %s", strerror(errno));
        goto fail;
    }
    void *p = mmap((void *)(uintptr_t)addr, m->window_bytes, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED || p != (void *)(uintptr_t)addr) {
        if (p != MAP_FAILED)
            munmap(p, m->window_bytes); /* an old kernel ignoring MAP_FIXED_NOREPLACE */
        rc = exomem_set_error(EXO_EOVERLAP, "gupswin map: window address %#llx is taken",
                              (unsigned long long)addr);
        goto fail;
    }
    m->window = p;
    /* Every entry written once here, so the runs never allocate a page of the table. */
    for (unsigned w = 0; w < cfg->windows; w++) {
        if ((rc = map_window(m, w)) != 0)
            goto fail_unmap;
        gups_init_part(m->window, (uint64_t)w << cfg->window_log2, UINT64_C(1) << cfg->window_log2);
    }
    *out = m;
    return 0;
fail_unmap:
    munmap(m->window, m->window_bytes);
fail:
    close(m->fd);
    free(m);
    return rc;
}

struct gupswin_design gupswin_map_design(struct gupswin_map *m)
{
    return (struct gupswin_design){ .apply = map_apply, .ctx = m };
}

uint64_t gupswin_map_verify(struct gupswin_map *m, uint64_t updates)
{
    uint64_t errors = 0, len = UINT64_C(1) << m->cfg.window_log2;
    unsigned log2 = gupswin_table_log2(&m->cfg);
    for (unsigned w = 0; w < m->cfg.windows; w++) {
        if (map_window(m, w) != 0)
            return UINT64_MAX;
        errors += gups_verify_part(m->window, log2, updates, (uint64_t)w * len, len);
    }
    return errors;
}

void gupswin_map_close(struct gupswin_map *m)
{
    if (!m)
        return;
    munmap(m->window, m->window_bytes);
    close(m->fd);
    free(m);
}
