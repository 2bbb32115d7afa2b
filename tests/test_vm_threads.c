/* Threads: regions created, protected, faulted on and destroyed from several threads at
 * once, and one shared region whose pages two threads protect while two others write. Every
 * write must land, and every trap must come from a page that was protected. */
#include "test_vm_util.h"

#include <pthread.h>
#include <stdatomic.h>

#define THREADS 4
#define ROUNDS 100
#define SHARED_PAGES 32

/* The shared-region writers go on past their 20,000 writes until this many traps were seen
 * (bounded by WRITES_MAX), so the count asserted below is never left to chance. */
#define MIN_SHARED_TRAPS 200
#define WRITES_MAX 20000000

static exo_vm_engine engine;
static atomic_int traps;
static atomic_long protects;    /* exo_vm_prot1 calls on the shared region */

static exo_vm_region *shared;
static char *shared_mem;
static atomic_int stop;

static exo_vm_action unprot_handler(exo_vm_fault *f, void *arg)
{
    (void)arg;
    atomic_fetch_add(&traps, 1);
    /* Every trap is on a page of the region that faulted, reported page-aligned. */
    CHECK(((uintptr_t)f->page & (PG - 1)) == 0);
    return exo_vm_unprot(f->region, f->page) == 0 ? EXO_VM_RESUME : EXO_VM_DECLINE;
}

static void *own_regions(void *arg)
{
    char *mem = arg;
    for (int round = 0; round < ROUNDS; round++) {
        exo_vm_options opt = {.engine = engine, .handler = unprot_handler};
        exo_vm_region *r;
        CHECK_OK(exo_vm_region_create(mem, 4 * PG, &opt, &r));
        CHECK_OK(exo_vm_protect(r, mem, 4 * PG, EXO_VM_READONLY));
        for (int i = 0; i < 4; i++)
            ((volatile char *)mem)[i * PG] = (char)round;
        CHECK_OK(exo_vm_region_destroy(r));
        for (int i = 0; i < 4; i++)
            CHECK_EQ(mem[i * PG], (char)round);
    }
    return NULL;
}

static void *protector(void *arg)
{
    unsigned x = (unsigned)(uintptr_t)arg;
    while (!atomic_load(&stop)) {
        x = x * 1103515245u + 12345u;
        char *p = shared_mem + (x >> 8) % SHARED_PAGES * PG;
        CHECK_OK(exo_vm_prot1(shared, p, EXO_VM_READONLY));
        atomic_fetch_add(&protects, 1);
    }
    return NULL;
}

static void *writer(void *arg)
{
    int id = (int)(uintptr_t)arg;
    for (int i = 0; i < WRITES_MAX && (i < 20000 || atomic_load(&traps) < MIN_SHARED_TRAPS);
         i++) {
        volatile int *slot = (volatile int *)(shared_mem + (size_t)(i % SHARED_PAGES) * PG) + id;
        *slot = i;
        CHECK_EQ(*slot, i);
    }
    return NULL;
}

static void run(exo_vm_engine e)
{
    engine = e;
    atomic_store(&traps, 0);
    char *mem = vm_test_map(THREADS * 4 * PG);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, own_regions, mem + (size_t)i * 4 * PG) == 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    CHECK_EQ(atomic_load(&traps), THREADS * ROUNDS * 4);

    shared_mem = vm_test_map(SHARED_PAGES * PG);
    exo_vm_options opt = {.engine = e, .handler = unprot_handler};
    CHECK_OK(exo_vm_region_create(shared_mem, SHARED_PAGES * PG, &opt, &shared));
    atomic_store(&stop, 0);
    atomic_store(&traps, 0);
    atomic_store(&protects, 0);
    pthread_t p[2], w[2];
    for (int i = 0; i < 2; i++) {
        CHECK(pthread_create(&p[i], NULL, protector, (void *)(uintptr_t)(i + 1)) == 0);
        CHECK(pthread_create(&w[i], NULL, writer, (void *)(uintptr_t)i) == 0);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(w[i], NULL);
    atomic_store(&stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(p[i], NULL);
    int n = atomic_load(&traps);
    long prot = atomic_load(&protects);
    printf("  %s: %d traps on the shared region, %ld PROT1 calls\n", exo_vm_engine_name(e), n,
           prot);
    /* Writes raced with PROT1 and trapped; and no trap came from nowhere: each protected
     * page traps at most once per writer before the handler unprotects it. */
    CHECK(n >= MIN_SHARED_TRAPS);
    CHECK(n <= 2 * prot);
    CHECK_OK(exo_vm_region_destroy(shared));
    munmap(shared_mem, SHARED_PAGES * PG);
    munmap(mem, THREADS * 4 * PG);
}

int main(void)
{
    vm_test_each_trap_engine(run);
    printf("ok\n");
    return 0;
}
