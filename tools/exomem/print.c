/* Reading the registry and printing what it holds, for `exomem ls` and `exomem show`. */
#include "print.h"

#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* seg_list() and vas_list() behind one signature, so one loop reads either. */
typedef int (*list_fn)(void *out, size_t cap, size_t *count, size_t *corrupt);

static int list_segs(void *out, size_t cap, size_t *count, size_t *corrupt)
{
    return seg_list(out, cap, count, corrupt);
}

static int list_vases(void *out, size_t cap, size_t *count, size_t *corrupt)
{
    return vas_list(out, cap, count, corrupt);
}

/* Call `fn` with a growing buffer until everything fits (objects may be created meanwhile). */
static int load_list(list_fn fn, size_t elem_size, void **out, size_t *n, size_t *corrupt)
{
    size_t cap = 16;
    void *buf = NULL;
    for (;;) {
        void *grown = realloc(buf, cap * elem_size);
        if (!grown) {
            free(buf);
            return -EXO_ENOMEM;
        }
        buf = grown;
        size_t count = 0;
        int rc = fn(buf, cap, &count, corrupt);
        if (rc != 0) {
            free(buf);
            return rc;
        }
        if (count <= cap) {
            *out = buf;
            *n = count;
            return 0;
        }
        cap = count + 16;
    }
}

int snapshot_load(struct registry_snapshot *s)
{
    memset(s, 0, sizeof *s);
    int rc = load_list(list_segs, sizeof *s->segs, (void **)&s->segs, &s->nsegs,
                       &s->seg_corrupt);
    if (rc == 0)
        rc = load_list(list_vases, sizeof *s->vases, (void **)&s->vases, &s->nvases,
                       &s->vas_corrupt);
    if (rc == 0) {
        s->backing = calloc(s->nsegs + 1, sizeof *s->backing);
        s->have_backing = calloc(s->nsegs + 1, sizeof *s->have_backing);
        if (!s->backing || !s->have_backing)
            rc = -EXO_ENOMEM;
        /* Unreadable or vanished segments just show no backing. */
        for (size_t i = 0; rc == 0 && i < s->nsegs; i++)
            s->have_backing[i] = seg_backing(s->segs[i].id, &s->backing[i]) == 0;
    }
    if (rc != 0)
        snapshot_free(s);
    return rc;
}

void snapshot_free(struct registry_snapshot *s)
{
    free(s->segs);
    free(s->backing);
    free(s->have_backing);
    free(s->vases);
    memset(s, 0, sizeof *s);
}

static const struct seg_info *find_seg(const struct registry_snapshot *s, segid_t id)
{
    for (size_t i = 0; i < s->nsegs; i++)
        if (s->segs[i].id == id)
            return &s->segs[i];
    return NULL;
}

/* The backing of segment `id` in the snapshot, NULL when unknown. */
static const struct seg_backing *backing_of(const struct registry_snapshot *s, segid_t id)
{
    for (size_t i = 0; i < s->nsegs; i++)
        if (s->segs[i].id == id)
            return s->have_backing[i] ? &s->backing[i] : NULL;
    return NULL;
}

static const char *access_str(int flags)
{
    return flags == SEG_RDONLY ? "ro" : "rw";
}

/* Exact sizes only: "1G", "512M", "4K", else plain bytes (never a rounded figure). */
static void fmt_size(uint64_t v, char *buf, size_t len)
{
    static const char units[] = "TGMK";
    for (int i = 0; i < 4; i++) {
        unsigned shift = 40 - 10 * (unsigned)i;
        if (v && v % (UINT64_C(1) << shift) == 0) {
            snprintf(buf, len, "%" PRIu64 "%c", v >> shift, units[i]);
            return;
        }
    }
    snprintf(buf, len, "%" PRIu64, v);
}

/* "4K", "THP" (4K-granular with transparent huge pages), "2M", "1G". */
static void fmt_page(const struct seg_info *si, char *buf, size_t len)
{
    if (si->flags & SEG_THP)
        snprintf(buf, len, "THP");
    else
        fmt_size(si->page_size, buf, len);
}

/* A backing figure, exact like fmt_size(), "0" for none and "?" when unknown. */
static void fmt_backing(const struct seg_backing *b, bool huge, char *buf, size_t len)
{
    uint64_t v = b ? (huge ? b->huge : b->resident) : 0;
    if (!b)
        snprintf(buf, len, "?");
    else if (v == 0)
        snprintf(buf, len, "0");
    else
        fmt_size(v, buf, len);
}

static void user_name(uid_t uid, char *buf, size_t len)
{
    struct passwd *pw = getpwuid(uid);
    if (pw)
        snprintf(buf, len, "%s", pw->pw_name);
    else
        snprintf(buf, len, "%u", (unsigned)uid);
}

