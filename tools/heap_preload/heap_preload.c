/* libexomem_heap.so: serve a dynamically linked program's malloc family from one exomem
 * segment. Started by `exomem run --heap-segment SIZE -- PROGRAM` (see docs/launcher.md),
 * which names the segment in EXOMEM_HEAP_SEGMENT.
 *
 * The segment is mapped MAP_PRIVATE at its base rather than switched in through a VAS:
 * private pages give a forked child a copy-on-write heap of its own, as with normal malloc (a
 * shared mapping would let parent and child corrupt each other's heap). For 2M and 1G pages
 * the hugetlbfs data file is mapped, which provides the huge pages; a 4K segment's range is
 * mapped anonymously (with THP off) instead, because a private mapping of a tmpfs file puts
 * a zero page into the file for every page the program writes, doubling the memory used.
 * Private writes never reach the file, so every process (and every program it execs) starts
 * from a zero region, which exo_heap_open() formats as a fresh heap.
 *
 * Calls made before the heap is ready (libc start-up, the set-up itself) are served from a
 * small static bootstrap arena whose blocks are never reclaimed. Without EXOMEM_HEAP_SEGMENT
 * every call goes to glibc's own allocator.
 */
#include "alloc/heap.h"
#include "fork_repair.h"
#include "internal.h"
#include "seg/segment.h"

#include <errno.h>
#include <stdbool.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* glibc's allocator, for processes run without a heap segment. */
extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

enum heap_mode { MODE_BOOT, MODE_SEGMENT, MODE_LIBC };

static _Atomic int mode = MODE_BOOT;
static struct exo_heap *heap;
static uintptr_t heap_lo, heap_hi;

/* Serializes every heap call so that no thread holds the heap's own mutex across fork(). */
static pthread_mutex_t heap_guard = PTHREAD_MUTEX_INITIALIZER;

/* ---- bootstrap arena: a bump allocator; each block is preceded by its size ---- */

#define BOOT_BYTES (256 * 1024)
#define BOOT_ALIGN 16
static _Alignas(BOOT_ALIGN) unsigned char boot_arena[BOOT_BYTES];
static _Atomic size_t boot_used;

static bool in_boot(const void *p)
{
    return (uintptr_t)p >= (uintptr_t)boot_arena &&
           (uintptr_t)p < (uintptr_t)boot_arena + BOOT_BYTES;
}

static void *boot_alloc(size_t align, size_t size)
{
    if (align < BOOT_ALIGN)
        align = BOOT_ALIGN;
    if (size > BOOT_BYTES || align > BOOT_BYTES / 4) {
        errno = ENOMEM;
        return NULL;
    }
    size_t start, payload, end;
    size_t used = atomic_load(&boot_used);
    do {
        payload = (used + BOOT_ALIGN + align - 1) & ~(align - 1);
        start = payload - BOOT_ALIGN;
        end = (payload + size + BOOT_ALIGN - 1) & ~(size_t)(BOOT_ALIGN - 1);
        if (end > BOOT_BYTES) {
            errno = ENOMEM;
            return NULL;
        }
    } while (!atomic_compare_exchange_weak(&boot_used, &used, end));
    (void)start;
    memcpy(boot_arena + payload - sizeof(size_t), &size, sizeof size);
    return boot_arena + payload;   /* static storage: already zero */
}

static size_t boot_size(const void *p)
{
    size_t n;
    memcpy(&n, (const unsigned char *)p - sizeof n, sizeof n);
    return n;
}

/* ---- set-up ---- */

static void die(const char *what, int code)
{
    fprintf(stderr, "libexomem_heap: %s: %s (%s)\n", what, exomem_strerror(code),
            exomem_last_error());
    _exit(127);
}

/* The heap lock is held across fork(), and with it the check that the child really got the
 * heap's 1 GiB pages (fork_repair.c). */
static void fork_prepare(void)
{
    pthread_mutex_lock(&heap_guard);
    fork_repair_prepare();
}

static void fork_parent(void)
{
    fork_repair_parent();
    pthread_mutex_unlock(&heap_guard);
}

static void fork_child(void)
{
    fork_repair_child();
    pthread_mutex_unlock(&heap_guard);
}

/* Map segment `name` privately at its base and open a heap over it; exits the process
 * (status 127) when that cannot be done, since running on another allocator would hide it. */
