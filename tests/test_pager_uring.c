/* The io_uring file store (exo_pager_store_file_uring): the same results as the plain file
 * store, call by call, over one file (reads past the end, holes, discard, usage); a region
 * over it keeps what is written through evictions with every policy, both deliveries, 4 KiB
 * and 2 MiB units, and several threads faulting at once; a region over it and then over the
 * plain store on the same file (and back) sees the same data; a failing store gives the
 * documented SIGBUS (pager_failures_scenario), and an EIO injected in the os layer's ring
 * read or write is retried and served; threads calling at once get rings of their own, and
 * close frees them; bad arguments are refused, and a kernel that refuses io_uring gives
 * -EXO_ENOTSUP with the reason (injected, and for real with kernel.io_uring_disabled when
 * this process may set it). Where io_uring is not available the parts that need it are
 * skipped, saying so. */
#include "harness.h"
#include "pager_fixture.h"
#include "os/os.h"
#include "pager/store_file.h"

#include <dirent.h>
#include <exomem/pager.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)
#define UNIT (4 * KIB)

static char path[512], dir_path[512];

static exo_pager_store *uring_store(void)
{
    exo_pager_store *s = NULL;
    unlink(path);
    CHECK_OK(exo_pager_store_file_uring(path, 0, &s));
    return s;
}

static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    CHECK(d != NULL);
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* ---- what needs no io_uring ---- */

static void bad_arguments(void)
{
    exo_pager_store *s = NULL;
    CHECK_ERR(exo_pager_store_file_uring(NULL, 0, &s), EXO_EINVAL);
    CHECK(strstr(exomem_last_error(), "NULL") != NULL);
    CHECK_ERR(exo_pager_store_file_uring(path, 0, NULL), EXO_EINVAL);
    CHECK_ERR(exo_pager_store_file_uring(path, 4097, &s), EXO_EINVAL);
    CHECK(strstr(exomem_last_error(), "queue depth 4097") != NULL);
    CHECK(s == NULL);
}

/* io_uring_setup refused, as the os layer would see it: -EXO_ENOTSUP, the reason, and no
 * file made. */
static void refused_by_injection(void)
{
    exo_pager_store *s = NULL;
    unlink(path);
    exo_os_fault_arm(EXO_FAULT_OPEN, 1, ENOSYS);
    CHECK_ERR(exo_pager_store_file_uring(path, 0, &s), EXO_ENOTSUP);
    exo_os_fault_disarm();
    CHECK(strstr(exomem_last_error(), "io_uring is not available") != NULL);
    CHECK(strstr(exomem_last_error(), "built without io_uring") != NULL);
    exo_os_fault_arm(EXO_FAULT_OPEN, 1, EPERM);
    CHECK_ERR(exo_pager_store_file_uring(path, 0, &s), EXO_ENOTSUP);
    exo_os_fault_disarm();
    CHECK(strstr(exomem_last_error(), strerror(EPERM)) != NULL);
    CHECK(strstr(exomem_last_error(), "kernel.io_uring_disabled") != NULL ||
          strstr(exomem_last_error(), "seccomp") != NULL);
    struct stat st;
    CHECK(stat(path, &st) != 0 && errno == ENOENT);
    CHECK(s == NULL);
}

/* The kernel's own refusal: kernel.io_uring_disabled = 2 for as long as one constructor
 * call takes (root only), then put back. The sysctl is machine-wide: another process making
 * a ring in those microseconds would be refused too (nothing else in the suite uses
 * io_uring). */
static void refused_by_sysctl(void)
{
    const char *knob = "/proc/sys/kernel/io_uring_disabled";
    int fd = open(knob, O_RDWR);
    char old = 0;
    if (fd < 0 || pread(fd, &old, 1, 0) != 1) {
        fprintf(stderr, "kernel.io_uring_disabled cannot be set here: the real refusal is "
                "not tried\n");
        if (fd >= 0)
            close(fd);
        return;
    }
    exo_pager_store *s = NULL;
    int rc = pwrite(fd, "2", 1, 0) == 1 ? exo_pager_store_file_uring(path, 0, &s) : 1;
    int put_back = pwrite(fd, &old, 1, 0) == 1;
    close(fd);
    CHECK(put_back);
    CHECK(rc != 1);
    CHECK_EQ(rc, -EXO_ENOTSUP);
    CHECK(strstr(exomem_last_error(), "kernel.io_uring_disabled is 2") != NULL);
}

/* ---- the store itself, against the plain file store ---- */

/* Units written (and one discarded) through one kind of store, then read through a fresh
 * store of each kind over the file: every result and every byte the same. (Each store knows
 * the file's end as it found it and as it wrote it: two stores over one file at the same
 * time do not see each other's growth, for either kind.) */
