/* The fault walk (fault_walk.h). */
#include "fault_walk.h"
#include "os/os.h"

#include <exomem/exomem.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB (UINT64_C(1) << 20)
#define WALK_BASE UINT64_C(0x380000000000)  /* apart from tests' test_base() range */
#define CLI_MAX_N 64

/* --- snapshots: what must be as before after a failed operation --- */

struct text {
    char *buf;
    size_t len, cap;
};

static void text_add(struct text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char line[8192];
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof line)
        n = sizeof line - 1;
    if (t->len + (size_t)n + 1 > t->cap) {
        size_t cap = (t->cap + (size_t)n + 1) * 2;
        char *grown = realloc(t->buf, cap);
        if (!grown) {
            fprintf(stderr, "fault walk: out of memory\n");
            exit(1);
        }
        t->buf = grown;
        t->cap = cap;
    }
    memcpy(t->buf + t->len, line, (size_t)n + 1);
    t->len += (size_t)n;
}

static uint64_t file_hash(const char *path, const struct stat *st)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    if (st->st_size > (off_t)(8 * MIB))
        return h;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return h;
    unsigned char buf[65536];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)  /* hugetlbfs cannot be read: size only */
        for (ssize_t i = 0; i < n; i++)
            h = (h ^ buf[i]) * UINT64_C(0x100000001b3);
    close(fd);
    return h;
}

static void snap_tree(struct text *t, const char *dir)
{
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort);
    if (n < 0) {
        text_add(t, "%s: unreadable (%s)\n", dir, strerror(errno));
        return;
    }
    for (int i = 0; i < n; i++) {
        const char *e = names[i]->d_name;
        char path[4096];
        struct stat st;
        if (strcmp(e, ".") && strcmp(e, "..") &&
            snprintf(path, sizeof path, "%s/%s", dir, e) < (int)sizeof path &&
            lstat(path, &st) == 0) {
            text_add(t, "%s %o uid %u size %lld", path, (unsigned)st.st_mode, (unsigned)st.st_uid,
                     (long long)st.st_size);
            if (S_ISREG(st.st_mode)) {
                text_add(t, " hash %016llx\n", (unsigned long long)file_hash(path, &st));
            } else if (S_ISLNK(st.st_mode)) {
                char target[256];
                ssize_t len = readlink(path, target, sizeof target - 1);
                target[len > 0 ? len : 0] = '\0';
                text_add(t, " -> %s\n", target);
            } else {
                text_add(t, "\n");
                if (S_ISDIR(st.st_mode))
                    snap_tree(t, path);
            }
        }
        free(names[i]);
    }
    free(names);
}

static void snap_file_lines(struct text *t, const char *path, const char *must_contain)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    char line[1024];
    while (fgets(line, sizeof line, f))
        if (!must_contain || strstr(line, must_contain))
            text_add(t, "%s", line);
    fclose(f);
}

/* Whether the operation walked now may touch the huge page pools: only then are they part
 * of the snapshot (other programs on the machine may change them meanwhile; the suite
 * runs the tests that do so one at a time: tests/CMakeLists.txt, RESOURCE_LOCK). */
static bool walk_pools;

/* The registry, its private mounts and (walk_pools) the huge page pools. */
static void snap_registry(struct text *t)
{
    t->len = 0;
    text_add(t, "");
    snap_tree(t, exomem_root());
    snap_file_lines(t, "/proc/self/mounts", exomem_root());
    static const char *const pools[] = {"/sys/kernel/mm/hugepages/hugepages-2048kB",
                                        "/sys/kernel/mm/hugepages/hugepages-1048576kB"};
    static const char *const counts[] = {"nr_hugepages", "free_hugepages", "resv_hugepages"};
    for (size_t p = 0; p < 2 && walk_pools; p++)
        for (size_t c = 0; c < 3; c++) {
            char path[256];
            snprintf(path, sizeof path, "%s/%s", pools[p], counts[c]);
            text_add(t, "%s: ", path);
            snap_file_lines(t, path, NULL);
        }
}