static void heap_setup(const char *name)
{
    segid_t sid;
    int rc = seg_find(name, &sid);
    if (rc)
        die("cannot find the heap segment", rc);
    struct exo_seg_rec rec;
    if ((rc = exo_seg_load(sid, &rec)) != 0)
        die("cannot read the heap segment's record", rc);
    int fd;
    bool writable;
    if ((rc = exo_seg_open_data(&rec, &fd, &writable)) != 0)
        die("cannot open the heap segment's data", rc);
    void *base = (void *)(uintptr_t)rec.base;
    bool huge = rec.page_size != SEG_PAGE_4K;
    int flags = MAP_PRIVATE | MAP_FIXED_NOREPLACE | (huge ? 0 : MAP_ANONYMOUS);
    void *m = mmap(base, rec.size, PROT_READ | PROT_WRITE, flags, huge ? fd : -1, 0);
    int err = errno;
    close(fd);
    if (m == base && !huge)
        madvise(base, rec.size, MADV_NOHUGEPAGE);   /* the 4K pages the segment promises */
    if (m != base) {
        if (m != MAP_FAILED)
            munmap(m, rec.size);
        fprintf(stderr, "libexomem_heap: cannot map segment '%s' at %#llx: %s\n", name,
                (unsigned long long)rec.base, strerror(m == MAP_FAILED ? err : EEXIST));
        _exit(127);
    }
    if ((rc = exo_heap_open(base, rec.size, &heap)) != 0)
        die("cannot open a heap in the segment", rc);
    heap_lo = (uintptr_t)base;
    heap_hi = heap_lo + rec.size;
    /* EXOMEM_HEAP_FORK_CHECK=0 turns the check off, to see what the kernel does alone. */
    const char *check = getenv("EXOMEM_HEAP_FORK_CHECK");
    if (huge && !(check && strcmp(check, "0") == 0))
        fork_repair_init(heap_lo, rec.size, rec.page_size);
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* ---- which processes of a run get the heap (EXOMEM_HEAP_IN) ---- */

/* True if `list` (comma-separated program names) holds `name`. */
static bool name_listed(const char *list, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == len && len && memcmp(p, name, n) == 0)
            return true;
        p += n + (end != NULL);
    }
    return false;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Does this process get the heap? "first" (or unset) and "all" say yes; otherwise the value
 * lists program names, matched against argv[0] and the executable's file name. */
static bool heap_wanted_here(const char *scope)
{
    if (!scope || !*scope || strcmp(scope, "first") == 0 || strcmp(scope, "all") == 0)
        return true;
    if (name_listed(scope, program_invocation_short_name))
        return true;
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return false;
    exe[n] = '\0';
    return name_listed(scope, base_name(exe));
}

/* Is the LD_PRELOAD entry p[0..n) this library (by file name)? */
static bool is_this_library(const char *p, size_t n)
{
    static const char me[] = "libexomem_heap.so";
    size_t start = n;
    while (start > 0 && p[start - 1] != '/')
        start--;
    return n - start == sizeof me - 1 && memcmp(p + start, me, sizeof me - 1) == 0;
}

/* With the default scope the heap is the launched program's alone: the programs it execs
 * (Open MPI's orted daemon under hpcc, say) run on glibc's allocator. Each would otherwise
 * map a private heap of its own, which with huge pages takes SIZE more of the pool per
 * program, and a program that cannot get them dies at start. Taking this library out of
 * LD_PRELOAD is enough: without it the EXOMEM_HEAP_* variables do nothing. */
static void keep_heap_to_this_program(void)
{
    const char *list = getenv("LD_PRELOAD");
    if (!list)
        return;
    size_t cap = strlen(list) + 1;
    char *kept = malloc(cap);   /* served by the heap: set-up is done */
    if (!kept)
        return;
    size_t used = 0;
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ": ");
        if (n && !is_this_library(p, n))
            used += (size_t)snprintf(kept + used, cap - used, "%s%.*s", used ? ":" : "",
                                     (int)n, p);
        p += n;
        p += strspn(p, ": ");
    }
    if (used)
        setenv("LD_PRELOAD", kept, 1);
    else
        unsetenv("LD_PRELOAD");
    free(kept);
}

__attribute__((constructor)) static void heap_preload_init(void)
{
    const char *name = getenv("EXOMEM_HEAP_SEGMENT");
    const char *scope = getenv("EXOMEM_HEAP_IN");
    if (!name || !*name || !heap_wanted_here(scope)) {
        atomic_store(&mode, MODE_LIBC);
        return;
    }
    heap_setup(name);
    atomic_store(&mode, MODE_SEGMENT);
    if (!scope || !*scope || strcmp(scope, "first") == 0)
        keep_heap_to_this_program();
}

/* ---- the malloc family ---- */

static bool in_heap(const void *p)
{
    return (uintptr_t)p >= heap_lo && (uintptr_t)p < heap_hi;
}

