/* SpaceJMP in one file: one process builds a linked list inside a segment, another process
 * walks it through the very same raw pointers, because the segment sits at the same base
 * address in both.
 *
 *   1. create segment "ex-list" at a fixed base and VAS "ex-v0", and record the segment in
 *      the VAS (the paper's Figure 4); an interrupted earlier run may have left them, so
 *      they are looked up by name when they exist already;
 *   2. attach the VAS, switch into it, build the list with seg_malloc() and store its head
 *      as the heap's root; switch home and detach;
 *   3. fork a child that finds the VAS by name, attaches it afresh, switches in, walks the
 *      list from the root and checks every node;
 *   4. delete the VAS and the segment.
 *
 * Exit status 0 when every step worked and the child saw the whole list, 1 otherwise.
 * Run it with a private registry:  EXOMEM_ROOT=$(mktemp -d /dev/shm/ex-XXXXXX) ./spacejmp_list
 */
#include <exomem/exomem.h>

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define LIST_BASE UINT64_C(0x380000000000) /* 1 GiB aligned, far from where mmap places things */
#define LIST_SIZE (UINT64_C(16) << 20)
#define LIST_LEN 1000

struct node {
    struct node *next;  /* a plain pointer into the segment: valid wherever it is attached */
    long value;
};

/* Print why exomem call `what` failed (code rc) and return 1, the exit status. */
static int report(const char *what, int rc)
{
    const char *detail = exomem_last_error();
    fprintf(stderr, "spacejmp_list[%d]: %s failed: %s%s%s%s\n", (int)getpid(), what,
            exomem_strerror(rc), *detail ? " (" : "", detail, *detail ? ")" : "");
    return 1;
}

/* Step 1: the segment and the VAS, created or found by name; the segment listed in the VAS. */
static int create_objects(segid_t *sid, vasid_t *vid)
{
    int rc = seg_alloc("ex-list", LIST_BASE, LIST_SIZE, 0600, sid);
    if (rc == -EXO_EEXIST)
        rc = seg_find("ex-list", sid);
    if (rc < 0)
        return report("seg_alloc(\"ex-list\")", rc);

    rc = vas_create("ex-v0", 0600, vid);
    if (rc == -EXO_EEXIST)
        rc = vas_find("ex-v0", vid);
    if (rc < 0)
        return report("vas_create(\"ex-v0\")", rc);

    struct vas_info info;
    rc = vas_ctl(VAS_CTL_INFO, *vid, &info);
    if (rc < 0)
        return report("vas_ctl(VAS_CTL_INFO)", rc);
    printf("segment ex-list (id %llu) at %#llx, %llu MiB, in VAS ex-v0 (id %llu)\n",
           (unsigned long long)*sid, (unsigned long long)LIST_BASE,
           (unsigned long long)(LIST_SIZE >> 20), (unsigned long long)*vid);
    for (unsigned i = 0; i < info.nsegs; i++)
        if (info.segs[i].sid == *sid)
            return 0;   /* listed by an earlier run */
    rc = seg_attach(*vid, *sid, SEG_RDWR);
    return rc < 0 ? report("seg_attach", rc) : 0;
}

/* Step 2, inside the VAS: free a list an interrupted run left, build 1..LIST_LEN, set root. */
static int build_list(segid_t sid)
{
    void *old;
    int rc = seg_get_root(sid, &old);
    if (rc < 0)
        return report("seg_get_root", rc);
    for (struct node *n = old, *next; n; n = next) {
        next = n->next;
        seg_free(n);
    }

    struct node *head = NULL;
    for (long v = LIST_LEN; v >= 1; v--) {
        struct node *n = seg_malloc(sid, sizeof *n);
        if (!n)
            return report("seg_malloc", seg_heap_last_code());
        n->value = v;
        n->next = head;
        head = n;
    }
    rc = seg_set_root(sid, head);
    if (rc < 0)
        return report("seg_set_root", rc);
    printf("parent %d: built %d nodes, head at %p\n", (int)getpid(), LIST_LEN, (void *)head);
    return 0;
}

