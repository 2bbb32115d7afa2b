/* A block mapped right against a thread's stack mapping. The top of a thread's stack
 * mapping holds words that are not the program's: the C library's descriptor of the thread
 * (its stack block, where the mapping starts) and the runtime's own per-thread record (the
 * stack's bounds, where it ends, which the inline escape filter reads). With a block
 * mapped right above the stack, the stack's end is the block's header address; right
 * below, the stack's start is the block's one-past-the-end address. A move patched both as
 * addresses derived from the block: found in minimap2, whose 8 MiB kalloc cores landed
 * next to its threads' stacks. The runtime's stack end then lay below its start, the
 * filter took every heap slot for one in the thread's own stack and dropped the thread's
 * escapes, and the next move left them at the freed copy; glibc asserted at the thread's
 * exit. Here: a move of the block leaves both threads' records as they were, and a store
 * the lower thread makes after it is patched by the next move. */
#define _GNU_SOURCE   /* pthread_getattr_np */
#include "carat_check.h"
#include "carat/carat_internal.h"

#include <exomem/carat.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>

#define STACK_BYTES (512u << 10)
/* The stacks' edges are the block's header and one-past-the-end addresses: a copy of one in
 * a frame of this test's would be patched by the move like any such address in a stack
 * (conservatively), so they are kept scrambled. */
#define HIDE(x) ((uintptr_t)(x) ^ 0x5a5a5a5a5a5a5a5aull)
#define SHOW(x) ((void *)((x) ^ 0x5a5a5a5a5a5a5a5aull))
static volatile uintptr_t lower_hidden, upper_hidden;

struct holder {
    void *slot;
    long pad;
};

static struct holder *volatile holder;   /* a heap block whose slot the lower thread writes */
static void *volatile target;            /* a small block the slot will point to */
static atomic_int phase, ready;   /* ready: the threads waiting for the move (2: both) */

/* Waits in the program's own code (see main). */
static void wait_for(int want)
{
    while (atomic_load(&phase) < want)
        __builtin_ia32_pause();
}

/* The lower stack's end, scrambled: computed afresh each time, never kept in a frame. */
static __attribute__((noinline)) uintptr_t lower_end_hidden(void)
{
    return HIDE((uintptr_t)SHOW(lower_hidden) + STACK_BYTES);
}

/* Below the block: its stack ends at the block's header. */
static void *lower(void *arg)
{
    (void)arg;
    /* Its first allocation and escape: the runtime records this thread and its stack. */
    holder->slot = malloc(16);
    CHECK(exo_carat_tls.stack_lo == (uintptr_t)SHOW(lower_hidden));
    CHECK(HIDE(exo_carat_tls.stack_end) == lower_end_hidden());
    atomic_fetch_add(&ready, 1);
    wait_for(2);   /* the block moves */
    CHECK(exo_carat_tls.stack_lo == (uintptr_t)SHOW(lower_hidden));
    CHECK(HIDE(exo_carat_tls.stack_end) == lower_end_hidden());
    holder->slot = target;   /* an escape the next move must know */
    atomic_store(&phase, 3);
    return NULL;
}

/* Above the block: the C library's descriptor says its stack starts at the block's end. */
static __attribute__((noinline)) void check_own_stack(void)
{
    void *addr;
    size_t size;
    pthread_attr_t a;
    CHECK(pthread_getattr_np(pthread_self(), &a) == 0);
    CHECK(pthread_attr_getstack(&a, &addr, &size) == 0);
    pthread_attr_destroy(&a);
    CHECK(HIDE(addr) == upper_hidden && size == STACK_BYTES);
}

static void *upper(void *arg)
{
    (void)arg;
    check_own_stack();
    atomic_fetch_add(&ready, 1);
    wait_for(2);
    check_own_stack();
    return NULL;
}

static __attribute__((noinline)) pthread_t start(uintptr_t hidden, void *(*fn)(void *))
{
    pthread_attr_t a;
    pthread_t t;
    CHECK(pthread_attr_init(&a) == 0);
    CHECK(pthread_attr_setstack(&a, SHOW(hidden), STACK_BYTES) == 0);
    CHECK(pthread_create(&t, &a, fn, NULL) == 0);
    pthread_attr_destroy(&a);
    return t;
}

/* New mappings go below the lowest one: the upper stack, then the block (a chunk glibc maps
 * on its own), then the lower stack, each against the last. The block, or NULL if they did
 * not land so. */
static __attribute__((noinline)) char *place(void)
{
    char *upper_stack = mmap(NULL, STACK_BYTES, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *block = malloc(4u << 20);
    char *lower_stack = mmap(NULL, STACK_BYTES, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(upper_stack != MAP_FAILED && block && lower_stack != MAP_FAILED);
    upper_hidden = HIDE(upper_stack);
    lower_hidden = HIDE(lower_stack);
    if (HIDE(lower_stack + STACK_BYTES) != HIDE(block - 16) ||
        HIDE(block + malloc_usable_size(block)) != upper_hidden)
        return NULL;
    return block;
}

/* Clears the stack below the caller's frame: place's and start's dead frames held the
 * stacks' edges in the clear. */
static __attribute__((noinline)) void wipe_stack(void)
{
    volatile char area[8192];
    for (size_t i = 0; i < sizeof area; i++)
        area[i] = 0;
}

int main(void)
{
    char *block = place();
    if (!block) {
        printf("move_stack_edge: the stacks did not land against the block: not tested\n");
        return 0;
    }
    holder = malloc(sizeof *holder);
    target = malloc(48);
    CHECK(holder && target);
    pthread_t lo = start(lower_hidden, lower), up = start(upper_hidden, upper);
    wipe_stack();
    /* Both in their own code: one stopped inside the C library (pthread_getattr_np) while
     * it holds its stack's start, the block's end, refuses the move, as it should. */
    while (atomic_load(&ready) < 2)
        __builtin_ia32_pause();

    void *moved;
    volatile uintptr_t was_hidden = HIDE(block);   /* now, not after the call */
    int rc = exo_carat_move(block, &moved, NULL);
    if (rc)
        fprintf(stderr, "move_stack_edge: %s\n", exomem_last_error());
    CHECK(rc == 0);
    CHECK(HIDE(moved) != was_hidden && block == moved);
    block = moved;
    atomic_store(&phase, 2);
    wait_for(3);
    CHECK(pthread_join(lo, NULL) == 0 && pthread_join(up, NULL) == 0);

    void *was = target;
    CHECK(exo_carat_move(was, &moved, NULL) == 0);
    CHECK(target == moved && holder->slot == moved);

    free(block);
    free(target);
    free(holder);
    munmap(SHOW(lower_hidden), STACK_BYTES);
    munmap(SHOW(upper_hidden), STACK_BYTES);
    printf("move_stack_edge: ok\n");
    return 0;
}
