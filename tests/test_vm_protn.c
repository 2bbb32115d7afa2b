/* PROTN of many scattered pages. With uffd, 100,000 scattered pages add no mappings to the
 * process; with the signal engine each isolated page splits a mapping, so 10,000 pages add
 * more than 10,000 mappings, and 100,000 pages (about 200,000 mappings) succeed exactly when
 * vm.max_map_count allows that many; past it, as vm.h says, PROTN fails with -EXO_ENOMEM and
 * is rolled back. */
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
 * failed (then checks that nothing changed); *code gets PROTN's result. */
static long protn_growth(exo_vm_engine engine, size_t n, int *code)
{
    void **pages;
    char *mem = scattered(n, &pages);
    exo_vm_options opt = {.engine = engine, .handler = unprot_handler};
    exo_vm_region *r;
    CHECK_OK(exo_vm_region_create(mem, 2 * n * PG, &opt, &r));
    long before = vm_test_map_count();
    int rc = exo_vm_protn(r, pages, n, EXO_VM_READONLY);
    *code = rc;
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

static long max_map_count(void)
{
    FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
    long v = -1;
    CHECK(f && fscanf(f, "%ld", &v) == 1);
    fclose(f);
    return v;
}

int main(void)
{
    int rc;
    if (vm_test_engine_ok(EXO_VM_ENGINE_UFFD, 0)) {
        long g = protn_growth(EXO_VM_ENGINE_UFFD, SCATTERED, &rc);
        printf("uffd: PROTN of %d scattered pages: mapping count grew by %ld\n", SCATTERED, g);
        CHECK_OK(rc);
        /* What PROTN must not do is add mappings. The count may fall meanwhile: it is the
         * whole process's, and in the sanitizer build it fell by 1 once (ASan's allocator,
         * or the set-up of the handler thread region_create just started, unmapping). */
        CHECK(g <= 3);
    }
    long g = protn_growth(EXO_VM_ENGINE_SIGNAL, 10000, &rc);
    printf("signal: PROTN of 10000 scattered pages: mapping count grew by %ld\n", g);
    CHECK_OK(rc);
    CHECK(g > 10000); /* each isolated page is a mapping of its own */
    /* 100,000 isolated pages need about two mappings each. Near the limit either outcome is
     * right, so the margin is left out of the check. */
    long max = max_map_count(), now = vm_test_map_count(), need = now + 2L * SCATTERED;
    g = protn_growth(EXO_VM_ENGINE_SIGNAL, SCATTERED, &rc);
    printf("signal: PROTN of %d scattered pages with vm.max_map_count %ld: %s\n", SCATTERED,
           max, rc ? "refused, rolled back" : "done");
    if (need > max + 1000)
        CHECK_EQ(rc, -EXO_ENOMEM);
    else if (need + 1000 < max)
        CHECK(rc == 0 && g > SCATTERED);
    printf("ok\n");
    return 0;
}