/* Mappings the library could have made, clobbered or leaked (anonymous read-write ones
 * belong to malloc and are left out, as are the sanitizers' reservations), and the count
 * of open descriptors. */
static void snap_process(struct text *t)
{
    t->len = 0;
    text_add(t, "");
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        char perms[8] = "";
        unsigned long inode = 1;
        char path[512] = "";
        sscanf(line, "%*x-%*x %7s %*x %*s %lu %511s", perms, &inode, path);
        if (strstr(line, "[heap]") || (inode == 0 && !path[0] && !strcmp(perms, "rw-p")))
            continue;
#if defined(__SANITIZE_ADDRESS__)
        if (inode == 0 && !path[0])
            continue;
#endif
        text_add(t, "%s", line);
    }
    fclose(f);
    DIR *d = opendir("/proc/self/fd");
    int fds = 0;
    if (d) {
        while (readdir(d))
            fds++;
        closedir(d);
    }
    text_add(t, "descriptors: %d\n", fds - 1); /* less the directory's own */
    text_add(t, "current VAS: %d\n", vas_current());
}

/* Name the first line where two snapshots differ. */
static void first_difference(const struct text *a, const struct text *b, char *out, size_t len)
{
    const char *p = a->buf, *q = b->buf;
    while (*p && *p == *q) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) + 1 : strlen(p);
        if (strncmp(p, q, n) != 0)
            break;
        p += n;
        q += n;
    }
    snprintf(out, len, "before: %.70s | after: %.70s", *p ? p : "(end)", *q ? q : "(end)");
    for (char *c = out; *c; c++)
        if (*c == '\n')
            *c = ' ';
}

/* --- the operations --- */

struct ctx {
    segid_t s, src, made;
    vasid_t v, v2, made_v;
    vhandle_t vh, vh2;
    uint64_t page;
    unsigned flags;
    int engine;
    const char *bin;
    const char *cli_args[12];
};

struct op {
    const char *name;
    int (*prepare)(struct ctx *);   /* preconditions, made without faults */
    int (*run)(struct ctx *);       /* the operation under test */
    int (*undo)(struct ctx *);      /* after a success: back to the preconditions */
    void (*cleanup)(struct ctx *);
};

static uint64_t base_of(const struct ctx *c, int i)
{
    (void)c;
    return WALK_BASE + (uint64_t)i * (UINT64_C(1) << 32);
}

static uint64_t seg_size(const struct ctx *c)
{
    return c->page == SEG_PAGE_2M ? 2 * MIB : MIB;
}

static int alloc_named(struct ctx *c, const char *name, int i, segid_t *sid)
{
    struct seg_opts o = {.page_size = c->page ? c->page : SEG_PAGE_4K, .flags = c->flags};
    return seg_alloc_ex(name, base_of(c, i), seg_size(c), 0600, &o, sid);
}

static void drop_seg(const char *name)
{
    segid_t sid;
    if (seg_find(name, &sid) == 0)
        seg_delete(sid);
}

static void drop_vas(const char *name)
{
    vasid_t vid;
    if (vas_find(name, &vid) == 0)
        vas_delete(vid);
}

static int no_prepare(struct ctx *c) { (void)c; return 0; }
static void no_cleanup(struct ctx *c) { (void)c; }

/* seg_alloc_ex */
static int alloc_run(struct ctx *c) { return alloc_named(c, "walk-new", 0, &c->made); }
static int alloc_undo(struct ctx *c) { return seg_delete(c->made); }

/* seg_clone */
static int clone_prepare(struct ctx *c) { return alloc_named(c, "walk-src", 1, &c->src); }
static int clone_run(struct ctx *c) { return seg_clone(c->src, "walk-copy", &c->made); }
static void clone_cleanup(struct ctx *c) { seg_delete(c->src); }

