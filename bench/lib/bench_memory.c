/* Memory kinds for benchmark tables; see bench_memory.h. */
#include "bench_memory.h"
#include "bench_util.h"
#include "os/os.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define PROG program_invocation_short_name

const char *const bench_memory_names[BENCH_MEM_KINDS] = {"anon", "seg4k", "thp", "seg2m",
                                                         "seg1g"};

int bench_memory_parse(const char *name)
{
    for (int i = 0; i < BENCH_MEM_KINDS; i++)
        if (!strcmp(name, bench_memory_names[i]))
            return i;
    return -1;
}

uint64_t bench_memory_page(enum bench_memory m)
{
    return m == BENCH_MEM_SEG2M ? SEG_PAGE_2M : m == BENCH_MEM_SEG1G ? SEG_PAGE_1G : SEG_PAGE_4K;
}

uint64_t bench_memory_round(enum bench_memory m, uint64_t bytes)
{
    uint64_t page = bench_memory_page(m);
    return (bytes + page - 1) / page * page;
}

static enum bench_memory pool_kind;
static long pool_saved = -1;

const char *bench_memory_reserve(enum bench_memory m, uint64_t bytes)
{
    if (m != BENCH_MEM_SEG2M && m != BENCH_MEM_SEG1G)
        return NULL;
    uint64_t page = bench_memory_page(m);
    const char *env = getenv(page == SEG_PAGE_2M ? "EXOMEM_HUGETLBFS_2M" : "EXOMEM_HUGETLBFS_1G");
    char mount[256];
    if ((!env || !*env) && exo_os_find_hugetlbfs(page, mount, sizeof mount) != 0)
        return "no hugetlbfs mount of this page size";
    pool_kind = m;
    switch (exo_os_pool_reserve(page, (long)(bench_memory_round(m, bytes) / page), &pool_saved)) {
    case 0: return NULL;
    case -EXO_EPERM: return "huge page pool too small (and not root)";
    case -EXO_ENOHUGE: return "huge page pool cannot be grown enough";
    default: return "no huge page pool of this size";
    }
}

void bench_memory_release(void)
{
    if (exo_os_pool_restore(bench_memory_page(pool_kind), pool_saved) != 0)
        fprintf(stderr, "%s: cannot restore the huge page pool to %ld pages\n", PROG,
                pool_saved);
    pool_saved = -1;
}

static segid_t table_seg;

/* At exit, after the benchmark's VAS is gone (bench_teardown), the segment can go: made with
 * options bench_make_seg() lacks, and for 2M/1G living in hugetlbfs, not in the registry. */
static void delete_table_seg(void)
{
    bench_teardown();
    if (table_seg && seg_delete(table_seg) != 0)
        fprintf(stderr, "%s: cleanup: seg_delete: %s\n", PROG, exomem_last_error());
    table_seg = 0;
}

void *bench_memory_map(enum bench_memory m, const char *name, uint64_t base, uint64_t bytes,
                       const char **why)
{
    if (m == BENCH_MEM_ANON) {
        void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) {
            fprintf(stderr, "%s: mmap %llu bytes: %s\n", PROG, (unsigned long long)bytes,
                    strerror(errno));
            exit(1);
        }
        return p;
    }
    atexit(delete_table_seg);
    struct seg_opts so = {.page_size = bench_memory_page(m)};
    int rc = seg_alloc_ex(name, base, bytes, 0600, &so, &table_seg);
    if (rc == -EXO_ENOHUGE) {
        fprintf(stderr, "%s: %s\n", PROG, exomem_last_error());
        *why = "no huge pages for the segment";
        return NULL;
    }
    TRY(rc);
    vasid_t vid = bench_make_vas(name);
    TRY(seg_attach(vid, table_seg, SEG_RDWR));
    TRY(vas_switch(bench_attach(vid)));
    if (m == BENCH_MEM_THP && madvise((void *)base, bytes, MADV_HUGEPAGE) != 0) {
        fprintf(stderr, "%s: madvise(MADV_HUGEPAGE): %s\n", PROG, strerror(errno));
        exit(1);
    }
    return (void *)base;
}
