/* bench_launcher: unmodified Debian programs with their malloc heap in one segment
 * (`exomem run --heap-segment`), against the same binary run plainly and under libhugetlbfs's
 * `hugectl --heap`.
 *
 * Programs: hpcc (the HPC Challenge suite; its RandomAccess tests are TLB-bound) and `xz -9`
 * (LZMA's bt4 match finder walks hash chains and binary trees spread over hundreds of MiB
 * of malloc'd tables). Variants, all with the same binary and arguments:
 *   plain    the program as it is (glibc malloc; THP is "madvise" here, so 4K pages)
 *   seg4k    exomem run --heap-segment 1G -- PROGRAM
 *   seg2m    exomem run --heap-segment 1G --page 2m -- PROGRAM
 *   seg1g    exomem run --heap-segment 1G --page 1g -- PROGRAM
 *   hugectl  hugectl --heap PROGRAM
 * Rounds interleave the variants, so that a change in the machine's load hits all alike.
 * Each run is checked (exit status; hpcc's "Success=1" and no FAILED line; xz's output must
 * equal the plain run's, which must decompress to the input); a failed run is reported with
 * a skip line, not timed. While a run goes on, its program's /proc/PID/smaps is sampled for
 * the resident size of the heap range and of the huge pages it holds, which shows where its
 * heap really was.
 *
 * Huge pages (root): a temporary hugetlbfs mount per page size, and pool pages for two or
 * three heaps (see heaps_per_run), reserved per program and given back afterwards, also
 * after SIGTERM/SIGINT/SIGHUP. Each program first runs once plainly, untimed, to warm the
 * page cache (and give xz's reference output).
 *
 * Usage: bench_launcher [--quick] [--repeats N]
 * Output: JSON lines (bench/run.py's protocol); exomem is taken from $EXOMEM_BIN or next to
 * the bench directory, the registry from $EXOMEM_ROOT.
 */
#include "bench_child.h"
#include "bench_util.h"
#include "os/os.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROG program_invocation_short_name

#define HEAP_BYTES (UINT64_C(1) << 30)        /* every segment variant: a 1 GiB heap */
#define HEAP_BASE UINT64_C(0x600000000000)    /* exomem run's default base */
/* Heaps' worth of huge pages one run may hold: the heap segment's data file reserves its
 * pages (seg_alloc's trial mapping), and so does the program's private mapping of it. (The
 * MPI daemon hpcc execs, orted, no longer maps a heap: `exomem run` gives the heap to the
 * launched program only.) huge_reserve adds one page per extra heap for copy-on-write. */
static const long heaps_per_run[2] = {2, 2};   /* hpcc, xz */
#define RUN_TIMEOUT_S 600
#define SAMPLE_MS 200

enum variant { V_PLAIN, V_SEG4K, V_SEG2M, V_SEG1G, V_HUGECTL, N_VARIANTS };
static const char *const variant_names[N_VARIANTS] = {"plain", "seg4k", "seg2m", "seg1g",
                                                      "hugectl"};

enum program { P_HPCC, P_XZ, N_PROGRAMS };
static const char *const program_names[N_PROGRAMS] = {"hpcc", "xz"};

/* A variant that cannot run at all: why (NULL when it can). */
static const char *variant_skip[N_VARIANTS];

static char exomem_bin[PATH_MAX];
static char workdir[] = "/tmp/exomem-bench-launcher-XXXXXX";
static bool have_workdir;

/* ---- huge page mounts and pools, undone at exit and on termination signals ---- */

struct huge_setup {
    uint64_t page;
    const char *env;          /* the variable exomem reads the mount from */
    char mount[PATH_MAX];     /* "" if none */
    bool mounted_here;        /* a temporary mount of ours, to unmount */
    long saved_pool;          /* for exo_os_pool_restore, -1: untouched */
};
static struct huge_setup huge[2] = {
    {.page = SEG_PAGE_2M, .env = "EXOMEM_HUGETLBFS_2M", .saved_pool = -1},
    {.page = SEG_PAGE_1G, .env = "EXOMEM_HUGETLBFS_1G", .saved_pool = -1},
};

