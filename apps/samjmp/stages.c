/* samjmp's stages that build data in the store: load (parse once), sort, index. */
#include "samjmp.h"

#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

void sj_stall_point(const char *where)
{
    const char *want = getenv("SAMJMP_STALL");
    if (want && strcmp(want, where) == 0) {
        fflush(NULL);
        raise(SIGSTOP);
    }
}

void sj_bam_view(const struct sj_rec *r, bam1_t *b)
{
    memset(b, 0, sizeof *b);
    b->core = r->core;
    b->data = (uint8_t *)r->data; /* htslib only reads it: see BAM_USER_OWNS_DATA */
    b->l_data = (int)r->l_data;
    b->m_data = r->l_data;
    bam_set_mempolicy(b, BAM_USER_OWNS_STRUCT | BAM_USER_OWNS_DATA);
}

static sj_ref store_bytes(struct sj_store *s, const void *p, uint64_t n)
{
    sj_ref r = sj_alloc(s, n);
    if (r)
        memcpy(sj_ptr(s, r), p, n);
    return r;
}

/* Header text and reference sequences. */
static int load_header(struct sj_store *s, sam_hdr_t *hdr)
{
    struct sj_header *h = s->h;
    const char *text = sam_hdr_str(hdr);
    uint64_t l_text = text ? sam_hdr_length(hdr) : 0;
    char nul = 0;
    h->hdr_text = l_text ? store_bytes(s, text, l_text + 1) : store_bytes(s, &nul, 1);
    if (!h->hdr_text)
        return -EXO_ENOMEM;
    h->l_text = l_text;
    h->n_targets = sam_hdr_nref(hdr);
    if (h->n_targets < 0)
        return exomem_set_error(EXO_EINVAL, "cannot read the header's reference sequences");
    h->targets = sj_alloc(s, (uint64_t)h->n_targets * sizeof(struct sj_target) + 8);
    if (!h->targets)
        return -EXO_ENOMEM;
    for (int64_t i = 0; i < h->n_targets; i++) {
        const char *nm = sam_hdr_tid2name(hdr, (int)i);
        sj_ref nr = store_bytes(s, nm, strlen(nm) + 1);
        if (!nr)
            return -EXO_ENOMEM;
        struct sj_target *t = (struct sj_target *)sj_ptr(s, h->targets) + i;
        t->name = nr;
        t->len = sam_hdr_tid2len(hdr, (int)i);
    }
    return 0;
}

int sj_load(struct sj_store *s, const char *path)
{
    samFile *in = sam_open(path, "r");
    if (!in)
        return exomem_set_error(errno ? -errno : EXO_EIO, "cannot open %s: %s", path,
                                strerror(errno ? errno : EIO));
    sam_hdr_t *hdr = sam_hdr_read(in);
    bam1_t *b = bam_init1();
    sj_ref *order = NULL;
    uint64_t n = 0, cap = 0;
    int rc = 0;
    if (!hdr || !b) {
        rc = exomem_set_error(EXO_EINVAL, "%s: cannot read a SAM/BAM header", path);
        goto out;
    }
    if ((rc = sj_stage_begin(s, SJ_LOAD)) || (rc = load_header(s, hdr)))
        goto out;
    int r;
    while ((r = sam_read1(in, hdr, b)) >= 0) {
        sj_ref rr = sj_alloc(s, sizeof(struct sj_rec) + (uint64_t)b->l_data);
        if (!rr) {
            rc = -EXO_ENOMEM;
            goto out;
        }
        struct sj_rec *rec = sj_ptr(s, rr);
        rec->core = b->core;
        rec->l_data = (uint32_t)b->l_data;
        rec->unused = 0;
        memcpy(rec->data, b->data, (size_t)b->l_data);
        if (n == cap) {
            cap = cap ? 2 * cap : 1 << 16;
            sj_ref *o = realloc(order, cap * sizeof *o);
            if (!o) {
                rc = exomem_set_error(EXO_ENOMEM, "%s: out of memory after %llu records", path,
                                      (unsigned long long)n);
                goto out;
            }
            order = o;
        }
        order[n++] = rr;
        if (n == 100)
            sj_stall_point("load");
    }
    if (r < -1) {
        rc = exomem_set_error(EXO_EINVAL, "%s: record %llu cannot be parsed (sam_read1 %d)",
                              path, (unsigned long long)n + 1, r);
        goto out;
    }
    struct sj_header *h = s->h;
    h->recs = n ? store_bytes(s, order, n * sizeof *order) : sj_alloc(s, 8);
    if (!h->recs) {
        rc = -EXO_ENOMEM;
        goto out;
    }
    h->n_recs = n;
    sj_stage_done(s, SJ_LOAD);
out:
    free(order);
    if (b)
        bam_destroy1(b);
    if (hdr)
        sam_hdr_destroy(hdr);
    sam_close(in);
    return rc;
}

