/* Address-space calls: reservations, fixed file mappings, page-table moves, protection.
 *
 * Every range exomem owns is always mapped: either by a segment's file or by an inaccessible
 * anonymous reservation. Replacing one by the other is done with MAP_FIXED over our own
 * range (atomic in the kernel), so another thread's mmap can never land in a gap. */
#include "os/os.h"
#include "internal.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#define RESERVE_FLAGS (MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE)

int exo_os_reserve_fixed(uint64_t addr, uint64_t len)
{
    if (exo_os_fault(EXO_FAULT_MAP))
        return -exo_os_code(errno);
    void *p = mmap((void *)addr, len, PROT_NONE, RESERVE_FLAGS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED) {
        if (errno == EEXIST)
            return -EXO_EOVERLAP;
        return -exo_os_code(errno);
    }
    if ((uint64_t)p != addr) {
        /* A kernel older than 4.17 ignores MAP_FIXED_NOREPLACE and treats it as a hint. */
        munmap(p, len);
        return -EXO_EOVERLAP;
    }
    return 0;
}

int exo_os_reserve_congruent(uint64_t len, uint64_t align_to, uint64_t modulus, uint64_t *addr)
{
    if (exo_os_fault(EXO_FAULT_MAP))
        return -exo_os_code(errno);
    uint64_t want = align_to & (modulus - 1);
    uint64_t span = len + modulus;
    if (span < len)
        return -EXO_ENOMEM;
    void *p = mmap(NULL, span, PROT_NONE, RESERVE_FLAGS, -1, 0);
    if (p == MAP_FAILED)
        return -exo_os_code(errno);
    uint64_t start = (uint64_t)p;
    uint64_t slot = (start & ~(modulus - 1)) + want;
    if (slot < start)
        slot += modulus;
    /* Trim the over-reservation on both sides; what remains is exactly [slot, slot+len). */
    if (slot > start)
        munmap(p, slot - start);
    uint64_t end = start + span;
    if (end > slot + len)
        munmap((void *)(slot + len), end - (slot + len));
    *addr = slot;
    return 0;
}

int exo_os_hide(uint64_t addr, uint64_t len)
{
    void *p = mmap((void *)addr, len, PROT_NONE, RESERVE_FLAGS | MAP_FIXED, -1, 0);
    if (p == MAP_FAILED)
        return -exo_os_code(errno);
    return 0;
}

int exo_os_map_file_fixed(int fd, uint64_t addr, uint64_t len, bool writable, bool populate,
                          bool huge_advice)
{
    if (exo_os_fault(EXO_FAULT_MAP))
        return -exo_os_code(errno);
    int prot = PROT_READ | (writable ? PROT_WRITE : 0);
    /* With huge_advice the advice must come before the first fault, so populate after it:
     * MAP_POPULATE would fault 4K pages in first on a huge=advise tmpfs. */
    int flags = MAP_SHARED | MAP_FIXED | (populate && !huge_advice ? MAP_POPULATE : 0);
    void *p = mmap((void *)addr, len, prot, flags, fd, 0);
    if (p == MAP_FAILED)
        return -exo_os_code(errno);
    if (huge_advice) {
        (void)madvise(p, len, MADV_HUGEPAGE); /* advice only: a kernel without THP says no */
        if (populate)
            (void)madvise(p, len, MADV_POPULATE_READ); /* a speed-up, like MAP_POPULATE */
    }
    return 0;
}