static void huge_release(struct huge_setup *h);

static volatile sig_atomic_t stop_requested;
static volatile pid_t running_pgid;

static void on_stop_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
    if (running_pgid > 0)
        kill(-running_pgid, SIGTERM);
}

static void cleanup(void)
{
    for (int i = 0; i < 2; i++) {
        struct huge_setup *h = &huge[i];
        huge_release(h);
        if (h->mounted_here) {
            if (umount2(h->mount, MNT_DETACH) != 0)
                fprintf(stderr, "%s: umount %s: %s\n", PROG, h->mount, strerror(errno));
            rmdir(h->mount);
            h->mounted_here = false;
        }
    }
    if (have_workdir)
        bench_remove_tree(workdir);
    have_workdir = false;
}

/* A hugetlbfs mount of h->page ($EXOMEM_HUGETLBFS_*, else made in the work directory when
 * root, else one found mounted). NULL when there is one, else why not. */
static const char *huge_mount(struct huge_setup *h)
{
    const char *env = getenv(h->env);
    if (env && *env) {
        snprintf(h->mount, sizeof h->mount, "%s", env);
    } else if (geteuid() != 0) {
        /* Someone else's mount will do; as root a private one cannot go away meanwhile. */
        if (exo_os_find_hugetlbfs(h->page, h->mount, sizeof h->mount) != 0)
            return "no hugetlbfs mount of this page size (and not root to make one)";
    } else {
        snprintf(h->mount, sizeof h->mount, "%s/huge-%s", workdir,
                 h->page == SEG_PAGE_2M ? "2m" : "1g");
        char opts[32];
        snprintf(opts, sizeof opts, "pagesize=%s", h->page == SEG_PAGE_2M ? "2M" : "1G");
        if (mkdir(h->mount, 0700) != 0 || mount("none", h->mount, "hugetlbfs", 0, opts) != 0) {
            h->mount[0] = '\0';
            return "cannot mount hugetlbfs for this page size";
        }
        h->mounted_here = true;
    }
    setenv(h->env, h->mount, 1);
    return NULL;
}

/* Free pool pages for `heaps` heaps of HEAP_BYTES, and some for the copy-on-write copies
 * forked children make of heap pages before they exec: with 1G pages a whole 1 GiB each
 * (and a child that cannot get one dies), so one per extra process. NULL when ready, else
 * why not. */
static const char *huge_reserve(struct huge_setup *h, long heaps)
{
    long need = heaps * (long)(HEAP_BYTES / h->page) + (h->page == SEG_PAGE_2M ? 16 : heaps - 1);
    switch (exo_os_pool_reserve(h->page, need, &h->saved_pool)) {
    case 0: return NULL;
    case -EXO_EPERM: return "huge page pool too small (and not root)";
    case -EXO_ENOHUGE: return "the kernel cannot grow the huge page pool enough (memory "
                              "fragmented?)";
    default: return "no huge page pool of this page size";
    }
}

/* Touch the free pool pages once (through a private huge page mapping) so that a virtual
 * machine's first-touch cost of fresh memory is not charged to whichever run gets them. */
static void huge_prefault(const struct huge_setup *h, long heaps)
{
    size_t bytes = (size_t)heaps * HEAP_BYTES;
    int shift = h->page == SEG_PAGE_2M ? 21 : 30;
    char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | (shift << MAP_HUGE_SHIFT), -1, 0);
    if (p == MAP_FAILED)
        return;   /* best effort: the pages are someone else's now */
    for (size_t off = 0; off < bytes; off += 4096)
        p[off] = 1;
    munmap(p, bytes);
}

/* Free pages again after a run found too few (others share the pool): like huge_reserve,
 * keeping the pool size to give back from the first reservation. */
static void huge_topup(struct huge_setup *h, long heaps)
{
    long first = h->saved_pool;
    huge_reserve(h, heaps);
    if (first >= 0)
        h->saved_pool = first;
}

static void huge_release(struct huge_setup *h)
{
    if (h->saved_pool >= 0 && exo_os_pool_restore(h->page, h->saved_pool) != 0)
        fprintf(stderr, "%s: cannot restore the huge page pool to %ld pages\n", PROG,
                h->saved_pool);
    h->saved_pool = -1;
}

