/* C++'s operator new: are its blocks malloc's?
 *
 * A move makes the copy with malloc and frees the old block with free. That is right for
 * the blocks of the C++ library's operator new, which comes down to malloc (libstdc++,
 * libc++), and for an allocator that defines both (AddressSanitizer's runtime, jemalloc,
 * tcmalloc: their free takes their new's blocks). A program may also replace operator new
 * with its own (a pool, an arena): free on such a block corrupts the heap. So the runtime
 * asks the dynamic loader, once, which object defines the operator new the program calls,
 * and the new family's call sites (exo_carat_hook_alloc_new) track their blocks only when
 * it is one of the above (and delete's, exo_carat_hook_delete, forget them only then). A replacement's blocks are then memory the runtime does not know,
 * as an uninstrumented library's are: never moved, while the pointers stored in them are
 * still patched. A replacement that takes its memory from malloc, and is built with the
 * plugin, has that malloc tracked inside it, header and all. */
#include "carat/carat_internal.h"
#include "os/os.h"

#include <string.h>

bool exo_carat_cxx_new_is_malloc;

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

void exo_carat_cxx_new_init(void)
{
    char new_at[512], malloc_at[512];
    if (exo_os_symbol_object("_Znwm", new_at, sizeof new_at) != 0) {
        exo_carat_cxx_new_is_malloc = true;   /* no C++ in the process: no such call site */
        return;
    }
    const char *name = base_name(new_at);
    exo_carat_cxx_new_is_malloc =
        strncmp(name, "libstdc++.so", 12) == 0 || strncmp(name, "libc++.so", 9) == 0 ||
        (exo_os_symbol_object("malloc", malloc_at, sizeof malloc_at) == 0 &&
         strcmp(new_at, malloc_at) == 0);
}
