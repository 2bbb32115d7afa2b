/* `exomem run --heap-segment SIZE [--page 4k|2m|1g] [--base ADDR] [--heap-in WHO] -- PROGRAM
 * [ARGS]`: run an
 * unmodified dynamically linked program with its malloc heap in one exomem segment.
 *
 * The segment is made for the run (in $EXOMEM_ROOT, or in a private temporary registry under
 * /dev/shm when that is unset) and libexomem_heap.so is preloaded into the program; it maps
 * the segment privately at its base and serves the malloc family from it (see
 * tools/heap_preload/heap_preload.c). Afterwards the segment (and a temporary registry) is
 * deleted, and the program's exit status is returned.
 */
#include "commands.h"

#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define HEAP_PRELOAD_NAME "libexomem_heap.so"
#define DEFAULT_HEAP_BASE UINT64_C(0x600000000000)   /* 1 GiB aligned, far from mmap's area */

const struct cli_cmd run_cmd = {
    "run", "--heap-segment SIZE [--page 4k|2m|1g] [--base ADDR] [--heap-in WHO] -- PROGRAM "
    "[ARGS]",
    "Run a program with its malloc heap in one segment.",
    "Creates a segment of SIZE bytes for the run and starts PROGRAM (an unmodified,\n"
    "dynamically linked program, looked up in PATH) with " HEAP_PRELOAD_NAME " preloaded:\n"
    "malloc, free, calloc, realloc, posix_memalign, aligned_alloc, memalign, valloc,\n"
    "pvalloc and malloc_usable_size are then served from that one contiguous segment.\n"
    "When the heap is full they fail with ENOMEM. A forked child gets a copy-on-write copy\n"
    "of the heap, as with the normal allocator. The segment is deleted when PROGRAM exits.\n\n"
    "By default only PROGRAM gets the heap: the programs it starts with exec run on the\n"
    "normal allocator. With --heap-in all each of them maps a fresh private heap of its own\n"
    "in the same range (with huge pages, SIZE more of the pool per program); with\n"
    "--heap-in NAME[,NAME...] only processes running one of the named programs do.\n\n"
    "The segment lives in $EXOMEM_ROOT if set, else in a private temporary registry\n"
    "(/dev/shm/exomem-run-*) removed afterwards. The program sees EXOMEM_HEAP_SEGMENT,\n"
    "EXOMEM_HEAP_BASE and EXOMEM_HEAP_SIZE. " HEAP_PRELOAD_NAME " is taken from\n"
    "$EXOMEM_HEAP_PRELOAD, else from the directory of the exomem binary or ../lib,\n"
    "else the dynamic loader's search path.\n\n"
    "Options:\n"
    "  --heap-segment SIZE  heap size, e.g. 64M, 1G; a multiple of the page size (required)\n"
    "  --page PAGE          page size: 4k (default), 2m or 1g; 2m and 1g need hugetlbfs\n"
    "                       and a huge page pool of SIZE\n"
    "  --base ADDR          base address of the heap (default 0x600000000000)\n"
    "  --heap-in WHO        first (default): PROGRAM only; all: every program it starts\n"
    "                       too; or a comma-separated list of program names\n\n"
    "Exit status: PROGRAM's, or 128+N if it was killed by signal N; 127 if it could not\n"
    "be started (126 if not executable); else the codes of 'exomem --help'.\n\n"
    "Example:\n"
    "  exomem run --heap-segment 256M --page 2m -- sort big.txt\n"
    "  exomem run --heap-segment 1G --page 1g --heap-in hpcc -- mpirun -np 2 hpcc\n",
};

/* Where libexomem_heap.so is: $EXOMEM_HEAP_PRELOAD, next to this binary, in ../lib, or
 * (the bare name) wherever the dynamic loader finds it. */
static void find_preload(char *out, size_t cap)
{
    const char *env = getenv("EXOMEM_HEAP_PRELOAD");
    if (env && *env) {
        snprintf(out, cap, "%s", env);
        return;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            static const char *const dirs[] = {"", "/../lib", "/../lib64"};
            for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
                int n = snprintf(out, cap, "%s%s/%s", exe, dirs[i], HEAP_PRELOAD_NAME);
                if (n > 0 && (size_t)n < cap && access(out, R_OK) == 0)
                    return;
            }
        }
    }
    snprintf(out, cap, "%s", HEAP_PRELOAD_NAME);
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    remove(path);
    return 0;
}

/* The program's pid while it runs, for passing on termination signals. */
static volatile sig_atomic_t child_pid;

static void forward_signal(int sig)
{
    if (child_pid > 0)
        kill((pid_t)child_pid, sig);
}

/* In the child: set up the environment and exec the program; never returns. */
static void exec_program(char **prog, const char *seg_name, uint64_t base, uint64_t size,
                         const char *heap_in, const char *preload)
{
    char num[32];
    setenv("EXOMEM_HEAP_SEGMENT", seg_name, 1);
    setenv("EXOMEM_HEAP_IN", heap_in, 1);
    snprintf(num, sizeof num, "%#" PRIx64, base);
    setenv("EXOMEM_HEAP_BASE", num, 1);
    snprintf(num, sizeof num, "%" PRIu64, size);
    setenv("EXOMEM_HEAP_SIZE", num, 1);
    /* Ours first, so that its malloc wins over any other preloaded one. */
    const char *old = getenv("LD_PRELOAD");
    size_t len = strlen(preload) + (old ? strlen(old) : 0) + 2;
    char *list = malloc(len);
    if (list) {
        snprintf(list, len, "%s%s%s", preload, old && *old ? ":" : "", old ? old : "");
        setenv("LD_PRELOAD", list, 1);
    }
    execvp(prog[0], prog);
    int err = errno;
    fprintf(stderr, "exomem: run: cannot execute %s: %s\n", prog[0], strerror(err));
    _exit(err == ENOENT ? 127 : 126);
}

