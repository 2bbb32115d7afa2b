/* src/os: the only layer of exomem that talks to the kernel.
 *
 * Contract (every file in src/os keeps it; nothing above src/os breaks it):
 * - Only src/os calls the kernel or libc's system-call wrappers (mmap, mremap, mprotect,
 *   open, pread, link, mkdir, stat, flock/fcntl locks, ioctl, mount, userfaultfd, signals,
 *   /proc and /sys). The layers above call these wrappers; tests/test_os_boundary.sh fails
 *   the build's suite on any system call outside src/os. (src/config.c alone reads the
 *   environment: that is configuration, not the kernel.)
 * - A wrapper does one thing the kernel offers and hides kernel-version differences (uapi
 *   constants newer than Debian 12's headers are defined in os_uapi.h and probed at run time).
 * - It returns 0 (or a result: a descriptor, a length) or a negative exomem code
 *   (-EXO_EACCES, ...; exo_os_code() maps errno), and leaves errno as the kernel set it, so
 *   the caller can add strerror(errno) to its message. Wrappers write no message themselves:
 *   the caller knows which object the call was for.
 * - EINTR: calls that can be interrupted (open, pread, pwrite, posix_fallocate, waiting
 *   locks) are retried inside the wrapper; close is never retried (Linux frees the
 *   descriptor anyway). An injected EINTR takes the same retry path.
 * - No state: wrappers keep nothing between calls, so they are thread-safe; the fault
 *   injector's counters are the one exception and are only for tests. Wrappers documented
 *   as async-signal-safe (exo_os_pool_restore, the uffd and signal ones) call nothing else.
 * - Failure leaves nothing behind: a wrapper that made something (a mapping, a directory)
 *   before a later step failed undoes it before returning.
 *
 * Injected faults: exo_os_fault_arm(kind, n, err) makes the n-th wrapper call of `kind`
 * after arming fail with errno `err`, without calling the kernel; the tests walk n upward
 * through an operation until it succeeds (tests/test_faults.c), and EXOMEM_FAULT does the
 * same for a whole process (the CLI). Off, it costs one load and an untaken branch. */
#ifndef EXOMEM_OS_H
#define EXOMEM_OS_H

#include <exomem/access.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Kernel constants newer than Debian 12's 6.1 headers, defined once here. */
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif

/* --- injected faults (os_fault.c) --- */

enum exo_fault_kind {
    EXO_FAULT_OPEN,     /* opening files */
    EXO_FAULT_READ,     /* reading files, links, directories and metadata */
    EXO_FAULT_WRITE,    /* writing files */
    EXO_FAULT_SIZE,     /* sizing and filling files (fallocate, ftruncate, hugetlb reserve) */
    EXO_FAULT_NAME,     /* making, removing, linking and re-permissioning names */
    EXO_FAULT_MAP,      /* mapping and reserving address space */
    EXO_FAULT_MOVE,     /* moving page tables (mremap) */
    EXO_FAULT_PROTECT,  /* changing access (mprotect) */
    EXO_FAULT_LOCK,     /* segment and registry locks */
    EXO_FAULT_MOUNT,    /* mounting private file systems */
    EXO_FAULT_POOL,     /* growing huge page pools */
    EXO_FAULT_RESIDENT, /* asking which pages are in memory (mincore) */
    EXO_FAULT_KINDS
};

extern int exo_os_fault_on;
bool exo_os_fault_hit(enum exo_fault_kind kind);
/* In a wrapper, before its kernel call: true (errno set) when this call is to fail. */
static inline bool exo_os_fault(enum exo_fault_kind kind)
{
    return __builtin_expect(exo_os_fault_on, 0) && exo_os_fault_hit(kind);
}
/* Count every wrapper call from now on, and fail the nth of `kind` (nth 0: none; kind -1:
 * count only) with errno err. Not thread-safe against itself: arm from one thread. */
void exo_os_fault_arm(int kind, unsigned long nth, int err);
void exo_os_fault_disarm(void);
/* Calls of `kind` since arming; whether the armed fault has fired. */
unsigned long exo_os_fault_calls(enum exo_fault_kind kind);
bool exo_os_fault_fired(void);
const char *exo_os_fault_kind_name(enum exo_fault_kind kind);
/* The kind of that name ("open", "map", ...), or -1. */
int exo_os_fault_kind_parse(const char *name);

/* Highest user address + 1 with 4-level paging (47 bits). */
#define EXO_USER_ADDR_END (UINT64_C(1) << 47)

/* --- address space --- */