static void same_as_plain(void)
{
    static char buf[2][UNIT], data[UNIT];
    unlink(path);
    for (int round = 0; round < 2; round++) {
        exo_pager_store *w, *both[2];
        if (round == 0)
            w = uring_store();
        else
            CHECK_OK(exo_pager_store_file(path, &w));
        for (uint64_t unit = 0; unit < 16; unit += 3) {
            memset(data, 'a' + (int)unit + round, UNIT);
            CHECK_OK(exo_pager_store_write(w, unit, UNIT, data));
        }
        CHECK_OK(exo_pager_store_discard(w, 6, UNIT));
        CHECK_OK(exo_pager_store_discard(w, 100, UNIT)); /* past the end: nothing */
        uint64_t units;
        CHECK_OK(exo_pager_store_usage(w, NULL, &units));
        CHECK_EQ(units, 6);
        CHECK_OK(exo_pager_store_close(w));
        CHECK_OK(exo_pager_store_file_uring(path, 1, &both[0]));
        CHECK_OK(exo_pager_store_file(path, &both[1]));
        for (uint64_t unit = 0; unit < 20; unit++) {
            int rc[2];
            for (int k = 0; k < 2; k++) {
                memset(buf[k], 'x', UNIT);
                rc[k] = exo_pager_store_read(both[k], unit, UNIT, buf[k]);
            }
            if (rc[0] != rc[1] || (rc[0] == 0 && memcmp(buf[0], buf[1], UNIT) != 0)) {
                fprintf(stderr, "round %d unit %llu: io_uring %d, plain %d\n", round,
                        (unsigned long long)unit, rc[0], rc[1]);
                exit(1);
            }
            /* A written unit reads back, a hole or discarded unit as zeros, past the end as
             * never written. */
            char want = unit % 3 == 0 && unit != 6 ? (char)('a' + unit + round) : 0;
            if (unit < 16)
                CHECK(rc[0] == 0 && buf[0][0] == want && buf[0][UNIT - 1] == want);
            else
                CHECK_EQ(rc[0], -EXO_ENOENT);
        }
        uint64_t bytes[2];
        for (int k = 0; k < 2; k++)
            CHECK_OK(exo_pager_store_usage(both[k], &bytes[k], NULL));
        CHECK_EQ(bytes[0], bytes[1]);
        CHECK(bytes[0] >= 5 * UNIT);
        for (int k = 0; k < 2; k++)
            CHECK_OK(exo_pager_store_close(both[k]));
    }
    /* A file cut short inside a unit: the rest of the unit reads as zeros from both. */
    CHECK_OK(truncate(path, 15 * UNIT + 100));
    exo_pager_store *again[2];
    CHECK_OK(exo_pager_store_file_uring(path, 1, &again[0]));
    CHECK_OK(exo_pager_store_file(path, &again[1]));
    for (int k = 0; k < 2; k++) {
        memset(buf[k], 'x', UNIT);
        CHECK_OK(exo_pager_store_read(again[k], 15, UNIT, buf[k]));
        CHECK(buf[k][99] == 'a' + 15 + 1 && buf[k][100] == 0 && buf[k][UNIT - 1] == 0);
        CHECK_EQ(exo_pager_store_read(again[k], 16, UNIT, buf[k]), -EXO_ENOENT);
        CHECK_OK(exo_pager_store_close(again[k]));
    }
}

/* Threads calling the store at once (no region in between to serialise them): each keeps
 * its own units, which all read back; they got rings of their own. */
struct caller {
    exo_pager_store *s;
    int id;
};

static void *caller_main(void *arg)
{
    struct caller *c = arg;
    static _Thread_local char buf[UNIT], back[UNIT];
    for (int i = 0; i < 3000; i++) {
        uint64_t unit = (uint64_t)c->id * 8 + (uint64_t)i % 8;
        memset(buf, (char)(i + c->id), UNIT);
        CHECK_OK(exo_pager_store_write(c->s, unit, UNIT, buf));
        CHECK_OK(exo_pager_store_read(c->s, unit, UNIT, back));
        CHECK(memcmp(buf, back, UNIT) == 0);
    }
    return NULL;
}

