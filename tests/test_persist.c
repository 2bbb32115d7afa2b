/* The SpaceJMP scenario across processes: process A creates VAS "v0" with a segment,
 * switches into it, builds a linked list with raw pointers in the segment and exits;
 * a fresh process B finds "v0", attaches, switches, and walks the list. Each is this program
 * run again (execv of /proc/self/exe), so nothing is inherited but the registry. */
#include "harness.h"

#include <string.h>
#include <unistd.h>

#define SEG_SIZE (UINT64_C(8) << 20)
#define NODES 5000

struct node {
    struct node *next;
    uint64_t value;
    char label[24];
};

static uint64_t value_of(int i)
{
    return (uint64_t)i * i * 2654435761u + 17;
}

/* Build the list (head = node 0) with seg_malloc; the heap failing fails the test. */
static void writer(void)
{
    segid_t sid;
    vasid_t vid;
    vhandle_t vh;
    CHECK_OK(seg_alloc("s0", test_base(0), SEG_SIZE, 0660, &sid));
    CHECK_OK(vas_create("v0", 0660, &vid));
    CHECK_OK(seg_attach(vid, sid, SEG_RDWR));
    CHECK_OK(vas_attach(vid, &vh));
    CHECK_OK(vas_switch(vh));

    struct node *head = NULL;
    for (int i = NODES - 1; i >= 0; i--) {
        struct node *n = seg_malloc(sid, sizeof *n);
        CHECK(n != NULL);
        CHECK((uint64_t)n >= test_base(0) && (uint64_t)n + sizeof *n <= test_base(0) + SEG_SIZE);
        n->next = head;
        n->value = value_of(i);
        snprintf(n->label, sizeof n->label, "node-%d", i);
        head = n;
    }
    CHECK_OK(seg_set_root(sid, head));
    /* Exit while switched in and attached: nothing must depend on this process any more. */
    exit(0);
}

static void reader(void)
{
    vasid_t vid;
    segid_t sid;
    vhandle_t vh;
    CHECK_OK(vas_find("v0", &vid));
    CHECK_OK(seg_find("s0", &sid));
    CHECK_OK(vas_attach(vid, &vh));
    CHECK(test_faults((const void *)test_base(0), 0));   /* attached, not yet visible */
    CHECK_OK(vas_switch(vh));

    void *root = NULL;
    CHECK_OK(seg_get_root(sid, &root));
    struct node *head = root;
    struct seg_heap_stats st;
    CHECK_OK(seg_heap_stats(sid, &st));
    CHECK_EQ(st.allocations, NODES);
    int i = 0;
    char label[24];
    for (struct node *n = head; n; n = n->next, i++) {
        CHECK(i < NODES);
        CHECK((uint64_t)n >= test_base(0) && (uint64_t)n < test_base(0) + SEG_SIZE);
        CHECK_EQ(n->value, value_of(i));
        snprintf(label, sizeof label, "node-%d", i);
        CHECK(!strcmp(n->label, label));
    }
    CHECK_EQ(i, NODES);
    CHECK_OK(vas_switch(VAS_HOME));
    CHECK(test_faults((const void *)test_base(0), 0));
    CHECK_OK(vas_detach(vh));
    exit(0);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "writer"))
        writer();
    if (argc > 1 && !strcmp(argv[1], "reader"))
        reader();

    test_root_setup();
    test_run_self("writer", NULL, NULL);
    test_run_self("reader", NULL, NULL);
    test_run_self("reader", NULL, NULL);   /* reading changed nothing */

    /* Delete everything; the registry is left empty. */
    vasid_t vid;
    segid_t sid;
    CHECK_OK(vas_find("v0", &vid));
    CHECK_OK(seg_find("s0", &sid));
    CHECK_ERR(seg_delete(sid), EXO_EINUSE);
    CHECK_OK(vas_delete(vid));
    CHECK_ERR(vas_find("v0", &vid), EXO_ENOENT);
    CHECK_OK(seg_delete(sid));
    CHECK_ERR(seg_find("s0", &sid), EXO_ENOENT);
    size_t count = 1;
    CHECK_OK(seg_list(NULL, 0, &count, NULL));
    CHECK_EQ(count, 0);
    CHECK_OK(vas_list(NULL, 0, &count, NULL));
    CHECK_EQ(count, 0);
    printf("test_persist: ok\n");
    return 0;
}
