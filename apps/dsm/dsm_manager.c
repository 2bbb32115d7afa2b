/* dsm: the central manager (the process that calls dsm_run). It keeps, for every page, the
 * owner and the copyset, and runs one page transaction at a time to its end (the requester's
 * DONE), which is what makes single-writer/multiple-reader hold: no node can be granted a
 * page while another transaction on it is half done. Locks and the barrier are queues here.
 * It never touches the shared pages itself; their bytes pass through it from owner to
 * requester. */
#include "dsm.h"
#include "dsm_internal.h"
#include "dsm_proto.h"

#include <exomem/error.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

struct page_meta {
    int owner;          /* -1: never written (every copy is zeros) */
    uint32_t copyset;   /* nodes with a READ copy, owner excluded */
};

struct manager {
    int nodes, timeout_ms;
    size_t pages;
    int fault_fd[DSM_MAX_NODES], svc_fd[DSM_MAX_NODES];
    int left[DSM_MAX_NODES];
    int n_left;
    struct page_meta *pg;
    int lock_holder[DSM_MAX_LOCKS];
    int lock_queue[DSM_MAX_LOCKS][DSM_MAX_NODES]; /* FIFO of waiting nodes */
    int lock_waiting[DSM_MAX_LOCKS];
    int barrier_arrived;
    dsm_result *res;
    struct dsm_msg buf;
};

static int mgr_send(struct manager *m, int fd, uint32_t type, uint32_t page, uint32_t arg,
                    const void *data, uint32_t len)
{
    m->res->messages++;
    return dsm_send(fd, type, page, arg, data, len);
}

static int mgr_recv(struct manager *m, int fd, uint32_t expect, uint32_t page)
{
    int rc = dsm_recv(fd, &m->buf, m->timeout_ms);
    if (rc == 0 && (m->buf.h.type != expect || m->buf.h.page != page))
        rc = -EPROTO;
    if (rc == 0)
        m->res->messages++;
    return rc;
}

/* Ask node t's service thread to drop or downgrade the page; with `fetch`, get its bytes
 * into m->buf. Returns 0 or a negative errno (then *bad = t). */
static int service_call(struct manager *m, int t, uint32_t type, uint32_t page, int *bad)
{
    int fetch = type != DSM_INVALIDATE;
    int rc = mgr_send(m, m->svc_fd[t], type, page, 0, NULL, 0);
    if (rc == 0)
        rc = mgr_recv(m, m->svc_fd[t], fetch ? DSM_DATA : DSM_ACK, page);
    if (rc == 0 && fetch && m->buf.h.len != DSM_PAGE)
        rc = -EPROTO;
    if (rc != 0)
        *bad = t;
    return rc;
}

/* One page transaction for node i (DSM_READ or DSM_WRITE), to its end. */
static int page_transaction(struct manager *m, int i, uint32_t type, uint32_t page, int *bad)
{
    if (page >= m->pages) {
        *bad = i;
        return -EPROTO;
    }
    struct page_meta *p = &m->pg[page];
    uint32_t me = 1u << i;
    int with_data = 0, rc = 0, granted;
    m->res->transactions++;
    if (type == DSM_READ) {
        if (p->owner >= 0 && p->owner != i) {
            rc = service_call(m, p->owner, DSM_FETCH_DOWNGRADE, page, bad);
            with_data = 1;
        }
        if (p->owner != i)
            p->copyset |= me;
        granted = p->owner == i ? DSM_WRITE_STATE : DSM_READ_STATE;
    } else {
        /* a reader's copy is current (every write invalidates all copies first) */
        int need_data = p->owner >= 0 && p->owner != i && !(p->copyset & me);
        uint32_t targets = p->copyset | (p->owner >= 0 ? 1u << p->owner : 0);
        targets &= ~me;
        for (int t = 0; rc == 0 && t < m->nodes; t++) {
            if (!(targets & (1u << t)))
                continue;
            int fetch = t == p->owner && need_data;
            rc = service_call(m, t, fetch ? DSM_FETCH_INVALIDATE : DSM_INVALIDATE, page, bad);
            with_data |= fetch;
        }
        if (rc == 0) {
            p->owner = i;
            p->copyset = 0;
        }
        granted = DSM_WRITE_STATE;
    }
    if (rc != 0)
        return rc;
    if (with_data)
        m->res->page_transfers++;
    rc = mgr_send(m, m->fault_fd[i], DSM_GRANT, page, (uint32_t)granted,
                  with_data ? m->buf.data : NULL, with_data ? DSM_PAGE : 0);
    if (rc == 0)
        rc = mgr_recv(m, m->fault_fd[i], DSM_DONE, page);
    if (rc != 0)
        *bad = i;
    return rc;
}