int exo_os_map_file(int fd, uint64_t len, bool writable, uint64_t *addr)
{
    if (exo_os_fault(EXO_FAULT_MAP))
        return -exo_os_code(errno);
    void *p = mmap(NULL, len, PROT_READ | (writable ? PROT_WRITE : 0), MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return -exo_os_code(errno);
    *addr = (uint64_t)(uintptr_t)p;
    return 0;
}

int exo_os_move(uint64_t from, uint64_t to, uint64_t len, struct exo_os_move_steps *steps)
{
    if (exo_os_fault(EXO_FAULT_MOVE))
        return -exo_os_code(errno);
    uint64_t t0 = steps ? exo_os_now_ns() : 0;
    void *p = mremap((void *)from, len, len, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP,
                     (void *)to);
    if (p == MAP_FAILED)
        return -exo_os_code(errno);
    uint64_t t1 = steps ? exo_os_now_ns() : 0;
    /* DONTUNMAP left the source mapped (empty page tables); make it inaccessible so a stray
     * access faults instead of silently mapping the file again. */
    int rc = mprotect((void *)from, len, PROT_NONE) != 0 ? -exo_os_code(errno) : 0;
    if (steps) {
        steps->remap_ns += t1 - t0;
        steps->protect_ns += exo_os_now_ns() - t1;
    }
    return rc;
}

int exo_os_prot(int access)
{
    return ((access & EXO_ACCESS_READ) ? PROT_READ : 0) |
           ((access & EXO_ACCESS_WRITE) ? PROT_WRITE : 0);
}

int exo_os_protect(uint64_t addr, uint64_t len, int access)
{
    if (exo_os_fault(EXO_FAULT_PROTECT))
        return -exo_os_code(errno);
    if (mprotect((void *)addr, len, exo_os_prot(access)) != 0)
        return -exo_os_code(errno);
    return 0;
}

/* exo_os_map_anon, and when inherited, a mapping a forked child gets a copy of. */
static int map_anon(uint64_t len, bool huge_2m, bool inherited, uint64_t *addr)
{
    if (exo_os_fault(EXO_FAULT_MAP))
        return -exo_os_code(errno);
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | (huge_2m ? MAP_HUGETLB : 0);
#ifdef MAP_HUGE_2MB
    if (huge_2m)
        flags |= MAP_HUGE_2MB;
#endif
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (p == MAP_FAILED)
        return -exo_os_code(errno);
    if (!inherited && madvise(p, len, MADV_DONTFORK) != 0) {
        int e = errno;
        munmap(p, len);
        return -exo_os_code(e);
    }
    *addr = (uint64_t)(uintptr_t)p;
    return 0;
}

int exo_os_map_anon(uint64_t len, bool huge_2m, uint64_t *addr)
{
    return map_anon(len, huge_2m, false, addr);
}

int exo_os_map_anon_inherited(uint64_t len, uint64_t *addr)
{
    return map_anon(len, false, true, addr);
}

int exo_os_map_anon_fixed(uint64_t addr, uint64_t len, bool huge_2m)
{
    if (exo_os_fault(EXO_FAULT_MAP))
        return -exo_os_code(errno);
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED |
                (huge_2m ? MAP_HUGETLB : 0);
#ifdef MAP_HUGE_2MB
    if (huge_2m)
        flags |= MAP_HUGE_2MB;
#endif
    void *p = mmap((void *)(uintptr_t)addr, len, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (p == MAP_FAILED)
        return -exo_os_code(errno);
    /* Not inherited by fork, like every pager region: a child has no handler for it. */
    (void)madvise(p, len, MADV_DONTFORK);
    return 0;
}

int exo_os_drop_pages(uint64_t addr, uint64_t len)
{
    if (madvise((void *)(uintptr_t)addr, len, MADV_DONTNEED) != 0)
        return -exo_os_code(errno);
    return 0;
}

int exo_os_unmap(uint64_t addr, uint64_t len)
{
    if (munmap((void *)addr, len) != 0)
        return -exo_os_code(errno);
    return 0;
}

bool exo_os_range_mapped(uint64_t addr, uint64_t len, char *desc, size_t desc_len)
{
    return exo_os_range_mapped_except(addr, len, NULL, desc, desc_len);
}

bool exo_os_range_mapped_except(uint64_t addr, uint64_t len,
                                bool (*ignore)(uint64_t lo, uint64_t hi), char *desc,
                                size_t desc_len)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return false;
    char line[512];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx", &lo, &hi) != 2)
            continue;
        if (lo < addr + len && addr < hi) {
            uint64_t from = lo > addr ? lo : addr, to = hi < addr + len ? hi : addr + len;
            if (ignore && ignore(from, to))
                continue;
            found = true;
            if (desc && desc_len) {
                const char *path = strchr(line, '/');
                if (!path)
                    path = strchr(line, '[');
                snprintf(desc, desc_len, "%lx-%lx %s", lo, hi, path ? path : "(anonymous)");
                desc[strcspn(desc, "\n")] = '\0';
            }
        }
    }
    fclose(f);
    return found;
}

int exo_os_copy_file(int src, int dst, uint64_t size)
{
    if (exo_os_fault(EXO_FAULT_MAP))
        return -exo_os_code(errno);
    void *from = mmap(NULL, size, PROT_READ, MAP_SHARED, src, 0);
    if (from == MAP_FAILED)
        return -exo_os_code(errno);
    void *to = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, dst, 0);
    if (to == MAP_FAILED) {
        int err = errno;
        munmap(from, size);
        errno = err;
        return -exo_os_code(err);
    }
    memcpy(to, from, size);
    munmap(to, size);
    munmap(from, size);
    return 0;
}

int exo_os_read_self(const uintptr_t *addr, uintptr_t *word, bool *ok, size_t n)
{
    enum { BATCH = 256 };
    struct iovec local[BATCH], remote[BATCH];
    pid_t self = getpid();
    size_t i = 0;
    while (i < n) {
        size_t m = n - i < BATCH ? n - i : BATCH;
        for (size_t k = 0; k < m; k++) {
            local[k] = (struct iovec){ &word[i + k], sizeof word[0] };
            remote[k] = (struct iovec){ (void *)addr[i + k], sizeof word[0] };
        }
        ssize_t got = process_vm_readv(self, local, m, remote, m, 0);
        if (got < 0 && errno != EFAULT)
            return -exo_os_code(errno);
        /* The kernel stops at the first element it cannot read (never inside one). */
        size_t done = got < 0 ? 0 : (size_t)got / sizeof word[0];
        for (size_t k = 0; k < done; k++)
            ok[i + k] = true;
        if (done < m)
            ok[i + done++] = false;
        i += done;
    }
    return 0;
}

int exo_os_resident(uint64_t addr, uint64_t len, unsigned char *vec)
{
    if (exo_os_fault(EXO_FAULT_RESIDENT))
        return -exo_os_code(errno);
    if (mincore((void *)(uintptr_t)addr, len, vec) != 0)
        return -exo_os_code(errno);
    return 0;
}
