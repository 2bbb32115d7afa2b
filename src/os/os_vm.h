/* src/os wrappers used by the Appel-Li primitives (src/vm): signals, userfaultfd, pagemap,
 * memfd. Same conventions as os.h: 0 or a result, a negative exomem code on failure, errno
 * kept for the caller's message. Nothing here keeps state. */
#ifndef EXOMEM_OS_VM_H
#define EXOMEM_OS_VM_H

#include "os/os_uapi.h"

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* --- the process's memory map --- */

/* What covers [addr, addr+len) in /proc/self/maps. */
struct exo_os_range_info {
    int access;      /* the least access over the range: EXO_ACCESS_* bits */
    bool any_shared; /* some part is a MAP_SHARED mapping */
    bool any_file;   /* some part maps a file (not anonymous) */
    char gap[96];    /* when not fully mapped: the first unmapped address, as text */
};

/* 0 when every byte of [addr, addr+len) is mapped (filling *info), else -EXO_ENOTMAPPED
 * with info->gap naming the first hole. */
int exo_os_range_info(uint64_t addr, uint64_t len, struct exo_os_range_info *info);

/* Number of mappings (lines of /proc/self/maps), or a negative code. */
long exo_os_map_count(void);

/* The lowest address the kernel lets a process map without CAP_SYS_RAWIO (the sysctl
 * vm.mmap_min_addr) into *addr: 0, or a negative code if it cannot be read. */
int exo_os_lowest_map_addr(uint64_t *addr);

/* Could this process map a page at addr (page-aligned)? *can is true when a page could be
 * mapped there or something already is; false when the kernel refuses the address as past
 * the top of user space (ENOMEM: x86 with 4-level paging above 2^47 - 4096, even where the
 * processor has 5-level paging; a process at vm.max_map_count gets ENOMEM too, so ask
 * early). A negative code, *can untouched, when the probe says nothing (another error, or
 * an injected EXO_FAULT_MAP). Does not block; maps and unmaps one PROT_NONE page when it
 * can; not thread-safe against a MAP_FIXED mapping of that page by another thread. */
int exo_os_can_map_at(uint64_t addr, bool *can);

/* --- signals --- */

/* Install fn for sig (SA_SIGINFO|SA_ONSTACK|SA_NODEFER|SA_RESTART), storing the previous
 * action in *old. */
int exo_os_signal_install(int sig, void (*fn)(int, siginfo_t *, void *), struct sigaction *old);
/* The same without SA_NODEFER: sig stays blocked while fn runs, and a second one waits until
 * it returns (for a signal whose handler must never interrupt itself). */
int exo_os_signal_install_unnested(int sig, void (*fn)(int, siginfo_t *, void *),
                                   struct sigaction *old);

/* Put back a saved action. */
int exo_os_signal_restore(int sig, const struct sigaction *act);

/* Reset sig to its default action and unblock it (async-signal-safe): after that, returning
 * from a fault handler makes the access fault again and take the default action. */
void exo_os_signal_default(int sig);

/* Pass a fault signal on to the action `old` that was installed before ours, as if ours had
 * never been there: call its handler, or take the default action (async-signal-safe). */
void exo_os_signal_chain(int sig, siginfo_t *si, void *ctx, const struct sigaction *old);

/* From a fault handler's context: 1 if the access was a write, 0 a read, -1 unknown. */
int exo_os_fault_is_write(void *ctx);

/* Send sig to one thread of this process (async-signal-safe). */
int exo_os_signal_thread(pid_t tid, int sig);

/* This thread's kernel id. */
pid_t exo_os_gettid(void);

/* --- userfaultfd --- */

/* Open a userfaultfd (non-blocking, close-on-exec) and do the API handshake asking for
 * `features`. Falls back to UFFD_USER_MODE_ONLY when the kernel refuses an unrestricted
 * one. *got (may be NULL) receives the features the kernel offers. On failure *why says
 * which step failed. */
