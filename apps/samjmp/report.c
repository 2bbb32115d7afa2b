/* samjmp's stages that only read the store and print: flagstat, idxstats, pileup, view. Each
 * prints what samtools 1.16 prints for the same records. */
#include "samjmp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- flagstat (samtools bam_stat.c's counts and lines) ---- */

struct flagstat {
    long long reads[2], primary[2], secondary[2], supp[2], dup[2], pdup[2], mapped[2];
    long long pmapped[2], paired[2], read1[2], read2[2], proper[2], both_mapped[2];
    long long singletons[2], diff_chr[2], diff_chr_q5[2];
};

static void flagstat_count(struct flagstat *st, const bam1_core_t *c)
{
    int w = (c->flag & BAM_FQCFAIL) ? 1 : 0;
    st->reads[w]++;
    if (c->flag & BAM_FSECONDARY) {
        st->secondary[w]++;
    } else if (c->flag & BAM_FSUPPLEMENTARY) {
        st->supp[w]++;
    } else {
        st->primary[w]++;
        if (c->flag & BAM_FPAIRED) {
            st->paired[w]++;
            if ((c->flag & BAM_FPROPER_PAIR) && !(c->flag & BAM_FUNMAP))
                st->proper[w]++;
            if (c->flag & BAM_FREAD1)
                st->read1[w]++;
            if (c->flag & BAM_FREAD2)
                st->read2[w]++;
            if ((c->flag & BAM_FMUNMAP) && !(c->flag & BAM_FUNMAP))
                st->singletons[w]++;
            if (!(c->flag & BAM_FUNMAP) && !(c->flag & BAM_FMUNMAP)) {
                st->both_mapped[w]++;
                if (c->mtid != c->tid) {
                    st->diff_chr[w]++;
                    if (c->qual >= 5)
                        st->diff_chr_q5[w]++;
                }
            }
        }
        if (!(c->flag & BAM_FUNMAP))
            st->pmapped[w]++;
        if (c->flag & BAM_FDUP)
            st->pdup[w]++;
    }
    if (!(c->flag & BAM_FUNMAP))
        st->mapped[w]++;
    if (c->flag & BAM_FDUP)
        st->dup[w]++;
}

/* One line of samtools flagstat: "P + F label", with "(p% : f%)" of `of` when not NULL
 * (samtools' percentage: a single-precision quotient, "N/A" without a total). */
static void flagstat_line(FILE *out, const long long v[2], const char *label,
                          const long long *of)
{
    fprintf(out, "%lld + %lld %s", v[0], v[1], label);
    if (of) {
        char pct[2][32];
        for (int w = 0; w < 2; w++) {
            if (of[w] == 0)
                snprintf(pct[w], sizeof pct[w], "N/A");
            else
                snprintf(pct[w], sizeof pct[w], "%.2f%%", (float)v[w] / of[w] * 100.0);
        }
        fprintf(out, " (%s : %s)", pct[0], pct[1]);
    }
    fputc('\n', out);
}

int sj_flagstat(struct sj_store *s, FILE *out)
{
    int rc = sj_require(s, SJ_LOAD);
    if (rc)
        return rc;
    struct flagstat st;
    memset(&st, 0, sizeof st);
    const sj_ref *recs = sj_ptr(s, s->h->recs);
    for (uint64_t i = 0; i < s->h->n_recs; i++)
        flagstat_count(&st, &((const struct sj_rec *)sj_ptr(s, recs[i]))->core);
    flagstat_line(out, st.reads, "in total (QC-passed reads + QC-failed reads)", NULL);
    flagstat_line(out, st.primary, "primary", NULL);
    flagstat_line(out, st.secondary, "secondary", NULL);
    flagstat_line(out, st.supp, "supplementary", NULL);
    flagstat_line(out, st.dup, "duplicates", NULL);
    flagstat_line(out, st.pdup, "primary duplicates", NULL);
    flagstat_line(out, st.mapped, "mapped", st.reads);
    flagstat_line(out, st.pmapped, "primary mapped", st.primary);
    flagstat_line(out, st.paired, "paired in sequencing", NULL);
    flagstat_line(out, st.read1, "read1", NULL);
    flagstat_line(out, st.read2, "read2", NULL);
    flagstat_line(out, st.proper, "properly paired", st.paired);
    flagstat_line(out, st.both_mapped, "with itself and mate mapped", NULL);
    flagstat_line(out, st.singletons, "singletons", st.paired);
    flagstat_line(out, st.diff_chr, "with mate mapped to a different chr", NULL);
    flagstat_line(out, st.diff_chr_q5, "with mate mapped to a different chr (mapQ>=5)", NULL);
    return ferror(out) ? exomem_set_error(EXO_EIO, "writing flagstat: %s", strerror(errno)) : 0;
}