/* Translate a heap result: errno ENOMEM or EINVAL for NULL. */
static void *heap_result(void *p, int code)
{
    if (!p)
        errno = code == -EXO_EINVAL ? EINVAL : ENOMEM;
    return p;
}

static void *seg_alloc_aligned(size_t align, size_t size)
{
    int code;
    pthread_mutex_lock(&heap_guard);
    void *p = align <= 16 ? exo_heap_malloc(heap, size, &code)
                          : exo_heap_memalign(heap, align, size, &code);
    pthread_mutex_unlock(&heap_guard);
    return heap_result(p, code);
}

static void *any_alloc(size_t align, size_t size)
{
    switch (atomic_load(&mode)) {
    case MODE_SEGMENT:
        return seg_alloc_aligned(align, size);
    case MODE_LIBC:
        return align <= 16 ? __libc_malloc(size) : __libc_memalign(align, size);
    default:
        return boot_alloc(align, size);
    }
}

EXPORT void *malloc(size_t size)
{
    return any_alloc(16, size);
}

EXPORT void free(void *p)
{
    if (!p || in_boot(p))
        return;
    int saved = errno;
    if (atomic_load(&mode) == MODE_LIBC) {
        __libc_free(p);
    } else if (in_heap(p)) {
        pthread_mutex_lock(&heap_guard);
        exo_heap_free(heap, p);
        pthread_mutex_unlock(&heap_guard);
    }
    /* Anything else was never handed out here (e.g. the dynamic loader's early blocks):
     * leaking it is the only safe thing to do. */
    errno = saved;
}

EXPORT void *calloc(size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    if (atomic_load(&mode) == MODE_LIBC)
        return __libc_calloc(n, size);
    void *p = any_alloc(16, total);
    if (p && !in_boot(p))
        memset(p, 0, total);
    return p;
}

EXPORT size_t malloc_usable_size(void *p)
{
    if (!p)
        return 0;
    if (in_boot(p))
        return boot_size(p);
    if (atomic_load(&mode) == MODE_LIBC) {
        extern size_t __malloc_usable_size(void *) __attribute__((weak));
        return __malloc_usable_size ? __malloc_usable_size(p) : 0;
    }
    if (!in_heap(p))
        return 0;
    pthread_mutex_lock(&heap_guard);
    size_t n = exo_heap_usable_size(heap, p);
    pthread_mutex_unlock(&heap_guard);
    return n;
}

EXPORT void *realloc(void *p, size_t size)
{
    if (!p)
        return malloc(size);
    int m = atomic_load(&mode);
    if (m == MODE_LIBC && !in_boot(p))
        return __libc_realloc(p, size);
    if (m == MODE_SEGMENT && in_heap(p)) {
        int code;
        pthread_mutex_lock(&heap_guard);
        void *q = exo_heap_realloc(heap, p, size, &code);
        pthread_mutex_unlock(&heap_guard);
        return size == 0 && code == 0 ? NULL : heap_result(q, code);
    }
    if (!in_boot(p)) {
        errno = EINVAL;   /* not ours: there is no size to copy */
        return NULL;
    }
    /* A bootstrap block moves to the current allocator; the old block stays behind. */
    void *q = malloc(size);
    if (q) {
        size_t old = boot_size(p);
        memcpy(q, p, old < size ? old : size);
    }
    return q;
}

static bool power_of_two(size_t x) { return x && !(x & (x - 1)); }

EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
    if (!power_of_two(align) || align % sizeof(void *))
        return EINVAL;
    int saved = errno;
    void *p = any_alloc(align, size);
    int err = errno;
    errno = saved;
    if (!p)
        return err;
    *out = p;
    return 0;
}

EXPORT void *aligned_alloc(size_t align, size_t size)
{
    if (!power_of_two(align)) {
        errno = EINVAL;
        return NULL;
    }
    return any_alloc(align, size);
}

EXPORT void *memalign(size_t align, size_t size)
{
    /* As glibc: an alignment that is not a power of two is rounded up to one. */
    if (align > (SIZE_MAX >> 1) + 1) {
        errno = EINVAL;
        return NULL;
    }
    size_t a = 1;
    while (a < align)
        a <<= 1;
    return any_alloc(a, size);
}

EXPORT void *valloc(size_t size)
{
    return any_alloc((size_t)sysconf(_SC_PAGESIZE), size);
}

EXPORT void *pvalloc(size_t size)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (size > SIZE_MAX - page) {
        errno = ENOMEM;
        return NULL;
    }
    return any_alloc(page, size ? (size + page - 1) & ~(page - 1) : page);
}
