/* samjmp: a SAM pipeline whose stages are separate processes that keep the parsed records in
 * memory between them (SpaceJMP section 5.4, Figures 11 and 12), instead of writing and
 * re-reading SAM/BAM. `load` parses once with htslib; `sort`, `index`, `flagstat`,
 * `idxstats`, `pileup` and `view` then work on the records where `load` left them, in a VAS
 * or (the paper's comparison) in an mmap'd file with offsets (store.h).
 *
 * Every call returns 0 or a negative -EXO_ code with exomem_last_error() set; outputs go to
 * `out`. Results are samtools 1.16's: flagstat and idxstats print its lines, the coordinate
 * order is `samtools sort`'s, pileup prints what `samtools depth -a` prints. One thread.
 */
#ifndef SAMJMP_H
#define SAMJMP_H

#include "store.h"

#include <htslib/sam.h>
#include <stdio.h>

/* One alignment as htslib holds it (bam1_t's core and data), kept in the store. */
struct sj_rec {
    bam1_core_t core;
    uint32_t l_data;
    uint32_t unused;
    uint8_t data[];         /* qname, cigar, seq, qual, aux: bam1_t's data */
};

/* A bam1_t that points at a stored record, for htslib's read-only calls (sam_write1,
 * bam_endpos, bam_aux_get...); htslib neither frees nor grows it. */
void sj_bam_view(const struct sj_rec *r, bam1_t *b);

/* Parse SAM/BAM/CRAM file `path` into the store (the load stage; redoes it if it was done). */
int sj_load(struct sj_store *s, const char *path);

/* Sort into a new array of the records' refs: by coordinate (samtools sort's order:
 * reference, position, reverse strand, then input order) or, with by_name, by name
 * (samtools sort -n: natural name order, then READ1/READ2, then input order). */
int sj_sort(struct sj_store *s, int by_name);

/* 0 if the store is sorted by coordinate, else an error naming the command to run. */
int sj_require_coord(struct sj_store *s);

/* Per reference: its span of the sorted array, mapped and placed-unmapped counts, and a
 * linear index of 16 kbp windows. */
int sj_index(struct sj_store *s);

/* `samtools flagstat`'s output. */
int sj_flagstat(struct sj_store *s, FILE *out);

/* `samtools idxstats`'s output, from the index. */
int sj_idxstats(struct sj_store *s, FILE *out);

/* `samtools depth -a`'s output from the sorted records. */
int sj_pileup(struct sj_store *s, FILE *out);

/* Write the records as SAM to out_path ("-": stdout), as `samtools view` (with the header
 * when `header`), in coordinate order once sorted (unless `input_order`), else in input
 * order. */
int sj_view(struct sj_store *s, const char *out_path, int header, int input_order);

/* For the tests: stop the process (SIGSTOP) at point `where` ("load", "sort", "index": in
 * the middle of that stage; "read": a reading stage that has just opened the store) when
 * SAMJMP_STALL names it, so that a test can kill it there or act while it holds the store. */
void sj_stall_point(const char *where);

#endif
