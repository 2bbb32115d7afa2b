/* SpaceJMP Figures 11 and 12: a SAM pipeline whose stages keep the parsed records in memory
 * (apps/samjmp) against samtools 1.16 reading and writing SAM and BAM files in /dev/shm, and
 * the same pipeline keeping its records in a VAS (raw pointers) against an mmap'd file
 * (offsets).
 *
 * Per read count (reads simulated and aligned by bench/make_sam_data.sh, cached in the build
 * directory) and per repeat, each tool runs each operation as its own process, timed from
 * fork to exit (wall clock), output to /dev/null:
 *   samtools-sam  flagstat in.sam; sort -O sam in.sam; depth -a sorted.sam
 *                 (samtools cannot index a SAM text file: no index for SAM)
 *   samtools-bam  flagstat in.bam; sort in.bam; index sorted.bam; depth -a sorted.bam
 *   samtools-bam-2t  the same with -@ 1 (two threads: the multi-threaded peer; samjmp's
 *                 stages are single-threaded)
 *   samjmp-vas    load in.sam; sort; index; flagstat; pileup    (records in a VAS)
 *   samjmp-mmap   the same with --mmap (records in a file in /dev/shm, offsets)
 * "flagstat-2clients": two flagstat processes started together, until both exit (samjmp's
 * readers share the store; samtools' read the same file).
 * "qname-sort": sort by name (samtools sort -n, samjmp sort -n), after the pipeline.
 * "pipeline" is the sum of a tool's operations in that repeat (samjmp's includes its load,
 * the one time it parses SAM). The tools alternate within a repeat so that they share the
 * machine's load. Prints one JSON line per measurement: name "samjmp_op", unit "s",
 * params {reads, tool, op}; samjmp-vas is compared with samtools-sam, samjmp-mmap with
 * samjmp-vas.
 */
#include "bench_util.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SAMJMP_BIN
#error "SAMJMP_BIN (the samjmp executable) must be defined by the build"
#endif
#ifndef SAMJMP_DATA_SCRIPT
#error "SAMJMP_DATA_SCRIPT (bench/make_sam_data.sh) must be defined by the build"
#endif

static char work_dir[256];       /* the run's files in /dev/shm, removed at exit */
static char data_dir[PATH_MAX - 64]; /* cached data under the build directory */
static int repeats = 3;
static long read_counts[8];
static int n_counts;
static int data_limit_s = 600;

#define MAX_CLIENTS 4
/* Clients run side by side in the "2 clients" operations. */
#define CLIENTS 2

/* Run `n` copies of argv at once with stdout to /dev/null (or, for one, to `out` when not
 * NULL); each must exit 0, else die. Returns the wall-clock seconds from the first fork to
 * the last exit. */
static double run_n(char *const argv[], const char *out, int n)
{
    fflush(NULL);
    uint64_t t0 = bench_now_ns();
    pid_t pids[MAX_CLIENTS];
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        if (pids[i] < 0) {
            perror("bench_samjmp: fork");
            exit(1);
        }
        if (pids[i] == 0) {
            int fd = open(out ? out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0600);
            if (fd < 0 || dup2(fd, 1) < 0)
                _exit(126);
            execvp(argv[0], argv);
            _exit(127);
        }
    }
    int failed = 0, st = 0;
    for (int i = 0; i < n; i++) {
        int one;
        while (waitpid(pids[i], &one, 0) < 0)
            if (errno != EINTR) {
                perror("bench_samjmp: waitpid");
                exit(1);
            }
        if (!WIFEXITED(one) || WEXITSTATUS(one) != 0) {
            failed = 1;
            st = one;
        }
    }
    double s = (double)(bench_now_ns() - t0) / 1e9;
    if (failed) {
        fprintf(stderr, "bench_samjmp: %s", argv[0]);
        for (int i = 1; argv[i]; i++)
            fprintf(stderr, " %s", argv[i]);
        fprintf(stderr, " failed (status 0x%x)\n", st);
        exit(1);
    }
    return s;
}

static double run(char *const argv[], const char *out)
{
    return run_n(argv, out, 1);
}

