/* Segments: named, persistent, lockable pieces of memory with a fixed base address.
 *
 * A segment's data lives in a file in the registry (EXOMEM_ROOT, default /dev/shm/exomem;
 * hugetlbfs for 2M and 1G pages) and outlives the process that made it. Access is governed
 * by the file's owner, group and mode, as for any file. Segments become visible in a process
 * through a VAS (see vas.h): seg_attach() records a segment in a VAS for every process that
 * attaches it; seg_attach_local() adds it only to one process's attachment of a VAS.
 *
 * For every call below: it returns 0 or a negative code (-EXO_..., error.h), sets errno, and
 * says why in exomem_last_error(); a failed call leaves the registry and the process as they
 * were. Codes listed are the ones the call itself chooses; any call that touches the
 * registry may also give -EXO_EIO, -EXO_ENOSPC or -EXO_ENOMEM from the kernel, -EXO_ECORRUPT
 * for a damaged record and -EXO_EACCES where the caller's permission ends. Calls that
 * change the registry take its lock exclusively and those that list it take it shared; a
 * call blocks at most EXOMEM_LOCK_TIMEOUT (default 10 s) for it, then fails with
 * -EXO_EBUSY naming the holder. Lookups by name or id read without that lock. Every call
 * is thread-safe (and process-safe) unless its comment says otherwise.
 */
#ifndef EXOMEM_SEG_H
#define EXOMEM_SEG_H

#include <exomem/access.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint64_t segid_t;   /* registry-wide id of a segment, never reused; 0 is none */
typedef uint64_t vasid_t;   /* registry-wide id of a VAS, never reused; 0 is none */
typedef int vhandle_t;      /* a process's attachment of a VAS; VAS_HOME is the original */

#define EXOMEM_NAME_MAX 63  /* longest segment or VAS name; names use [A-Za-z0-9._-] */

#define SEG_PAGE_4K (UINT64_C(1) << 12)
#define SEG_PAGE_2M (UINT64_C(1) << 21)
#define SEG_PAGE_1G (UINT64_C(1) << 30)

/* Access of an attachment (seg_attach(), seg_attach_local()): the values of access.h, so
 * SEG_RDONLY == EXO_ACCESS_READ and SEG_RDWR == EXO_ACCESS_RW. */
#define SEG_RDONLY EXO_ACCESS_READ  /* read-only: shared lock while switched in */
#define SEG_RDWR   EXO_ACCESS_RW    /* read-write: exclusive lock while switched in */

/* seg_alloc_ex() options (struct seg_opts.flags). Their values never meet the access values
 * above, so passing one where the other belongs fails with EXO_EINVAL. */
#define SEG_NORESERVE 0x100 /* do not reserve the memory up front (sparse file) */
/* Transparent huge pages: a 4K-granular segment (page_size SEG_PAGE_4K) whose data lives in
 * a tmpfs that allows huge pages (EXOMEM_TMPFS_HUGE, else a tmpfs mounted with
 * huge=advise/within_size/always, else, for root, a private one under the registry), filled
 * through a MADV_HUGEPAGE mapping. Its 2 MiB-aligned parts get huge pages when the kernel
 * has them to give (never guaranteed: see seg_backing()); a base that is a multiple of
 * 2 MiB lets every process map them whole. EXO_ENOHUGE when no such tmpfs can be had. */
#define SEG_THP 0x200

/* Huge page segments (docs/hugepages.md). 2M and 1G data lives in a hugetlbfs mount
 * (EXOMEM_HUGETLBFS_2M/_1G, else one found in /proc/self/mounts, else, for root, a private
 * mount under the registry, $EXOMEM_ROOT/mnt/2M or mnt/1G). Their pages come from the
 * kernel's pool: when it lacks free pages and the caller is root, the pool is grown for the
 * segment (all or nothing) and shrunk again by seg_delete(); otherwise EXO_ENOHUGE, with
 * exomem_last_error() saying how many pages are missing, and nothing is created. Never a
 * silent fallback to 4K pages. */
