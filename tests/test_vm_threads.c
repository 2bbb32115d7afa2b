/* Threads: regions created, protected, faulted on and destroyed from several threads at
 * once, and one shared region whose pages two threads protect while two others write. Every
 * write must land, and every trap must come from a page that was protected. */
#include "test_vm_util.h"

#include <pthread.h>
#include <stdatomic.h>

#define THREADS 4
#define ROUNDS 100
#define SHARED_PAGES 32

static exo_vm_engine engine;
static atomic_int traps;

static exo_vm_action unprot_handler(exo_vm_fault *f, void *arg)
{
    (void)arg;
    atomic_fetch_add(&traps, 1);
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

static exo_vm_region *shared;
static char *shared_mem;
static atomic_int stop;

static void *protector(void *arg)
{
    unsigned x = (unsigned)(uintptr_t)arg;
    while (!atomic_load(&stop)) {
        x = x * 1103515245u + 12345u;
        char *p = shared_mem + (x >> 8) % SHARED_PAGES * PG;
        CHECK_OK(exo_vm_prot1(shared, p, EXO_VM_READONLY));
    }
    return NULL;
}

static void *writer(void *arg)
{
    int id = (int)(uintptr_t)arg;
    for (int i = 0; i < 20000; i++) {
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
    printf("  %s: %d traps on the shared region\n", exo_vm_engine_name(e), atomic_load(&traps));
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
