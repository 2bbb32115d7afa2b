/* bench_hpcc: an independent check of bench_gups -- Debian's hpcc (HPC Challenge 1.5.0) runs
 * RandomAccess at the same table size as ours, one MPI process, table in malloc'd (4K)
 * memory. Prints "hpcc_gups" lines (GUP/s of hpcc's SingleRandomAccess and
 * StarRandomAccess tests) whose baseline is our single-thread GUPS in anonymous memory at
 * the same table size, so the report shows hpcc / ours. A "skip" line, exit 0, when hpcc is
 * not installed.
 *
 * hpcc sizes the RandomAccess table from the HPL problem size N in hpccinf.txt: the largest
 * power-of-two number of bytes <= 8 N^2 (HPL's matrix). hpcc then runs all of HPC Challenge
 * (HPL, FFT, PTRANS, ...); the RandomAccess tests come first, so the run is stopped once
 * hpccoutf.txt has the end of the SingleRandomAccess section, whose lines we parse. hpcc
 * runs in a temporary directory (with Open MPI's session files) that is removed afterwards.
 */
#include "bench_child.h"
#include "bench_util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define GUPS_UPDATE_CAP (UINT64_C(1) << 25) /* bench_gups.c's UPDATE_CAP: keep in step */
#define RUN_TIMEOUT_S 900

/* Is there an executable `name` on PATH? Writes its path. */
static bool find_on_path(const char *name, char *out, size_t cap)
{
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/bin:/bin";
    while (*path) {
        size_t len = strcspn(path, ":");
        snprintf(out, cap, "%.*s/%s", (int)len, path, name);
        if (len && access(out, X_OK) == 0)
            return true;
        path += len + (path[len] == ':');
    }
    return false;
}

/* hpccinf.txt: HPL's input with one problem size N on a 1 x 1 process grid. */
static int write_input(const char *dir, long n)
{
    char file[512];
    snprintf(file, sizeof file, "%s/hpccinf.txt", dir);
    FILE *f = fopen(file, "w");
    if (!f)
        return -1;
    fprintf(f, "HPLinpack benchmark input file\nInnovative Computing Laboratory, University of "
               "Tennessee\nHPL.out      output file name (if any)\n8            device out\n"
               "1            # of problems sizes (N)\n%ld         Ns\n1            # of NBs\n"
               "80           NBs\n0            PMAP process mapping\n"
               "1            # of process grids (P x Q)\n1            Ps\n1            Qs\n"
               "16.0         threshold\n1            # of panel fact\n2            PFACTs\n"
               "1            # of recursive stopping criterium\n4            NBMINs\n"
               "1            # of panels in recursion\n2            NDIVs\n"
               "1            # of recursive panel fact.\n1            RFACTs\n"
               "1            # of broadcast\n1            BCASTs\n"
               "1            # of lookahead depth\n1            DEPTHs\n2            SWAP\n"
               "64           swapping threshold\n0            L1 in form\n"
               "0            U  in form\n1            Equilibration\n"
               "8            memory alignment in double\n"
               "##### This line (no. 32) is ignored (it serves as a separator). ######\n"
               "0            Number of additional problem sizes for PTRANS\n1200 10000 30000\n"
               "0            number of additional blocking sizes for PTRANS\n"
               "40 9 8 13 13 20 16 32 64\n", n);
    return fclose(f);
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (cap - len < 4096) {
            char *bigger = realloc(buf, cap *= 2);
            if (!bigger) {
                free(buf);
                buf = NULL;
            }
            buf = bigger;
        }
    }
    fclose(f);
    if (buf)
        buf[len] = '\0';
    return buf;
}

/* Run hpcc in `dir` until its SingleRandomAccess section is written; returns hpccoutf.txt's
 * text (malloc'd) or NULL. */
static char *run_hpcc(const char *hpcc, const char *dir)
{
    char out[512], log[512];
    snprintf(out, sizeof out, "%s/hpccoutf.txt", dir);
    snprintf(log, sizeof log, "%s/hpcc.log", dir);
    /* Keep Open MPI's session and shared-memory files in our directory. */
    char tmpdir[600], ompi_tmp[600];
    snprintf(tmpdir, sizeof tmpdir, "TMPDIR=%s", dir);
    snprintf(ompi_tmp, sizeof ompi_tmp, "OMPI_MCA_orte_tmpdir_base=%s", dir);
    const char *const env[] = { tmpdir, ompi_tmp, "OMPI_MCA_btl=self",
                                "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
                                NULL };
    const char *const argv[] = { hpcc, NULL };
    pid_t child = bench_spawn(argv, dir, log, log, env);
    if (child < 0)
        return NULL;
    char *text = NULL;
    bool exited = false;
    int status = 0;
    for (int tick = 0; tick < RUN_TIMEOUT_S * 4 && !bench_stop; tick++) {
        struct timespec quarter = { 0, 250000000 };
        nanosleep(&quarter, NULL);
        if (waitpid(child, &status, WNOHANG) == child) {
            exited = true;
            break;
        }
        free(text);
        text = read_file(out);
        if (text && strstr(text, "End of SingleRandomAccess section."))
            break;
    }
    if (!exited)
        bench_stop_group(child, 4000);
    free(text);
    text = read_file(out);
    if (!text || !strstr(text, "End of SingleRandomAccess section.")) {
        char *l = read_file(log);
        fprintf(stderr, "bench_hpcc: hpcc did not finish RandomAccess; its output:\n%s\n",
                l ? l : "(none)");
        free(l);
        free(text);
        return NULL;
    }
    return text;
}

