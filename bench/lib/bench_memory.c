/* Memory kinds for benchmark tables; see bench_memory.h. */
#include "bench_memory.h"
#include "bench_util.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define PROG program_invocation_short_name

const char *const bench_memory_names[BENCH_MEM_KINDS] = {"anon", "seg4k", "thp", "seg2m",
                                                         "seg1g"};

enum bench_memory bench_memory_arg(const char *name)
{
    for (int i = 0; i < BENCH_MEM_KINDS; i++)
        if (!strcmp(name, bench_memory_names[i]))
            return (enum bench_memory)i;
    fprintf(stderr, "%s: unknown memory kind '%s' (anon, seg4k, thp, seg2m or seg1g)\n", PROG,
            name);
    exit(2);
}

uint64_t bench_memory_page(enum bench_memory m)
{
    return m == BENCH_MEM_SEG2M ? SEG_PAGE_2M : m == BENCH_MEM_SEG1G ? SEG_PAGE_1G : SEG_PAGE_4K;
}

uint64_t bench_memory_round(enum bench_memory m, uint64_t bytes)
{
    uint64_t page = m == BENCH_MEM_THP ? SEG_PAGE_2M : bench_memory_page(m);
    return (bytes + page - 1) / page * page;
}

static segid_t table_seg;

/* At exit, after the benchmark's VAS is gone (bench_teardown), the segment can go: made with
 * options bench_make_seg() lacks; its seg_delete() also returns the pool pages and private
 * mount the library made for it. */
static void delete_table_seg(void)
{
    bench_teardown();
    if (table_seg && seg_delete(table_seg) != 0)
        fprintf(stderr, "%s: cleanup: seg_delete: %s\n", PROG, exomem_last_error());
    table_seg = 0;
}

/* exomem_last_error() kept for a JSON string: quotes, backslashes and controls blanked. */
static const char *refusal(void)
{
    static char why[512];
    snprintf(why, sizeof why, "%s", exomem_last_error());
    for (char *c = why; *c; c++)
        if (*c == '"' || *c == '\\' || (unsigned char)*c < ' ')
            *c = ' ';
    return why;
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
    struct seg_opts so = {.page_size = bench_memory_page(m),
                          .flags = m == BENCH_MEM_THP ? SEG_THP : 0};
    int rc = seg_alloc_ex(name, base, bytes, 0600, &so, &table_seg);
    if (rc == -EXO_ENOHUGE) {
        *why = refusal();
        fprintf(stderr, "%s: %s\n", PROG, *why);
        return NULL;
    }
    TRY(rc);
    vasid_t vid = bench_make_vas(name);
    TRY(seg_attach(vid, table_seg, SEG_RDWR));
    TRY(vas_switch(bench_attach(vid)));
    return (void *)base;
}

uint64_t bench_memory_huge_bytes(const void *p, uint64_t len)
{
    static const char *const fields[] = { "AnonHugePages:", "ShmemPmdMapped:", "FilePmdMapped:",
                                          "Shared_Hugetlb:", "Private_Hugetlb:" };
    FILE *f = fopen("/proc/self/smaps", "re");
    if (!f)
        return 0;
    uintptr_t lo = (uintptr_t)p, hi = lo + len;
    char line[512];
    bool inside = false;
    uint64_t kib = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long start, end;
        if (line[0] != ' ' && sscanf(line, "%lx-%lx ", &start, &end) == 2 &&
            strchr(line, '-') < strchr(line, ' ')) {
            inside = start < hi && end > lo;
            continue;
        }
        for (size_t i = 0; inside && i < sizeof fields / sizeof fields[0]; i++)
            if (!strncmp(line, fields[i], strlen(fields[i])))
                kib += strtoull(line + strlen(fields[i]), NULL, 10);
    }
    fclose(f);
    return kib * 1024 > len ? len : kib * 1024;
}

uint64_t bench_mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "re");
    char line[256];
    unsigned long long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return (uint64_t)kib * 1024;
}

void bench_emit_skip(const char *params, const char *reason)
{
    printf("{\"name\":\"skip\",\"params\":{%s},\"reason\":\"%s\"}\n", params, reason);
    fflush(stdout);
}
