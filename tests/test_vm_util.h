/* Helpers shared by the tests of the Appel-Li primitives (tests/test_vm_*.c). */
#ifndef EXOMEM_TEST_VM_UTIL_H
#define EXOMEM_TEST_VM_UTIL_H

#include "harness.h"
#include "os/os_vm.h"

#include <exomem/vm.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define VM_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VM_TEST_ASAN 1
#endif
#endif
#ifndef VM_TEST_ASAN
#define VM_TEST_ASAN 0
#endif

#define PG ((size_t)4096)

/* Fresh private anonymous read-write memory. */
static inline char *vm_test_map(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    return p;
}

/* Lines of /proc/self/maps. */
static inline long vm_test_map_count(void)
{
    long n = exo_os_map_count();
    CHECK(n >= 0);
    return n;
}

/* Is this engine usable for regions with these flags? Prints why not. */
static inline int vm_test_engine_ok(exo_vm_engine e, unsigned flags)
{
    const char *why = NULL;
    if (exo_vm_engine_supported(e, flags, &why) == 0)
        return 1;
    printf("engine %s (flags %#x) not available here: %s\n", exo_vm_engine_name(e), flags,
           why ? why : "?");
    return 0;
}

/* Run fn with the signal engine, then with the uffd engine where that is available. */
static inline void vm_test_each_trap_engine(void (*fn)(exo_vm_engine))
{
    fn(EXO_VM_ENGINE_SIGNAL);
    if (vm_test_engine_ok(EXO_VM_ENGINE_UFFD, 0))
        fn(EXO_VM_ENGINE_UFFD);
}

#endif