static void callers_at_once(void)
{
    enum { CALLERS = 4 };
    int fds = open_fds();
    exo_pager_store *s = uring_store();
    CHECK_EQ(exo_pager_uring_rings(s), 1);
    struct caller c[CALLERS];
    pthread_t t[CALLERS];
    for (int i = 0; i < CALLERS; i++) {
        c[i] = (struct caller){s, i};
        CHECK_OK(pthread_create(&t[i], NULL, caller_main, &c[i]));
    }
    for (int i = 0; i < CALLERS; i++)
        CHECK_OK(pthread_join(t[i], NULL));
    unsigned rings = exo_pager_uring_rings(s);
    fprintf(stderr, "%d threads calling at once: %u rings\n", CALLERS, rings);
    CHECK(rings >= 1 && rings <= CALLERS);
    if (sysconf(_SC_NPROCESSORS_ONLN) >= 2)
        CHECK(rings >= 2);
    CHECK(open_fds() > fds);
    CHECK_OK(exo_pager_store_close(s));
    CHECK_EQ(open_fds(), fds); /* the rings and the file are closed */
}

/* ---- regions over the store ---- */

static void every_config(void)
{
    exo_pager_policy policies[] = {EXO_PAGER_FIFO, EXO_PAGER_CLOCK, EXO_PAGER_LRU,
                                   EXO_PAGER_MRU, EXO_PAGER_CUSTOM};
    int n = 0;
    for (int d = 0; d < 2; d++)
        for (int pi = 0; pi < 5; pi++) {
            exo_pager_delivery del = d ? EXO_PAGER_SIGBUS : EXO_PAGER_THREADS;
            exo_pager_store *s = uring_store();
            pager_one_config(s, "file-uring", policies[pi], EXO_PAGER_TABLE_RADIX, UNIT, del,
                             96, 16);
            CHECK_OK(exo_pager_store_close(s));
            s = uring_store();
            pager_one_config(s, "file-uring", policies[pi], EXO_PAGER_TABLE_HASH, 2 * MIB, del,
                             12, 3);
            CHECK_OK(exo_pager_store_close(s));
            n += 2;
        }
    for (int d = 0; d < 2; d++)
        for (int pi = 0; pi < 2; pi++) {
            exo_pager_store *s = uring_store();
            pager_many_threads(s, d ? EXO_PAGER_SIGBUS : EXO_PAGER_THREADS,
                               pi ? EXO_PAGER_CLOCK : EXO_PAGER_FIFO);
            CHECK_OK(exo_pager_store_close(s));
            n++;
        }
    fprintf(stderr, "io_uring store: %d regions written, evicted and read back\n", n);
}

/* One region over the file through `uring` or the plain store: checks round `expect`
 * (0: nothing to check), discards units [8, 10) when asked, writes round `write`, and
 * leaves it all in the file. */
static void region_over_file(int uring, exo_pager_delivery delivery, uint64_t expect,
                             uint64_t write, int discard)
{
    exo_pager_store *s;
    if (uring)
        CHECK_OK(exo_pager_store_file_uring(path, 2, &s));
    else
        CHECK_OK(exo_pager_store_file(path, &s));
    exo_pager_options o = {.size = 64 * UNIT, .budget = 8 * UNIT, .delivery = delivery,
                           .policy = EXO_PAGER_CLOCK, .store = s};
    exo_pager *p;
    CHECK_OK(exo_pager_create(&o, &p));
    uint64_t *base = exo_pager_base(p);
    if (expect)
        pager_check_all(base, o.size, UNIT, expect);
    if (discard) {
        CHECK_OK(exo_pager_discard(p, (char *)base + 8 * UNIT, 2 * UNIT));
        for (size_t off = 8 * UNIT; off < 10 * UNIT; off += 8)
            CHECK_EQ(base[off / 8], 0);
    }
    if (write)
        pager_write_all(base, o.size, UNIT, write);
    CHECK_OK(exo_pager_destroy(p));
    CHECK_OK(exo_pager_store_close(s));
}

static void switch_stores(void)
{
    for (int d = 0; d < 2; d++) {
        exo_pager_delivery del = d ? EXO_PAGER_SIGBUS : EXO_PAGER_THREADS;
        unlink(path);
        region_over_file(1, del, 0, 1, 0); /* io_uring writes round 1 */
        region_over_file(0, del, 1, 2, 0); /* the plain store sees it, writes round 2 */
        region_over_file(1, del, 2, 3, 0); /* and back */
        region_over_file(0, del, 3, 0, 1); /* the plain store punches a hole ... */
        exo_pager_store *s;
        CHECK_OK(exo_pager_store_file_uring(path, 0, &s));
        static char buf[UNIT];
        memset(buf, 'x', UNIT);
        CHECK_OK(exo_pager_store_read(s, 9, UNIT, buf)); /* ... which io_uring reads as 0 */
        CHECK(buf[0] == 0 && buf[UNIT - 1] == 0);
        CHECK_OK(exo_pager_store_read(s, 10, UNIT, buf));
        CHECK_EQ(((uint64_t *)buf)[0], pager_stamp(10 * UNIT, 3));
        CHECK_OK(exo_pager_store_close(s));
    }
}

