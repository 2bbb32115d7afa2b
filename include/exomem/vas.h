/* Virtual address spaces (SpaceJMP): named, persistent sets of segments that a process
 * attaches and switches between.
 *
 * Linux gives a process one page table, so vas_switch() changes what the WHOLE process sees,
 * all its threads at once; what every VAS shares (code, stack, heap, libraries: the "common
 * region") never changes. After vas_switch(h) exactly h's segments are visible at their
 * bases; the segments of the other attached VASes are reserved but inaccessible (touching
 * them faults), so no other mmap can take their addresses.
 *
 * Switching in takes each segment's lock (shared for SEG_RDONLY, exclusive for SEG_RDWR)
 * in one global order (by segment id), and switching out releases it. The locks are OFD
 * record locks, which the kernel drops when the holder dies.
 *
 * Calls return 0 or a negative code (-EXO_..., error.h), set errno and exomem_last_error(),
 * and leave the registry and the process as they were when they fail; seg.h says which
 * registry failures any call may meet and how long the registry lock is waited for. All
 * calls are thread-safe: a process's attachments are guarded by one mutex, which no call
 * holds while it waits for another process (see vas_switch()).
 */
#ifndef EXOMEM_VAS_H
#define EXOMEM_VAS_H

#include <exomem/seg.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VAS_HOME 0          /* the handle of the process's original address space */
#define VAS_SEGS_MAX 64     /* segments per VAS (persistent plus local) */
#define VAS_ATTACH_MAX 256  /* VASes attached at once per process */

/* Switch engines (see docs/spacejmp.md). */
enum vas_engine {
    VAS_ENGINE_PARK = 1,    /* keep switched-out segments mapped in a parking area, move
                               their page tables with mremap (default) */
    VAS_ENGINE_REMAP = 2,   /* unmap switched-out segments, map and populate on switch-in */
    VAS_ENGINE_KEEP = 3,    /* park, but a switched-out segment stays mapped at its base
                               (unlocked) until a VAS that needs its range comes in: a switch
                               that moves nothing is only its locks. Not isolating: a stray
                               access to it, or a write through a read-only VAS after a
                               read-write one, does not fault */
};

struct vas_seg_ref {
    segid_t sid;
    char name[EXOMEM_NAME_MAX + 1];
    int flags;              /* SEG_RDONLY or SEG_RDWR */
};

struct vas_info {
    vasid_t id;
    char name[EXOMEM_NAME_MAX + 1];
    mode_t mode;
    uid_t uid;
    gid_t gid;
    segid_t heap;           /* segment vas_malloc() allocates from; 0: the first SEG_RDWR */
    int64_t created;
    unsigned nsegs;
    struct vas_seg_ref segs[VAS_SEGS_MAX];
};

struct vas_park_stats {
    uint64_t parked_bytes;  /* bytes of segments parked with their page tables */
    uint64_t limit_bytes;   /* the bound past which the least recently used VAS is evicted */
    uint64_t evictions;     /* parked VASes evicted so far */
    uint64_t moves;         /* segment moves by mremap so far */
    uint64_t maps;          /* segment maps (mmap + populate) so far */
    /* Where vas_switch's time went, in nanoseconds summed over `switches` switches (those
     * that changed the VAS): page-table moves (mremap), hiding what was moved away and
     * changing access (mprotect), segment locks, and the rest (bookkeeping, maps). */
    uint64_t switches;
    uint64_t remap_ns, protect_ns, lock_ns, other_ns;
};

/* vas_ctl() commands. Those marked "process" apply to the calling process and ignore vid. */
enum vas_ctl_cmd {
    VAS_CTL_INFO = 1,       /* arg: struct vas_info *, filled in */
    VAS_CTL_SET_MODE,       /* arg: const mode_t *; owner or root only */
    VAS_CTL_SET_HEAP,       /* arg: const segid_t *, a SEG_RDWR segment of the VAS */
    VAS_CTL_SET_ENGINE,     /* process; arg: const int * (enum vas_engine); only at home */
    VAS_CTL_GET_ENGINE,     /* process; arg: int * */
    VAS_CTL_SET_PARK_LIMIT, /* process; arg: const uint64_t *, bytes */
    VAS_CTL_PARK_STATS,     /* process; arg: struct vas_park_stats * */
    VAS_CTL_SET_LOCKING,    /* process; arg: const int *, 1 (default) takes segment locks on
                               switch, 0 does not (for measurements; unsafe when shared);
                               only at home */
};

/* Create an empty VAS `name` with permission bits `mode`; store its id in *vid.
 * -EXO_EEXIST, -EXO_EBADNAME, -EXO_ENAMETOOLONG, -EXO_EINVAL (vid NULL). Blocks on the
 * registry lock. */