/* Reserve [addr, addr+len) as inaccessible, never replacing an existing mapping:
 * -EXO_EOVERLAP if anything is mapped there. */
int exo_os_reserve_fixed(uint64_t addr, uint64_t len);

/* Reserve len bytes anywhere, inaccessible, at an address congruent to `align_to` modulo
 * `modulus` (a power of two). Stores the address in *addr. */
int exo_os_reserve_congruent(uint64_t len, uint64_t align_to, uint64_t modulus, uint64_t *addr);

/* Replace whatever this process has mapped at [addr, addr+len) (which must be exomem's own)
 * by an inaccessible reservation, dropping its page tables. Never leaves a hole. */
int exo_os_hide(uint64_t addr, uint64_t len);

/* Map file fd (offset 0) shared at exactly addr over exomem's own reservation, with
 * read-write or read-only access, populating page tables when `populate`. len may exceed
 * the file's size (a padded segment, see switch.c): an access past the file's end then gets
 * SIGBUS, and populating stops there. */
int exo_os_map_file_fixed(int fd, uint64_t addr, uint64_t len, bool writable, bool populate,
                          bool huge_advice);

/* Map all of file fd (len bytes) shared wherever the kernel likes; *addr receives it. */
int exo_os_map_file(int fd, uint64_t len, bool writable, uint64_t *addr);

/* Move the page tables of the mapping at [from, from+len) to `to` (replacing the reservation
 * there) with mremap(MREMAP_FIXED|MREMAP_DONTUNMAP), then make `from` inaccessible. Neither
 * range is ever a hole. Not for hugetlb mappings. When `steps` is not NULL, the time spent
 * in the mremap and in the mprotect is added to it (for vas_switch's breakdown). */
struct exo_os_move_steps {
    uint64_t remap_ns, protect_ns;
};
int exo_os_move(uint64_t from, uint64_t to, uint64_t len, struct exo_os_move_steps *steps);

/* The mmap/mprotect PROT_ bits of an access (EXO_ACCESS_* of access.h). */
int exo_os_prot(int access);

/* Change access of [addr, addr+len) to EXO_ACCESS_NONE, _READ or _RW (access.h). */
int exo_os_protect(uint64_t addr, uint64_t len, int access);

/* Private anonymous memory of len bytes anywhere, read-write, not reserved (MAP_NORESERVE)
 * and not inherited by a child (MADV_DONTFORK): for memory whose pages a pager fills.
 * huge_2m: of 2 MiB hugetlb pages (MAP_HUGETLB), taken from the pool as they are filled. */
int exo_os_map_anon(uint64_t len, bool huge_2m, uint64_t *addr);
/* Private anonymous read-write memory of len bytes anywhere (MAP_NORESERVE) that a forked
 * child gets a copy of, as it does of the heap: for a runtime's records of the heap. */
int exo_os_map_anon_inherited(uint64_t len, uint64_t *addr);
/* exo_os_map_anon() at exactly addr, over what is there (the caller's reservation). */
int exo_os_map_anon_fixed(uint64_t addr, uint64_t len, bool huge_2m);

/* Drop the pages of [addr, addr+len) (MADV_DONTNEED): private memory reads as missing (or
 * zero) afterwards. */
int exo_os_drop_pages(uint64_t addr, uint64_t len);

/* Give [addr, addr+len) back to the kernel. */
int exo_os_unmap(uint64_t addr, uint64_t len);

/* Is any part of [addr, addr+len) mapped in this process? If so, and desc is not NULL,
 * writes "start-end path" of the first overlapping mapping (from /proc/self/maps). */
bool exo_os_range_mapped(uint64_t addr, uint64_t len, char *desc, size_t desc_len);

/* As exo_os_range_mapped(), but mappings for which ignore(lo, hi) is true (the part of a
 * mapping inside [addr, addr+len)) do not count. */
bool exo_os_range_mapped_except(uint64_t addr, uint64_t len,
                                bool (*ignore)(uint64_t lo, uint64_t hi), char *desc,
                                size_t desc_len);

/* --- segment locks (OFD record locks over the whole file; dropped by the kernel when the
 * holder dies) --- */

enum exo_lock_mode { EXO_LOCK_NONE = 0, EXO_LOCK_SHARED = 1, EXO_LOCK_EXCLUSIVE = 2 };

/* Take or convert the lock on fd; waits when `wait`, else -EXO_EBUSY. Retries EINTR. */
int exo_os_lock(int fd, enum exo_lock_mode mode, bool wait);
int exo_os_unlock(int fd);

