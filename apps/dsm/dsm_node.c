/* dsm: one node (a process): the program's view with its fault handler, and the service
 * thread that answers the manager through the second view (see dsm.h, dsm_proto.h). */
#include "dsm.h"
#include "dsm_internal.h"
#include "dsm_proto.h"

#include <exomem/vm.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct dsm_node {
    int id, nodes;
    size_t pages;
    int fault_fd, svc_fd, timeout_ms;
    exo_vm_map2 map;          /* a: the program's view (protected); b: always read-write */
    exo_vm_region *region;    /* over map.a */
    _Atomic unsigned char *state; /* DSM_INVALID / DSM_READ_STATE / DSM_WRITE_STATE per page */
    pthread_t service;
    int service_started;
    /* counters: the handler and program thread write the first group, the service thread
     * the second, so no two threads write the same one. */
    uint64_t read_faults, write_faults, pages_received, work_ns;
    _Atomic uint64_t invalidations, pages_sent;
    struct dsm_msg fault_buf;   /* the fault channel's packet (handler or program thread) */
    struct dsm_msg service_buf; /* the service channel's packet */
};

/* Write a message to stderr from any context (signal handler included). */
static void say(const dsm_node *n, const char *what, int err)
{
    char buf[256];
    size_t k = 0;
    const char *parts[] = { "dsm: node ", NULL, ": ", what, ": ", NULL, "\n" };
    char id[4] = { (char)('0' + n->id / 10), (char)('0' + n->id % 10), 0 };
    parts[1] = n->id < 10 ? id + 1 : id;
    parts[5] = err == -ETIMEDOUT ? "no reply from the manager (timeout)"
             : err == -EPIPE    ? "the cluster broke (manager or a node is gone)"
             : err == -EPROTO   ? "malformed message" : "unexpected message";
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        for (const char *s = parts[i]; *s && k < sizeof buf; s++)
            buf[k++] = *s;
    ssize_t w = write(STDERR_FILENO, buf, k);
    (void)w;
}

static int access_of(int state)
{
    return state == DSM_WRITE_STATE ? EXO_VM_READWRITE
         : state == DSM_READ_STATE  ? EXO_VM_READONLY : EXO_VM_NOACCESS;
}

/* TRAP: ask the manager for the page, install what it sends, map it, confirm, resume. In
 * signal context: only sendmsg/poll/recv, memcpy and the protection calls. */
static exo_vm_action on_fault(exo_vm_fault *fault, void *arg)
{
    dsm_node *n = arg;
    char *base = n->map.a, *addr = fault->addr;
    if (addr < base || addr >= base + n->pages * DSM_PAGE)
        return EXO_VM_DECLINE;
    int saved_errno = errno;
    uint32_t page = (uint32_t)((size_t)(addr - base) / DSM_PAGE);
    int state = atomic_load(&n->state[page]);
    uint32_t want;
    if (state == DSM_INVALID)
        want = fault->is_write == 1 ? DSM_WRITE : DSM_READ;
    else if (state == DSM_READ_STATE)
        want = DSM_WRITE;
    else
        return EXO_VM_RESUME; /* already writable: a stale fault, retry */

    int rc = dsm_send(n->fault_fd, want, page, 0, NULL, 0);
    if (rc == 0)
        rc = dsm_recv(n->fault_fd, &n->fault_buf, n->timeout_ms);
    if (rc == 0 && (n->fault_buf.h.type != DSM_GRANT || n->fault_buf.h.page != page ||
                    (n->fault_buf.h.len != 0 && n->fault_buf.h.len != DSM_PAGE)))
        rc = -EBADMSG;
    if (rc != 0) {
        say(n, want == DSM_READ ? "read fault" : "write fault", rc);
        _exit(DSM_EXIT_LOST);
    }
    int granted = (int)n->fault_buf.h.arg;
    char *page_b = (char *)n->map.b + (size_t)page * DSM_PAGE;
    if (n->fault_buf.h.len == DSM_PAGE) {
        memcpy(page_b, n->fault_buf.data, DSM_PAGE);
        n->pages_received++;
    }
    if (exo_vm_protect(n->region, base + (size_t)page * DSM_PAGE, DSM_PAGE,
                       access_of(granted)) != 0) {
        say(n, "cannot map a granted page", -EBADMSG);
        _exit(DSM_EXIT_LOST);
    }
    atomic_store(&n->state[page], (unsigned char)granted);
    if (granted == DSM_WRITE_STATE)
        n->write_faults++;
    else
        n->read_faults++;
    rc = dsm_send(n->fault_fd, DSM_DONE, page, 0, NULL, 0);
    if (rc != 0) {
        say(n, "confirming a page", rc);
        _exit(DSM_EXIT_LOST);
    }
    errno = saved_errno;
    return EXO_VM_RESUME;
}

/* The service thread: answers the manager's fetches and invalidations through view b. It
 * lowers the program's access before copying, so no store after the copy is lost. */
static void *service_main(void *arg)
{
    dsm_node *n = arg;
    struct dsm_msg *m = &n->service_buf;
    while (dsm_recv(n->svc_fd, m, -1) == 0) {
        uint32_t page = m->h.page;
        if (page >= n->pages)
            break;
        char *page_a = (char *)n->map.a + (size_t)page * DSM_PAGE;
        const char *page_b = (const char *)n->map.b + (size_t)page * DSM_PAGE;
        int next = m->h.type == DSM_FETCH_DOWNGRADE ? DSM_READ_STATE : DSM_INVALID;
        if (m->h.type != DSM_FETCH_DOWNGRADE && m->h.type != DSM_FETCH_INVALIDATE &&
            m->h.type != DSM_INVALIDATE)
            break;
        atomic_store(&n->state[page], (unsigned char)next);
        if (exo_vm_protect(n->region, page_a, DSM_PAGE, access_of(next)) != 0)
            break;
        if (next == DSM_INVALID)
            atomic_fetch_add(&n->invalidations, 1);
        int rc;
        if (m->h.type == DSM_INVALIDATE) {
            rc = dsm_send(n->svc_fd, DSM_ACK, page, 0, NULL, 0);
        } else {
            rc = dsm_send(n->svc_fd, DSM_DATA, page, 0, page_b, DSM_PAGE);
            atomic_fetch_add(&n->pages_sent, 1);
        }
        if (rc != 0)
            break;
    }
    return NULL;
}

