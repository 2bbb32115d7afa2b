/* Paged segments in a process (SEG_PAGED; docs/pager.md "Paged segments").
 *
 * While switched in, a paged segment is a pager region at its base, over a file store of its
 * data file, with the budget and policy its settings record gives. Switching out writes
 * every dirty unit back (while the segment's lock is still held), puts exomem's
 * reservation back over the range and frees the region: so the next process to switch it
 * in (after taking the lock) reads what this one wrote. Frames do not outlive a switch:
 * each switch-in starts cold (the store file's page cache keeps it cheap). */
#include "vas/space.h"
#include "internal.h"
#include "pager/segment_region.h"
#include "pager/store.h"

#include <exomem/pager.h>


int exo_paged_show(struct pseg *ps, int access)
{
    int fd = exo_os_reopen(ps->fd, ps->fd_writable);
    if (fd < 0)
        return exo_fail(-fd, "paged segment '%s': cannot open its store", ps->name);
    int rc = exo_pager_store_file_fd(fd, &ps->store);
    if (rc)
        return exo_fail(-rc, "paged segment '%s': cannot make its store", ps->name);
    exo_pager_options o = {.size = ps->size, .budget = ps->paged_rec.budget,
                           .unit = ps->paged_rec.unit,
                           .policy = (exo_pager_policy)ps->paged_rec.policy,
                           .store = ps->store};
    rc = exo_pager_create_at(&o, ps->base, &ps->pager);
    if (!rc && access != EXO_ACCESS_RW && (rc = exo_os_protect(ps->base, ps->size, access)) != 0) {
        exo_os_hide(ps->base, ps->size);
        exo_pager_quiesce(ps->pager); /* nothing is dirty: it cannot fail */
        exo_pager_release(ps->pager);
        rc = exo_fail(-rc, "paged segment '%s': cannot make it read-only", ps->name);
    }
    if (rc) {
        exo_os_hide(ps->base, ps->size); /* the base is never a hole */
        exo_pager_store_close(ps->store);
        ps->store = NULL;
        ps->pager = NULL;
        return rc;
    }
    return 0;
}

int exo_paged_flush(struct pseg *ps)
{
    if (!ps->pager)
        return 0;
    int rc = exo_pager_flush(ps->pager);
    if (rc)
        return exo_fail(-rc, "paged segment '%s': its dirty data cannot be written back, so "
                        "it stays switched in: %s", ps->name, exo_pager_last_failure(ps->pager));
    return 0;
}

void exo_paged_hide(struct pseg *ps)
{
    if (!ps->pager) {
        exo_os_hide(ps->base, ps->size);
        return;
    }
    /* Written back and quiet (faults wait) before the range goes: a write can only be lost
     * if the store fails here, after exo_paged_flush() succeeded a moment before. */
    exo_pager_quiesce(ps->pager);
    exo_os_hide(ps->base, ps->size);
    exo_pager_release(ps->pager);
    exo_pager_store_close(ps->store);
    ps->pager = NULL;
    ps->store = NULL;
}

void exo_paged_forget(struct pseg *ps)
{
    /* The parent's handler threads do not exist here and its locks may look held: the
     * region is the parent's business. Its memory is left behind, like its range. */
    ps->pager = NULL;
    ps->store = NULL;
}