/* --heap-in: "first", "all", or program names separated by commas, none empty or with '/'. */
static bool heap_in_ok(const char *s)
{
    if (strcmp(s, "first") == 0 || strcmp(s, "all") == 0)
        return true;
    if (!*s || *s == ',' || s[strlen(s) - 1] == ',' || strstr(s, ",,"))
        return false;
    return strpbrk(s, "/ \t") == NULL;
}

/* Run the program to its end; returns its exit status as a shell reports it. */
static int run_program(char **prog, const char *seg_name, uint64_t base, uint64_t size,
                       const char *heap_in)
{
    char preload[PATH_MAX];
    find_preload(preload, sizeof preload);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "exomem: run: fork: %s\n", strerror(errno));
        return CLI_EXIT_FAIL;
    }
    if (pid == 0)
        exec_program(prog, seg_name, base, size, heap_in, preload);

    /* Terminal signals reach the program directly; the others are passed on. Either way
     * this process lives on to delete the segment. */
    child_pid = pid;
    struct sigaction ign = {.sa_handler = SIG_IGN}, fwd = {.sa_handler = forward_signal};
    struct sigaction old_int, old_quit, old_term, old_hup;
    sigaction(SIGINT, &ign, &old_int);
    sigaction(SIGQUIT, &ign, &old_quit);
    sigaction(SIGTERM, &fwd, &old_term);
    sigaction(SIGHUP, &fwd, &old_hup);
    int status = 0;
    pid_t got;
    while ((got = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
        ;
    child_pid = 0;
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGHUP, &old_hup, NULL);
    if (got < 0) {
        fprintf(stderr, "exomem: run: waitpid: %s\n", strerror(errno));
        return CLI_EXIT_FAIL;
    }
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

/* Create the heap segment, run the program, delete the segment. */
static int run_with_segment(char **prog, uint64_t base, uint64_t size, uint64_t page,
                            const char *heap_in)
{
    char name[EXOMEM_NAME_MAX + 1];
    snprintf(name, sizeof name, "heap-run-%ld", (long)getpid());
    /* No reservation: the program maps the segment privately, so its data file never holds
     * the heap's memory (a hugetlbfs mapping reserves its pages in the program instead). */
    struct seg_opts opts = {.page_size = page, .flags = SEG_NORESERVE};
    segid_t sid;
    int rc = seg_alloc_ex(name, base, size, 0600, &opts, &sid);
    if (rc)
        return cli_fail(rc, "run: cannot create heap segment '%s'", name);
    int status = run_program(prog, name, base, size, heap_in);
    rc = seg_delete(sid);
    if (rc) {
        int code = cli_fail(rc, "run: cannot delete heap segment '%s'", name);
        return status ? status : code;
    }
    return status;
}

int run_run(int argc, char **argv)
{
    int dd = 1;
    while (dd < argc && strcmp(argv[dd], "--") != 0)
        dd++;
    const char *heap_s = NULL, *page_s = NULL, *base_s = NULL, *in_s = NULL;
    const struct cli_opt opts[] = {
        {"heap-segment", &heap_s, NULL},
        {"page", &page_s, NULL},
        {"base", &base_s, NULL},
        {"heap-in", &in_s, NULL},
    };
    const char *pos[1];
    size_t npos;
    int rc = cli_parse(&run_cmd, dd - 1, argv + 1, opts, sizeof opts / sizeof opts[0], pos, 0, 0,
                       &npos);
    if (rc != CLI_CONTINUE)
        return rc;
    if (dd + 1 >= argc)
        return cli_usage(&run_cmd, "missing '-- PROGRAM'");
    if (!heap_s)
        return cli_usage(&run_cmd, "missing option --heap-segment");
    uint64_t size, page = SEG_PAGE_4K, base = DEFAULT_HEAP_BASE;
    if (!cli_parse_size(heap_s, &size) || size == 0)
        return cli_usage(&run_cmd, "bad size '%s'", heap_s);
    if (page_s && !cli_parse_page(page_s, &page))
        return cli_usage(&run_cmd, "bad page size '%s' (4k, 2m or 1g)", page_s);
    if (base_s && !cli_parse_addr(base_s, &base))
        return cli_usage(&run_cmd, "bad address '%s'", base_s);
    if (in_s && !heap_in_ok(in_s))
        return cli_usage(&run_cmd, "bad --heap-in '%s' (first, all, or program names "
                         "separated by commas)", in_s);

    /* Without a registry of the user's choosing, a private one for this run alone. */
    char tmp_root[] = "/dev/shm/exomem-run-XXXXXX";
    const char *root = getenv("EXOMEM_ROOT");
    bool private_root = !root || !*root;
    if (private_root) {
        if (!mkdtemp(tmp_root)) {
            fprintf(stderr, "exomem: run: cannot create a registry in /dev/shm: %s\n",
                    strerror(errno));
            return CLI_EXIT_FAIL;
        }
        setenv("EXOMEM_ROOT", tmp_root, 1);
    }
    int status = run_with_segment(argv + dd + 1, base, size, page, in_s ? in_s : "first");
    if (private_root)
        nftw(tmp_root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return status;
}
