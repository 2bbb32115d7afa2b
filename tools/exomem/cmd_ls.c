/* `exomem ls` and `exomem show`: read-only views of the registry. */
#include "commands.h"
#include "print.h"

#include <string.h>

const struct cli_cmd ls_cmd = {
    "ls", "[--json]",
    "List all segments and VASes.",
    "Segments are listed with id, name, base, size, page size (4K, THP, 2M or 1G), mode,\n"
    "owner, how much is resident and how much of that is in huge pages, and the VASes\n"
    "that list them; VASes with id, name, mode, owner and their segments (rw or ro).\n\n"
    "Options:\n"
    "  --json    print one JSON document instead, for scripts:\n"
    "            {\"root\", \"segments\": [...], \"vases\": [...], \"corrupt_segments\",\n"
    "             \"corrupt_vases\"}; see docs/cli.md for the keys of each object.\n",
};

const struct cli_cmd show_cmd = {
    "show", "[seg|vas] NAME [--json]",
    "Show one segment or VAS in detail.",
    "With only NAME, shows the segment and the VAS of that name; if both exist, both are\n"
    "shown, each labelled. 'show seg NAME' or 'show vas NAME' shows only that kind.\n"
    "Exits 3 when nothing of that name exists.\n\n"
    "Options:\n"
    "  --json    print {\"segment\": {...} or null, \"vas\": {...} or null}\n",
};

/* Reads the registry for a command; prints the failure when there is one. */
static int load(struct registry_snapshot *s)
{
    int rc = snapshot_load(s);
    if (rc != 0)
        return cli_fail(rc, "read the registry %s", exomem_root());
    if (s->seg_corrupt || s->vas_corrupt)
        fprintf(stderr, "exomem: warning: skipped %zu segment and %zu VAS records in %s that "
                "could not be read\n", s->seg_corrupt, s->vas_corrupt, exomem_root());
    return CLI_EXIT_OK;
}

int run_ls(int argc, char **argv)
{
    bool json = false;
    const struct cli_opt opts[] = {{"json", NULL, &json}};
    size_t npos;
    int rc = cli_parse(&ls_cmd, argc - 1, argv + 1, opts, 1, NULL, 0, 0, &npos);
    if (rc != CLI_CONTINUE)
        return rc;

    struct registry_snapshot s;
    rc = load(&s);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (json)
        print_ls_json(&s, stdout);
    else
        print_ls_text(&s, stdout);
    snapshot_free(&s);
    return CLI_EXIT_OK;
}

/* Look `name` up as a segment (want_seg) and a VAS (want_vas). Not finding one is no error
 * here; any other failure is reported and ends the command (its exit code is returned). */
static int lookup(const char *name, bool want_seg, bool want_vas, struct seg_info *si,
                  bool *have_seg, struct vas_info *vi, bool *have_vas)
{
    *have_seg = *have_vas = false;
    if (want_seg) {
        segid_t sid;
        int rc = seg_find(name, &sid);
        if (rc == 0)
            rc = seg_ctl(sid, SEG_CTL_INFO, si);
        if (rc != 0 && rc != -EXO_ENOENT)
            return cli_fail(rc, "show segment '%s'", name);
        *have_seg = rc == 0;
    }
    if (want_vas) {
        vasid_t vid;
        int rc = vas_find(name, &vid);
        if (rc == 0)
            rc = vas_ctl(VAS_CTL_INFO, vid, vi);
        if (rc != 0 && rc != -EXO_ENOENT)
            return cli_fail(rc, "show VAS '%s'", name);
        *have_vas = rc == 0;
    }
    return CLI_EXIT_OK;
}

int run_show(int argc, char **argv)
{
    bool json = false;
    const struct cli_opt opts[] = {{"json", NULL, &json}};
    const char *pos[2];
    size_t npos;
    int rc = cli_parse(&show_cmd, argc - 1, argv + 1, opts, 1, pos, 1, 2, &npos);
    if (rc != CLI_CONTINUE)
        return rc;

    bool want_seg = true, want_vas = true;
    const char *name = pos[npos - 1];
    if (npos == 2) {
        if (!strcmp(pos[0], "seg"))
            want_vas = false;
        else if (!strcmp(pos[0], "vas"))
            want_seg = false;
        else
            return cli_usage(&show_cmd, "expected 'seg' or 'vas' before NAME, not '%s'",
                             pos[0]);
    }

    static struct seg_info si;
    static struct vas_info vi;
    bool have_seg, have_vas;
    rc = lookup(name, want_seg, want_vas, &si, &have_seg, &vi, &have_vas);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (!have_seg && !have_vas) {
        const char *what = !want_vas ? "segment" : !want_seg ? "VAS" : "segment or VAS";
        fprintf(stderr, "exomem: show '%s': no %s of that name\n", name, what);
        return CLI_EXIT_NOTFOUND;
    }

    struct registry_snapshot s;
    rc = load(&s);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (json) {
        fputs("{\"segment\": ", stdout);
        if (have_seg)
            print_seg_json(&si, &s, stdout);
        else
            fputs("null", stdout);
        fputs(", \"vas\": ", stdout);
        if (have_vas)
            print_vas_json(&vi, stdout);
        else
            fputs("null", stdout);
        fputs("}\n", stdout);
    } else {
        if (have_seg)
            print_seg_text(&si, &s, stdout);
        if (have_seg && have_vas)
            fputc('\n', stdout);
        if (have_vas)
            print_vas_text(&vi, &s, stdout);
    }
    snapshot_free(&s);
    return CLI_EXIT_OK;
}
