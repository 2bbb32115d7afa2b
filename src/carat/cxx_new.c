/* C++'s operator new: are its blocks malloc's?
 *
 * A move makes the copy with malloc and frees the old block with free. That is right for
 * the blocks of the C++ library's operator new, which comes down to malloc (libstdc++,
 * libc++), and for an allocator that defines both (AddressSanitizer's runtime, jemalloc,
 * tcmalloc: their free takes their new's blocks). A program may also replace operator new
 * with its own (a pool, an arena): free on such a block corrupts the heap. So the runtime
 * asks the dynamic loader which object defines the operator new the program calls, at the
 * first new or delete (a C program never asks), and the new family's call sites
 * (exo_carat_hook_alloc_new) track their blocks only when it is one of the above, as
 * delete's (exo_carat_hook_delete) forget them only then. A replacement's blocks are then
 * memory the runtime does not know, as an uninstrumented library's are: never moved, while
 * the pointers stored in them are still patched. A replacement that takes its memory from
 * malloc, and is built with the plugin, has that malloc tracked inside it, header and all. */
#include "carat/carat_internal.h"
#include "os/os.h"

#include <stdatomic.h>
#include <string.h>

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static bool ask_loader(void)
{
    char new_at[512], malloc_at[512];
    if (exo_os_symbol_object("_Znwm", new_at, sizeof new_at) != 0)
        return true;   /* no C++ library loaded: nothing else to take new's blocks */
    const char *name = base_name(new_at);
    return strncmp(name, "libstdc++.so", 12) == 0 || strncmp(name, "libc++.so", 9) == 0 ||
           (exo_os_symbol_object("malloc", malloc_at, sizeof malloc_at) == 0 &&
            strcmp(new_at, malloc_at) == 0);
}

bool exo_carat_cxx_new_is_malloc(void)
{
    /* 0: not asked yet; 1: malloc's; 2: not. Two threads asking at once get the same
     * answer, so either store will do. */
    static _Atomic int answer;
    int a = atomic_load_explicit(&answer, memory_order_relaxed);
    if (__builtin_expect(!a, 0)) {
        a = ask_loader() ? 1 : 2;
        atomic_store_explicit(&answer, a, memory_order_relaxed);
    }
    return a == 1;
}
