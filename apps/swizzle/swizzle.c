/* Pointer swizzling at page-fault time (swizzle.h): the window is a pager region whose
 * store callbacks read persistent pages and translate their pointers. */
#include "swizzle.h"

#include <exomem/exomem.h>
#include <exomem/pager.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NO_SLOT UINT32_MAX
#define NO_PAGE UINT64_MAX
#define WORDS (SWZ_PAGE / 8)

struct swz {
    int fd;
    uint64_t npages;        /* persistent pages in the file */
    uint64_t nslots;        /* window pages */
    uint64_t base;          /* the window's address */
    uint32_t *slot_of;      /* persistent page -> window page, NO_SLOT */
    uint64_t *page_of;      /* window page -> persistent page, NO_PAGE */
    uint64_t reserved;
    exo_pager_store *store;
    exo_pager *pager;
    struct swz_stats st;
    char failure[160];
};

/* Reserve (or find) the window page of persistent page p: its slot, or NO_SLOT when the
 * window is full. Runs under the pager's lock (from the callbacks) or before the pager. */
static uint32_t slot_for(struct swz *s, uint64_t p)
{
    if (s->slot_of[p] != NO_SLOT)
        return s->slot_of[p];
    if (s->reserved == s->nslots)
        return NO_SLOT;
    uint32_t slot = (uint32_t)s->reserved++;
    s->slot_of[p] = slot;
    s->page_of[slot] = p;
    return slot;
}

static int fill(void *arg, uint64_t slot, size_t size, void *buf)
{
    struct swz *s = arg;
    uint64_t p = slot < s->nslots ? s->page_of[slot] : NO_PAGE;
    if (p == NO_PAGE || size != SWZ_PAGE) {
        snprintf(s->failure, sizeof s->failure, "window page %llu holds no persistent page "
                 "(a pointer that was not swizzled?)", (unsigned long long)slot);
        return -EXO_EINVAL;
    }
    ssize_t n = pread(s->fd, buf, SWZ_PAGE, (off_t)(p * SWZ_PAGE));
    if (n < 0) {
        snprintf(s->failure, sizeof s->failure, "reading persistent page %llu: %s",
                 (unsigned long long)p, strerror(errno));
        return -EXO_EIO;
    }
    if (n < (ssize_t)SWZ_PAGE)
        memset((char *)buf + n, 0, SWZ_PAGE - (size_t)n);
    uint64_t *w = buf;
    for (unsigned i = 0; i < WORDS; i++) {
        if (!(w[i] & SWZ_TAG))
            continue;
        uint64_t target = (w[i] & ~SWZ_TAG) >> 12, off = w[i] & (SWZ_PAGE - 1);
        if (target >= s->npages) {
            snprintf(s->failure, sizeof s->failure, "persistent page %llu word %u points to "
                     "page %llu, past the store", (unsigned long long)p, i,
                     (unsigned long long)target);
            return -EXO_ECORRUPT;
        }
        uint32_t t = slot_for(s, target);
        if (t == NO_SLOT) {
            snprintf(s->failure, sizeof s->failure, "the window is full (%llu pages): "
                     "persistent page %llu cannot be reserved", (unsigned long long)s->nslots,
                     (unsigned long long)target);
            return -EXO_ENOMEM;
        }
        w[i] = s->base + (uint64_t)t * SWZ_PAGE + off;
        s->st.swizzled++;
    }
    s->st.faults++;
    return 0;
}

static int write_back(void *arg, uint64_t slot, size_t size, const void *buf)
{
    struct swz *s = arg;
    uint64_t p = slot < s->nslots ? s->page_of[slot] : NO_PAGE;
    if (p == NO_PAGE || size != SWZ_PAGE)
        return -EXO_EINVAL;
    uint64_t w[WORDS];
    memcpy(w, buf, SWZ_PAGE);
    for (unsigned i = 0; i < WORDS; i++) {
        if (w[i] >= s->base && w[i] < s->base + s->nslots * SWZ_PAGE) {
            uint64_t off = w[i] - s->base;
            w[i] = swz_pptr(s->page_of[off / SWZ_PAGE], off % SWZ_PAGE);
        }
    }
    if (pwrite(s->fd, w, SWZ_PAGE, (off_t)(p * SWZ_PAGE)) != (ssize_t)SWZ_PAGE) {
        snprintf(s->failure, sizeof s->failure, "writing persistent page %llu failed",
                 (unsigned long long)p);
        return -EXO_EIO;
    }
    s->st.written_back++;
    return 0;
}