/* One RandomAccess section of hpccoutf.txt: the table's log2 size, GUP/s and whether its
 * verification passed. False if the section is missing or incomplete. */
static bool parse_section(const char *text, const char *test, const char *rate_label,
                          int *log2, double *gups, bool *passed, long long *errors)
{
    char begin[96], end[96];
    snprintf(begin, sizeof begin, "Begin of %s section.", test);
    snprintf(end, sizeof end, "End of %s section.", test);
    const char *b = strstr(text, begin), *e = b ? strstr(b, end) : NULL;
    if (!b || !e)
        return false;
    const char *size = strstr(b, "Main table size"), *rate = strstr(b, rate_label);
    const char *found = strstr(b, "Found ");
    if (!size || !rate || !found || size > e || rate > e || found > e)
        return false;
    long long words, locations;
    char verdict[32] = "";
    if (sscanf(size, "Main table size = 2^%d = %lld", log2, &words) != 2 &&
        sscanf(size, "Main table size   = 2^%d = %lld", log2, &words) != 2)
        return false;
    if (sscanf(rate + strlen(rate_label), " %lf", gups) != 1)
        return false;
    if (sscanf(found, "Found %lld errors in %lld locations (%31[a-z]", errors, &locations,
               verdict) != 3)
        return false;
    *passed = !strcmp(verdict, "passed");
    return true;
}

/* HPL problem size N whose 8 N^2 bytes lie in [table, 2 table): hpcc's table is then `table`. */
static long problem_size(uint64_t table_bytes)
{
    long n = 1;
    while ((uint64_t)8 * (uint64_t)n * (uint64_t)n < table_bytes)
        n++;
    return n + n / 8; /* clear of the lower edge, still below 2 table */
}

static int measure(const char *hpcc, unsigned log2_words)
{
    uint64_t table_bytes = UINT64_C(8) << log2_words;
    uint64_t updates = UINT64_C(4) << log2_words;
    if (updates > GUPS_UPDATE_CAP)
        updates = GUPS_UPDATE_CAP;
    char dir[] = "/tmp/exomem-hpcc-XXXXXX";
    if (!mkdtemp(dir)) {
        fprintf(stderr, "bench_hpcc: mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    long n = problem_size(table_bytes);
    char *text = NULL;
    if (write_input(dir, n) == 0)
        text = run_hpcc(hpcc, dir);
    bench_remove_tree(dir);
    if (!text)
        return 1;
    static const struct { const char *test, *label; } tests[] = {
        { "SingleRandomAccess", "Single GUP/s" },
        { "StarRandomAccess", "Average GUP/s" },
    };
    int status = 0;
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        int got_log2 = 0;
        double gups = 0;
        bool passed = false;
        long long errors = 0;
        if (!parse_section(text, tests[i].test, tests[i].label, &got_log2, &gups, &passed,
                           &errors)) {
            fprintf(stderr, "bench_hpcc: no %s result in hpccoutf.txt\n", tests[i].test);
            status = 1;
            continue;
        }
        char p[160];
        snprintf(p, sizeof p, "\"table_bytes\":%llu,\"variant\":\"%s\",\"hpl_n\":%ld",
                 (unsigned long long)(UINT64_C(8) << got_log2), tests[i].test, n);
        if (!passed) {
            printf("{\"name\":\"skip\",\"params\":{%s},\"reason\":\"hpcc_failed: hpcc's "
                   "verification found %lld errors\"}\n", p, errors);
            status = 1;
            continue;
        }
        printf("{\"name\":\"hpcc_gups\",\"unit\":\"GUP/s\",\"value\":%.6f,\"params\":{%s},"
               "\"baseline\":\"gups\",\"baseline_params\":{\"mem\":\"anon\",\"table_bytes\":%llu,"
               "\"threads\":1,\"updates\":%llu,\"bounds\":0},\"note\":\"hpcc: %lld errors, "
               "passed; 4 updates per entry\"}\n",
               gups, p, (unsigned long long)table_bytes, (unsigned long long)updates, errors);
        fflush(stdout);
        if (got_log2 != (int)log2_words)
            fprintf(stderr, "bench_hpcc: asked for a 2^%u-word table, hpcc made 2^%d\n",
                    log2_words, got_log2);
    }
    free(text);
    return status;
}

int main(int argc, char **argv)
{
    bool quick = bench_has_flag(argc, argv, "--quick");
    if (bench_has_flag(argc, argv, "--help")) {
        printf("usage: bench_hpcc [--quick]\nDebian's hpcc RandomAccess at 64 MiB and 1 GiB "
               "(--quick: 64 MiB) tables, beside bench_gups.\n");
        return 0;
    }
    char hpcc[4096];
    if (!find_on_path("hpcc", hpcc, sizeof hpcc)) {
        printf("{\"name\":\"skip\",\"params\":{},\"reason\":\"hpcc is not installed "
               "(Debian package hpcc; scripts/install-deps.sh report)\"}\n");
        return 0;
    }
    bench_stop_on_signals();
    /* Table sizes as 2^k words: where our GUPS runs HPCC's full update count (64 MiB) and
     * where it is capped (1 GiB). */
    static const unsigned full_sizes[] = { 23, 27 }, quick_sizes[] = { 23 };
    const unsigned *sizes = quick ? quick_sizes : full_sizes;
    size_t count = quick ? 1 : 2;
    int status = 0;
    for (size_t i = 0; i < count && !bench_stop; i++)
        status |= measure(hpcc, sizes[i]);
    return status || bench_stop;
}
