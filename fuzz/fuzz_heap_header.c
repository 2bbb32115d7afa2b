/* Fuzz target: the in-segment heap's header (the first bytes of a segment with a heap), as
 * another process with write access could leave it. The heap's calls must give an error,
 * never crash or hang. The header is restored after each input. */
#include "fuzz_registry.h"
#include "alloc/heap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BASE UINT64_C(0x3c0000000000)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t saved[8192];
    static size_t saved_len;
    fuzz_registry_init();
    if (!saved_len) {
        vhandle_t vh;
        if (vas_attach(fuzz_vas, &vh) != 0 || vas_switch(vh) != 0)
            abort();
        void *p = seg_malloc(fuzz_seg, 64);   /* formats the heap */
        if (!p)
            abort();
        seg_free(p);
        saved_len = sizeof saved;
        memcpy(saved, (void *)BASE, saved_len);
        const char *dir = getenv("EXOMEM_FUZZ_SEEDS");
        char out[512];
        FILE *f = dir && snprintf(out, sizeof out, "%s/seed-header", dir) > 0 ? fopen(out, "we") : NULL;
        if (f) {
            fwrite(saved, 1, 1024, f);
            fclose(f);
        }
    }
    size_t header, lock_off, lock_len;
    exo_heap_header_layout(&header, &lock_off, &lock_len);
    if (size > header)
        size = header;
    memcpy((void *)BASE, saved, saved_len);
    memcpy((void *)BASE, data, size);
    memcpy((uint8_t *)BASE + lock_off, saved + lock_off, lock_len); /* see heap.h */
    void *a = seg_malloc(fuzz_seg, 100);
    void *b = seg_malloc(fuzz_seg, 5000);
    struct seg_heap_stats st;
    seg_heap_stats(fuzz_seg, &st);
    if (a)
        seg_free(a);
    if (b)
        seg_free(b);
    void *root;
    seg_get_root(fuzz_seg, &root);
    memcpy((void *)BASE, saved, saved_len);
    return 0;
}