int swz_open(const char *path, uint64_t window_bytes, uint64_t budget, swz **out)
{
    if (!path || !out || window_bytes < 2 * SWZ_PAGE || window_bytes % SWZ_PAGE ||
        window_bytes / SWZ_PAGE >= NO_SLOT)
        return exomem_set_error(EXO_EINVAL, "swz_open: bad path, out or window size %llu",
                                (unsigned long long)window_bytes);
    struct swz *s = calloc(1, sizeof *s);
    if (!s)
        return exomem_set_error(EXO_ENOMEM, "swz_open: out of memory");
    s->fd = open(path, O_RDWR | O_CLOEXEC);
    struct stat st;
    if (s->fd < 0 || fstat(s->fd, &st) != 0 || st.st_size < (off_t)SWZ_PAGE ||
        st.st_size % SWZ_PAGE) {
        int err = s->fd < 0 ? errno : EINVAL;
        if (s->fd >= 0)
            close(s->fd);
        free(s);
        return exomem_set_error(err == ENOENT ? EXO_ENOENT : EXO_EINVAL,
                                "swz_open: %s is not a store of whole pages", path);
    }
    s->npages = (uint64_t)st.st_size / SWZ_PAGE;
    s->nslots = window_bytes / SWZ_PAGE;
    s->slot_of = malloc(s->npages * sizeof *s->slot_of);
    s->page_of = malloc(s->nslots * sizeof *s->page_of);
    int rc = 0;
    if (!s->slot_of || !s->page_of)
        rc = exomem_set_error(EXO_ENOMEM, "swz_open: out of memory for the slot tables");
    if (!rc) {
        memset(s->slot_of, 0xff, s->npages * sizeof *s->slot_of);
        memset(s->page_of, 0xff, s->nslots * sizeof *s->page_of);
        exo_pager_store_callbacks cb = {fill, write_back, NULL, s};
        rc = exo_pager_store_custom(&cb, &s->store);
    }
    if (!rc) {
        exo_pager_options o = {.size = window_bytes, .budget = budget,
                               .policy = EXO_PAGER_CLOCK, .store = s->store};
        if ((rc = exo_pager_create(&o, &s->pager)) != 0)
            exo_pager_store_close(s->store);
    }
    if (rc) {
        close(s->fd);
        free(s->slot_of);
        free(s->page_of);
        free(s);
        return rc;
    }
    s->base = (uint64_t)(uintptr_t)exo_pager_base(s->pager);
    s->st.window_pages = s->nslots;
    slot_for(s, 0); /* the root's page: window page 0 */
    *out = s;
    return 0;
}

void *swz_root(swz *s)
{
    return s ? (void *)(uintptr_t)s->base : NULL;
}

uint64_t swz_window_free(const swz *s)
{
    return s->nslots - s->reserved;
}

void swz_get_stats(const swz *s, struct swz_stats *out)
{
    *out = s->st;
    out->reserved = s->reserved;
}

const char *swz_last_failure(const swz *s)
{
    return s ? s->failure : "";
}

int swz_close(swz *s)
{
    if (!s)
        return 0;
    int rc = exo_pager_destroy(s->pager);
    exo_pager_store_close(s->store);
    if (fsync(s->fd) != 0 && !rc)
        rc = exomem_set_error(EXO_EIO, "swz_close: fsync: %s", strerror(errno));
    close(s->fd);
    free(s->slot_of);
    free(s->page_of);
    free(s);
    return rc;
}

/* ---- the persistent tree ---- */

int swz_build_tree(const char *path, uint64_t nodes)
{
    const uint64_t per_page = SWZ_PAGE / sizeof(struct swz_node);
    /* Breadth first: node i's children are 2i+1 and 2i+2. Keys follow the in-order rank,
     * so that the complete tree is a search tree. */
    uint64_t *rank = malloc(nodes * sizeof *rank);
    uint64_t(*page)[WORDS] = malloc(SWZ_PAGE);
    if (!rank || !page || nodes == 0) {
        free(rank);
        free(page);
        return exomem_set_error(nodes ? EXO_ENOMEM : EXO_EINVAL, "swz_build_tree: %llu nodes",
                                (unsigned long long)nodes);
    }
    uint64_t stack[64], sp = 0, at = 0, r = 0;
    while (at < nodes || sp) {
        while (at < nodes) {
            stack[sp++] = at;
            at = 2 * at + 1;
        }
        at = stack[--sp];
        rank[at] = r++;
        at = 2 * at + 2;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int rc = fd < 0 ? -EXO_EIO : 0;
    for (uint64_t first = 0; first < nodes && !rc; first += per_page) {
        memset(page, 0, SWZ_PAGE);
        for (uint64_t k = 0; k < per_page && first + k < nodes; k++) {
            uint64_t i = first + k, *w = page[0] + k * 8;
            uint64_t l = 2 * i + 1, rt = 2 * i + 2;
            w[0] = rank[i] * 2;   /* key */
            w[1] = rank[i] * 6;   /* value = key * 3 */
            w[2] = l < nodes ? swz_pptr(l / per_page, (l % per_page) * 64) : 0;
            w[3] = rt < nodes ? swz_pptr(rt / per_page, (rt % per_page) * 64) : 0;
        }
        if (pwrite(fd, page, SWZ_PAGE, (off_t)(first / per_page * SWZ_PAGE)) != SWZ_PAGE)
            rc = -EXO_EIO;
    }
    free(rank);
    free(page);
    if (fd >= 0 && close(fd) != 0 && !rc)
        rc = -EXO_EIO;
    return rc ? exomem_set_error(-rc, "swz_build_tree: writing %s failed", path) : 0;
}

struct swz_node *swz_tree_find(struct swz_node *n, uint64_t key)
{
    while (n && n->key != key)
        n = key < n->key ? n->left : n->right;
    return n;
}