static void group_name(gid_t gid, char *buf, size_t len)
{
    struct group *gr = getgrgid(gid);
    if (gr)
        snprintf(buf, len, "%s", gr->gr_name);
    else
        snprintf(buf, len, "%u", (unsigned)gid);
}

static void fmt_owner(uid_t uid, gid_t gid, char *buf, size_t len)
{
    char u[64], g[64];
    user_name(uid, u, sizeof u);
    group_name(gid, g, sizeof g);
    snprintf(buf, len, "%s:%s", u, g);
}

static void fmt_time(int64_t t, char *buf, size_t len)
{
    time_t tt = (time_t)t;
    struct tm tm;
    if (!gmtime_r(&tt, &tm) || !strftime(buf, len, "%Y-%m-%d %H:%M:%S UTC", &tm))
        snprintf(buf, len, "%" PRId64, t);
}

/* --- tables for `ls` --- */

enum { CELL = 160, COLS_MAX = 10 };

struct table {
    const char *title;
    const char *const *heads;    /* ncols fixed-width headings, then the free last one */
    size_t ncols, nrows;
    void (*cells)(const struct registry_snapshot *s, size_t row, char cells[][CELL]);
    void (*tail)(const struct registry_snapshot *s, size_t row, FILE *out);
};

static void print_table(const struct table *t, const struct registry_snapshot *s, FILE *out)
{
    char cells[COLS_MAX][CELL];
    int width[COLS_MAX];
    for (size_t c = 0; c < t->ncols; c++)
        width[c] = (int)strlen(t->heads[c]);
    for (size_t r = 0; r < t->nrows; r++) {
        t->cells(s, r, cells);
        for (size_t c = 0; c < t->ncols; c++)
            if ((int)strlen(cells[c]) > width[c])
                width[c] = (int)strlen(cells[c]);
    }
    fprintf(out, "%s: %zu\n", t->title, t->nrows);
    if (t->nrows == 0)
        return;
    for (size_t c = 0; c < t->ncols; c++)
        fprintf(out, "%-*s  ", width[c], t->heads[c]);
    fprintf(out, "%s\n", t->heads[t->ncols]);
    for (size_t r = 0; r < t->nrows; r++) {
        t->cells(s, r, cells);
        for (size_t c = 0; c < t->ncols; c++)
            fprintf(out, "%-*s  ", width[c], cells[c]);
        t->tail(s, r, out);
        fputc('\n', out);
    }
}

static void seg_cells(const struct registry_snapshot *s, size_t row, char cells[][CELL])
{
    const struct seg_info *si = &s->segs[row];
    snprintf(cells[0], CELL, "%" PRIu64, si->id);
    snprintf(cells[1], CELL, "%s", si->name);
    snprintf(cells[2], CELL, "%#" PRIx64, si->base);
    fmt_size(si->size, cells[3], CELL);
    fmt_page(si, cells[4], CELL);
    snprintf(cells[5], CELL, "%04o", (unsigned)si->mode);
    fmt_owner(si->uid, si->gid, cells[6], CELL);
    const struct seg_backing *b = s->have_backing[row] ? &s->backing[row] : NULL;
    fmt_backing(b, false, cells[7], CELL);
    fmt_backing(b, true, cells[8], CELL);
}

/* The VASes that list a segment: "v0:rw,v1:ro", or "-". */
static void seg_tail(const struct registry_snapshot *s, size_t row, FILE *out)
{
    segid_t id = s->segs[row].id;
    int n = 0;
    for (size_t v = 0; v < s->nvases; v++)
        for (unsigned k = 0; k < s->vases[v].nsegs && k < VAS_SEGS_MAX; k++)
            if (s->vases[v].segs[k].sid == id)
                fprintf(out, "%s%s:%s", n++ ? "," : "", s->vases[v].name,
                        access_str(s->vases[v].segs[k].flags));
    if (n == 0)
        fputc('-', out);
}

static void vas_cells(const struct registry_snapshot *s, size_t row, char cells[][CELL])
{
    const struct vas_info *vi = &s->vases[row];
    snprintf(cells[0], CELL, "%" PRIu64, vi->id);
    snprintf(cells[1], CELL, "%s", vi->name);
    snprintf(cells[2], CELL, "%04o", (unsigned)vi->mode);
    fmt_owner(vi->uid, vi->gid, cells[3], CELL);
}

/* A VAS's segments: "s0:rw,s1:ro", or "-". */
static void vas_tail(const struct registry_snapshot *s, size_t row, FILE *out)
{
    const struct vas_info *vi = &s->vases[row];
    for (unsigned k = 0; k < vi->nsegs && k < VAS_SEGS_MAX; k++)
        fprintf(out, "%s%s:%s", k ? "," : "", vi->segs[k].name, access_str(vi->segs[k].flags));
    if (vi->nsegs == 0)
        fputc('-', out);
}