static void emit(long reads, const char *tool, const char *op, double s)
{
    char p[256], bp[256];
    snprintf(p, sizeof p, "\"reads\": %ld, \"tool\": \"%s\", \"op\": \"%s\"", reads, tool, op);
    const char *base_tool = strcmp(tool, "samjmp-vas") == 0    ? "samtools-sam"
                            : strcmp(tool, "samjmp-mmap") == 0 ? "samjmp-vas"
                                                               : NULL;
    if (!base_tool) {
        bench_emit("samjmp_op", "s", s, p, NULL, NULL);
        return;
    }
    snprintf(bp, sizeof bp, "\"reads\": %ld, \"tool\": \"%s\", \"op\": \"%s\"", reads, base_tool,
             op);
    bench_emit_against("samjmp_op", "s", s, p, "samjmp_op", bp, NULL);
}

static void path_in(char *out, const char *name)
{
    snprintf(out, PATH_MAX, "%s/%s", work_dir, name);
}

/* One repeat of samtools on SAM or BAM; with `threads`, BAM with -@ threads-1 helpers
 * (BGZF compression and decompression, sort blocks), the multi-threaded peer. */
static void samtools_repeat(long reads, int bam, int threads)
{
    const char *tool = !bam ? "samtools-sam" : threads > 1 ? "samtools-bam-2t" : "samtools-bam";
    char in[PATH_MAX], sorted[PATH_MAX], extra[16];
    path_in(in, bam ? "in.bam" : "in.sam");
    path_in(sorted, bam ? "sorted.bam" : "sorted.sam");
    snprintf(extra, sizeof extra, "%d", threads > 1 ? threads - 1 : 0);
    double total = 0, s;
    s = run((char *[]){ "samtools", "flagstat", "-@", extra, in, NULL }, NULL);
    emit(reads, tool, "flagstat", s);
    total += s;
    s = run_n((char *[]){ "samtools", "flagstat", "-@", extra, in, NULL }, NULL, CLIENTS);
    emit(reads, tool, "flagstat-2clients", s);
    s = run((char *[]){ "samtools", "sort", "-@", extra, "-O", bam ? "bam" : "sam", "-o", sorted,
                        in, NULL },
            NULL);
    emit(reads, tool, "sort", s);
    total += s;
    if (bam) {
        s = run((char *[]){ "samtools", "index", "-@", extra, sorted, NULL }, NULL);
        emit(reads, tool, "index", s);
        total += s;
    }
    s = run((char *[]){ "samtools", "depth", "-@", extra, "-a", sorted, NULL }, NULL);
    emit(reads, tool, "pileup", s);
    total += s;
    emit(reads, tool, "pipeline", total);
    s = run((char *[]){ "samtools", "sort", "-n", "-@", extra, "-O", bam ? "bam" : "sam", "-o",
                        sorted, in, NULL },
            NULL);
    emit(reads, tool, "qname-sort", s);
}

/* One repeat of samjmp in a VAS or an mmap'd file. */
static void samjmp_repeat(long reads, int mmap_store)
{
    const char *tool = mmap_store ? "samjmp-mmap" : "samjmp-vas";
    char in[PATH_MAX];
    path_in(in, "in.sam");
    /* argv: samjmp [--mmap DIR] CMD [FILE] STORE */
    char *argv[8];
    int a = 0;
    argv[a++] = SAMJMP_BIN;
    if (mmap_store) {
        argv[a++] = "--mmap";
        argv[a++] = work_dir;
    }
    static const char *const ops[] = { "load", "sort", "index", "flagstat", "pileup" };
    double total = 0;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        int k = a;
        argv[k++] = (char *)ops[i];
        if (i == 0)
            argv[k++] = in;
        argv[k++] = "st";
        argv[k] = NULL;
        double s = run(argv, NULL);
        emit(reads, tool, ops[i], s);
        total += s;
        if (strcmp(ops[i], "flagstat") == 0) /* readers share the store */
            emit(reads, tool, "flagstat-2clients", run_n(argv, NULL, CLIENTS));
    }
    emit(reads, tool, "pipeline", total);
    argv[a] = "sort";
    argv[a + 1] = "-n";
    argv[a + 2] = "st";
    argv[a + 3] = NULL;
    emit(reads, tool, "qname-sort", run(argv, NULL));
    argv[a] = "drop";
    argv[a + 1] = "st";
    argv[a + 2] = NULL;
    run(argv, NULL);
}

