/* Two address spaces, one address: segments "ex-a" and "ex-b" both start at BASE, each in
 * its own VAS. The program writes a different text at BASE in each VAS, then switches back
 * and forth and reads the same pointer, which shows whichever VAS is current.
 *
 * The segments are used as plain memory here (no heap); examples/spacejmp_list.c shows the
 * in-segment heap. Exit status 0 when each switch showed the right text, 1 otherwise.
 * Run it with a private registry:  EXOMEM_ROOT=$(mktemp -d /dev/shm/ex-XXXXXX) ./two_spaces
 */
#include <exomem/exomem.h>

#include <stdio.h>
#include <string.h>

#define BASE UINT64_C(0x390000000000)   /* 1 GiB aligned, far from where mmap places things */
#define SEG_SIZE (UINT64_C(2) << 20)

struct space {
    const char *seg_name, *vas_name, *text;
    segid_t sid;        /* 0 until created: only what this run created is deleted */
    vasid_t vid;
    vhandle_t vh;
    int attached;
};

static struct space spaces[2] = {
    {.seg_name = "ex-a", .vas_name = "ex-va", .text = "I am the data of address space A"},
    {.seg_name = "ex-b", .vas_name = "ex-vb", .text = "address space B keeps this text"},
};

/* Print why exomem call `what` on `name` failed (code rc) and return 1, the exit status. */
static int report(const char *what, const char *name, int rc)
{
    const char *detail = exomem_last_error();
    fprintf(stderr, "two_spaces: %s(%s) failed: %s%s%s%s\n", what, name, exomem_strerror(rc),
            *detail ? " (" : "", detail, *detail ? ")" : "");
    return 1;
}

/* Segment at BASE, a VAS listing it read-write, attached to this process. */
static int set_up(struct space *s)
{
    int rc = seg_alloc(s->seg_name, BASE, SEG_SIZE, 0600, &s->sid);
    if (rc < 0)
        return report("seg_alloc", s->seg_name, rc);
    rc = vas_create(s->vas_name, 0600, &s->vid);
    if (rc < 0)
        return report("vas_create", s->vas_name, rc);
    rc = seg_attach(s->vid, s->sid, SEG_RDWR);
    if (rc < 0)
        return report("seg_attach", s->seg_name, rc);
    rc = vas_attach(s->vid, &s->vh);
    if (rc < 0)
        return report("vas_attach", s->vas_name, rc);
    s->attached = 1;
    return 0;
}

/* Switch into s and write its text at BASE. */
static int write_text(struct space *s)
{
    int rc = vas_switch(s->vh);
    if (rc < 0)
        return report("vas_switch", s->vas_name, rc);
    strcpy((char *)(uintptr_t)BASE, s->text);
    printf("in %s: wrote \"%s\" at %p\n", s->vas_name, s->text, (void *)(uintptr_t)BASE);
    return 0;
}

/* Switch into s and check that BASE shows its text. */
static int read_text(struct space *s)
{
    int rc = vas_switch(s->vh);
    if (rc < 0)
        return report("vas_switch", s->vas_name, rc);
    const char *at_base = (const char *)(uintptr_t)BASE;
    printf("in %s: %p holds \"%s\"\n", s->vas_name, (const void *)at_base, at_base);
    if (strcmp(at_base, s->text) != 0) {
        fprintf(stderr, "two_spaces: %s shows the wrong text\n", s->vas_name);
        return 1;
    }
    return 0;
}

/* Undo set_up: detach (which switches home if needed), delete the VAS, then the segment. */
static int tear_down(struct space *s)
{
    int status = 0, rc;
    if (s->attached && (rc = vas_detach(s->vh)) < 0)
        status = report("vas_detach", s->vas_name, rc);
    if (s->vid && (rc = vas_delete(s->vid)) < 0)
        status = report("vas_delete", s->vas_name, rc);
    if (s->sid && (rc = seg_delete(s->sid)) < 0)
        status = report("seg_delete", s->seg_name, rc);
    return status;
}

int main(void)
{
    int status = set_up(&spaces[0]) || set_up(&spaces[1]) ||
                 write_text(&spaces[0]) || write_text(&spaces[1]);
    for (int i = 0; i < 4 && status == 0; i++)
        status = read_text(&spaces[i % 2]);
    if (status == 0 && vas_current() != spaces[1].vh) {
        fprintf(stderr, "two_spaces: vas_current() is not ex-vb after switching to it\n");
        status = 1;
    }
    int rc = vas_switch(VAS_HOME);
    if (rc < 0)
        status = report("vas_switch", "VAS_HOME", rc);
    status |= tear_down(&spaces[0]);
    status |= tear_down(&spaces[1]);
    puts(status == 0 ? "two_spaces: OK" : "two_spaces: FAILED");
    return status;
}