/* ---- the programs' inputs ---- */

static bool on_path(const char *name)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", name);
    return system(cmd) == 0;
}

static void write_file(const char *name, const char *text, size_t len)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", workdir, name);
    FILE *f = fopen(path, "w");
    if (!f || fwrite(text, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "%s: cannot write %s: %s\n", PROG, path, strerror(errno));
        exit(1);
    }
}

/* hpcc's input: one 1x1 process grid and matrix order n. HPL's n also sizes the local
 * tests: RandomAccess gets the smallest power-of-two table above n*n*4 bytes. */
static void write_hpccinf(int n)
{
    char text[2048];
    int len = snprintf(text, sizeof text,
        "HPLinpack benchmark input file\nexomem bench_launcher\nHPL.out\n8\n"
        "1 # of problems sizes (N)\n%d Ns\n1 # of NBs\n80 NBs\n"
        "0 PMAP process mapping (0=Row-,1=Column-major)\n1 # of process grids (P x Q)\n"
        "1 Ps\n1 Qs\n16.0 threshold\n1 # of panel fact\n2 PFACTs\n"
        "1 # of recursive stopping criterium\n4 NBMINs\n1 # of panels in recursion\n"
        "2 NDIVs\n1 # of recursive panel fact.\n1 RFACTs\n1 # of broadcast\n1 BCASTs\n"
        "1 # of lookahead depth\n1 DEPTHs\n2 SWAP\n64 swapping threshold\n0 L1 in\n"
        "0 U  in\n1 Equilibration\n8 memory alignment in double\n"
        "##### This line (no. 32) is ignored (it serves as a separator). ######\n"
        "0 Number of additional problem sizes for PTRANS\n1200 values of N\n"
        "0 number of additional blocking sizes for PTRANS\n40 values of NB\n", n);
    write_file("hpccinf.txt", text, (size_t)len);
}

/* xz's input: `bytes` of text made of words from a fixed pseudo-random vocabulary, so
 * that it compresses like prose (about 2.6:1) and is the same on every machine. */
static void write_text(size_t bytes)
{
    enum { WORDS = 20000 };
    static char vocab[WORDS][12];
    uint64_t x = 88172645463325252u;
#define NEXT() (x ^= x << 13, x ^= x >> 7, x ^= x << 17, x)
    for (int w = 0; w < WORDS; w++) {
        int len = 2 + (int)(NEXT() % 9);
        for (int i = 0; i < len; i++)
            vocab[w][i] = (char)('a' + NEXT() % 26);
        vocab[w][len] = '\0';
    }
    char *text = malloc(bytes + 16);
    if (!text)
        exit(1);
    size_t n = 0;
    for (int col = 0; n < bytes; col = (col + 1) % 12) {
        const char *w = vocab[NEXT() % WORDS];
        size_t len = strlen(w);
        memcpy(text + n, w, len < bytes - n ? len : bytes - n);
        n += len < bytes - n ? len : bytes - n;
        if (n < bytes)
            text[n++] = col == 11 ? '\n' : ' ';
    }
#undef NEXT
    write_file("input.txt", text, bytes);
    free(text);
}

/* ---- one run ---- */

struct run_result {
    bool ok;
    char why[256];          /* when not ok */
    double wall_s, cpu_s;
    double heap_mib;        /* peak resident size of the heap range */
    double hugetlb_mib;     /* peak huge pages (hugetlbfs) held by the program */
    double gups[3];         /* hpcc: Single, Star, MPI RandomAccess GUP/s */
    char note[256];         /* what libhugetlbfs said about the heap */
    bool unmapped;          /* failed: a process could not map its heap (pool too short) */
};

static const char *const gups_keys[3] = {"SingleRandomAccess_GUPs=", "StarRandomAccess_GUPs=",
                                         "MPIRandomAccess_GUPs="};
static const char *const gups_tests[3] = {"SingleRandomAccess", "StarRandomAccess",
                                          "MPIRandomAccess"};