/* A call on the fault channel from the program thread: send, wait for the answer. */
static int node_call(dsm_node *n, uint32_t type, uint32_t arg, const void *data, uint32_t len,
                     uint32_t expect, int timeout_ms)
{
    int rc = dsm_send(n->fault_fd, type, 0, arg, data, len);
    if (rc == 0)
        rc = dsm_recv(n->fault_fd, &n->fault_buf, timeout_ms);
    if (rc == 0 && n->fault_buf.h.type != expect)
        rc = -EPROTO;
    if (rc != 0) {
        say(n, type == DSM_LOCK ? "lock" : type == DSM_UNLOCK ? "unlock"
               : type == DSM_BARRIER ? "barrier" : "leaving", rc);
        errno = rc == -ETIMEDOUT ? ETIMEDOUT : EPIPE;
        return -1;
    }
    return 0;
}

int dsm_lock(dsm_node *n, unsigned lock_id)
{
    if (lock_id >= DSM_MAX_LOCKS) {
        errno = EINVAL;
        return -1;
    }
    /* waiting for a lock may take long: only a broken cluster (EOF) ends it */
    return node_call(n, DSM_LOCK, lock_id, NULL, 0, DSM_OK, -1);
}

int dsm_unlock(dsm_node *n, unsigned lock_id)
{
    if (lock_id >= DSM_MAX_LOCKS) {
        errno = EINVAL;
        return -1;
    }
    return node_call(n, DSM_UNLOCK, lock_id, NULL, 0, DSM_OK, n->timeout_ms);
}

int dsm_barrier(dsm_node *n) { return node_call(n, DSM_BARRIER, 0, NULL, 0, DSM_OK, -1); }

void *dsm_base(dsm_node *n) { return n->map.a; }
size_t dsm_size(const dsm_node *n) { return n->pages * DSM_PAGE; }
int dsm_node_id(const dsm_node *n) { return n->id; }
int dsm_node_count(const dsm_node *n) { return n->nodes; }
void dsm_set_work_time(dsm_node *n, uint64_t ns) { n->work_ns = ns; }

dsm_stats dsm_node_stats(const dsm_node *n)
{
    return (dsm_stats){ .read_faults = n->read_faults, .write_faults = n->write_faults,
                        .invalidations = atomic_load(&n->invalidations),
                        .pages_sent = atomic_load(&n->pages_sent),
                        .pages_received = n->pages_received, .work_ns = n->work_ns };
}

static void node_free(dsm_node *n)
{
    if (n->service_started) {
        shutdown(n->svc_fd, SHUT_RDWR); /* wakes the service thread */
        pthread_join(n->service, NULL);
    }
    if (n->region)
        exo_vm_region_destroy(n->region);
    if (n->map.a)
        exo_vm_map2_destroy(&n->map);
    free((void *)n->state);
    close(n->fault_fd);
    close(n->svc_fd);
    free(n);
}

int dsm_node_start(int id, int nodes, size_t pages, int fault_fd, int svc_fd, int timeout_ms,
                   dsm_node **out)
{
    dsm_node *n = calloc(1, sizeof *n);
    if (!n)
        return -ENOMEM;
    n->id = id;
    n->nodes = nodes;
    n->pages = pages;
    n->fault_fd = fault_fd;
    n->svc_fd = svc_fd;
    n->timeout_ms = timeout_ms;
    n->state = calloc(pages, 1);
    int rc = n->state ? 0 : -ENOMEM;
    if (rc == 0)
        rc = exo_vm_map2_create(pages * DSM_PAGE, EXO_VM_READWRITE, EXO_VM_READWRITE, &n->map);
    if (rc == 0) {
        exo_vm_options o = { .engine = EXO_VM_ENGINE_SIGNAL, .handler = on_fault, .arg = n };
        rc = exo_vm_region_create(n->map.a, pages * DSM_PAGE, &o, &n->region);
    }
    if (rc == 0) /* every page starts INVALID: the first touch asks the manager */
        rc = exo_vm_protect(n->region, n->map.a, pages * DSM_PAGE, EXO_VM_NOACCESS);
    if (rc == 0) {
        rc = -pthread_create(&n->service, NULL, service_main, n);
        n->service_started = rc == 0;
    }
    if (rc != 0) {
        node_free(n);
        return rc;
    }
    *out = n;
    return 0;
}

int dsm_node_finish(dsm_node *n)
{
    /* keep serving pages until every node has left: FINISH comes after the last BYE */
    int rc = node_call(n, DSM_BYE, 0, NULL, 0, DSM_FINISH, -1);
    if (rc == 0 && n->service_started) {
        shutdown(n->svc_fd, SHUT_RDWR); /* wakes the service thread */
        pthread_join(n->service, NULL);
        n->service_started = 0;
    }
    if (rc == 0) {
        dsm_stats s = dsm_node_stats(n);
        if (dsm_send(n->fault_fd, DSM_STATS, 0, 0, &s, sizeof s) != 0) {
            errno = EPIPE;
            rc = -1;
        }
    }
    node_free(n);
    return rc;
}