/* Whole-file flock for the registry lock file (shared or exclusive), waiting at most
 * timeout_ms: -EXO_EBUSY after that. */
int exo_os_flock(int fd, bool exclusive, long timeout_ms);
/* The pid holding a flock on fd's file (from /proc/locks), or 0 if none is found. */
int exo_os_flock_holder(int fd);
int exo_os_funlock(int fd);

/* --- files --- */

/* open() that retries EINTR and maps errno to exomem codes; O_CLOEXEC is always added. */
int exo_os_open(const char *path, int flags, mode_t mode);
/* A new open file description of the file fd refers to (through /proc/self/fd), read-write
 * or read-only: its OFD locks are its own, apart from fd's. */
int exo_os_reopen(int fd, bool writable);
int exo_os_close(int fd);
/* Free the blocks of [off, off+len) of fd, keeping its size (a hole reads as zeros). */
int exo_os_punch_hole(int fd, uint64_t off, uint64_t len);
/* Read or write exactly len bytes at off; short read -> -EXO_ECORRUPT. */
int exo_os_pread_all(int fd, void *buf, size_t len, off_t off);
/* One pread of up to len bytes at off: the count read (0 at end of file) or -EXO_ code. */
long exo_os_pread_some(int fd, void *buf, size_t len, off_t off);
/* The number a small file of the kernel's holds (/proc/sys, /sys: "4096\n"), or -1 if it
 * cannot be read or does not start with one. Plain open and read: safe in a signal
 * handler. */
long exo_os_read_long(const char *path);
int exo_os_pwrite_all(int fd, const void *buf, size_t len, off_t off);
/* Size the file to len; reserve its blocks when `reserve` (ENOSPC -> -EXO_ENOSPC). */
int exo_os_size_file(int fd, uint64_t len, bool reserve);
int exo_os_fsync(int fd);
/* Map errno to an exomem code (EACCES -> EXO_EACCES, ...). */
int exo_os_code(int err);

/* --- names in the file system (os_fs.c) --- */

struct stat;
/* mkdir with exactly `mode` (the umask undone); -EXO_EEXIST if it exists. */
int exo_os_mkdir(const char *path, mode_t mode);
int exo_os_rmdir(const char *path);
int exo_os_unlink(const char *path);
/* link(2): never replaces an existing path (-EXO_EEXIST). */
int exo_os_link(const char *existing, const char *path);
int exo_os_symlink(const char *target, const char *path);
/* The link's target, NUL-terminated in buf (at most len-1 bytes); returns its length. */
int exo_os_readlink(const char *path, char *buf, size_t len);
int exo_os_stat(const char *path, struct stat *st);
int exo_os_lstat(const char *path, struct stat *st);
int exo_os_fstat(int fd, struct stat *st);
int exo_os_chmod(const char *path, mode_t mode);
int exo_os_fchmod(int fd, mode_t mode);
/* Call each(name) for every entry of dir but . and .., until it returns non-zero (which
 * is returned). -EXO_ code if dir cannot be read. */
int exo_os_dir_each(const char *dir, int (*each)(const char *name, void *arg), void *arg);
/* 1 if dir has no entry but . and .., 0 if it has one, -EXO_ code if it cannot be read. */
int exo_os_dir_is_empty(const char *dir);
uid_t exo_os_euid(void);
int exo_os_pid(void);
/* When process pid started (clock ticks since boot, /proc/PID/stat): with the pid it names
 * one process, even after its pid is reused. -EXO_ENOENT if there is no such process. */
int exo_os_process_start(int pid, uint64_t *ticks);
/* Copy size bytes from file src to file dst through two temporary shared mappings (works
 * on hugetlbfs, which has no read/write). */
int exo_os_copy_file(int src, int dst, uint64_t size);

/* --- threads and the CPU --- */

/* The base page size (sysconf). */
long exo_os_page_size(void);
/* Give the CPU to another thread (sched_yield). */
void exo_os_yield(void);
/* Sleep for ns nanoseconds (less if a signal comes). */
void exo_os_sleep_ns(long ns);
/* A monotonic clock in nanoseconds (async-signal-safe). */
uint64_t exo_os_now_ns(void);
/* The process's peak resident memory so far in bytes (getrusage), 0 if unknown. */
uint64_t exo_os_peak_rss_bytes(void);
/* Block every signal in the calling thread (*old gets the previous mask), and put a mask
 * back. For helper threads that must never run a handler. */