/* The process to watch: the forked one, or, under `exomem run`, the program it started. */
static pid_t program_pid(pid_t pid)
{
    for (int depth = 0; depth < 4; depth++) {
        char path[64], comm[64] = "";
        snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
        FILE *f = fopen(path, "r");
        if (!f)
            return pid;
        if (!fgets(comm, sizeof comm, f))
            comm[0] = '\0';
        fclose(f);
        if (strncmp(comm, "exomem\n", 7) != 0)
            return pid;
        snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
        f = fopen(path, "r");
        int child = 0;
        if (!f || fscanf(f, "%d", &child) != 1 || child <= 0) {
            if (f)
                fclose(f);
            return 0;
        }
        fclose(f);
        pid = child;
    }
    return pid;
}

/* One look at the program's smaps: resident KiB of the heap range, hugetlbfs KiB in all. */
static void sample_smaps(pid_t pid, struct run_result *r)
{
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/smaps", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    bool in_heap = false;
    double heap_kb = 0, huge_kb = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long long lo, hi;
        char *colon = strchr(line, ':');
        /* A mapping's header, "LO-HI perms offset dev inode path" (dev has a colon too). */
        if (sscanf(line, "%llx-%llx ", &lo, &hi) == 2 && strchr(line, '-') < colon) {
            in_heap = lo == HEAP_BASE;
            continue;
        }
        if (!colon)
            continue;
        double kb = strtod(colon + 1, NULL);
        bool hugetlb = !strncmp(line, "Private_Hugetlb:", 16) ||
                       !strncmp(line, "Shared_Hugetlb:", 15);
        if (hugetlb)
            huge_kb += kb;
        if (in_heap && (hugetlb || !strncmp(line, "Rss:", 4)))
            heap_kb += kb;
    }
    fclose(f);
    if (heap_kb / 1024 > r->heap_mib)
        r->heap_mib = heap_kb / 1024;
    if (huge_kb / 1024 > r->hugetlb_mib)
        r->hugetlb_mib = huge_kb / 1024;
}

static void build_argv(enum program p, enum variant v, const char **argv)
{
    int n = 0;
    static const char *const pages[N_VARIANTS] = {[V_SEG2M] = "2m", [V_SEG1G] = "1g"};
    if (v == V_SEG4K || v == V_SEG2M || v == V_SEG1G) {
        argv[n++] = exomem_bin;
        argv[n++] = "run";
        argv[n++] = "--heap-segment";
        argv[n++] = "1G";
        if (pages[v]) {
            argv[n++] = "--page";
            argv[n++] = pages[v];
        }
        argv[n++] = "--";
    } else if (v == V_HUGECTL) {
        argv[n++] = "hugectl";
        argv[n++] = "--heap";
    }
    if (p == P_HPCC) {
        argv[n++] = "hpcc";
    } else {
        argv[n++] = "xz";
        argv[n++] = "-9";
        argv[n++] = "-T1";
        argv[n++] = "-c";
        argv[n++] = "input.txt";
    }
    argv[n] = NULL;
}

/* Start argv in the work directory, stdout and stderr to files; run it to its end. */
static void run_command(const char **argv, const char *out, const char *err, bool watch,
                        struct run_result *r, int *status)
{
    uint64_t t0 = bench_now_ns();
    pid_t pid = bench_spawn(argv, workdir, out, err, NULL);
    if (pid < 0) {
        fprintf(stderr, "%s: fork: %s\n", PROG, strerror(errno));
        exit(1);
    }
    running_pgid = pid;
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    uint64_t limit = t0 + (uint64_t)RUN_TIMEOUT_S * 1000000000u;
    while (pidfd >= 0) {
        struct pollfd pfd = {.fd = pidfd, .events = POLLIN};
        int n = poll(&pfd, 1, SAMPLE_MS);
        if (n > 0 || (n < 0 && errno != EINTR))
            break;
        if (bench_now_ns() > limit) {
            kill(-pid, SIGKILL);
            break;
        }
        if (watch) {
            pid_t prog = program_pid(pid);
            if (prog > 0)
                sample_smaps(prog, r);
        }
    }
    struct rusage ru;
    pid_t got;
    while ((got = wait4(pid, status, 0, &ru)) < 0 && errno == EINTR)
        ;
    r->wall_s = (double)(bench_now_ns() - t0) / 1e9;
    running_pgid = 0;
    if (pidfd >= 0)
        close(pidfd);
    if (got < 0) {
        *status = -1;
        return;
    }
    r->cpu_s = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
               (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* The last non-empty line of a file (for a failure's reason), or "". */
static void last_line(const char *path, char *out, size_t cap)
{
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0] && snprintf(out, cap, "%s", line) >= (int)cap)
            out[cap - 1] = '\0';   /* cut short: enough to say what went wrong */
    }
    fclose(f);
}