/* Paged segments (docs/pager.md, "Paged segments"): the data lives in a file store of the
 * application-level pager, in paged_dir on a disk file system, not in memory, so a segment
 * can be far larger than RAM. Each process that switches it in gets a pager region at its
 * base with paged_budget bytes of frames; dirty data is written back to the store when the
 * process switches it out (before its lock is released), so the next process to switch it
 * in sees it. 4K pages only; not with SEG_THP. seg_clone() of a paged segment is not
 * supported (EXO_ENOTSUP). */
#define SEG_PAGED 0x400

struct seg_opts {
    uint64_t page_size;     /* SEG_PAGE_4K (default when 0), SEG_PAGE_2M or SEG_PAGE_1G */
    unsigned flags;         /* SEG_NORESERVE, SEG_THP (only with 4K pages), SEG_PAGED */
    /* SEG_PAGED only: */
    const char *paged_dir;  /* directory of the store file (default $EXOMEM_PAGED_DIR, else
                             * /var/tmp) */
    uint64_t paged_budget;  /* bytes each process may keep resident (default: the lesser
                             * of the size and 256 MiB) */
    unsigned paged_policy;  /* an exo_pager_policy (default EXO_PAGER_CLOCK); not CUSTOM */
    uint64_t paged_unit;    /* 4 KiB (default) or 2 MiB units (then base and size must be
                             * multiples of 2 MiB) */
};

struct seg_info {
    segid_t id;
    char name[EXOMEM_NAME_MAX + 1];
    uint64_t base;
    uint64_t size;
    uint64_t page_size;
    mode_t mode;
    uid_t uid;
    gid_t gid;
    unsigned flags;         /* SEG_NORESERVE, SEG_THP */
    int64_t created;        /* seconds since the epoch */
};

/* What memory is behind a segment's data right now (seg_backing()). */
struct seg_backing {
    uint64_t page_size;     /* the segment's page size (SEG_PAGE_4K for SEG_THP segments) */
    unsigned flags;         /* the segment's flags (SEG_THP, SEG_NORESERVE) */
    uint64_t size;          /* the segment's size */
    uint64_t resident;      /* bytes that have memory (hugetlb: pages faulted in) */
    uint64_t huge;          /* bytes of those in huge pages (2M or 1G) */
};

/* seg_ctl() commands. */
enum seg_ctl_cmd {
    SEG_CTL_INFO = 1,       /* arg: struct seg_info *, filled in */
    SEG_CTL_SET_MODE,       /* arg: const mode_t *; owner or root only */
};

/* Create segment `name` of `size` bytes at virtual address `base` with 4K pages and
 * permission bits `mode` (as chmod); on success stores the new id in *sid. Errors:
 * -EXO_EEXIST (the name is taken), -EXO_EBADNAME, -EXO_ENAMETOOLONG, -EXO_EALIGN (base or
 * size not page-aligned), -EXO_ESIZE, -EXO_EOVERLAP (the range overlaps a mapping of the
 * caller), -EXO_ENOSPC (the registry's file system is full), -EXO_EINVAL (sid NULL).
 * Blocks on the registry lock; reserves the memory (writes the file's blocks) unless
 * SEG_NORESERVE. */
int seg_alloc(const char *name, uint64_t base, uint64_t size, mode_t mode, segid_t *sid);

/* seg_alloc() with options (page size, flags); opts may be NULL. Also -EXO_EPAGESIZE (a
 * page size other than 4K, 2M, 1G), -EXO_EINVAL (unknown flags, SEG_THP with huge pages),
 * -EXO_ENOHUGE (no hugetlbfs or huge-page tmpfs, or the pool cannot give the pages; for root
 * the pool is grown first). Blocks as seg_alloc(), and while the kernel fills the pool. */
int seg_alloc_ex(const char *name, uint64_t base, uint64_t size, mode_t mode,
                 const struct seg_opts *opts, segid_t *sid);

/* Look a segment up by name; stores its id in *sid. -EXO_ENOENT (no such segment),
 * -EXO_EBADNAME, -EXO_ECORRUPT (a damaged or foreign name link), -EXO_EINVAL (sid NULL).
 * Never blocks on locks. */
int seg_find(const char *name, segid_t *sid);

