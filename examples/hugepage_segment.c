/* Segments with large pages: one with transparent huge pages (SEG_THP) and one with 2 MiB
 * hugetlb pages. Each is written through a VAS and then asked what backs it
 * (seg_backing): how much is resident and how much of that is in huge pages.
 *
 * Run as root, exomem mounts what it needs under the registry and grows the 2 MiB pool for
 * the hugetlb segment, and seg_delete() gives both back. Without root, each kind needs a
 * mount (and, for 2M, free pages in the pool) prepared beforehand (docs/hugepages.md); a
 * kind that cannot be had is reported with the reason. Exit status 0 when every kind that
 * could be had was backed as asked, 77 when neither could be had, 1 on a failure.
 * Run it with a private registry:  EXOMEM_ROOT=$(mktemp -d /dev/shm/ex-XXXXXX) ./hugepage_segment
 */
#include <exomem/exomem.h>

#include <stdio.h>
#include <string.h>

#define SEG_SIZE (UINT64_C(16) << 20)
#define NOT_HERE 77

struct kind {
    const char *name;
    uint64_t base;              /* 1 GiB aligned, far from where mmap places things */
    struct seg_opts opts;
};

static int report(const char *what, const char *name, int rc)
{
    const char *detail = exomem_last_error();
    fprintf(stderr, "hugepage_segment: %s(%s) failed: %s%s%s%s\n", what, name,
            exomem_strerror(rc), *detail ? " (" : "", detail, *detail ? ")" : "");
    return 1;
}

/* Write the whole segment through a VAS that lists it, then leave and detach. */
static int write_through_vas(const struct kind *k, segid_t sid)
{
    vasid_t vid;
    vhandle_t vh;
    int rc = vas_create(k->name, 0600, &vid);
    if (rc < 0)
        return report("vas_create", k->name, rc);
    int status = 0;
    if ((rc = seg_attach(vid, sid, SEG_RDWR)) < 0 || (rc = vas_attach(vid, &vh)) < 0) {
        status = report("seg_attach/vas_attach", k->name, rc);
    } else {
        if ((rc = vas_switch(vh)) < 0)
            status = report("vas_switch", k->name, rc);
        else
            memset((void *)k->base, 0x5a, SEG_SIZE);
        if ((rc = vas_switch(VAS_HOME)) < 0 || (rc = vas_detach(vh)) < 0)
            status = report("vas_switch(VAS_HOME)/vas_detach", k->name, rc);
    }
    if ((rc = vas_delete(vid)) < 0)
        status = report("vas_delete", k->name, rc);
    return status;
}

static int show(const struct kind *k)
{
    segid_t sid;
    int rc = seg_alloc_ex(k->name, k->base, SEG_SIZE, 0600, &k->opts, &sid);
    if (rc == -EXO_ENOHUGE) {
        /* Never a silent fallback to 4K pages: the caller learns why. */
        printf("%-6s not available here: %s\n", k->name, exomem_last_error());
        return NOT_HERE;
    }
    if (rc < 0)
        return report("seg_alloc_ex", k->name, rc);
    int status = write_through_vas(k, sid);
    struct seg_backing b;
    if (!status && (rc = seg_backing(sid, &b)) < 0)
        status = report("seg_backing", k->name, rc);
    if (!status) {
        printf("%-6s %llu MiB: resident %llu MiB, in huge pages %llu MiB\n", k->name,
               (unsigned long long)(SEG_SIZE >> 20), (unsigned long long)(b.resident >> 20),
               (unsigned long long)(b.huge >> 20));
        /* hugetlb pages are huge by construction; THP ones are the kernel's to give. */
        if (b.resident != SEG_SIZE || (k->opts.page_size != SEG_PAGE_4K && b.huge != SEG_SIZE))
            status = 1;
    }
    if ((rc = seg_delete(sid)) < 0)
        status = report("seg_delete", k->name, rc);
    return status;
}

int main(void)
{
    const struct kind kinds[] = {
        {"thp", UINT64_C(0x380000000000), {.page_size = SEG_PAGE_4K, .flags = SEG_THP}},
        {"huge2m", UINT64_C(0x3c0000000000), {.page_size = SEG_PAGE_2M, .flags = 0}},
    };
    int had = 0, failed = 0;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        int status = show(&kinds[i]);
        had += status != NOT_HERE;
        failed += status == 1;
    }
    return failed ? 1 : had ? 0 : NOT_HERE;
}