/* seg_delete */
static int delete_prepare(struct ctx *c) { return alloc_named(c, "walk-del", 2, &c->s); }
static int delete_run(struct ctx *c) { return seg_delete(c->s); }
static void delete_cleanup(struct ctx *c) { (void)c; drop_seg("walk-del"); }

/* vas_create, vas_clone */
static int vcreate_run(struct ctx *c) { return vas_create("walk-vas", 0600, &c->made_v); }
static int vdelete_made(struct ctx *c) { return vas_delete(c->made_v); }
static int vclone_prepare(struct ctx *c)
{
    int rc = alloc_named(c, "walk-vseg", 3, &c->s);
    if (!rc)
        rc = vas_create("walk-vsrc", 0600, &c->v);
    return rc ? rc : seg_attach(c->v, c->s, SEG_RDWR);
}
static int vclone_run(struct ctx *c) { return vas_clone(c->v, "walk-vcopy", &c->made_v); }
static void vclone_cleanup(struct ctx *c)
{
    seg_detach(c->v, c->s);
    vas_delete(c->v);
    seg_delete(c->s);
}

/* seg_attach (to a VAS) */
static int sattach_prepare(struct ctx *c)
{
    int rc = alloc_named(c, "walk-aseg", 4, &c->s);
    return rc ? rc : vas_create("walk-avas", 0600, &c->v);
}
static int sattach_run(struct ctx *c) { return seg_attach(c->v, c->s, SEG_RDWR); }
static int sattach_undo(struct ctx *c) { return seg_detach(c->v, c->s); }
static void sattach_cleanup(struct ctx *c)
{
    vas_delete(c->v);
    seg_delete(c->s);
}

/* vas_attach, vas_detach */
static int vattach_run(struct ctx *c) { return vas_attach(c->v, &c->vh); }
static int vattach_undo(struct ctx *c) { return vas_detach(c->vh); }
static int vdetach_prepare(struct ctx *c)
{
    int rc = vclone_prepare(c);
    return rc ? rc : vas_attach(c->v, &c->vh);
}
static void vdetach_cleanup(struct ctx *c)
{
    vas_detach(c->vh);
    vclone_cleanup(c);
}

/* vas_switch: home -> A, with the segment's contents checked after every success. */
#define PATTERN UINT64_C(0x5eed0f0a17)
static int switch_prepare(struct ctx *c)
{
    int rc = vas_ctl(VAS_CTL_SET_ENGINE, 0, &c->engine);
    if (!rc)
        rc = vdetach_prepare(c);
    if (!rc)
        rc = vas_switch(c->vh);
    if (rc)
        return rc;
    for (uint64_t off = 0; off < seg_size(c); off += 4096)
        *(volatile uint64_t *)(base_of(c, 3) + off) = PATTERN ^ off;
    return vas_switch(VAS_HOME);
}
static int switch_run(struct ctx *c) { return vas_switch(c->vh); }
static int switch_undo(struct ctx *c)
{
    for (uint64_t off = 0; off < seg_size(c); off += 4096)
        if (*(volatile uint64_t *)(base_of(c, 3) + off) != (PATTERN ^ off))
            return -EXO_ECORRUPT;
    return vas_switch(VAS_HOME);
}
static void switch_cleanup(struct ctx *c)
{
    vas_switch(VAS_HOME);
    vdetach_cleanup(c);
    int park = VAS_ENGINE_PARK;
    vas_ctl(VAS_CTL_SET_ENGINE, 0, &park);
}

/* The CLI: exomem with EXOMEM_FAULT in its environment; 0 or its exit status. */
static char cli_fault[64];
static char cli_stderr[256];