/* ---- sort ---- */

/* One record to sort: its keys and its ref. Equal keys keep their input order (the merge
 * sort is stable), as in samtools 1.16, whose block sort and merge of blocks are stable. */
struct sort_item {
    uint64_t k1, k2;
    const char *name;       /* qname order: the record's name */
    sj_ref rec;
};

/* samtools sort's coordinate key (bam_sort.c): the reference id as unsigned (so records
 * without one go last), then pos+1, then the reverse-strand flag. */
static int coord_le(const struct sort_item *a, const struct sort_item *b)
{
    return a->k1 < b->k1 || (a->k1 == b->k1 && a->k2 <= b->k2);
}

/* samtools' "natural" name order: runs of digits compare as numbers (leading zeros
 * skipped; when equal, the name with fewer leading zeros first), other bytes as bytes. */
static int name_cmp(const char *x, const char *y)
{
    const unsigned char *a = (const unsigned char *)x, *b = (const unsigned char *)y;
    int zeros = 0; /* leading-zero difference of the first equal numbers */
    while (*a && *b) {
        if (!isdigit(*a) || !isdigit(*b)) {
            if (*a != *b)
                return (int)*a - (int)*b;
            a++, b++;
            continue;
        }
        const unsigned char *a0 = a, *b0 = b;
        while (*a == '0')
            a++;
        while (*b == '0')
            b++;
        if (!zeros)
            zeros = (int)(a - a0) - (int)(b - b0);
        const unsigned char *ae = a, *be = b;
        while (isdigit(*ae))
            ae++;
        while (isdigit(*be))
            be++;
        if (ae - a != be - b) /* more significant digits: larger */
            return ae - a > be - b ? 1 : -1;
        for (; a < ae; a++, b++)
            if (*a != *b)
                return (int)*a - (int)*b;
    }
    if (*a || *b)
        return *a ? 1 : -1;
    return zeros;
}

/* samtools sort -n: the name, then READ1/READ2 (flag & 0xc0). */
static int name_le(const struct sort_item *a, const struct sort_item *b)
{
    int c = name_cmp(a->name, b->name);
    return c < 0 || (c == 0 && a->k2 <= b->k2);
}

/* Stable bottom-up merge sort of a[0..n) using tmp[0..n); returns the sorted array. */
static struct sort_item *merge_sort(struct sort_item *a, struct sort_item *tmp, uint64_t n,
                                    int (*le)(const struct sort_item *, const struct sort_item *))
{
    for (uint64_t w = 1; w < n; w *= 2) {
        for (uint64_t lo = 0; lo < n; lo += 2 * w) {
            uint64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            uint64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                tmp[k++] = le(&a[i], &a[j]) ? a[i++] : a[j++];
            while (i < mid)
                tmp[k++] = a[i++];
            while (j < hi)
                tmp[k++] = a[j++];
        }
        struct sort_item *t = a;
        a = tmp;
        tmp = t;
    }
    return a;
}

int sj_sort(struct sj_store *s, int by_name)
{
    int rc = sj_stage_begin(s, SJ_SORT);
    if (rc)
        return rc;
    struct sj_header *h = s->h;
    uint64_t n = h->n_recs;
    struct sort_item *a = malloc((n ? n : 1) * sizeof *a);
    struct sort_item *tmp = malloc((n ? n : 1) * sizeof *tmp);
    sj_ref sorted = sj_alloc(s, (n ? n : 1) * sizeof(sj_ref));
    if (!a || !tmp || !sorted) {
        free(a);
        free(tmp);
        return sorted ? exomem_set_error(EXO_ENOMEM, "sorting %llu records: out of memory",
                                         (unsigned long long)n) : -EXO_ENOMEM;
    }
    const sj_ref *recs = sj_ptr(s, h->recs);
    for (uint64_t i = 0; i < n; i++) {
        const struct sj_rec *r = sj_ptr(s, recs[i]);
        if (by_name) {
            a[i].name = (const char *)r->data;
            a[i].k1 = 0;
            a[i].k2 = r->core.flag & (BAM_FREAD1 | BAM_FREAD2);
        } else {
            a[i].name = NULL;
            a[i].k1 = (uint64_t)(int64_t)r->core.tid; /* -1 becomes the largest */
            a[i].k2 = ((uint64_t)(r->core.pos + 1) << 1) | ((r->core.flag & BAM_FREVERSE) != 0);
        }
        a[i].rec = recs[i];
    }
    struct sort_item *res = merge_sort(a, tmp, n, by_name ? name_le : coord_le);
    sj_ref *out = sj_ptr(s, sorted);
    for (uint64_t i = 0; i < n; i++) {
        out[i] = res[i].rec;
        if (i == n / 2)
            sj_stall_point("sort");
    }
    free(a);
    free(tmp);
    h->sorted = sorted;
    h->sort_order = by_name ? SJ_ORDER_NAME : SJ_ORDER_COORD;
    sj_stage_done(s, SJ_SORT);
    return 0;
}