void print_ls_text(const struct registry_snapshot *s, FILE *out)
{
    static const char *const seg_heads[] = {"ID", "NAME", "BASE", "SIZE", "PAGE", "MODE",
                                            "OWNER", "RESIDENT", "HUGE", "VASES"};
    static const char *const vas_heads[] = {"ID", "NAME", "MODE", "OWNER", "SEGMENTS"};
    const struct table segs = {"segments", seg_heads, 9, s->nsegs, seg_cells, seg_tail};
    const struct table vases = {"vases", vas_heads, 4, s->nvases, vas_cells, vas_tail};
    print_table(&segs, s, out);
    fputc('\n', out);
    print_table(&vases, s, out);
}

/* --- JSON --- */

static void json_str(FILE *out, const char *str)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)str; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

/* The keys both kinds share: id, name, mode, uid, gid, owner, group, created. */
static void json_common(FILE *out, uint64_t id, const char *name, mode_t mode, uid_t uid,
                        gid_t gid, int64_t created)
{
    char u[64], g[64];
    user_name(uid, u, sizeof u);
    group_name(gid, g, sizeof g);
    fprintf(out, "\"id\": %" PRIu64 ", \"name\": ", id);
    json_str(out, name);
    fprintf(out, ", \"mode\": \"%04o\", \"uid\": %u, \"gid\": %u, \"owner\": ",
            (unsigned)mode, (unsigned)uid, (unsigned)gid);
    json_str(out, u);
    fputs(", \"group\": ", out);
    json_str(out, g);
    fprintf(out, ", \"created\": %" PRId64, created);
}

/* The JSON's "flags" keep the numbers they were first published with (1 no reserve, 2 THP),
 * whatever values the C constants have. */
static unsigned json_flags(unsigned seg_flags)
{
    return ((seg_flags & SEG_NORESERVE) ? 1u : 0u) | ((seg_flags & SEG_THP) ? 2u : 0u) |
           ((seg_flags & SEG_PAGED) ? 4u : 0u);
}

static void json_ref(FILE *out, int first, uint64_t id, const char *name, int flags)
{
    fprintf(out, "%s{\"id\": %" PRIu64 ", \"name\": ", first ? "" : ", ", id);
    json_str(out, name);
    fprintf(out, ", \"access\": \"%s\"}", access_str(flags));
}

void print_seg_json(const struct seg_info *si, const struct registry_snapshot *s, FILE *out)
{
    fputc('{', out);
    json_common(out, si->id, si->name, si->mode, si->uid, si->gid, si->created);
    fprintf(out, ", \"base\": %" PRIu64 ", \"base_hex\": \"%#" PRIx64 "\", \"size\": %" PRIu64
            ", \"page_size\": %" PRIu64 ", \"flags\": %u, \"noreserve\": %s, ",
            si->base, si->base, si->size, si->page_size, json_flags(si->flags),
            (si->flags & SEG_NORESERVE) ? "true" : "false");
    char page[24];
    fmt_page(si, page, sizeof page);
    fprintf(out, "\"page\": \"%s\", \"thp\": %s, \"paged\": %s, ", page,
            (si->flags & SEG_THP) ? "true" : "false", (si->flags & SEG_PAGED) ? "true" : "false");
    const struct seg_backing *b = backing_of(s, si->id);
    if (b)
        fprintf(out, "\"resident\": %" PRIu64 ", \"huge\": %" PRIu64 ", ", b->resident, b->huge);
    else
        fputs("\"resident\": null, \"huge\": null, ", out);
    fputs("\"vases\": [", out);
    int n = 0;
    for (size_t v = 0; v < s->nvases; v++)
        for (unsigned k = 0; k < s->vases[v].nsegs && k < VAS_SEGS_MAX; k++)
            if (s->vases[v].segs[k].sid == si->id)
                json_ref(out, n++ == 0, s->vases[v].id, s->vases[v].name,
                         s->vases[v].segs[k].flags);
    fputs("]}", out);
}

void print_vas_json(const struct vas_info *vi, FILE *out)
{
    fputc('{', out);
    json_common(out, vi->id, vi->name, vi->mode, vi->uid, vi->gid, vi->created);
    fprintf(out, ", \"heap\": %" PRIu64 ", \"segments\": [", vi->heap);
    for (unsigned k = 0; k < vi->nsegs && k < VAS_SEGS_MAX; k++)
        json_ref(out, k == 0, vi->segs[k].sid, vi->segs[k].name, vi->segs[k].flags);
    fputs("]}", out);
}

