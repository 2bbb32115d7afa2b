/* PROTN of many scattered pages. With uffd, 100,000 scattered pages add no mappings to the
 * process; with the signal engine each isolated page splits a mapping (the count is
 * printed, not asserted), and a PROTN beyond vm.max_map_count fails and is rolled back. */
#include "test_vm_util.h"

#include <stdatomic.h>
#include <stdlib.h>

#define SCATTERED 100000

static atomic_int traps;

static exo_vm_action unprot_handler(exo_vm_fault *f, void *arg)
{
    (void)arg;
    atomic_fetch_add(&traps, 1);
    return exo_vm_unprot(f->region, f->page) == 0 ? EXO_VM_RESUME : EXO_VM_DECLINE;
}

/* Every other page of a (never populated) range of 2n pages. */
static char *scattered(size_t n, void ***pages_out)
{
    char *mem = mmap(NULL, 2 * n * PG, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    CHECK(mem != MAP_FAILED);
    void **pages = malloc(n * sizeof *pages);
    CHECK(pages != NULL);
    for (size_t i = 0; i < n; i++)
        pages[i] = mem + 2 * i * PG;
    *pages_out = pages;
    return mem;
}

/* Protect n scattered pages; returns the growth of the mapping count, or -1 if PROTN
 * failed (then checks that nothing changed). */
static long protn_growth(exo_vm_engine engine, size_t n)
{
    void **pages;
    char *mem = scattered(n, &pages);
    exo_vm_options opt = {.engine = engine, .handler = unprot_handler};
    exo_vm_region *r;
    CHECK_OK(exo_vm_region_create(mem, 2 * n * PG, &opt, &r));
    long before = vm_test_map_count();
    int rc = exo_vm_protn(r, pages, n, EXO_VM_READONLY);
    long after = vm_test_map_count();
    long growth = after - before;
    atomic_store(&traps, 0);
    if (rc == 0) {
        /* Protected pages trap once; their neighbours never. */
        size_t probe[] = {0, n / 2, n - 1};
        for (size_t k = 0; k < 3; k++) {
            ((volatile char *)pages[probe[k]])[0] = 1;
            ((volatile char *)pages[probe[k]])[PG] = 1;
        }
        CHECK_EQ(atomic_load(&traps), 3);
        CHECK_OK(exo_vm_protn(r, pages, n, EXO_VM_READWRITE));
    } else {
        printf("  %s: PROTN of %zu pages failed (%s: %s); rolled back\n",
               exo_vm_engine_name(engine), n, exomem_strerror(rc), exomem_last_error());
        CHECK(vm_test_map_count() <= before + 2);
        ((volatile char *)pages[0])[0] = 1; /* nothing protected */
        ((volatile char *)pages[n - 1])[0] = 1;
        CHECK_EQ(atomic_load(&traps), 0);
        growth = -1;
    }
    CHECK_OK(exo_vm_region_destroy(r));
    munmap(mem, 2 * n * PG);
    free(pages);
    return growth;
}

int main(void)
{
    if (vm_test_engine_ok(EXO_VM_ENGINE_UFFD, 0)) {
        long g = protn_growth(EXO_VM_ENGINE_UFFD, SCATTERED);
        printf("uffd: PROTN of %d scattered pages: mapping count grew by %ld\n", SCATTERED, g);
        CHECK(g >= 0 && g <= 3);
    }
    long g = protn_growth(EXO_VM_ENGINE_SIGNAL, 10000);
    printf("signal: PROTN of 10000 scattered pages: mapping count grew by %ld\n", g);
    CHECK(g > 10000); /* each isolated page is a mapping of its own */
    g = protn_growth(EXO_VM_ENGINE_SIGNAL, SCATTERED);
    if (g >= 0)
        printf("signal: PROTN of %d scattered pages: mapping count grew by %ld\n", SCATTERED, g);
    printf("ok\n");
    return 0;
}