/* Is the sorted array in coordinate order (index and pileup need it)? */
int sj_require_coord(struct sj_store *s)
{
    int rc = sj_require(s, SJ_SORT);
    if (rc == 0 && s->h->sort_order != SJ_ORDER_COORD)
        rc = exomem_set_error(EXO_EINVAL, "store '%s' is sorted by name: run samjmp sort "
                              "first (coordinate order)", s->name);
    return rc;
}

/* ---- index ---- */

#define LINEAR_SHIFT 14 /* 16 kbp windows, as BAI's linear index */

static int index_target(struct sj_store *s, const sj_ref *sorted, uint64_t first, uint64_t end,
                        struct sj_ref_index *ix)
{
    bam1_t b;
    hts_pos_t max_end = 0;
    ix->first = first;
    ix->end = end;
    for (uint64_t i = first; i < end; i++) {
        const struct sj_rec *r = sj_ptr(s, sorted[i]);
        if (r->core.flag & BAM_FUNMAP) {
            ix->n_unmapped++;
            continue;
        }
        ix->n_mapped++;
        sj_bam_view(r, &b);
        hts_pos_t e = bam_endpos(&b);
        if (e > max_end)
            max_end = e;
    }
    ix->n_windows = (uint64_t)(max_end >> LINEAR_SHIFT) + 1;
    ix->linear = sj_alloc(s, ix->n_windows * sizeof(uint64_t));
    if (!ix->linear)
        return -EXO_ENOMEM;
    uint64_t *lin = sj_ptr(s, ix->linear);
    for (uint64_t w = 0; w < ix->n_windows; w++)
        lin[w] = UINT64_MAX;
    for (uint64_t i = first; i < end; i++) {
        const struct sj_rec *r = sj_ptr(s, sorted[i]);
        if (r->core.flag & BAM_FUNMAP || r->core.pos < 0)
            continue;
        sj_bam_view(r, &b);
        hts_pos_t e = bam_endpos(&b);
        uint64_t w0 = (uint64_t)r->core.pos >> LINEAR_SHIFT;
        uint64_t w1 = (uint64_t)(e > r->core.pos ? e - 1 : r->core.pos) >> LINEAR_SHIFT;
        for (uint64_t w = w0; w <= w1 && w < ix->n_windows; w++)
            if (lin[w] == UINT64_MAX)
                lin[w] = i;
    }
    /* A window no record overlaps starts where the next one does. */
    uint64_t next = end;
    for (uint64_t w = ix->n_windows; w-- > 0;) {
        if (lin[w] == UINT64_MAX)
            lin[w] = next;
        else
            next = lin[w];
    }
    return 0;
}

int sj_index(struct sj_store *s)
{
    int rc = sj_require_coord(s);
    if (rc == 0)
        rc = sj_stage_begin(s, SJ_INDEX);
    if (rc)
        return rc;
    struct sj_header *h = s->h;
    uint64_t nt = (uint64_t)h->n_targets;
    sj_ref ixr = sj_alloc(s, (nt ? nt : 1) * sizeof(struct sj_ref_index));
    if (!ixr)
        return -EXO_ENOMEM;
    struct sj_ref_index *ix = sj_ptr(s, ixr);
    memset(ix, 0, nt * sizeof *ix);
    const sj_ref *sorted = sj_ptr(s, h->sorted);
    uint64_t i = 0, n = h->n_recs;
    for (uint64_t t = 0; t < nt; t++) {
        uint64_t first = i;
        while (i < n && ((const struct sj_rec *)sj_ptr(s, sorted[i]))->core.tid == (int32_t)t)
            i++;
        if ((rc = index_target(s, sorted, first, i, &ix[t])))
            return rc;
        if (t == nt / 2)
            sj_stall_point("index");
    }
    h->n_no_coor = n - i; /* the rest: no reference (sorted last) */
    h->index = ixr;
    sj_stage_done(s, SJ_INDEX);
    return 0;
}