/* The os layer's ring read or write fails once with EIO: the pager's retry serves the
 * fault (or the eviction) all the same, and counts the error. */
static void os_eio(exo_pager_delivery delivery)
{
    exo_pager_store *s = uring_store();
    exo_pager_options o = {.size = 16 * UNIT, .budget = 4 * UNIT, .delivery = delivery,
                           .store = s};
    exo_pager *p;
    CHECK_OK(exo_pager_create(&o, &p));
    char *base = exo_pager_base(p);
    for (int u = 0; u < 4; u++)
        memset(base + (size_t)u * UNIT, 'A' + u, UNIT);
    exo_pager_stats before, after;
    CHECK_OK(exo_pager_get_stats(p, &before));
    exo_os_fault_arm(EXO_FAULT_WRITE, 1, EIO);
    CHECK_OK(exo_pager_advise(p, base, 4 * UNIT, EXO_PAGER_DONTNEED, 0));
    CHECK(exo_os_fault_fired());
    exo_os_fault_disarm();
    CHECK_OK(exo_pager_get_stats(p, &after));
    CHECK_EQ(after.store_errors, before.store_errors + 1);
    CHECK_EQ(after.writebacks, before.writebacks + 4);
    CHECK_EQ(after.resident_bytes, 0);
    exo_os_fault_arm(EXO_FAULT_READ, 1, EIO);
    char c = 0;
    CHECK(!pager_read_faults(base + 2 * UNIT, &c)); /* served on the retry */
    CHECK(exo_os_fault_fired());
    CHECK(exo_os_fault_calls(EXO_FAULT_READ) >= 2); /* the ring read went through src/os */
    exo_os_fault_disarm();
    CHECK_EQ(c, 'C');
    CHECK_OK(exo_pager_get_stats(p, &before));
    CHECK_EQ(before.store_errors, after.store_errors + 1);
    for (int u = 0; u < 4; u++)
        CHECK(base[(size_t)u * UNIT + UNIT - 1] == 'A' + u);
    CHECK_OK(exo_pager_destroy(p));
    CHECK_OK(exo_pager_store_close(s));
}

int main(void)
{
    const char *root = test_root_setup();
    snprintf(path, sizeof path, "%s/uring-store", root);
    snprintf(dir_path, sizeof dir_path, "%s/a-directory", root);
    bad_arguments();
    refused_by_injection();
    exo_pager_store *s = NULL;
    int rc = exo_pager_store_file_uring(path, 0, &s);
    if (rc == -EXO_ENOTSUP) {
        fprintf(stderr, "SKIPPED (io_uring is not available here): everything but bad "
                "arguments and the refusal: %s\n", exomem_last_error());
        printf("test_pager_uring: ok, io_uring parts skipped\n");
        return 0;
    }
    CHECK_OK(rc);
    CHECK_OK(exo_pager_store_close(s));
    refused_by_sysctl();
    /* Arguments that need a working ring to be reached. */
    CHECK_OK(mkdir(dir_path, 0700));
    CHECK_ERR(exo_pager_store_file_uring(dir_path, 0, &s), EXO_EINVAL);
    CHECK(strstr(exomem_last_error(), "not a regular file") != NULL);
    CHECK_ERR(exo_pager_store_file(dir_path, &s), EXO_EINVAL); /* as the plain store */
    CHECK_ERR(exo_pager_store_file_uring("/nonexistent-dir/x", 0, &s), EXO_ENOENT);
    CHECK_OK(exo_pager_store_file_uring(path, 4096, &s));
    CHECK_OK(exo_pager_store_close(s));
    rmdir(dir_path);
    same_as_plain();
    callers_at_once();

    const char *why = NULL;
    if (exo_vm_engine_supported(EXO_VM_ENGINE_UFFD, 0, &why) != 0) {
        fprintf(stderr, "SKIPPED (userfaultfd is not usable here: %s): the regions over the "
                "store\n", why ? why : "?");
        printf("test_pager_uring: ok, regions skipped\n");
        return 0;
    }
    pager_failures_install();
    every_config();
    switch_stores();
    for (int d = 0; d < 2; d++) {
        exo_pager_delivery del = d ? EXO_PAGER_SIGBUS : EXO_PAGER_THREADS;
        s = uring_store();
        pager_failures_scenario(s, del);
        CHECK_OK(exo_pager_store_close(s));
        os_eio(del);
    }
    unlink(path);
    printf("test_pager_uring: ok (%d SIGBUS seen)\n", pager_bus_errors());
    return 0;
}