static int cli_run(struct ctx *c)
{
    int err_fd = open(cli_stderr, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (err_fd < 0)
        return -EXO_EIO;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(err_fd, 2);
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0)
            dup2(null, 1);
        if (cli_fault[0])
            setenv("EXOMEM_FAULT", cli_fault, 1);
        else
            unsetenv("EXOMEM_FAULT");
        execv(c->bin, (char *const *)c->cli_args);
        _exit(127);
    }
    close(err_fd);
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) < 0)
        return -EXO_EIO;
    if (!WIFEXITED(status))
        return -EXO_EIO;
    return WEXITSTATUS(status) ? -WEXITSTATUS(status) : 0;
}

static void cli_set(struct ctx *c, const char *const *args)
{
    size_t i = 0;
    c->cli_args[i++] = c->bin;
    for (; args[i - 1] && i < 11; i++)
        c->cli_args[i] = args[i - 1];
    c->cli_args[i] = NULL;
}

static char cli_base[32];
static int cli_seg_create_prepare(struct ctx *c)
{
    snprintf(cli_base, sizeof cli_base, "%#llx", (unsigned long long)base_of(c, 5));
    const char *a[] = {"seg", "create", "walk-cli", "--base", cli_base, "--size", "1M",
                       "--mode", "0600", NULL};
    cli_set(c, a);
    return 0;
}
static int cli_seg_create_undo(struct ctx *c) { (void)c; drop_seg("walk-cli"); return 0; }
static int cli_seg_rm_prepare(struct ctx *c)
{
    const char *a[] = {"seg", "rm", "walk-cli", NULL};
    cli_set(c, a);
    return alloc_named(c, "walk-cli", 5, &c->s);
}
static int cli_seg_rm_undo(struct ctx *c) { return alloc_named(c, "walk-cli", 5, &c->s); }
static void cli_seg_cleanup(struct ctx *c) { (void)c; drop_seg("walk-cli"); }
static int cli_vas_create_prepare(struct ctx *c)
{
    const char *a[] = {"vas", "create", "walk-clivas", "--mode", "0600", NULL};
    cli_set(c, a);
    return 0;
}
static int cli_vas_create_undo(struct ctx *c) { (void)c; drop_vas("walk-clivas"); return 0; }
static int cli_vas_rm_prepare(struct ctx *c)
{
    const char *a[] = {"vas", "rm", "walk-clivas", NULL};
    cli_set(c, a);
    return vas_create("walk-clivas", 0600, &c->v);
}
static int cli_vas_rm_undo(struct ctx *c) { return vas_create("walk-clivas", 0600, &c->v); }
static void cli_vas_cleanup(struct ctx *c) { (void)c; drop_vas("walk-clivas"); }

/* --- the walk --- */

static const int all_errnos[] = {EIO, ENOSPC, ENOMEM, EACCES, EINTR};

static void broken(struct fault_walk_result *r, const char *fmt, ...)
{
    if (r->broken)
        return;
    r->broken = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->why, sizeof r->why, fmt, ap);
    va_end(ap);
}

static bool cli_message(void)
{
    struct stat st;
    return stat(cli_stderr, &st) == 0 && st.st_size > 0;
}

