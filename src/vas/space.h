/* This process's view of exomem: the segments it has open and where each one's mapping is,
 * and its attachments of VASes. One mutex guards it all (vas_switch changes the whole
 * process anyway). */
#ifndef EXOMEM_SPACE_H
#define EXOMEM_SPACE_H

#include <exomem/vas.h>
#include <pthread.h>
#include <stdbool.h>

#include "os/os.h"
#include "seg/segment.h"

/* Where a segment's page tables are. Whatever the state, its base range is always mapped
 * by exomem (a reservation, another segment, or itself), never a hole. */
enum pseg_where {
    PSEG_HIDDEN,    /* no page tables; the data is in the file only */
    PSEG_VISIBLE,   /* mapped at its base, accessible */
    PSEG_PARKED,    /* mapped and populated at park_addr, inaccessible */
    PSEG_KEPT,      /* keep engine: still mapped at its base, accessible, but in no current
                       VAS and unlocked; moved off when a VAS needing the range comes in */
};

struct pseg {
    segid_t sid;
    char name[EXOMEM_NAME_MAX + 1];
    uint64_t base, size, page_size;
    /* The length of the range the segment's mapping covers from its base: its size, or,
     * when padded, its size rounded up to a whole 1 GiB (see exo_pseg_get()). Mapping,
     * moving, hiding and reserving use the span; the data is size bytes. */
    uint64_t span;
    bool thp;                   /* SEG_THP: advise huge pages before populating */
    int fd;                     /* the data file; -1 after a failed reopen in a fork child */
    bool fd_writable;
    int refs;                   /* attachments that list it */
    enum pseg_where where;
    int access;                 /* when visible: EXO_ACCESS_READ or EXO_ACCESS_RW, what the
                                   current VAS grants */
    int prot;                   /* when mapped (visible, kept, parked): the mapping's access.
                                   Equal to access except under the keep engine, which does
                                   not take write access away again (switch.c) */
    uint64_t park_addr;         /* reserved parking slot, 0 if none */
    uint64_t park_len;          /* its length (the span when it was reserved) */
    bool slot_new;              /* the slot was reserved by the switch under way */
    enum exo_lock_mode lock;    /* lock this process holds on it */
    /* SEG_PAGED (paged.c): the data is in a pager store; while visible a pager region at
     * the base serves it. */
    bool paged;
    struct exo_paged_rec paged_rec;
    struct exo_pager *pager;
    struct exo_pager_store *store;
};

/* Do [a, a+alen) and [b, b+blen) share a byte? */
static inline bool ranges_meet(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
    return a < b + blen && b < a + alen;
}

/* Mapped at its base (the current VAS's, or kept there by the keep engine). */
static inline bool pseg_at_base(const struct pseg *ps)
{
    return ps->where == PSEG_VISIBLE || ps->where == PSEG_KEPT;
}

struct attach_seg {
    struct pseg *ps;
    int flags;                  /* SEG_RDONLY or SEG_RDWR */
    bool local;                 /* added by seg_attach_local() */
};

struct attachment {
    vhandle_t handle;           /* 0: slot free */
    vasid_t vid;
    char name[EXOMEM_NAME_MAX + 1];
    segid_t heap;
    unsigned nsegs;
    struct attach_seg segs[VAS_SEGS_MAX];
    uint64_t last_used;         /* LRU clock of the park area */
};

struct space {
    pthread_mutex_t lock;
    struct pseg **psegs;
    size_t npsegs, cappsegs;
    struct attachment att[VAS_ATTACH_MAX];
    struct attachment *current; /* NULL: home */
    vhandle_t next_handle;
    uint64_t clock;
    int engine;
    bool locking;
    struct vas_park_stats park;
    struct exo_os_move_steps steps; /* the current switch's mremap/mprotect time */
};

/* The process's space, initialised on first use. Callers take space->lock. */
struct space *exo_space(void);

struct attachment *exo_space_find(struct space *s, vhandle_t vh);
struct pseg *exo_space_pseg(struct space *s, segid_t sid);

/* Open (or take another reference to) segment sid for an attachment needing `flags`
 * access, reserving its base range (its span: padded to whole GiBs where it can be). */
int exo_pseg_get(struct space *s, segid_t sid, int flags, struct pseg **out);
/* Drop a reference; the last one closes the file and gives back the address ranges. The
 * segment must not be visible. */
void exo_pseg_put(struct space *s, struct pseg *ps);

/* Switch the process to attachment `to` (NULL: home), taking segment locks (waiting when
 * `wait`). */
int exo_space_switch(struct space *s, struct attachment *to, bool wait);

/* Make one segment visible at its base (access EXO_ACCESS_READ or _RW), or take it off. */
int exo_space_show(struct space *s, struct pseg *ps, int access);
void exo_space_hide(struct space *s, struct pseg *ps);

/* Paged segments (paged.c). Show: a pager region at the base over a file store of the
 * data file. Flush: write a visible one's dirty units back (before its lock can go). Hide:
 * write back, put the reservation back, free the region. Forget: in a fork child, drop
 * the parent's region without touching it. */
int exo_paged_show(struct pseg *ps, int access);
int exo_paged_flush(struct pseg *ps);
void exo_paged_hide(struct pseg *ps);
void exo_paged_forget(struct pseg *ps);

/* Keep engine, at home: take every kept segment off its base (before the engine changes). */
void exo_space_drop_kept(struct space *s);

/* Give up page tables of parked segments, least recently used attachments first, until
 * the park area is within its bound. `keep` is never evicted. */
void exo_space_trim_park(struct space *s, const struct attachment *keep);

#endif
