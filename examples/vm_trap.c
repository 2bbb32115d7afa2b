/* TRAP + PROT1 + UNPROT: count the first write to each page of a buffer.
 * Every page starts read-only; the handler notes the page and makes it writable, and the
 * write then completes as if nothing had happened. */
#include <exomem/exomem.h>
#include <stdio.h>
#include <sys/mman.h>

static int first_writes;

static exo_vm_action on_write(exo_vm_fault *f, void *arg)
{
    (void)arg;
    first_writes++;                       /* signal engine: async-signal-safe work only */
    return exo_vm_unprot(f->region, f->page) == 0 ? EXO_VM_RESUME : EXO_VM_DECLINE;
}

int main(void)
{
    size_t page = exo_vm_page_size(), len = 64 * page;
    char *buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED)
        return 1;
    exo_vm_options opt = {.engine = EXO_VM_ENGINE_SIGNAL, .handler = on_write};
    exo_vm_region *r;
    if (exo_vm_region_create(buf, len, &opt, &r) != 0 ||
        exo_vm_protect(r, buf, len, EXO_VM_READONLY) != 0) {
        fprintf(stderr, "vm_trap: %s\n", exomem_last_error());
        return 1;
    }
    for (int i = 0; i < 1000; i++)        /* 1000 writes over 10 pages */
        buf[(size_t)(i % 10) * page + (size_t)i] = 1;
    exo_vm_region_destroy(r);
    printf("%d pages written first, 1000 writes\n", first_writes);
    return first_writes == 10 ? 0 : 1;
}