static int handle_lock(struct manager *m, int i, uint32_t type, uint32_t id, int *bad)
{
    int rc = 0;
    if (id >= DSM_MAX_LOCKS) {
        *bad = i;
        return -EPROTO;
    }
    if (type == DSM_LOCK) {
        if (m->lock_holder[id] < 0) {
            m->lock_holder[id] = i;
            rc = mgr_send(m, m->fault_fd[i], DSM_OK, 0, id, NULL, 0);
        } else {
            m->lock_queue[id][m->lock_waiting[id]++] = i;
        }
        if (rc != 0)
            *bad = i;
        return rc;
    }
    if (m->lock_holder[id] != i) {
        *bad = i;
        return -EPROTO;
    }
    m->lock_holder[id] = -1;
    if (m->lock_waiting[id] > 0) {
        int next = m->lock_queue[id][0];
        memmove(&m->lock_queue[id][0], &m->lock_queue[id][1],
                sizeof(int) * (size_t)--m->lock_waiting[id]);
        m->lock_holder[id] = next;
        if ((rc = mgr_send(m, m->fault_fd[next], DSM_OK, 0, id, NULL, 0)) != 0) {
            *bad = next;
            return rc;
        }
    }
    if ((rc = mgr_send(m, m->fault_fd[i], DSM_OK, 0, id, NULL, 0)) != 0)
        *bad = i;
    return rc;
}

/* Answer everyone waiting at the barrier (or at the end: FINISH to everyone who left). */
static int release_all(struct manager *m, uint32_t type, int *bad)
{
    for (int t = 0; t < m->nodes; t++) {
        int rc = mgr_send(m, m->fault_fd[t], type, 0, 0, NULL, 0);
        if (rc != 0) {
            *bad = t;
            return rc;
        }
    }
    return 0;
}

/* One request that arrived on node i's fault channel. */
static int handle_request(struct manager *m, int i, int *bad)
{
    int rc = dsm_recv(m->fault_fd[i], &m->buf, 0);
    if (rc != 0 || m->left[i]) {
        *bad = i;
        return rc ? rc : -EPROTO;
    }
    m->res->messages++;
    struct dsm_msg_hdr h = m->buf.h;
    switch (h.type) {
    case DSM_READ:
    case DSM_WRITE:
        return page_transaction(m, i, h.type, h.page, bad);
    case DSM_LOCK:
    case DSM_UNLOCK:
        return handle_lock(m, i, h.type, h.arg, bad);
    case DSM_BARRIER:
        if (++m->barrier_arrived < m->nodes)
            return 0;
        m->barrier_arrived = 0;
        return release_all(m, DSM_OK, bad);
    case DSM_BYE:
        m->left[i] = 1;
        if (++m->n_left == m->nodes)
            return release_all(m, DSM_FINISH, bad);
        return 0;
    default:
        *bad = i;
        return -EPROTO;
    }
}

/* Serve until every node has left (returns -1), or until one breaks (returns its id, or
 * DSM_MAX_NODES when the manager itself failed); the caller then shuts every connection
 * down so that the others stop with an error instead of waiting. */
