/* DIRTY: an incremental checkpoint. Each round writes a few pages, then exo_vm_dirty()
 * reports exactly those (and re-arms tracking), and the checkpoint copies only them. */
#include <exomem/exomem.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

struct ckpt {
    char *mem, *copy;
    size_t pages;
};

static int save(void *addr, size_t len, void *arg)
{
    struct ckpt *c = arg;
    memcpy(c->copy + ((char *)addr - c->mem), addr, len);
    c->pages += len / exo_vm_page_size();
    return 0;                             /* 0: keep going */
}

int main(void)
{
    size_t page = exo_vm_page_size(), len = 1024 * page;
    char *mem = mmap(NULL, 2 * len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return 1;
    struct ckpt c = {.mem = mem, .copy = mem + len};
    exo_vm_options opt = {.flags = EXO_VM_TRACK_DIRTY}; /* engine AUTO: uffd if it can */
    exo_vm_region *r;
    if (exo_vm_region_create(mem, len, &opt, &r) != 0) {
        fprintf(stderr, "vm_dirty: %s\n", exomem_last_error());
        return 1;
    }
    printf("engine: %s\n", exo_vm_engine_name(exo_vm_region_engine(r)));
    for (int round = 1; round <= 3; round++) {
        for (int i = 0; i < 10 * round; i++)
            mem[(size_t)(i * 7 % 1024) * page] = (char)round;
        c.pages = 0;
        long n = exo_vm_dirty(r, save, &c);
        printf("round %d: %ld dirty pages saved\n", round, n);
        if (n != 10 * round || memcmp(mem, c.copy, len) != 0)
            return 1;
    }
    exo_vm_region_destroy(r);
    return 0;
}