int exo_os_block_signals(sigset_t *old);
int exo_os_restore_signals(const sigset_t *old);
/* Keep writes to a socket whose peer is gone from raising SIGPIPE in the calling thread,
 * for libraries that write with write(2) rather than send(MSG_NOSIGNAL) (hiredis):
 * exo_os_sigpipe_hold_start blocks SIGPIPE; exo_os_sigpipe_hold_end takes away a SIGPIPE
 * that became pending meanwhile (one already pending before the start stays), puts the mask
 * back and leaves errno as it was. The failed write still returns EPIPE. System calls only
 * (sigpending, pthread_sigmask, sigtimedwait), so usable in a signal handler. */
typedef struct exo_os_sigpipe_hold {
    sigset_t old;
    bool was_pending;
} exo_os_sigpipe_hold;
void exo_os_sigpipe_hold_start(exo_os_sigpipe_hold *h);
void exo_os_sigpipe_hold_end(exo_os_sigpipe_hold *h);

/* --- stopping a process's threads (CARAT's moves); none of these call malloc --- */

/* The ids of this process's threads (/proc/self/task) into tids; returns how many, or
 * -EXO_ENOSPC if there are more than max, or another -EXO_ code. */
int exo_os_list_threads(pid_t *tids, int max);
/* Wait while *word == expected (or until a wake or a signal); wake every waiter. */
void exo_os_futex_wait(const uint32_t *word, uint32_t expected);
void exo_os_futex_wake_all(const uint32_t *word);
/* This process's readable and writable mappings as sorted [lo, hi) pairs in ranges (one per
 * mapping, so a thread's stack is one range), read from /proc/self/maps into buf. Returns how many pairs, -EXO_ENOSPC
 * when more than max or buf is too small, or another -EXO_ code. */
int exo_os_writable_ranges(uintptr_t *ranges, int max, char *buf, size_t buf_len);
/* Read n words of this process's memory at addr[i] into word[i] without touching them
 * directly (process_vm_readv): ok[i] says whether addr[i] could be read; an unmapped word
 * is not a crash. 0, or a negative code when the kernel refuses the call altogether (the
 * caller then must not read directly either, unless it knows the memory is there). */
int exo_os_read_self(const uintptr_t *addr, uintptr_t *word, bool *ok, size_t n);

/* Which pages of [addr, addr + len) are in memory (mincore): vec[i] bit 0 for the i-th page
 * (addr page-aligned; vec has a byte per page). Never faults them in. 0 or a -EXO_ code
 * (-EXO_ENOMEM: part of the range is not mapped). */
int exo_os_resident(uint64_t addr, uint64_t len, unsigned char *vec);

/* The calling thread's stack [*lo, *hi) as the C library knows it (pthread_getattr_np: for
 * the main thread, from /proc/self/maps and the stack size limit; it may call malloc).
 * -EXO_EIO if the C library cannot tell. */
int exo_os_thread_stack(uintptr_t *lo, uintptr_t *hi);

/* The calling thread's thread pointer (x86-64: the %fs base), where the C library keeps its
 * descriptor (struct pthread; for a thread it started, at the top of that thread's stack
 * mapping, below which the static TLS blocks lie). 0 on other architectures.
 * Async-signal-safe: one load, no call. */
uintptr_t exo_os_thread_pointer(void);

/* Page size in bytes of a hugetlbfs mount, or 0 if path is not one. */
uint64_t exo_os_hugetlbfs_page_size(const char *path);
/* Find a mounted hugetlbfs with the given page size; writes its path. */
int exo_os_find_hugetlbfs(uint64_t page_size, char *path, size_t path_len);

/* --- the dynamic loader (os_loader.c) --- */

/* The executable segment [*lo, *hi) of the loaded object (program or shared library) whose
 * code holds address code (dl_iterate_phdr). -EXO_ENOENT if none does. Thread-safe. */
int exo_os_code_segment(const void *code, uintptr_t *lo, uintptr_t *hi);
/* The file name of the object (the program's path, or a shared library's as loaded) that
 * defines symbol as the dynamic linker binds it for the program (dlsym with RTLD_DEFAULT),
 * into path (len bytes, cut to fit). -EXO_ENOENT if no loaded object exports it.
 * Thread-safe; takes the loader's lock, and may call malloc. */
int exo_os_symbol_object(const char *symbol, char *path, size_t len);

/* --- huge page pools --- */

/* Pages in the pool of this page size (SEG_PAGE_2M or SEG_PAGE_1G) and how many are free;
 * -EXO_ENOHUGE if the kernel has no such pool. Either pointer may be NULL. */