/* One fault: the operation run with the nth call of `kind` failing with err. */
static void one_fault(const struct op *op, struct ctx *c, struct fault_walk_result *r, int kind,
                      unsigned long nth, int err, bool cli, bool *fired)
{
    static struct text reg0, reg1, proc0, proc1;
    char diff[200];
    snap_registry(&reg0);
    snap_process(&proc0);
    int rc;
    if (cli) {
        snprintf(cli_fault, sizeof cli_fault, "%s:%lu:%d", exo_os_fault_kind_name(kind), nth,
                 err);
        rc = op->run(c);
        cli_fault[0] = '\0';
        *fired = rc != 0;
    } else {
        exo_os_fault_arm(kind, nth, err);
        rc = op->run(c);
        *fired = exo_os_fault_fired();
        exo_os_fault_disarm();
    }
    if (!*fired) {
        if (rc == 0 && op->undo(c) != 0)
            broken(r, "undo failed: %s", exomem_last_error());
        return;
    }
    r->injected++;
    if (rc == 0) {
        r->tolerated++;
        if (op->undo(c) != 0)
            broken(r, "%s:%lu:%d tolerated, then undo failed: %s", exo_os_fault_kind_name(kind),
                   nth, err, exomem_last_error());
        return;
    }
    const char *where = exo_os_fault_kind_name(kind);
    if (rc > 0 || (cli ? !cli_message() : exomem_last_error()[0] == '\0'))
        broken(r, "%s #%lu (errno %d): returned %d without a message", where, nth, err, rc);
    snap_registry(&reg1);
    if (strcmp(reg0.buf, reg1.buf) != 0) {
        first_difference(&reg0, &reg1, diff, sizeof diff);
        broken(r, "%s #%lu (errno %d): registry changed: %s", where, nth, err, diff);
    }
    snap_process(&proc1);
    if (strcmp(proc0.buf, proc1.buf) != 0) {
        first_difference(&proc0, &proc1, diff, sizeof diff);
        broken(r, "%s #%lu (errno %d): process changed: %s", where, nth, err, diff);
    }
    if ((rc = op->run(c)) != 0)
        broken(r, "%s #%lu (errno %d): the retry failed too: %s", where, nth, err,
               exomem_last_error());
    else if (op->undo(c) != 0)
        broken(r, "%s #%lu (errno %d): undo after the retry failed: %s", where, nth, err,
               exomem_last_error());
    if (!r->broken)
        r->failed_clean++;
}

static void walk_op(const struct op *op, struct ctx *c, bool quick, bool cli,
                    struct fault_walk_result *r)
{
    int rc = op->prepare(c);
    if (rc) {
        r->skipped = true;
        snprintf(r->why, sizeof r->why, "cannot prepare: %s", exomem_last_error());
        op->cleanup(c);
        return;
    }
    unsigned long calls[EXO_FAULT_KINDS] = {0};
    if (!cli) {
        exo_os_fault_arm(-1, 0, 0);   /* count only */
        rc = op->run(c);
        for (int k = 0; k < EXO_FAULT_KINDS; k++)
            r->calls += calls[k] = exo_os_fault_calls(k);
        exo_os_fault_disarm();
        if (rc || op->undo(c) != 0) {
            r->skipped = true;
            snprintf(r->why, sizeof r->why, "fails without a fault: %s", exomem_last_error());
            op->cleanup(c);
            return;
        }
    }
    size_t nerr = quick ? 1 : sizeof all_errnos / sizeof all_errnos[0];
    for (int k = 0; k < EXO_FAULT_KINDS && !r->broken; k++) {
        unsigned long last = cli ? CLI_MAX_N : calls[k];
        for (unsigned long n = 1; n <= last && !r->broken; n++) {
            bool any = false;
            for (size_t e = 0; e < nerr && !r->broken; e++) {
                bool fired;
                one_fault(op, c, r, k, n, all_errnos[e], cli, &fired);
                any |= fired;
            }
            if (cli && !any)
                break;  /* the command succeeded: it makes fewer calls of this kind */
        }
    }
    op->cleanup(c);
}

const char *fault_walk_cli_path(void)
{
    static char bin[4096];
    ssize_t n = readlink("/proc/self/exe", bin, sizeof bin - 16);
    char *slash = n > 0 ? (bin[n] = '\0', strrchr(bin, '/')) : NULL;
    if (slash) {
        strcpy(slash, "/../exomem");
        if (access(bin, X_OK) == 0)
            return bin;
    }
    fprintf(stderr, "note: no exomem command at %s: the CLI is not walked\n", bin);
    return NULL;
}

