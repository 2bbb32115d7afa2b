/* TRAP, PROT1, PROTN, UNPROT and REDIRECT on each engine that the kernel has: every write
 * (or read) of a protected page runs the handler exactly once, the access then completes,
 * and accessible pages never trap. */
#include "test_vm_util.h"

#include <pthread.h>
#include <stdatomic.h>

enum mode { MODE_UNPROT, MODE_REDIRECT };

static struct {
    atomic_int count;
    void *last_page;
    int last_write;
    int last_in_signal;
    enum mode mode;
    exo_vm_region *region;
    char redirect_src[4096];
} T;

static exo_vm_action handler(exo_vm_fault *f, void *arg)
{
    CHECK(arg == &T);
    CHECK(f->region == T.region);
    atomic_fetch_add(&T.count, 1);
    T.last_page = f->page;
    T.last_write = f->is_write;
    T.last_in_signal = f->in_signal;
    if (T.mode == MODE_REDIRECT) {
        f->redirect = T.redirect_src;
        f->redirect_prot = EXO_VM_READWRITE;
        return EXO_VM_REDIRECT;
    }
    if (exo_vm_unprot(f->region, f->page) != 0)
        return EXO_VM_DECLINE;
    return EXO_VM_RESUME;
}

static void write_byte(char *p, char v)
{
    *(volatile char *)p = v;
}

static char read_byte(const char *p)
{
    return *(const volatile char *)p;
}

static void *writer_thread(void *p)
{
    write_byte(p, 'T');
    return NULL;
}

static void run(exo_vm_engine engine)
{
    printf("engine %s\n", exo_vm_engine_name(engine));
    const size_t npages = 16;
    char *mem = vm_test_map(npages * PG);
    for (size_t i = 0; i < npages; i++)
        mem[i * PG] = (char)i;
    atomic_store(&T.count, 0);
    T.mode = MODE_UNPROT;
    exo_vm_options opt = {.engine = engine, .handler = handler, .arg = &T};
    CHECK_OK(exo_vm_region_create(mem, npages * PG, &opt, &T.region));
    exo_vm_region *r = T.region;
    CHECK_EQ(exo_vm_region_engine(r), engine);

    /* Nothing is protected at first. */
    for (size_t i = 0; i < npages; i++)
        write_byte(mem + i * PG + 1, 'a');
    CHECK_EQ(atomic_load(&T.count), 0);

    /* PROT1 read-only: reads pass, the first write traps once and lands. */
    CHECK_OK(exo_vm_prot1(r, mem + 3 * PG, EXO_VM_READONLY));
    CHECK_EQ(read_byte(mem + 3 * PG), 3);
    CHECK_EQ(atomic_load(&T.count), 0);
    write_byte(mem + 3 * PG + 5, 'x');
    CHECK_EQ(atomic_load(&T.count), 1);
    CHECK(T.last_page == mem + 3 * PG);
    CHECK_EQ(T.last_write, 1);
    CHECK_EQ(T.last_in_signal, engine == EXO_VM_ENGINE_SIGNAL);
    CHECK_EQ(mem[3 * PG + 5], 'x');
    write_byte(mem + 3 * PG + 6, 'y');
    CHECK_EQ(atomic_load(&T.count), 1);

    /* PROTN of scattered pages (and a run): each traps once, others never. */
    void *pages[] = {mem + 1 * PG, mem + 5 * PG, mem + 6 * PG, mem + 9 * PG};
    CHECK_OK(exo_vm_protn(r, pages, 4, EXO_VM_READONLY));
    for (size_t i = 0; i < npages; i++)
        write_byte(mem + i * PG + 7, 'p');
    CHECK_EQ(atomic_load(&T.count), 5);
    for (size_t i = 0; i < npages; i++)
        CHECK_EQ(mem[i * PG + 7], 'p');

    /* exo_vm_protect on a range, then UNPROT of part of it by the caller. */
    CHECK_OK(exo_vm_protect(r, mem + 10 * PG, 4 * PG, EXO_VM_READONLY));
    CHECK_OK(exo_vm_unprot(r, mem + 11 * PG));
    CHECK_OK(exo_vm_protect(r, mem + 13 * PG, PG, EXO_VM_READWRITE));
    for (size_t i = 10; i < 14; i++)
        write_byte(mem + i * PG + 8, 'q');
    CHECK_EQ(atomic_load(&T.count), 7); /* pages 10 and 12 */

    /* A write from another thread traps too, and the handler runs on some thread. */
    CHECK_OK(exo_vm_prot1(r, mem + 14 * PG, EXO_VM_READONLY));
    pthread_t t;
    CHECK(pthread_create(&t, NULL, writer_thread, mem + 14 * PG + 9) == 0);
    pthread_join(t, NULL);
    CHECK_EQ(atomic_load(&T.count), 8);
    CHECK_EQ(mem[14 * PG + 9], 'T');

    /* NOACCESS: reads trap on the signal engine; uffd cannot trap reads. */
    if (engine == EXO_VM_ENGINE_SIGNAL) {
        CHECK_OK(exo_vm_prot1(r, mem + 2 * PG, EXO_VM_NOACCESS));
        CHECK_EQ(read_byte(mem + 2 * PG), 2);
        CHECK_EQ(atomic_load(&T.count), 9);
        CHECK_EQ(T.last_write, 0);
    } else {
        CHECK_ERR(exo_vm_prot1(r, mem + 2 * PG, EXO_VM_NOACCESS), EXO_ENOTSUP);
        CHECK(strstr(exomem_last_error(), "read") != NULL);
        atomic_fetch_add(&T.count, 1);
    }

    /* REDIRECT: the page's contents are replaced, then the write is retried on top. */
    memset(T.redirect_src, 'R', sizeof T.redirect_src);
    T.mode = MODE_REDIRECT;
    CHECK_OK(exo_vm_prot1(r, mem + 7 * PG, EXO_VM_READONLY));
    write_byte(mem + 7 * PG + 100, 'w');
    CHECK_EQ(atomic_load(&T.count), 10);
    for (size_t i = 0; i < PG; i++)
        CHECK_EQ(mem[7 * PG + i], i == 100 ? 'w' : 'R');
    write_byte(mem + 7 * PG + 101, 'v'); /* redirect_prot was read-write: no trap */
    CHECK_EQ(atomic_load(&T.count), 10);
    T.mode = MODE_UNPROT;

    /* Destroy leaves everything accessible with its contents. */
    CHECK_OK(exo_vm_prot1(r, mem + 15 * PG, EXO_VM_READONLY));
    CHECK_OK(exo_vm_region_destroy(r));
    write_byte(mem + 15 * PG + 1, 'z');
    CHECK_EQ(atomic_load(&T.count), 10);
    CHECK_EQ(mem[3 * PG + 5], 'x');
    CHECK_EQ(mem[15 * PG + 1], 'z');
    munmap(mem, npages * PG);
}

int main(void)
{
    vm_test_each_trap_engine(run);
    printf("ok\n");
    return 0;
}