int exo_os_uffd_open(uint64_t features, uint64_t *got, int *fd, const char **why);

/* Register [addr, addr+len) for missing-page and/or write-protect faults; *ioctls (may be
 * NULL) receives the range ioctls the kernel allows there (bit _UFFDIO_WRITEPROTECT etc.).
 * -EXO_ENOTSUP when the kernel refuses the modes for that memory. */
int exo_os_uffd_register(int fd, uint64_t addr, uint64_t len, bool missing, bool wp,
                         uint64_t *ioctls);
int exo_os_uffd_unregister(int fd, uint64_t addr, uint64_t len);

/* Write-protect (protect=true) or unprotect [addr, addr+len); unprotecting wakes the
 * threads waiting there unless dontwake (the kernel refuses dontwake with protect). */
int exo_os_uffd_wp(int fd, uint64_t addr, uint64_t len, bool protect, bool dontwake);

/* Fill the missing pages [dst, dst+len) with a copy of src (UFFDIO_COPY), write-protected
 * when `wp`; wakes the threads waiting there unless dontwake. -EXO_EEXIST when a page is
 * there already. A fault kind "map" (os.h) can make it fail on purpose. */
int exo_os_uffd_copy(int fd, uint64_t dst, const void *src, uint64_t len, bool wp, bool dontwake);

/* Fill the missing pages [dst, dst+len) with the shared zero page (UFFDIO_ZEROPAGE). */
int exo_os_uffd_zeropage(int fd, uint64_t dst, uint64_t len, bool dontwake);

/* Mark the missing pages [addr, addr+len) poisoned (UFFDIO_POISON) and wake the threads
 * waiting there: their access, and every later one until the pages are dropped, raises
 * SIGBUS. Needs UFFD_FEATURE_POISON. */
int exo_os_uffd_poison(int fd, uint64_t addr, uint64_t len);

/* Wake the threads waiting on faults in [addr, addr+len). */
int exo_os_uffd_wake(int fd, uint64_t addr, uint64_t len);

/* Wait until fd or stop_fd is readable: 1 fd, 0 stop_fd, negative on error. */
int exo_os_uffd_wait(int fd, int stop_fd);

/* Read up to n messages (non-blocking): count, 0 when none, negative on error. */
long exo_os_uffd_read(int fd, struct uffd_msg *msgs, size_t n);

/* An eventfd used to stop a handler thread, and its poke. */
int exo_os_eventfd(int *fd);
int exo_os_eventfd_poke(int fd);

/* --- pagemap --- */

/* Open /proc/self/pagemap read-only. Returns the fd or a negative code. */
int exo_os_pagemap_open(void);

/* The PAGEMAP_SCAN ioctl: number of regions written to arg->vec, or a negative code
 * (-EXO_ENOTSUP when the kernel does not know the ioctl). */
long exo_os_pagemap_scan(int fd, struct exo_pm_scan_arg *arg);

/* Read the pagemap entries of n pages from addr. */
int exo_os_pagemap_read(int fd, uint64_t addr, uint64_t *entries, size_t n);

/* Clear the soft-dirty bits of the whole process (write "4" to /proc/self/clear_refs). */
int exo_os_clear_soft_dirty(void);

/* Does the kernel set soft-dirty bits? Maps a private page, writes it, and reads its
 * pagemap entry (bit 55 is set on a fresh written page where CONFIG_MEM_SOFT_DIRTY is on). */
int exo_os_probe_soft_dirty(bool *works);

/* --- shared memory --- */

/* An anonymous memory file (memfd) of len bytes. */
int exo_os_memfd(const char *name, uint64_t len, int *fd);

/* Map len bytes of fd from off, shared, anywhere, with access EXO_ACCESS_NONE/_READ/_RW. */
int exo_os_map_shared(int fd, off_t off, uint64_t len, int access, void **addr);

#endif