int vas_create(const char *name, mode_t mode, vasid_t *vid);

/* Look a VAS up by name. -EXO_ENOENT, -EXO_EBADNAME, -EXO_ECORRUPT (a damaged or foreign
 * name link), -EXO_EINVAL. Never blocks on locks. */
int vas_find(const char *name, vasid_t *vid);

/* Make a new VAS `new_name` listing the same segments (the segments are shared, not
 * copied) with the same mode. -EXO_ENOENT (no VAS vid), -EXO_EACCES (vid not readable),
 * and vas_create()'s errors. Blocks on the registry lock. */
int vas_clone(vasid_t vid, const char *new_name, vasid_t *new_vid);

/* Delete a VAS from the registry; its segments remain. Processes that attached it keep
 * their attachment until they detach. -EXO_ENOENT, -EXO_EPERM (neither owner nor root).
 * Blocks on the registry lock. */
int vas_delete(vasid_t vid);

/* Attach VAS `vid` to this process: open its segments (-EXO_EACCES without permission) and
 * reserve their address ranges (-EXO_EOVERLAP if a range overlaps a mapping that is not
 * exomem's); store the handle in *vh. Nothing becomes visible until vas_switch().
 * -EXO_ENOENT, -EXO_ETOOMANY (VAS_ATTACH_MAX attached), -EXO_EINVAL (vh NULL). Never
 * blocks on locks. */
int vas_attach(vasid_t vid, vhandle_t *vh);

/* Detach an attachment; if it is current, the process first switches home (releasing the
 * segment locks). -EXO_EDETACHED for a handle that is not attached. Never waits for another
 * process. A thread waiting in vas_switch() for this handle fails with -EXO_EDETACHED. */
int vas_detach(vhandle_t vh);

/* Make `vh`'s segments visible at their bases and hide the current VAS's, taking and
 * releasing segment locks. vas_switch(VAS_HOME) returns to the original address space.
 * BLOCKS, without a time limit, while another process holds a conflicting segment lock:
 * the process then first goes home and drops every lock it holds (so two processes that
 * each want the other's segments cannot deadlock), waits without holding the process's
 * mutex (its other threads go on: they see vas_current() == VAS_HOME meanwhile, and may
 * switch and allocate), and then tries again. Use vas_try_switch() never to wait.
 * -EXO_EDETACHED (not attached, or detached by another thread during the wait),
 * -EXO_ENOMEM (no address space to park the current VAS's segments, or mapping failed: the
 * process is then at home holding nothing). */
int vas_switch(vhandle_t vh);

/* vas_switch() that fails with -EXO_EBUSY, changing nothing (same VAS, same locks, same
 * mappings), instead of waiting for a lock. Never blocks. */
int vas_try_switch(vhandle_t vh);

/* SpaceJMP's vcast: tell the CARAT plugin's VAS-safety analysis (exomem-cc with
 * EXOMEM_CARAT_PARTS containing vas, docs/carat.md) that p may be used whatever address
 * space is current (the program knows it points to memory visible everywhere). Returns p.
 * Never fails; does not block; thread-safe. */
void *vas_cast(void *p);
#define vcast(p) vas_cast(p)

/* The check the VAS-safety analysis puts before a dereference it could not prove safe: if
 * the current attachment is not `expected` (the one the pointer came from), print where
 * (site) and raise SIGSEGV in the calling thread, as touching a switched-out segment
 * would. Never fails otherwise; does not block; thread-safe. */
void exo_vas_deref_check(vhandle_t expected, const char *site);

/* The current attachment (VAS_HOME when none). Never fails; never waits for another
 * process (it takes the process's mutex briefly). */
vhandle_t vas_current(void);

/* Query or change a VAS, or the calling process's switching settings; see enum
 * vas_ctl_cmd. -EXO_EINVAL (unknown cmd, NULL or bad arg), -EXO_ENOENT, -EXO_EPERM
 * (SET_MODE by neither owner nor root), -EXO_EACCES (SET_HEAP with a read-only segment),
 * -EXO_EINUSE (SET_ENGINE or SET_LOCKING away from home). Registry commands block on the
 * registry lock; process commands never block. */
int vas_ctl(int cmd, vasid_t vid, void *arg);

/* Fill out[0..cap) with the registry's VASes, sorted by id; *count gets how many there are.
 * Corrupt entries are skipped and counted in *corrupt (may be NULL); VASes whose mode does
 * not let the caller read them are skipped and not counted. -EXO_EINVAL (count NULL, or out
 * NULL with cap > 0), or the error of a registry directory that cannot be read (never an
 * empty list instead). Takes the registry lock shared. */
int vas_list(struct vas_info *out, size_t cap, size_t *count, size_t *corrupt);

#ifdef __cplusplus
}
#endif
#endif
