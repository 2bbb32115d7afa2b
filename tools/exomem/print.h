/* Reading the whole registry once, and printing segments and VASes as text or JSON. */
#ifndef EXOMEM_CLI_PRINT_H
#define EXOMEM_CLI_PRINT_H

#include <exomem/exomem.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Every segment and VAS of the registry, as seg_list() and vas_list() saw them. Used to
 * cross-reference (which VASes list a segment, where a VAS's segments lie). */
struct registry_snapshot {
    struct seg_info *segs;
    size_t nsegs, seg_corrupt;
    struct seg_backing *backing;    /* per segment, from seg_backing() */
    bool *have_backing;             /* false where seg_backing() failed (e.g. no access) */
    struct vas_info *vases;
    size_t nvases, vas_corrupt;
};

/* Fill *s from seg_list(), seg_backing() and vas_list(). Returns 0 or a negative exomem
 * code. */
int snapshot_load(struct registry_snapshot *s);
void snapshot_free(struct registry_snapshot *s);

/* The whole registry, as two tables (text) or one JSON document with stable keys. */
void print_ls_text(const struct registry_snapshot *s, FILE *out);
void print_ls_json(const struct registry_snapshot *s, FILE *out);

/* One segment or VAS in detail, as indented "key value" lines. */
void print_seg_text(const struct seg_info *si, const struct registry_snapshot *s, FILE *out);
void print_vas_text(const struct vas_info *vi, const struct registry_snapshot *s, FILE *out);

/* One segment or VAS as a single-line JSON object (the same objects `ls --json` lists). */
void print_seg_json(const struct seg_info *si, const struct registry_snapshot *s, FILE *out);
void print_vas_json(const struct vas_info *vi, FILE *out);

#endif