static bool file_contains(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    char line[512];
    bool found = false;
    while (f && !found && fgets(line, sizeof line, f))
        found = strstr(line, needle) != NULL;
    if (f)
        fclose(f);
    return found;
}

static bool files_equal(const char *a, const char *b)
{
    FILE *fa = fopen(a, "r"), *fb = fopen(b, "r");
    bool same = fa && fb;
    while (same) {
        int ca = getc(fa), cb = getc(fb);
        if (ca != cb)
            same = false;
        if (ca == EOF || cb == EOF)
            break;
    }
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    return same;
}

/* hpcc's verdict from hpccoutf.txt: Success=1, no FAILED check; the GUP/s it measured. */
static void check_hpcc(struct run_result *r)
{
    char path[PATH_MAX], line[512];
    snprintf(path, sizeof path, "%s/hpccoutf.txt", workdir);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(r->why, sizeof r->why, "hpcc wrote no hpccoutf.txt");
        return;
    }
    bool success = false, failed = false;
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "Success=1", 9))
            success = true;
        if (strstr(line, "FAILED"))
            failed = true;
        for (int i = 0; i < 3; i++)
            if (!strncmp(line, gups_keys[i], strlen(gups_keys[i]))) {
                r->gups[i] = strtod(line + strlen(gups_keys[i]), NULL);
                found++;
            }
    }
    fclose(f);
    if (!success || failed || found != 3)
        snprintf(r->why, sizeof r->why, "hpcc reported %s", failed ? "a FAILED check"
                 : !success ? "no Success=1" : "no RandomAccess GUP/s");
    else
        r->ok = true;
}

static bool have_xz_reference;

/* xz's output must equal the plain run's, and that one must decompress to the input. */
static void check_xz(const char *out, struct run_result *r)
{
    char ref[PATH_MAX + 16], input[PATH_MAX + 16], back[PATH_MAX + 16];
    snprintf(ref, sizeof ref, "%s/reference.xz", workdir);
    if (!have_xz_reference) {
        snprintf(input, sizeof input, "%s/input.txt", workdir);
        snprintf(back, sizeof back, "%s/roundtrip.txt", workdir);
        const char *argv[] = {"xz", "-dc", out, NULL};
        struct run_result dr = {0};
        int status;
        run_command(argv, back, "/dev/null", false, &dr, &status);
        if (status != 0 || !files_equal(back, input)) {
            snprintf(r->why, sizeof r->why, "xz output does not decompress to the input");
            return;
        }
        remove(back);
        if (rename(out, ref) != 0) {
            snprintf(r->why, sizeof r->why, "cannot keep the reference output");
            return;
        }
        have_xz_reference = true;
        r->ok = true;
        return;
    }
    if (!files_equal(out, ref))
        snprintf(r->why, sizeof r->why, "xz output differs from the plain run's");
    else
        r->ok = true;
}

/* What libhugetlbfs said about the heap (HUGETLB_VERBOSE=3 lines naming morecore). */
static void hugectl_note(const char *err, struct run_result *r)
{
    FILE *f = fopen(err, "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char *m = strstr(line, "morecore");
        char *msg = strstr(line, "INFO: ");
        if (!m)
            continue;
        msg = msg ? msg + 6 : line;
        msg[strcspn(msg, "\n")] = '\0';
        for (char *c = msg; *c; c++)   /* the note goes into JSON as it is */
            if (*c == '"' || *c == '\\')
                *c = '\'';
        snprintf(r->note, sizeof r->note, "libhugetlbfs: %.230s", msg);
        break;
    }
    fclose(f);
}

