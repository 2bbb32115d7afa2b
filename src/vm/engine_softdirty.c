/* The softdirty engine (DIRTY only): the kernel sets a page's soft-dirty bit (pagemap bit
 * 55) on every write; writing "4" to /proc/self/clear_refs clears the bits of the whole
 * process. Because that clear is process-wide, clearing for one region first harvests the
 * bits of every other softdirty region into its `pending` bytes.
 *
 * Limit: reading the bits and clearing them are two steps, so a write landing between them
 * on a page not yet dirty is lost. Use uffd or signal where that matters. Needs
 * CONFIG_MEM_SOFT_DIRTY; without it the kernel accepts clear_refs but never sets the bit,
 * which the probe detects. */
#include "vm/vm_internal.h"
#include "internal.h"
#include "os/os.h"
#include "os/os_vm.h"

#include <stdlib.h>
#include <string.h>

static pthread_mutex_t softdirty_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static int probe_rc;
static const char *probe_why;

static void probe(void)
{
    bool works = false;
    probe_rc = exo_os_probe_soft_dirty(&works);
    if (probe_rc) {
        probe_why = "cannot read /proc/self/pagemap";
        probe_rc = -EXO_ENOTSUP;
    } else if (!works) {
        probe_why = "the kernel does not set soft-dirty bits (no CONFIG_MEM_SOFT_DIRTY): "
                    "a page written after mapping is not soft-dirty in /proc/self/pagemap";
        probe_rc = -EXO_ENOTSUP;
    }
}

int exo_vm_softdirty_supported(const char **why)
{
    pthread_once(&probe_once, probe);
    if (why)
        *why = probe_why;
    return probe_rc;
}

#define PM_CHUNK 4096

/* OR the soft-dirty bits of r's pages into out (npages bytes). */
static int read_bits(struct exo_vm_region *r, unsigned char *out)
{
    uint64_t entries[PM_CHUNK];
    for (size_t i = 0; i < r->npages; i += PM_CHUNK) {
        size_t n = r->npages - i < PM_CHUNK ? r->npages - i : PM_CHUNK;
        int rc = exo_os_pagemap_read(r->pagemap_fd, r->base + i * exo_vm_page(), entries, n);
        if (rc)
            return rc;
        for (size_t k = 0; k < n; k++)
            if (entries[k] & EXO_PM_SOFT_DIRTY)
                out[i + k] = 1;
    }
    return 0;
}

static void harvest(struct exo_vm_region *o, void *self)
{
    if (o != self && o->engine == EXO_VM_ENGINE_SOFTDIRTY && o->pending)
        read_bits(o, o->pending);
}

/* Clear the process's soft-dirty bits without losing other regions' dirty pages. */
static int clear_all(struct exo_vm_region *self)
{
    exo_vm_table_each(harvest, self);
    return exo_os_clear_soft_dirty();
}

int exo_vm_softdirty_create(struct exo_vm_region *r)
{
    r->pending = calloc(r->npages, 1);
    if (!r->pending)
        return exo_vm_fail(EXO_ENOMEM, "softdirty engine: out of memory");
    int pm = exo_os_pagemap_open();
    if (pm < 0)
        return exo_vm_fail(pm, "softdirty engine: cannot open /proc/self/pagemap");
    r->pagemap_fd = pm;
    pthread_mutex_lock(&softdirty_mutex);
    int rc = clear_all(r);
    pthread_mutex_unlock(&softdirty_mutex);
    if (rc) {
        exo_os_close(pm);
        r->pagemap_fd = -1;
        return exo_vm_fail(rc, "softdirty engine: cannot write /proc/self/clear_refs");
    }
    return 0;
}

void exo_vm_softdirty_destroy(struct exo_vm_region *r)
{
    if (r->pagemap_fd >= 0)
        exo_os_close(r->pagemap_fd);
    r->pagemap_fd = -1;
}

long exo_vm_softdirty_dirty(struct exo_vm_region *r, exo_vm_dirty_fn fn, void *arg)
{
    unsigned char *dirty = (unsigned char *)r->state; /* scratch: unused otherwise */
    pthread_mutex_lock(&softdirty_mutex);
    memcpy(dirty, r->pending, r->npages);
    memset(r->pending, 0, r->npages);
    int rc = read_bits(r, dirty);
    if (rc == 0)
        rc = clear_all(r);
    pthread_mutex_unlock(&softdirty_mutex);
    if (rc) {
        memcpy(r->pending, dirty, r->npages);
        return exo_vm_fail(rc, "softdirty engine: reading or clearing soft-dirty bits failed");
    }
    long count = 0;
    size_t page = exo_vm_page();
    for (size_t i = 0; i < r->npages;) {
        if (!dirty[i]) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < r->npages && dirty[j])
            j++;
        count += (long)(j - i);
        if (fn && fn((void *)(r->base + i * page), (j - i) * page, arg)) {
            /* Not reported yet: still dirty for the next call. */
            pthread_mutex_lock(&softdirty_mutex);
            for (size_t k = j; k < r->npages; k++)
                if (dirty[k])
                    r->pending[k] = 1;
            pthread_mutex_unlock(&softdirty_mutex);
            break;
        }
        i = j;
    }
    return count;
}