/* The cached SAM of `reads` reads (made on first use), copied with its BAM into work_dir. */
static int stage_data(long reads)
{
    char n[32], lim[32], list[PATH_MAX];
    snprintf(n, sizeof n, "%ld", reads);
    snprintf(lim, sizeof lim, "%d", data_limit_s);
    path_in(list, "data-path");
    fprintf(stderr, "bench_samjmp: data for %ld reads (made once, then cached in %s)\n", reads,
            data_dir);
    double s = run((char *[]){ "bash", SAMJMP_DATA_SCRIPT, data_dir, n, lim, NULL }, list);
    fprintf(stderr, "bench_samjmp: data ready after %.1f s\n", s);
    char sam[PATH_MAX] = "", bam[PATH_MAX], dst[PATH_MAX];
    FILE *f = fopen(list, "r");
    if (!f || !fgets(sam, sizeof sam, f)) {
        if (f)
            fclose(f);
        return -1;
    }
    fclose(f);
    sam[strcspn(sam, "\n")] = 0;
    snprintf(bam, sizeof bam, "%.*s.bam", (int)(strlen(sam) - 4), sam);
    path_in(dst, "in.sam");
    run((char *[]){ "cp", sam, dst, NULL }, NULL);
    path_in(dst, "in.bam");
    run((char *[]){ "cp", bam, dst, NULL }, NULL);
    return 0;
}

static int body(void)
{
    for (int c = 0; c < n_counts; c++) {
        long reads = read_counts[c];
        if (stage_data(reads) != 0) {
            printf("{\"name\": \"skip\", \"params\": {\"reads\": %ld}, \"reason\": "
                   "\"make_sam_data.sh gave no data\"}\n", reads);
            continue;
        }
        printf("{\"name\": \"skip\", \"params\": {\"reads\": %ld, \"tool\": \"samtools-sam\", "
               "\"op\": \"index\"}, \"reason\": \"samtools cannot index a SAM text file\"}\n",
               reads);
        for (int r = 0; r < repeats; r++) {
            samtools_repeat(reads, 0, 1);
            samtools_repeat(reads, 1, 1);
            samtools_repeat(reads, 1, 2);
            samjmp_repeat(reads, 0);
            samjmp_repeat(reads, 1);
            fflush(stdout);
        }
    }
    return 0;
}

static void remove_work_dir(void)
{
    if (work_dir[0])
        bench_remove_tree(work_dir);
}

int main(int argc, char **argv)
{
    int quick = bench_has_flag(argc, argv, "--quick");
    if (quick)
        repeats = 2;
    static const struct option opts[] = {
        { "repeats", required_argument, NULL, 'r' }, { "reads", required_argument, NULL, 'n' },
        { "data-limit", required_argument, NULL, 'l' }, BENCH_COMMON_LONGOPTS
    };
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'r':
            repeats = (int)bench_positive(optarg);
            break;
        case 'n': {
            char *save = NULL;
            for (char *t = strtok_r(optarg, ",", &save); t && n_counts < 8;
                 t = strtok_r(NULL, ",", &save))
                read_counts[n_counts++] = bench_positive(t);
            break;
        }
        case 'l':
            data_limit_s = (int)bench_positive(optarg);
            break;
        case 'q':
            break;
        case 'h':
            printf("usage: bench_samjmp [--quick] [--repeats N] [--reads N,N...] "
                   "[--data-limit SECONDS]\n"
                   "  defaults: 1M and 2M reads, 3 repeats; --quick: 100K reads, 2 repeats\n");
            return 0;
        default:
            return 2;
        }
    }
    if (n_counts == 0) {
        if (quick)
            read_counts[n_counts++] = 100000;
        else {
            read_counts[n_counts++] = 1000000;
            read_counts[n_counts++] = 2000000;
        }
    }
    if (system("command -v samtools >/dev/null 2>&1") != 0) {
        fprintf(stderr, "bench_samjmp: samtools is not installed\n");
        return 77;
    }
    /* Cached data lives beside the build's bench/ directory: <build>/bench-data/sam. */
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0)
        return 1;
    exe[len] = 0;
    snprintf(data_dir, sizeof data_dir, "%s/../bench-data/sam", dirname(exe));
    snprintf(work_dir, sizeof work_dir, "/dev/shm/samjmp-bench-XXXXXX");
    if (!mkdtemp(work_dir)) {
        perror("bench_samjmp: mkdtemp");
        return 1;
    }
    atexit(remove_work_dir);
    int rc = bench_run_in_private_registry(body);
    return rc;
}