/* ---- idxstats ---- */

int sj_idxstats(struct sj_store *s, FILE *out)
{
    int rc = sj_require(s, SJ_INDEX);
    if (rc)
        return rc;
    const struct sj_target *t = sj_ptr(s, s->h->targets);
    const struct sj_ref_index *ix = sj_ptr(s, s->h->index);
    for (int64_t i = 0; i < s->h->n_targets; i++)
        fprintf(out, "%s\t%lld\t%llu\t%llu\n", (const char *)sj_ptr(s, t[i].name),
                (long long)t[i].len, (unsigned long long)ix[i].n_mapped,
                (unsigned long long)ix[i].n_unmapped);
    fprintf(out, "*\t0\t0\t%llu\n", (unsigned long long)s->h->n_no_coor);
    return ferror(out) ? exomem_set_error(EXO_EIO, "writing idxstats: %s", strerror(errno)) : 0;
}

/* ---- pileup: samtools depth -a ---- */

/* Depths of positions [emitted, emitted + cap) in a ring, printed as they become final (no
 * later record starts before them, since the records are sorted). */
struct depth_ring {
    uint32_t *d;
    uint64_t cap;           /* a power of two */
    int64_t emitted;        /* next position to print (0-based) */
    const char *name;
    size_t name_len;
    char *buf;              /* output buffer */
    size_t used, size;
    FILE *out;
};

static void ring_flush_buf(struct depth_ring *r)
{
    fwrite(r->buf, 1, r->used, r->out);
    r->used = 0;
}

static char *put_u64(char *p, uint64_t v)
{
    char tmp[24];
    int n = 0;
    do
        tmp[n++] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    while (n)
        *p++ = tmp[--n];
    return p;
}

/* Print positions up to (not including) `to`. */
static void ring_emit(struct depth_ring *r, int64_t to)
{
    for (; r->emitted < to; r->emitted++) {
        if (r->used + r->name_len + 48 > r->size)
            ring_flush_buf(r);
        char *p = r->buf + r->used;
        memcpy(p, r->name, r->name_len);
        p += r->name_len;
        *p++ = '\t';
        p = put_u64(p, (uint64_t)r->emitted + 1);
        *p++ = '\t';
        uint32_t *slot = &r->d[(uint64_t)r->emitted & (r->cap - 1)];
        p = put_u64(p, *slot);
        *p++ = '\n';
        *slot = 0;
        r->used = (size_t)(p - r->buf);
    }
}

/* Make room for positions up to `end` (exclusive). */
static int ring_reserve(struct depth_ring *r, int64_t end)
{
    if ((uint64_t)(end - r->emitted) <= r->cap)
        return 0;
    uint64_t cap = r->cap;
    while (cap < (uint64_t)(end - r->emitted))
        cap *= 2;
    uint32_t *d = calloc(cap, sizeof *d);
    if (!d)
        return exomem_set_error(EXO_ENOMEM, "pileup: a depth window of %llu positions",
                                (unsigned long long)cap);
    for (uint64_t i = 0; i < r->cap; i++) {
        uint64_t pos = (uint64_t)r->emitted + i;
        d[pos & (cap - 1)] = r->d[pos & (r->cap - 1)];
    }
    free(r->d);
    r->d = d;
    r->cap = cap;
    return 0;
}

/* samtools depth's default filter: not unmapped, secondary, QC-failed or duplicate. */
#define DEPTH_SKIP (BAM_FUNMAP | BAM_FSECONDARY | BAM_FQCFAIL | BAM_FDUP)

/* Count rec's aligned bases; *covered_end: the end of the furthest one so far (samtools
 * depth prints positions past the reference's length where reads cover them). */
static int depth_add(struct depth_ring *r, const struct sj_rec *rec, int64_t *covered_end)
{
    int64_t pos = rec->core.pos;
    const uint32_t *cig = (const uint32_t *)(rec->data + rec->core.l_qname);
    for (uint32_t k = 0; k < rec->core.n_cigar; k++) {
        int op = bam_cigar_op(cig[k]);
        int64_t n = bam_cigar_oplen(cig[k]);
        if ((op == BAM_CMATCH || op == BAM_CEQUAL || op == BAM_CDIFF) && n > 0) {
            if (ring_reserve(r, pos + n) != 0)
                return -EXO_ENOMEM;
            for (int64_t p = pos; p < pos + n; p++)
                r->d[(uint64_t)p & (r->cap - 1)]++;
            if (pos + n > *covered_end)
                *covered_end = pos + n;
        }
        if (bam_cigar_type(op) & 2) /* consumes the reference */
            pos += n;
    }
    return 0;
}