size_t fault_walk_all(const char *exomem_bin, bool quick, struct fault_walk_result *out,
                      size_t cap)
{
    static const struct op lib_ops[] = {
        {"seg_alloc_ex", no_prepare, alloc_run, alloc_undo, no_cleanup},
        {"seg_clone", clone_prepare, clone_run, alloc_undo, clone_cleanup},
        {"seg_delete", delete_prepare, delete_run, delete_prepare, delete_cleanup},
        {"vas_create", no_prepare, vcreate_run, vdelete_made, no_cleanup},
        {"vas_clone", vclone_prepare, vclone_run, vdelete_made, vclone_cleanup},
        {"seg_attach", sattach_prepare, sattach_run, sattach_undo, sattach_cleanup},
        {"vas_attach", vclone_prepare, vattach_run, vattach_undo, vclone_cleanup},
        {"vas_detach", vdetach_prepare, vattach_undo, vattach_run, vdetach_cleanup},
        {"vas_switch", switch_prepare, switch_run, switch_undo, switch_cleanup},
    };
    static const struct op cli_ops[] = {
        {"exomem seg create", cli_seg_create_prepare, cli_run, cli_seg_create_undo,
         cli_seg_cleanup},
        {"exomem seg rm", cli_seg_rm_prepare, cli_run, cli_seg_rm_undo, cli_seg_cleanup},
        {"exomem vas create", cli_vas_create_prepare, cli_run, cli_vas_create_undo,
         cli_vas_cleanup},
        {"exomem vas rm", cli_vas_rm_prepare, cli_run, cli_vas_rm_undo, cli_vas_cleanup},
    };
    struct variant {
        const char *label;
        uint64_t page;
        unsigned flags;
        int engine;
        bool switch_only, alloc_only;
    } variants[] = {
        {"4K", SEG_PAGE_4K, 0, VAS_ENGINE_PARK, false, false},
        {"4K remap", SEG_PAGE_4K, 0, VAS_ENGINE_REMAP, true, false},
        {"THP", SEG_PAGE_4K, SEG_THP, VAS_ENGINE_PARK, false, true},
        {"2M", SEG_PAGE_2M, 0, VAS_ENGINE_PARK, false, true},
    };
    snprintf(cli_stderr, sizeof cli_stderr, "%s/../walk-cli-stderr-%d", exomem_root(),
             (int)getpid());
    size_t n = 0;
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        for (size_t i = 0; i < sizeof lib_ops / sizeof lib_ops[0] && n < cap; i++) {
            bool is_switch = lib_ops[i].run == switch_run;
            bool is_alloc = lib_ops[i].run == alloc_run;
            if ((variants[v].switch_only && !is_switch) || (variants[v].alloc_only && !is_alloc))
                continue;
            struct ctx c = {.page = variants[v].page, .flags = variants[v].flags,
                            .engine = variants[v].engine};
            walk_pools = variants[v].page != SEG_PAGE_4K;
            struct fault_walk_result *r = &out[n++];
            memset(r, 0, sizeof *r);
            snprintf(r->op, sizeof r->op, "%s (%s%s)", lib_ops[i].name, variants[v].label,
                     is_switch && v == 0 ? " park" : "");
            if (variants[v].alloc_only && geteuid() != 0) {
                r->skipped = true;
                snprintf(r->why, sizeof r->why, "needs root (private mounts, pools)");
                continue;
            }
            walk_op(&lib_ops[i], &c, quick, false, r);
        }
    }
    for (size_t i = 0; exomem_bin && i < sizeof cli_ops / sizeof cli_ops[0] && n < cap; i++) {
        struct ctx c = {.page = SEG_PAGE_4K, .bin = exomem_bin};
        walk_pools = false;
        struct fault_walk_result *r = &out[n++];
        memset(r, 0, sizeof *r);
        snprintf(r->op, sizeof r->op, "%s", cli_ops[i].name);
        walk_op(&cli_ops[i], &c, quick, true, r);
    }
    unlink(cli_stderr);
    return n;
}