int exo_os_pool_read(uint64_t page_size, long *total, long *free_pages);
/* Try to make need_free pages free (and not reserved by a mapping: see
 * exo_os_pool_available), growing the pool if needed (root only: -EXO_EPERM).
 * The kernel may grant fewer: *free_after says how many are free now, and the pool is left
 * grown. *saved_total gets the size to give back to exo_os_pool_restore(), or -1 when
 * nothing was changed. */
int exo_os_pool_grow(uint64_t page_size, long need_free, long *saved_total, long *free_after);
/* Make at least need_free pages free and unreserved, growing the pool if needed (root
 * only: -EXO_EPERM).
 * *saved_total gets the size to give back to exo_os_pool_restore(), or -1 when nothing was
 * changed. -EXO_ENOHUGE (pool unchanged) when the kernel cannot grant enough pages. */
int exo_os_pool_reserve(uint64_t page_size, long need_free, long *saved_total);
/* Put the pool back to saved_total (nothing for -1). Async-signal-safe. */
int exo_os_pool_restore(uint64_t page_size, long saved_total);
/* Pages in the pool and how many of the free ones no mapping has reserved yet (free minus
 * reserved: what a new mapping can still get). Either pointer may be NULL. */
int exo_os_pool_available(uint64_t page_size, long *total, long *available);
/* Shrink the pool by `pages` (never below 0): gives back pages an earlier grow added. Pages
 * still in use become surplus and the kernel frees them when they are released. Root only. */
int exo_os_pool_release(uint64_t page_size, long pages);
/* MemAvailable from /proc/meminfo, in bytes. */
int exo_os_mem_available(uint64_t *bytes);

/* --- huge page file systems (os_mount.c) --- */

/* A tmpfs's transparent huge page policy (its huge= mount option, or the system-wide
 * shmem_enabled=force/deny). */
enum exo_tmpfs_huge {
    EXO_TMPFS_HUGE_NONE = 0,    /* not a tmpfs, or huge=never, or shmem_enabled=deny */
    EXO_TMPFS_HUGE_ADVISE,      /* huge pages only for mappings with MADV_HUGEPAGE */
    EXO_TMPFS_HUGE_ALWAYS,      /* huge=always or within_size: huge pages on any fault */
};
/* The policy of the tmpfs that holds `dir` (a mount point or a directory inside one). */
enum exo_tmpfs_huge exo_os_tmpfs_huge_policy(const char *dir);
/* A writable tmpfs mount whose policy is not NONE, skipping exomem's private mounts (those
 * belong to one registry each). Writes its path; -EXO_ENOHUGE if there is none. */
int exo_os_find_tmpfs_huge(char *path, size_t path_len);
/* A writable hugetlbfs mount with this page size, skipping exomem's private mounts. */
int exo_os_find_shared_hugetlbfs(uint64_t page_size, char *path, size_t path_len);
/* Is `dir` a private mount that exomem made (hugetlbfs of page_size, or for page_size 0 a
 * tmpfs with huge pages)? */
bool exo_os_is_private_mount(const char *dir, uint64_t page_size);
/* Mount exomem's private file system at dir (which exists): hugetlbfs with pagesize=
 * page_size, or for page_size 0 a tmpfs with huge=within_size. Mode 1777, source
 * "exomem-2M", "exomem-1G" or "exomem-thp". Needs root (-EXO_EPERM). */
int exo_os_mount_private(const char *dir, uint64_t page_size);
/* Detach the mount at dir (lazily: mappings that still use it stay valid). */
int exo_os_unmount(const char *dir);
/* Reserve huge pages for all of a hugetlbfs file (a trial shared mapping: the kernel
 * reserves its pages for the file). -EXO_ENOHUGE if the pool cannot hold it. */
int exo_os_hugetlb_reserve_file(int fd, uint64_t len);
/* Allocate all of a tmpfs file through a 2 MiB-aligned mapping with MADV_HUGEPAGE, so that
 * a huge=advise tmpfs gives it huge pages. -EXO_ENOSPC when the tmpfs is full. */
int exo_os_thp_fill_file(int fd, uint64_t len);
/* How much of a tmpfs file (len bytes) has memory behind it (*resident: its allocated
 * blocks) and how much of that is in huge pages (*huge), in bytes. Maps the file
 * read-only, asks mincore() which pages of its data extents (SEEK_DATA) hold data,
 * touches only those (holes stay holes)
 * and reads the mapping's ShmemPmdMapped/FilePmdMapped from /proc/self/smaps. Pages
 * allocated but never written (posix_fallocate) count as resident, never as huge. */
int exo_os_file_residency(int fd, uint64_t len, uint64_t *resident, uint64_t *huge);


#endif