static void run_one(enum program p, enum variant v, struct run_result *r)
{
    memset(r, 0, sizeof *r);
    const char *argv[20];
    build_argv(p, v, argv);
    char out[PATH_MAX + 16], err[PATH_MAX + 16], hpccout[PATH_MAX + 16];
    snprintf(out, sizeof out, "%s/out.%s", workdir, variant_names[v]);
    snprintf(err, sizeof err, "%s/err.%s", workdir, variant_names[v]);
    snprintf(hpccout, sizeof hpccout, "%s/hpccoutf.txt", workdir);
    remove(hpccout);   /* hpcc appends to it */
    int status;
    run_command(argv, out, err, true, r, &status);
    if (stop_requested) {
        snprintf(r->why, sizeof r->why, "stopped by a signal");
        return;
    }
    if (v == V_HUGECTL)
        hugectl_note(err, r);
    if (status != 0) {
        r->unmapped = file_contains(err, "libexomem_heap: cannot map");
        char tail[200];
        last_line(err, tail, sizeof tail);
        for (char *c = tail; *c; c++)
            if (*c == '"' || *c == '\\' || (unsigned char)*c < 32)
                *c = '\'';
        snprintf(r->why, sizeof r->why, "run failed (%s %d): %.180s",
                 WIFSIGNALED(status) ? "signal" : "exit status",
                 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), tail);
        return;
    }
    if (p == P_HPCC)
        check_hpcc(r);
    else
        check_xz(out, r);
}

/* ---- output ---- */

static void emit(const char *name, const char *unit, double value, enum program p,
                 enum variant v, const char *extra, const char *note)
{
    printf("{\"name\":\"%s\",\"unit\":\"%s\",\"value\":%.6g,\"params\":{\"program\":\"%s\","
           "\"variant\":\"%s\"%s}", name, unit, value, program_names[p], variant_names[v],
           extra);
    if (v != V_PLAIN && strcmp(unit, "MiB") != 0)
        printf(",\"baseline\":\"%s\",\"baseline_params\":{\"program\":\"%s\",\"variant\":"
               "\"plain\"%s}", name, program_names[p], extra);
    if (note && *note)
        printf(",\"note\":\"%s\"", note);
    printf("}\n");
    fflush(stdout);
}

static void emit_skip(enum program p, enum variant v, const char *reason)
{
    printf("{\"name\":\"skip\",\"params\":{\"program\":\"%s\",\"variant\":\"%s\"},"
           "\"reason\":\"%s\"}\n", program_names[p], variant_names[v], reason);
    fflush(stdout);
}

static void report(enum program p, enum variant v, const struct run_result *r)
{
    if (!r->ok) {
        emit_skip(p, v, r->why);
        return;
    }
    emit("launcher_seconds", "s", r->wall_s, p, v, "", r->note);
    emit("launcher_cpu_seconds", "s", r->cpu_s, p, v, "", NULL);
    emit("launcher_heap_resident", "MiB", r->heap_mib, p, v, "", NULL);
    emit("launcher_hugetlb", "MiB", r->hugetlb_mib, p, v, "", NULL);
    if (p == P_HPCC)
        for (int i = 0; i < 3; i++) {
            char extra[64];
            snprintf(extra, sizeof extra, ",\"test\":\"%s\"", gups_tests[i]);
            emit("hpcc_gups", "GUP/s", r->gups[i], p, v, extra, NULL);
        }
}

/* ---- main ---- */

static void find_exomem(void)
{
    const char *env = getenv("EXOMEM_BIN");
    if (env && *env) {
        snprintf(exomem_bin, sizeof exomem_bin, "%s", env);
        return;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        fprintf(stderr, "%s: cannot find myself: %s\n", PROG, strerror(errno));
        exit(1);
    }
    exe[n] = '\0';
    *strrchr(exe, '/') = '\0';      /* BUILD/bench */
    char *up = strrchr(exe, '/');   /* BUILD */
    if (up)
        *up = '\0';
    if (snprintf(exomem_bin, sizeof exomem_bin, "%s/exomem", exe) >= (int)sizeof exomem_bin)
        exomem_bin[0] = '\0';
}

