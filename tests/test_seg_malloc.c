/* The public heap API through real segments: seg_malloc and friends in a switched-in VAS,
 * the failures at home and on read-only attachments, vas_malloc's choice of heap, and a heap
 * that a second process goes on using after the first one exited. */
#include "harness.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

#define SEG_SIZE (UINT64_C(8) << 20)
#define NODES 2000

struct node {
    struct node *next;
    uint64_t value;
    char text[40];
};

static int in_seg(const void *p, int i)
{
    uint64_t a = (uint64_t)(uintptr_t)p;
    return a >= test_base(i) && a < test_base(i) + SEG_SIZE;
}

static uint64_t value_of(uint64_t i)
{
    return i * 2654435761u + 3;
}

/* A failed allocating call: NULL, with errno and seg_heap_last_code() telling why. */
#define CHECK_ALLOC_FAILS(expr, code) do { errno = 0; void *_p = (expr); CHECK(_p == NULL); \
    CHECK_EQ(errno, exomem_errno(code)); CHECK_EQ(seg_heap_last_code(), -(code)); } while (0)

static vhandle_t attach_and_switch(const char *vas_name)
{
    vasid_t vid;
    vhandle_t vh;
    CHECK_OK(vas_find(vas_name, &vid));
    CHECK_OK(vas_attach(vid, &vh));
    CHECK_OK(vas_switch(vh));
    return vh;
}

static void leave(vhandle_t vh)
{
    CHECK_OK(vas_switch(VAS_HOME));
    CHECK_OK(vas_detach(vh));
}

static void test_at_home(segid_t s0)
{
    CHECK_ALLOC_FAILS(seg_malloc(s0, 10), EXO_ENOTMAPPED);
    CHECK_EQ(errno, EFAULT);
    CHECK_ALLOC_FAILS(vas_malloc(10), EXO_ENOTMAPPED);
    CHECK_EQ(errno, EFAULT);
    CHECK_ALLOC_FAILS(vas_calloc(2, 10), EXO_ENOTMAPPED);
    void *root;
    CHECK_ERR(seg_get_root(s0, &root), EXO_ENOTMAPPED);
    int local;
    CHECK_ERR(seg_free(&local), EXO_EINVAL);
    CHECK_EQ(seg_malloc_usable_size(&local), 0);
}

static void test_calls(segid_t s0, segid_t s1)
{
    vhandle_t vh = attach_and_switch("hv");
    struct seg_heap_stats st0;
    CHECK_OK(seg_heap_stats(s0, &st0));
    CHECK_EQ(st0.allocations, 0);
    CHECK(st0.heap_bytes > SEG_SIZE - 8192 && st0.heap_bytes < SEG_SIZE);

    char *a = seg_malloc(s0, 1000);
    char *b = seg_malloc(s1, 1000);
    CHECK(a && b && in_seg(a, 0) && in_seg(b, 1));
    CHECK_EQ((uintptr_t)a % 16, 0);
    CHECK(seg_malloc_usable_size(a) >= 1000);
    memset(a, 0xab, 1000);
    memset(b, 0xcd, 1000);

    /* calloc zeroes even memory that held data. */
    CHECK_OK(seg_free(a));
    unsigned char *z = seg_calloc(s0, 10, 100);
    CHECK(z != NULL && in_seg(z, 0));
    for (int i = 0; i < 1000; i++)
        CHECK_EQ(z[i], 0);
    CHECK_ALLOC_FAILS(seg_calloc(s0, SIZE_MAX / 2, 3), EXO_ENOMEM);
    CHECK_ALLOC_FAILS(seg_calloc(s0, (size_t)1 << 33, (size_t)1 << 33), EXO_ENOMEM);
    CHECK_ALLOC_FAILS(seg_malloc(s0, SIZE_MAX), EXO_ENOMEM);
    CHECK_ALLOC_FAILS(seg_malloc(s0, SEG_SIZE), EXO_ENOMEM);
    CHECK_ALLOC_FAILS(seg_malloc(987654, 10), EXO_ENOTMAPPED);

    char *m = seg_memalign(s0, 4096, 100);
    CHECK(m != NULL && in_seg(m, 0) && (uintptr_t)m % 4096 == 0);
    CHECK_ALLOC_FAILS(seg_memalign(s0, 24, 100), EXO_EINVAL);
    CHECK_ALLOC_FAILS(seg_memalign(s0, 0, 100), EXO_EINVAL);

    /* realloc keeps contents, finds the heap from the pointer, and frees on size 0. */
    char *r = seg_realloc(b, 50000);
    CHECK(r != NULL && in_seg(r, 1));
    for (int i = 0; i < 1000; i++)
        CHECK_EQ((unsigned char)r[i], 0xcd);
    CHECK_ALLOC_FAILS(seg_realloc(NULL, 10), EXO_EINVAL);
    CHECK_ALLOC_FAILS(seg_realloc(r, SIZE_MAX - 8), EXO_ENOMEM);
    CHECK_EQ((unsigned char)r[999], 0xcd);
    CHECK(seg_realloc(m, 0) == NULL);
    CHECK_ERR(seg_free(m), EXO_EINVAL);

    /* Bad frees are refused and leave the heaps consistent. */
    int local;
    CHECK_OK(seg_free(NULL));
    CHECK_ERR(seg_free(&local), EXO_EINVAL);
    CHECK_ERR(seg_free(z + 16), EXO_EINVAL);
    CHECK_ERR(seg_free((void *)(uintptr_t)test_base(0)), EXO_EINVAL);   /* the header */
    CHECK_EQ(seg_malloc_usable_size(z + 16), 0);
    CHECK_OK(seg_free(z));
    CHECK_ERR(seg_free(z), EXO_EINVAL);
    CHECK_OK(seg_free(r));
    CHECK_OK(seg_heap_stats(s0, &st0));
    CHECK_EQ(st0.allocations, 0);
    CHECK_EQ(st0.free_bytes, st0.heap_bytes);

    /* vas_malloc: the first SEG_RDWR segment by default, else the chosen heap segment. */
    void *v = vas_malloc(64);
    CHECK(v != NULL && in_seg(v, 0));
    vasid_t vid;
    CHECK_OK(vas_find("hv", &vid));
    CHECK_OK(vas_ctl(VAS_CTL_SET_HEAP, vid, &s1));
    CHECK_OK(vas_switch(VAS_HOME));
    CHECK_OK(vas_detach(vh));
    vh = attach_and_switch("hv");
    unsigned char *w = vas_calloc(16, 16);
    CHECK(w != NULL && in_seg(w, 1));
    for (int i = 0; i < 256; i++)
        CHECK_EQ(w[i], 0);
    CHECK_OK(seg_free(w));
    CHECK_OK(seg_free(v));
    CHECK_OK(vas_ctl(VAS_CTL_SET_HEAP, vid, &s0));
    leave(vh);
}