static int serve(struct manager *m)
{
    struct pollfd p[2 * DSM_MAX_NODES];
    while (m->n_left < m->nodes) {
        for (int i = 0; i < m->nodes; i++) {
            p[i] = (struct pollfd){ .fd = m->fault_fd[i], .events = POLLIN };
            /* a service channel is quiet between transactions: anything there is a death */
            p[m->nodes + i] = (struct pollfd){ .fd = m->svc_fd[i], .events = POLLIN };
        }
        int r = poll(p, (nfds_t)(2 * m->nodes), -1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return DSM_MAX_NODES; /* no node to blame */
        for (int i = 0; i < m->nodes; i++) {
            int bad = -1;
            if (p[m->nodes + i].revents)
                return i;
            if (p[i].revents && handle_request(m, i, &bad) != 0)
                return bad >= 0 ? bad : i;
        }
    }
    /* everyone got FINISH: collect the final counters */
    for (int i = 0; i < m->nodes; i++) {
        if (mgr_recv(m, m->fault_fd[i], DSM_STATS, 0) != 0 || m->buf.h.len != sizeof(dsm_stats))
            return i;
        memcpy(&m->res->node[i], m->buf.data, sizeof(dsm_stats));
    }
    return -1;
}

/* Wait for the node processes. After a failure a node may be stuck (stopped, or spinning
 * without touching the shared memory): give them grace_ms to notice, then kill them, so
 * that dsm_run itself never hangs. grace_ms < 0: wait as long as it takes. */
static void reap_nodes(const pid_t *pid, int n, int grace_ms, int *status)
{
    int done[DSM_MAX_NODES] = {0}, left = n;
    for (int waited = 0; left > 0;) {
        for (int i = 0; i < n; i++) {
            if (done[i])
                continue;
            pid_t r = waitpid(pid[i], &status[i], grace_ms < 0 ? 0 : WNOHANG);
            if (r == pid[i] || (r < 0 && errno != EINTR)) {
                done[i] = 1;
                left--;
            }
        }
        if (left == 0 || grace_ms < 0)
            continue;
        if (waited >= grace_ms) {
            for (int i = 0; i < n; i++)
                if (!done[i])
                    kill(pid[i], SIGKILL);
            grace_ms = -1; /* now they go for sure */
            continue;
        }
        usleep(10000);
        waited += 10;
    }
}

static void close_pair(int fd[2])
{
    for (int k = 0; k < 2; k++)
        if (fd[k] >= 0)
            close(fd[k]);
    fd[0] = fd[1] = -1;
}

/* The life of node `me` in its forked process: never returns. */
static _Noreturn void node_process(const struct manager *m, int me,
                                   int fault_pair[][2], int svc_pair[][2], dsm_node_fn fn,
                                   void *arg)
{
    /* keep only this node's ends: a dead node's sockets must reach EOF at the manager, so
     * nobody else may hold them */
    for (int i = 0; i < m->nodes; i++) {
        close(fault_pair[i][0]);
        close(svc_pair[i][0]);
        if (i != me) {
            close(fault_pair[i][1]);
            close(svc_pair[i][1]);
        }
    }
    dsm_node *node;
    int rc = dsm_node_start(me, m->nodes, m->pages, fault_pair[me][1], svc_pair[me][1],
                            m->timeout_ms, &node);
    if (rc != 0) {
        fprintf(stderr, "dsm: node %d: cannot start: %s (%s)\n", me, exomem_strerror(rc),
                exomem_last_error());
        _exit(1);
    }
    int status = fn(node, arg);
    if (dsm_node_finish(node) != 0 && status == 0)
        status = DSM_EXIT_LOST;
    fflush(NULL);
    _exit(status);
}

int dsm_run(const dsm_config *cfg, dsm_node_fn fn, void *arg, dsm_result *result)
{
    dsm_result local;
    dsm_result *res = result ? result : &local;
    memset(res, 0, sizeof *res);
    res->failed_node = -1;
    if (!cfg || !fn || cfg->nodes < 1 || cfg->nodes > DSM_MAX_NODES || cfg->pages == 0 ||
        cfg->pages > UINT32_MAX) {
        errno = EINVAL;
        return -EXO_EINVAL;
    }
    struct manager *m = calloc(1, sizeof *m);
    if (!m) {
        errno = ENOMEM;
        return -EXO_ENOMEM;
    }
    m->nodes = cfg->nodes;
    m->pages = cfg->pages;
    m->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 10000;
    m->res = res;
    m->pg = malloc(sizeof *m->pg * cfg->pages);
    int fault_pair[DSM_MAX_NODES][2], svc_pair[DSM_MAX_NODES][2];
    pid_t pid[DSM_MAX_NODES];
    int made = 0, forked = 0, rc = 0;
    for (; m->pg && made < m->nodes; made++) {
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fault_pair[made]) != 0)
            break;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, svc_pair[made]) != 0) {
            close_pair(fault_pair[made]);
            break;
        }
    }
    if (made < m->nodes) {
        rc = -EXO_ENOMEM;
        goto out;
    }
    for (size_t k = 0; k < m->pages; k++)
        m->pg[k] = (struct page_meta){ .owner = -1 };
    for (int l = 0; l < DSM_MAX_LOCKS; l++)
        m->lock_holder[l] = -1;
    fflush(NULL); /* no buffered output duplicated into the children */
    for (; forked < m->nodes; forked++) {
        pid[forked] = fork();
        if (pid[forked] < 0)
            break;
        if (pid[forked] == 0)
            node_process(m, forked, fault_pair, svc_pair, fn, arg);
    }
    for (int i = 0; i < m->nodes; i++) {
        close(fault_pair[i][1]);
        close(svc_pair[i][1]);
        m->fault_fd[i] = fault_pair[i][0];
        m->svc_fd[i] = svc_pair[i][0];
        fault_pair[i][0] = svc_pair[i][0] = -1;
    }
    made = 0;
    int failed = forked == m->nodes ? serve(m) : DSM_MAX_NODES;
    if (failed >= 0) {
        res->failed_node = failed < m->nodes ? failed : -1;
        rc = -EXO_EIO;
    }
    for (int i = 0; i < m->nodes; i++) {
        shutdown(m->fault_fd[i], SHUT_RDWR);
        shutdown(m->svc_fd[i], SHUT_RDWR);
        close(m->fault_fd[i]);
        close(m->svc_fd[i]);
    }
    reap_nodes(pid, forked, failed >= 0 ? m->timeout_ms : -1, res->status);
    for (int i = 0; i < forked; i++) {
        if (!WIFEXITED(res->status[i]) || WEXITSTATUS(res->status[i]) != 0) {
            rc = -EXO_EIO;
            if (res->failed_node < 0)
                res->failed_node = i;
        }
    }
    if (forked < m->nodes)
        rc = -EXO_ENOMEM;
    for (int i = 0; i < m->nodes; i++) {
        dsm_stats *s = &res->node[i], *t = &res->total;
        t->read_faults += s->read_faults;
        t->write_faults += s->write_faults;
        t->invalidations += s->invalidations;
        t->pages_sent += s->pages_sent;
        t->pages_received += s->pages_received;
        if (s->work_ns > t->work_ns)
            t->work_ns = s->work_ns; /* the slowest node's time */
    }
out:
    for (int i = 0; i < made; i++) {
        close_pair(fault_pair[i]);
        close_pair(svc_pair[i]);
    }
    free(m->pg);
    free(m);
    if (rc != 0)
        errno = exomem_errno(rc);
    return rc;
}