int main(int argc, char **argv)
{
    int repeats = 5;
    bool quick = bench_parse_args(argc, argv, &repeats, 1, NULL);
    find_exomem();
    if (access(exomem_bin, X_OK) != 0) {
        fprintf(stderr, "%s: no exomem binary at %s (set EXOMEM_BIN)\n", PROG, exomem_bin);
        return 1;
    }
    if (!mkdtemp(workdir)) {
        fprintf(stderr, "%s: mkdtemp: %s\n", PROG, strerror(errno));
        return 1;
    }
    have_workdir = true;
    atexit(cleanup);
    struct sigaction sa = {.sa_handler = on_stop_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    /* hpcc: one process, one BLAS thread; libhugetlbfs says what it does with the heap. */
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    setenv("OMP_NUM_THREADS", "1", 1);
    setenv("HUGETLB_VERBOSE", "3", 1);

    bool have_program[N_PROGRAMS] = {on_path("hpcc"), on_path("xz")};
    write_hpccinf(quick ? 1200 : 3000);         /* RandomAccess tables of 8 / 64 MiB */
    write_text(quick ? (size_t)1 << 20 : (size_t)4 << 20);
    if (!on_path("hugectl"))
        variant_skip[V_HUGECTL] = "hugectl is not installed (Debian package libhugetlbfs-bin)";
    const char *no_mount[2] = {huge_mount(&huge[0]), huge_mount(&huge[1])};

    for (int p = 0; p < N_PROGRAMS; p++) {
        if (!have_program[p]) {
            emit_skip(p, V_PLAIN, p == P_HPCC ? "hpcc is not installed (Debian package hpcc)"
                                              : "xz is not installed (Debian package xz-utils)");
            continue;
        }
        /* 1G pages first: they need contiguous memory, which 2M pages would break up. */
        long heaps = heaps_per_run[p];
        variant_skip[V_SEG1G] = no_mount[1] ? no_mount[1] : huge_reserve(&huge[1], heaps);
        variant_skip[V_SEG2M] = no_mount[0] ? no_mount[0] : huge_reserve(&huge[0], heaps);
        for (int i = 0; i < 2 && !quick; i++)   /* (a few seconds: not for a smoke test) */
            if (!variant_skip[i == 0 ? V_SEG2M : V_SEG1G])
                huge_prefault(&huge[i], heaps);
        for (int v = 0; v < N_VARIANTS; v++)
            if (variant_skip[v])
                emit_skip(p, v, variant_skip[v]);
        have_xz_reference = false;
        struct run_result warm;
        run_one(p, V_PLAIN, &warm);
        if (!warm.ok && !stop_requested)
            fprintf(stderr, "%s: %s: warm-up run failed: %s\n", PROG, program_names[p], warm.why);
        for (int rep = 0; rep < repeats && !stop_requested; rep++)
            for (int v = 0; v < N_VARIANTS && !stop_requested; v++) {
                if (variant_skip[v])
                    continue;
                struct run_result r;
                run_one(p, v, &r);
                if (r.unmapped && (v == V_SEG2M || v == V_SEG1G)) {
                    /* Another program took the pool's pages meanwhile: once more. */
                    fprintf(stderr, "%s: %s %s: %s; retrying\n", PROG, program_names[p],
                            variant_names[v], r.why);
                    huge_topup(&huge[v == V_SEG2M ? 0 : 1], heaps);
                    run_one(p, v, &r);
                }
                fprintf(stderr, "%s: %s %s: %s %.2f s wall, %.2f s cpu, heap %.0f MiB, "
                        "hugetlb %.0f MiB%s%s\n", PROG, program_names[p], variant_names[v],
                        r.ok ? "ok" : "FAILED", r.wall_s, r.cpu_s, r.heap_mib, r.hugetlb_mib,
                        r.ok && !r.note[0] ? "" : "; ", r.ok ? r.note : r.why);
                if (!stop_requested)
                    report(p, v, &r);
            }
        huge_release(&huge[0]);
        huge_release(&huge[1]);
    }
    cleanup();
    return stop_requested ? 1 : 0;
}
