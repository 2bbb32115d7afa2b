/* What the VAS layer tells the layers above it (the allocator) about the current view.
 *
 * The allocator asks on every call, so the common case takes no lock: each thread keeps a
 * snapshot of the visible segments, tagged with the process-wide view generation it was
 * taken at. Whoever changes the view (under the space mutex) makes the generation odd, waits
 * until no thread is inside an allocator call that trusted an older snapshot, changes the
 * view, and makes the generation even again. A thread's call therefore either runs on a
 * snapshot that stays true until it leaves, or (while a change is under way, or the first
 * time after one) runs under the space mutex, which no change can pass.
 */
#ifndef EXOMEM_VAS_VIEW_H
#define EXOMEM_VAS_VIEW_H

#include <exomem/seg.h>
#include <exomem/vas.h>
#include <stdbool.h>
#include <stdint.h>

/* One segment visible at its base. */
struct exo_view_seg {
    segid_t sid;
    uint64_t base, size;
    bool writable;
};

/* The visible segments of this process, and the current VAS's heap segment. */
struct exo_view {
    uint64_t gen;           /* generation it was taken at (even); odd: trusted by no one */
    unsigned nsegs;
    unsigned last;          /* the entry that answered last, tried first */
    struct exo_view_seg segs[VAS_SEGS_MAX];
    int heap_rc;            /* 0: heap is the current VAS's heap segment; else -EXO_ code */
    segid_t heap;
    char vas_name[EXOMEM_NAME_MAX + 1];
};

/* Enter an allocator call: returns the calling thread's view, which holds until
 * exo_view_leave(). Never fails; blocks only while another thread changes the view (then
 * the call holds the space mutex until it leaves). Calls must not nest. */
const struct exo_view *exo_view_enter(void);
void exo_view_leave(const struct exo_view *v);

/* Enter through the space mutex always, with the snapshot in *buf (for a thread's exit,
 * when its fast-path slot may be gone already). With try_only, -EXO_EBUSY instead of
 * waiting for the mutex. Leave with exo_view_leave(buf). */
int exo_view_enter_locked(struct exo_view *buf, bool try_only);

/* Where segment sid is in view v: -EXO_ENOTMAPPED if not visible. */
int exo_view_find(const struct exo_view *v, segid_t sid, const struct exo_view_seg **out);
/* The visible segment that contains address p: -EXO_ENOTMAPPED if none. */
int exo_view_find_at(const struct exo_view *v, const void *p, const struct exo_view_seg **out);
/* The heap segment of the current VAS: its VAS_CTL_SET_HEAP choice, else its first
 * SEG_RDWR segment. -EXO_ENOTMAPPED at home, -EXO_ENOHEAP if it has none. */
int exo_view_heap(const struct exo_view *v, segid_t *sid);

/* The writer's side, called with the space mutex held around anything that changes which
 * segments are visible, how, or the current VAS (and its heap). change_begin waits for
 * threads inside an allocator call to leave. */
void exo_view_change_begin(void);
void exo_view_change_end(void);
/* In a fork child (one thread, the view about to be emptied): forget the parent's other
 * threads and every snapshot. */
void exo_view_after_fork_child(void);

#endif
