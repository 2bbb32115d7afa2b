/* What the dynamic loader knows about this process's objects: where a loaded object's code
 * lies (CARAT's moves tell the C library's code from the program's), and which object
 * defines a symbol as it is bound (CARAT asks whose operator new the program calls). */
#include "os/os.h"
#include "internal.h"

#include <dlfcn.h>
#include <link.h>
#include <string.h>

struct code_search {
    uintptr_t addr, lo, hi;
};

static int find_code_segment(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct code_search *c = arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (c->addr >= lo && c->addr < hi) {
            c->lo = lo;
            c->hi = hi;
            return 1;
        }
    }
    return 0;
}

int exo_os_code_segment(const void *code, uintptr_t *lo, uintptr_t *hi)
{
    struct code_search c = { (uintptr_t)code, 0, 0 };
    if (!dl_iterate_phdr(find_code_segment, &c))
        return -EXO_ENOENT;
    *lo = c.lo;
    *hi = c.hi;
    return 0;
}

int exo_os_symbol_object(const char *symbol, char *path, size_t len)
{
    void *addr = dlsym(RTLD_DEFAULT, symbol);
    Dl_info info;
    if (!addr || !dladdr(addr, &info) || !info.dli_fname || !len)
        return -EXO_ENOENT;
    size_t n = strlen(info.dli_fname);
    if (n >= len)
        n = len - 1;
    memcpy(path, info.dli_fname, n);
    path[n] = '\0';
    return 0;
}