/* Make a new segment `new_name` with the same base, size, page size and mode as `sid`
 * and a copy of its data; the copy may be given other permissions with seg_ctl(). Errors as
 * seg_alloc_ex(), and -EXO_ENOENT (no segment sid), -EXO_EACCES (sid not readable). BLOCKS
 * while a process has sid switched in read-write: the copy is taken under a shared lock on
 * the segment, which waits for writers without a time limit (then the registry lock). */
int seg_clone(segid_t sid, const char *new_name, segid_t *new_sid);

/* Query or change a segment's metadata; see enum seg_ctl_cmd. -EXO_ENOENT, -EXO_EINVAL (an
 * unknown cmd or NULL arg), -EXO_EPERM (SEG_CTL_SET_MODE by neither owner nor root).
 * Never blocks on locks. */
int seg_ctl(segid_t sid, int cmd, void *arg);

/* Delete a segment and its data. -EXO_EINUSE while a VAS lists it, -EXO_EBUSY while a
 * process has it switched in (its lock is tried, never waited for), -EXO_EPERM for neither
 * owner nor root, -EXO_ENOENT. Gives back the huge pages seg_alloc_ex() added to the pool
 * for it, and (root) unmounts the registry's private mount it emptied. Blocks on the
 * registry lock. Mappings of it that processes still have stay valid until unmapped. */
int seg_delete(segid_t sid);

/* Record segment `sid` in VAS `vid` (persistent, for every process that attaches the VAS
 * afterwards) with SEG_RDONLY or SEG_RDWR access. -EXO_EOVERLAP (overlaps a segment already
 * in the VAS), -EXO_EEXIST (listed already), -EXO_ETOOMANY (past VAS_SEGS_MAX), -EXO_EINVAL
 * (access neither SEG_RDONLY nor SEG_RDWR), -EXO_ENOENT, -EXO_EACCES (the VAS not writable, or
 * the segment not open to that access). Blocks on the registry lock. Processes that
 * attached the VAS before keep what they attached. */
int seg_attach(vasid_t vid, segid_t sid, int flags);

/* Remove segment `sid` from VAS `vid`'s persistent list. -EXO_ENOENT (not listed),
 * -EXO_EACCES (the VAS not writable). Blocks on the registry lock. */
int seg_detach(vasid_t vid, segid_t sid);

/* Add segment `sid` to this process's attachment `vh` only (the VAS file is unchanged).
 * If `vh` is current the segment becomes visible at once, locked as a switch would lock it;
 * that lock is tried, not waited for: -EXO_EBUSY while another process holds it.
 * -EXO_EDETACHED, -EXO_EEXIST, -EXO_ETOOMANY, -EXO_EOVERLAP, -EXO_EINVAL, -EXO_EACCES. */
int seg_attach_local(vhandle_t vh, segid_t sid, int flags);

/* Remove a segment added with seg_attach_local() from this process's attachment `vh`.
 * If vh is current the segment is hidden and its lock released at once. -EXO_EDETACHED,
 * -EXO_ENOENT (not in vh), -EXO_EINVAL (a segment of the VAS's record: use seg_detach()).
 * Never blocks on locks. */
int seg_detach_local(vhandle_t vh, segid_t sid);

/* Report how much of segment `sid` is resident and how much of that is in huge pages.
 * For hugetlb segments, from the hugetlbfs file's allocated blocks (all huge). For 4K and
 * SEG_THP segments, through a read-only mapping of the data file: mincore() finds the
 * resident pages, only those are touched, and /proc/self/smaps tells which are mapped as
 * huge pages. Holes are never allocated. -EXO_EACCES without read permission, -EXO_ENOENT,
 * -EXO_EINVAL (out NULL). Never blocks on locks; takes time in proportion to the size. */
int seg_backing(segid_t sid, struct seg_backing *out);

/* Fill out[0..cap) with the registry's segments, sorted by id, and set *count to how many
 * there are (which may exceed cap). Corrupt entries are skipped and counted in *corrupt
 * (may be NULL). -EXO_EACCES or another code when a registry directory cannot be read
 * (never an empty list instead), -EXO_EINVAL (count NULL, or out NULL with cap > 0). Takes
 * the registry lock shared. */
int seg_list(struct seg_info *out, size_t cap, size_t *count, size_t *corrupt);

#ifdef __cplusplus
}
#endif
#endif