void print_ls_json(const struct registry_snapshot *s, FILE *out)
{
    fputs("{\n  \"root\": ", out);
    json_str(out, exomem_root());
    fputs(",\n  \"segments\": [", out);
    for (size_t i = 0; i < s->nsegs; i++) {
        fputs(i ? ",\n    " : "\n    ", out);
        print_seg_json(&s->segs[i], s, out);
    }
    fputs(s->nsegs ? "\n  ],\n  \"vases\": [" : "],\n  \"vases\": [", out);
    for (size_t i = 0; i < s->nvases; i++) {
        fputs(i ? ",\n    " : "\n    ", out);
        print_vas_json(&s->vases[i], out);
    }
    fprintf(out, "%s,\n  \"corrupt_segments\": %zu,\n  \"corrupt_vases\": %zu\n}\n",
            s->nvases ? "\n  ]" : "]", s->seg_corrupt, s->vas_corrupt);
}

/* --- details for `show` --- */

void print_seg_text(const struct seg_info *si, const struct registry_snapshot *s, FILE *out)
{
    char size[32], page[32], owner[160], created[64];
    fmt_size(si->size, size, sizeof size);
    fmt_page(si, page, sizeof page);
    fmt_owner(si->uid, si->gid, owner, sizeof owner);
    fmt_time(si->created, created, sizeof created);
    fprintf(out, "segment %s\n", si->name);
    fprintf(out, "  id         %" PRIu64 "\n", si->id);
    fprintf(out, "  base       %#" PRIx64 "\n", si->base);
    fprintf(out, "  end        %#" PRIx64 "\n", si->base + si->size);
    fprintf(out, "  size       %s (%" PRIu64 " bytes)\n", size, si->size);
    fprintf(out, "  page size  %s%s\n", page,
            (si->flags & SEG_THP) ? " (4K-granular, transparent huge pages)" : "");
    const struct seg_backing *b = backing_of(s, si->id);
    char resident[32] = "?", huge[32] = "?";
    fmt_backing(b, false, resident, sizeof resident);
    fmt_backing(b, true, huge, sizeof huge);
    fprintf(out, "  resident   %s\n", resident);
    fprintf(out, "  huge       %s\n", huge);
    fprintf(out, "  mode       %04o\n", (unsigned)si->mode);
    fprintf(out, "  owner      %s (uid %u, gid %u)\n", owner, (unsigned)si->uid,
            (unsigned)si->gid);
    char flags[64] = "";
    if (si->flags & SEG_NORESERVE)
        strcat(flags, ",noreserve");
    if (si->flags & SEG_THP)
        strcat(flags, ",thp");
    if (si->flags & SEG_PAGED)
        strcat(flags, ",paged");
    fprintf(out, "  flags      %s\n", flags[0] ? flags + 1 : "-");
    fprintf(out, "  created    %s\n", created);
    fputs("  vases      ", out);
    for (size_t r = 0; r < s->nsegs; r++)
        if (s->segs[r].id == si->id) {
            seg_tail(s, r, out);
            break;
        }
    fputc('\n', out);
}

void print_vas_text(const struct vas_info *vi, const struct registry_snapshot *s, FILE *out)
{
    char owner[160], created[64];
    fmt_owner(vi->uid, vi->gid, owner, sizeof owner);
    fmt_time(vi->created, created, sizeof created);
    fprintf(out, "vas %s\n", vi->name);
    fprintf(out, "  id         %" PRIu64 "\n", vi->id);
    fprintf(out, "  mode       %04o\n", (unsigned)vi->mode);
    fprintf(out, "  owner      %s (uid %u, gid %u)\n", owner, (unsigned)vi->uid,
            (unsigned)vi->gid);
    fprintf(out, "  created    %s\n", created);
    const struct seg_info *heap = vi->heap ? find_seg(s, vi->heap) : NULL;
    if (heap)
        fprintf(out, "  heap       %s\n", heap->name);
    else if (vi->heap)
        fprintf(out, "  heap       segment id %" PRIu64 "\n", vi->heap);
    else
        fputs("  heap       (the first read-write segment)\n", out);
    fprintf(out, "  segments   %u\n", vi->nsegs);
    for (unsigned k = 0; k < vi->nsegs && k < VAS_SEGS_MAX; k++) {
        const struct seg_info *si = find_seg(s, vi->segs[k].sid);
        fprintf(out, "    %-20s  %s", vi->segs[k].name, access_str(vi->segs[k].flags));
        if (si) {
            char size[32];
            fmt_size(si->size, size, sizeof size);
            fprintf(out, "  %#" PRIx64 "-%#" PRIx64 "  %s", si->base, si->base + si->size,
                    size);
        }
        fputc('\n', out);
    }
}