/* Step 2: attach, switch in, build, switch home, detach. */
static int fill_list(vasid_t vid, segid_t sid)
{
    vhandle_t vh;
    int rc = vas_attach(vid, &vh);
    if (rc < 0)
        return report("vas_attach", rc);
    int status;
    rc = vas_switch(vh);
    if (rc < 0) {
        status = report("vas_switch", rc);
    } else {
        status = build_list(sid);
        /* Switching home releases the segment's exclusive lock, so the child can enter. */
        rc = vas_switch(VAS_HOME);
        if (rc < 0)
            status = report("vas_switch(VAS_HOME)", rc);
    }
    rc = vas_detach(vh);
    if (rc < 0)
        status = report("vas_detach", rc);
    return status;
}

/* Step 3, inside the VAS: walk from the root and check values 1..LIST_LEN in order. */
static int walk_list(segid_t sid)
{
    void *root;
    int rc = seg_get_root(sid, &root);
    if (rc < 0)
        return report("seg_get_root", rc);
    long count = 0, sum = 0;
    for (const struct node *n = root; n; n = n->next) {
        if (n->value != count + 1) {
            fprintf(stderr, "spacejmp_list: node %ld holds %ld\n", count + 1, n->value);
            return 1;
        }
        count++;
        sum += n->value;
    }
    long want = (long)LIST_LEN * (LIST_LEN + 1) / 2;
    printf("child %d: walked %ld nodes from %p, sum %ld (expected %ld)\n", (int)getpid(),
           count, root, sum, want);
    return count == LIST_LEN && sum == want ? 0 : 1;
}

/* Step 3, the child: everything by name, as an unrelated process would. */
static int child_main(void)
{
    vasid_t vid;
    segid_t sid;
    vhandle_t vh;
    int rc = vas_find("ex-v0", &vid);
    if (rc < 0)
        return report("vas_find(\"ex-v0\")", rc);
    rc = seg_find("ex-list", &sid);
    if (rc < 0)
        return report("seg_find(\"ex-list\")", rc);
    rc = vas_attach(vid, &vh);
    if (rc < 0)
        return report("vas_attach (child)", rc);
    int status;
    rc = vas_switch(vh);
    if (rc < 0) {
        status = report("vas_switch (child)", rc);
    } else {
        status = walk_list(sid);
        rc = vas_switch(VAS_HOME);
        if (rc < 0)
            status = report("vas_switch(VAS_HOME) (child)", rc);
    }
    rc = vas_detach(vh);
    if (rc < 0)
        status = report("vas_detach (child)", rc);
    return status;
}

/* Step 3: fork the child and wait for its verdict. */
static int check_in_child(void)
{
    fflush(stdout);   /* or the child would print the parent's buffered lines again */
    pid_t pid = fork();
    if (pid < 0) {
        perror("spacejmp_list: fork");
        return 1;
    }
    if (pid == 0)
        exit(child_main());
    int ws;
    if (waitpid(pid, &ws, 0) < 0) {
        perror("spacejmp_list: waitpid");
        return 1;
    }
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
        fprintf(stderr, "spacejmp_list: the child did not see the list (wait status %#x)\n", ws);
        return 1;
    }
    return 0;
}

/* Step 4: a VAS that lists a segment keeps it in use, so the VAS goes first. */
static int delete_objects(vasid_t vid, segid_t sid)
{
    int status = 0, rc;
    if (vid && (rc = vas_delete(vid)) < 0)
        status = report("vas_delete", rc);
    if (sid && (rc = seg_delete(sid)) < 0)
        status = report("seg_delete", rc);
    return status;
}

int main(void)
{
    printf("registry: %s\n", exomem_root());
    segid_t sid = 0;
    vasid_t vid = 0;
    int status = create_objects(&sid, &vid);
    if (status == 0)
        status = fill_list(vid, sid);
    if (status == 0)
        status = check_in_child();
    status |= delete_objects(vid, sid);
    puts(status == 0 ? "spacejmp_list: OK" : "spacejmp_list: FAILED");
    return status;
}
