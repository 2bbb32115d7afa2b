/* Publishing pager statistics for other processes (publish.h). */
#include "pager/publish.h"
#include "internal.h"
#include "os/os.h"
#include "pager/pager_internal.h"
#include "seg/registry.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static atomic_uint_fast64_t next_serial;

static int pub_path(char *buf, size_t len, int pid, uint64_t serial)
{
    return exo_reg_path(buf, len, "pager/%d-%llu.stats", pid, (unsigned long long)serial);
}

void exo_pager_publish(struct exo_pager *p, exo_pager_table table)
{
    p->stats = &p->own_stats;
    p->pub = NULL;
    /* Publishing is best effort: the region works without it, so its errors are dropped. */
    char path[EXO_PATH_MAX];
    uint64_t serial = atomic_fetch_add(&next_serial, 1);
    int pid = exo_os_pid();
    uint64_t start = 0;
    if (exo_reg_open_extra("pager", true) != 0 || pub_path(path, sizeof path, pid, serial) ||
        exo_os_process_start(pid, &start) != 0) {
        exo_clear_error();
        return;
    }
    int fd = exo_os_open(path, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return;
    uint64_t addr = 0;
    int rc = exo_os_size_file(fd, sizeof(struct exo_pager_pub), false);
    if (!rc)
        rc = exo_os_map_file(fd, sizeof(struct exo_pager_pub), true, &addr);
    exo_os_close(fd);
    if (rc) {
        exo_os_unlink(path);
        return;
    }
    struct exo_pager_pub *pub = (struct exo_pager_pub *)(uintptr_t)addr;
    pub->version = EXO_PAGER_PUB_VERSION;
    pub->pid = pid;
    pub->start_time = start;
    pub->serial = serial;
    pub->base = p->base;
    pub->size = p->size;
    pub->unit = p->unit;
    pub->policy = (uint32_t)p->policy;
    pub->table = (uint32_t)table;
    pub->delivery = (uint32_t)p->delivery;
    pub->threads = p->delivery == EXO_PAGER_THREADS ? p->nthreads : 0;
    snprintf(pub->store, sizeof pub->store, "%s", p->store->kind);
    pub->stats = p->own_stats;
    memcpy(pub->magic, EXO_PAGER_PUB_MAGIC, 8); /* last: a reader skips a record without it */
    p->pub = pub;
    p->stats = &pub->stats;
}

void exo_pager_unpublish(struct exo_pager *p)
{
    struct exo_pager_pub *pub = p->pub;
    if (!pub)
        return;
    char path[EXO_PATH_MAX];
    if (pub_path(path, sizeof path, pub->pid, pub->serial) == 0)
        exo_os_unlink(path);
    p->own_stats = pub->stats;
    p->stats = &p->own_stats;
    p->pub = NULL;
    exo_os_unmap((uint64_t)(uintptr_t)pub, sizeof *pub);
}

struct visit {
    int pid;
    bool alive;
    uint64_t start;
    uint64_t serials[256];
    size_t count;
};

/* Collect the serials of pid's records ("<pid>-<serial>.stats"). */
static int collect(const char *name, void *arg)
{
    struct visit *v = arg;
    int pid;
    unsigned long long serial;
    char tail[8];
    if (sscanf(name, "%d-%llu%7s", &pid, &serial, tail) == 3 && pid == v->pid &&
        strcmp(tail, ".stats") == 0 && v->count < sizeof v->serials / sizeof v->serials[0])
        v->serials[v->count++] = serial;
    return 0;
}

static int by_serial(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int exo_pager_published_each(int pid, void (*each)(const struct exo_pager_pub *rec, void *arg),
                             void *arg)
{
    int rc = exo_reg_open_extra("pager", false);
    if (rc == -EXO_ENOENT)
        return exo_fail(EXO_ENOENT, "process %d has no pager region (no region was ever "
                        "published in %s)", pid, exomem_root());
    if (rc)
        return rc;
    char dir[EXO_PATH_MAX], path[EXO_PATH_MAX];
    if ((rc = exo_reg_path(dir, sizeof dir, "pager")) != 0)
        return rc;
    struct visit v = {.pid = pid};
    v.alive = exo_os_process_start(pid, &v.start) == 0;
    if ((rc = exo_os_dir_each(dir, collect, &v)) < 0)
        return exo_fail(-rc, "cannot read %s", dir);
    qsort(v.serials, v.count, sizeof v.serials[0], by_serial);
    int shown = 0;
    for (size_t i = 0; i < v.count; i++) {
        if (pub_path(path, sizeof path, pid, v.serials[i]) != 0)
            continue;
        struct exo_pager_pub rec;
        int fd = exo_os_open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
        if (fd < 0)
            continue;
        struct stat st;
        bool ok = exo_os_fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
                  exo_os_pread_all(fd, &rec, sizeof rec, 0) == 0 &&
                  memcmp(rec.magic, EXO_PAGER_PUB_MAGIC, 8) == 0 &&
                  rec.version == EXO_PAGER_PUB_VERSION && rec.pid == pid;
        exo_os_close(fd);
        if (!ok)
            continue; /* being made, or not ours to read */
        if (!v.alive || rec.start_time != v.start) {
            exo_os_unlink(path); /* left by a process that is gone */
            continue;
        }
        each(&rec, arg);
        shown++;
    }
    if (!shown)
        return exo_fail(EXO_ENOENT, "process %d has no pager region%s", pid,
                        v.alive ? "" : " (no such process)");
    return shown;
}

struct list_out {
    exo_pager_info *out;
    size_t cap, count;
};

static void to_info(const struct exo_pager_pub *rec, void *arg)
{
    struct list_out *l = arg;
    if (l->count < l->cap) {
        exo_pager_info *i = &l->out[l->count];
        *i = (exo_pager_info){.pid = rec->pid, .base = rec->base, .size = rec->size,
                              .unit = rec->unit, .policy = (exo_pager_policy)rec->policy,
                              .table = (exo_pager_table)rec->table,
                              .delivery = (exo_pager_delivery)rec->delivery,
                              .threads = rec->threads, .stats = rec->stats};
        memcpy(i->store, rec->store, sizeof i->store);
        i->store[sizeof i->store - 1] = '\0';
    }
    l->count++;
}

EXO_API int exo_pager_list(int pid, exo_pager_info *out, size_t cap, size_t *count)
{
    exo_clear_error();
    if (!count || (!out && cap > 0))
        return exo_fail(EXO_EINVAL, "exo_pager_list: count is NULL, or out is NULL with cap %zu",
                        cap);
    if (pid <= 0)
        return exo_fail(EXO_EINVAL, "exo_pager_list: bad pid %d", pid);
    struct list_out l = {out, cap, 0};
    int rc = exo_pager_published_each(pid, to_info, &l);
    *count = l.count;
    return rc < 0 ? rc : 0;
}