struct thread_arg {
    segid_t sid;
    pthread_barrier_t *start;
    int seed;
};

static void *thread_ops(void *argp)
{
    struct thread_arg *t = argp;
    pthread_barrier_wait(t->start);
    uint64_t *slot[64] = {0};
    for (int op = 0; op < 5000; op++) {
        int i = (op * 7 + t->seed * 13) % 64;
        if (slot[i]) {
            CHECK_EQ(slot[i][0], (uint64_t)t->seed);
            CHECK_OK(seg_free(slot[i]));
            slot[i] = NULL;
        } else {
            slot[i] = seg_malloc(t->sid, 16 + (size_t)((op * 31) % 2000));
            CHECK(slot[i] != NULL);
            slot[i][0] = (uint64_t)t->seed;
        }
    }
    for (int i = 0; i < 64; i++)
        CHECK_OK(seg_free(slot[i]));
    return NULL;
}

/* Threads start together on a fresh segment: it is formatted once, then shared. */
static void test_threads(segid_t s2)
{
    vhandle_t vh = attach_and_switch("hv");
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, 4);
    pthread_t th[4];
    struct thread_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (struct thread_arg){s2, &start, i + 1};
        CHECK_EQ(pthread_create(&th[i], NULL, thread_ops, &args[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    struct seg_heap_stats st;
    CHECK_OK(seg_heap_stats(s2, &st));
    CHECK_EQ(st.allocations, 0);
    CHECK_EQ(st.free_chunks, 1);
    leave(vh);
}

/* First process: builds a list in s0, stores its head as the root, exits switched in. */
static void writer(void *arg)
{
    segid_t s0 = *(segid_t *)arg;
    attach_and_switch("hv");
    struct node *head = NULL;
    for (uint64_t i = NODES; i-- > 0;) {
        struct node *n = seg_malloc(s0, sizeof *n);
        CHECK(n != NULL && in_seg(n, 0));
        n->value = value_of(i);
        snprintf(n->text, sizeof n->text, "node %" PRIu64, i);
        n->next = head;
        head = n;
    }
    CHECK_OK(seg_set_root(s0, head));
}

/* Walks the list from the root; returns its length, checking each node's contents. */
static uint64_t walk(segid_t s0)
{
    void *root = NULL;
    CHECK_OK(seg_get_root(s0, &root));
    uint64_t i = 0;
    char text[40];
    for (struct node *n = root; n; n = n->next, i++) {
        CHECK(in_seg(n, 0));
        CHECK_EQ(n->value, value_of(i));
        snprintf(text, sizeof text, "node %" PRIu64, i);
        CHECK(!strcmp(n->text, text));
        CHECK(seg_malloc_usable_size(n) >= sizeof *n);
    }
    return i;
}

/* Second process: checks the list, frees its odd half and appends as many new nodes. */
static void continuer(void *arg)
{
    segid_t s0 = *(segid_t *)arg;
    vhandle_t vh = attach_and_switch("hv");
    CHECK_EQ(walk(s0), NODES);
    struct seg_heap_stats st;
    CHECK_OK(seg_heap_stats(s0, &st));
    CHECK_EQ(st.allocations, NODES);
    void *root;
    CHECK_OK(seg_get_root(s0, &root));
    struct node *head = root, *tail = head;
    for (struct node *n = head; n && n->next; n = n->next) {   /* drop every other node */
        struct node *odd = n->next;
        n->next = odd->next;
        CHECK_OK(seg_free(odd));
        tail = n;
    }
    uint64_t i = 0;
    for (struct node *n = head; n; n = n->next, i++) {   /* renumber so walk() applies */
        n->value = value_of(i);
        snprintf(n->text, sizeof n->text, "node %" PRIu64, i);
        tail = n;
    }
    for (; i < NODES; i++) {
        struct node *n = seg_calloc(s0, 1, sizeof *n);
        CHECK(n != NULL && in_seg(n, 0));
        n->value = value_of(i);
        snprintf(n->text, sizeof n->text, "node %" PRIu64, i);
        tail->next = n;
        tail = n;
    }
    CHECK_EQ(walk(s0), NODES);
    leave(vh);
}

/* A read-only attachment can read the heap but not change it. */
static void test_read_only(segid_t s0, segid_t s3)
{
    vhandle_t vh = attach_and_switch("ro");
    CHECK_EQ(walk(s0), NODES);
    struct seg_heap_stats st;
    CHECK_OK(seg_heap_stats(s0, &st));
    CHECK_EQ(st.allocations, NODES);
    CHECK_ALLOC_FAILS(seg_malloc(s0, 10), EXO_EACCES);
    CHECK_ALLOC_FAILS(seg_calloc(s0, 1, 10), EXO_EACCES);
    CHECK_ALLOC_FAILS(seg_memalign(s0, 64, 10), EXO_EACCES);
    CHECK_ERR(seg_set_root(s0, NULL), EXO_EACCES);
    void *root;
    CHECK_OK(seg_get_root(s0, &root));
    CHECK(root != NULL);
    CHECK_ERR(seg_free(root), EXO_EACCES);
    CHECK_ALLOC_FAILS(seg_realloc(root, 10), EXO_EACCES);
    CHECK_ALLOC_FAILS(vas_malloc(10), EXO_ENOHEAP);   /* no SEG_RDWR segment in "ro" */
    /* A segment that never held a heap reads as an empty one. */
    CHECK_OK(seg_get_root(s3, &root));
    CHECK(root == NULL);
    CHECK_OK(seg_heap_stats(s3, &st));
    CHECK_EQ(st.heap_bytes, 0);
    leave(vh);
}

int main(void)
{
    test_root_setup();
    segid_t s[4];
    for (int i = 0; i < 4; i++) {
        char name[16];
        snprintf(name, sizeof name, "heap%d", i);
        CHECK_OK(seg_alloc(name, test_base(i), SEG_SIZE, 0600, &s[i]));
    }
    vasid_t hv, ro;
    CHECK_OK(vas_create("hv", 0600, &hv));
    CHECK_OK(vas_create("ro", 0600, &ro));
    for (int i = 0; i < 3; i++)
        CHECK_OK(seg_attach(hv, s[i], SEG_RDWR));
    CHECK_OK(seg_attach(ro, s[0], SEG_RDONLY));
    CHECK_OK(seg_attach(ro, s[3], SEG_RDONLY));

    test_at_home(s[0]);
    test_calls(s[0], s[1]);
    test_threads(s[2]);
    CHECK_EQ(test_in_child(writer, &s[0]), 0);
    CHECK_EQ(test_in_child(continuer, &s[0]), 0);
    vhandle_t vh = attach_and_switch("hv");   /* and this process sees what both did */
    CHECK_EQ(walk(s[0]), NODES);
    leave(vh);
    test_read_only(s[0], s[3]);
    test_at_home(s[0]);

    CHECK_OK(vas_delete(hv));
    CHECK_OK(vas_delete(ro));
    for (int i = 0; i < 4; i++)
        CHECK_OK(seg_delete(s[i]));
    fprintf(stderr, "test_seg_malloc: ok\n");
    return 0;
}
