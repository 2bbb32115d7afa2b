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

/* samtools' percentage: single-precision quotient, "N/A" without a total. */
static const char *percent(char *buf, size_t cap, long long n, long long total)
{
    if (total == 0)
        snprintf(buf, cap, "N/A");
    else
        snprintf(buf, cap, "%.2f%%", (float)n / total * 100.0);
    return buf;
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
    char a[32], b[32];
#define PAIR(f) st.f[0], st.f[1]
    fprintf(out, "%lld + %lld in total (QC-passed reads + QC-failed reads)\n", PAIR(reads));
    fprintf(out, "%lld + %lld primary\n", PAIR(primary));
    fprintf(out, "%lld + %lld secondary\n", PAIR(secondary));
    fprintf(out, "%lld + %lld supplementary\n", PAIR(supp));
    fprintf(out, "%lld + %lld duplicates\n", PAIR(dup));
    fprintf(out, "%lld + %lld primary duplicates\n", PAIR(pdup));
    fprintf(out, "%lld + %lld mapped (%s : %s)\n", PAIR(mapped),
            percent(a, sizeof a, st.mapped[0], st.reads[0]),
            percent(b, sizeof b, st.mapped[1], st.reads[1]));
    fprintf(out, "%lld + %lld primary mapped (%s : %s)\n", PAIR(pmapped),
            percent(a, sizeof a, st.pmapped[0], st.primary[0]),
            percent(b, sizeof b, st.pmapped[1], st.primary[1]));
    fprintf(out, "%lld + %lld paired in sequencing\n", PAIR(paired));
    fprintf(out, "%lld + %lld read1\n", PAIR(read1));
    fprintf(out, "%lld + %lld read2\n", PAIR(read2));
    fprintf(out, "%lld + %lld properly paired (%s : %s)\n", PAIR(proper),
            percent(a, sizeof a, st.proper[0], st.paired[0]),
            percent(b, sizeof b, st.proper[1], st.paired[1]));
    fprintf(out, "%lld + %lld with itself and mate mapped\n", PAIR(both_mapped));
    fprintf(out, "%lld + %lld singletons (%s : %s)\n", PAIR(singletons),
            percent(a, sizeof a, st.singletons[0], st.paired[0]),
            percent(b, sizeof b, st.singletons[1], st.paired[1]));
    fprintf(out, "%lld + %lld with mate mapped to a different chr\n", PAIR(diff_chr));
    fprintf(out, "%lld + %lld with mate mapped to a different chr (mapQ>=5)\n",
            PAIR(diff_chr_q5));
#undef PAIR
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

static int depth_add(struct depth_ring *r, const struct sj_rec *rec, int64_t len)
{
    int64_t pos = rec->core.pos;
    const uint32_t *cig = (const uint32_t *)(rec->data + rec->core.l_qname);
    for (uint32_t k = 0; k < rec->core.n_cigar; k++) {
        int op = bam_cigar_op(cig[k]);
        int64_t n = bam_cigar_oplen(cig[k]);
        if (op == BAM_CMATCH || op == BAM_CEQUAL || op == BAM_CDIFF) {
            int64_t end = pos + n < len ? pos + n : len;
            if (end > pos && ring_reserve(r, end) != 0)
                return -EXO_ENOMEM;
            for (int64_t p = pos; p < end; p++)
                r->d[(uint64_t)p & (r->cap - 1)]++;
        }
        if (bam_cigar_type(op) & 2) /* consumes the reference */
            pos += n;
    }
    return 0;
}

int sj_pileup(struct sj_store *s, FILE *out)
{
    int rc = sj_require(s, SJ_SORT);
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
        for (; i < n; i++) {
            const struct sj_rec *rec = sj_ptr(s, sorted[i]);
            if (rec->core.tid != tid)
                break;
            if (rec->core.flag & DEPTH_SKIP)
                continue;
            used = 1;
            ring_emit(&r, rec->core.pos < t[tid].len ? rec->core.pos : t[tid].len);
            if ((rc = depth_add(&r, rec, t[tid].len)))
                goto out;
        }
        if (used)
            ring_emit(&r, t[tid].len);
        else
            memset(r.d, 0, r.cap * sizeof *r.d);
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