int sj_pileup(struct sj_store *s, FILE *out)
{
    int rc = sj_require_coord(s);
    if (rc)
        return rc;
    struct depth_ring r = { .cap = 1 << 16, .size = 1 << 20, .out = out };
    r.d = calloc(r.cap, sizeof *r.d);
    r.buf = malloc(r.size);
    if (!r.d || !r.buf) {
        rc = exomem_set_error(EXO_ENOMEM, "pileup: out of memory");
        goto out;
    }
    const struct sj_target *t = sj_ptr(s, s->h->targets);
    const sj_ref *sorted = sj_ptr(s, s->h->sorted);
    uint64_t i = 0, n = s->h->n_recs;
    for (int64_t tid = 0; tid < s->h->n_targets; tid++) {
        r.name = sj_ptr(s, t[tid].name);
        r.name_len = strlen(r.name);
        r.emitted = 0;
        int used = 0; /* samtools depth -a prints only references it saw a read on */
        int64_t covered_end = 0;
        for (; i < n; i++) {
            const struct sj_rec *rec = sj_ptr(s, sorted[i]);
            if (rec->core.tid != tid)
                break;
            if (rec->core.flag & DEPTH_SKIP)
                continue;
            used = 1;
            ring_emit(&r, rec->core.pos);
            if ((rc = depth_add(&r, rec, &covered_end)))
                goto out;
        }
        if (used)
            ring_emit(&r, covered_end > t[tid].len ? covered_end : t[tid].len);
    }
    ring_flush_buf(&r);
    if (ferror(out))
        rc = exomem_set_error(EXO_EIO, "writing pileup: %s", strerror(errno));
out:
    free(r.d);
    free(r.buf);
    return rc;
}

/* ---- view ---- */

int sj_view(struct sj_store *s, const char *out_path, int header, int input_order)
{
    int rc = sj_require(s, SJ_LOAD);
    if (rc)
        return rc;
    struct sj_header *h = s->h;
    int sorted = !input_order && sj_require(s, SJ_SORT) == 0;
    sam_hdr_t *hdr = sam_hdr_parse(h->l_text, sj_ptr(s, h->hdr_text));
    samFile *o = sam_open(out_path, "w");
    if (!hdr || !o) {
        rc = exomem_set_error(EXO_EIO, "view: cannot %s", hdr ? "open the output" :
                              "parse the stored header");
        goto out;
    }
    /* A BAM header may list references in binary only (no @SQ text): add them, else htslib
     * cannot name the records' references. */
    const struct sj_target *t = sj_ptr(s, h->targets);
    for (int64_t i = hdr ? sam_hdr_nref(hdr) : 0; hdr && i < h->n_targets; i++) {
        char len[24];
        snprintf(len, sizeof len, "%lld", (long long)t[i].len);
        if (sam_hdr_add_line(hdr, "SQ", "SN", (const char *)sj_ptr(s, t[i].name), "LN", len,
                             NULL) < 0)
            break;
    }
    if (hdr && sam_hdr_nref(hdr) != h->n_targets) {
        rc = exomem_set_error(EXO_ECORRUPT, "view: the stored header names %d references, "
                              "the records %lld", sam_hdr_nref(hdr), (long long)h->n_targets);
        goto out;
    }
    if (header && sam_hdr_write(o, hdr) < 0) {
        rc = exomem_set_error(EXO_EIO, "view: writing the header failed");
        goto out;
    }
    const sj_ref *order = sj_ptr(s, sorted ? h->sorted : h->recs);
    bam1_t b;
    for (uint64_t i = 0; i < h->n_recs; i++) {
        sj_bam_view(sj_ptr(s, order[i]), &b);
        if (sam_write1(o, hdr, &b) < 0) {
            rc = exomem_set_error(EXO_EIO, "view: writing record %llu failed",
                                  (unsigned long long)i + 1);
            goto out;
        }
    }
out:
    if (o && sam_close(o) < 0 && rc == 0)
        rc = exomem_set_error(EXO_EIO, "view: closing the output failed");
    if (hdr)
        sam_hdr_destroy(hdr);
    return rc;
}
