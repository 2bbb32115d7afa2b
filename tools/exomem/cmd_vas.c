/* `exomem vas create|add-seg|rm-seg|rm`: make, change and delete VASes. Every argument is
 * checked before the registry is touched, so bad input changes nothing. */
#include "commands.h"

const struct cli_cmd vas_cmd = {
    "vas", "SUBCOMMAND [ARGS]",
    "Create, change and delete virtual address spaces (VASes).",
    "",
};

static const struct cli_cmd vas_create_cmd = {
    "vas create", "NAME [--mode MODE]",
    "Create an empty VAS.",
    "Arguments:\n"
    "  NAME          1-63 characters of [A-Za-z0-9._-], not starting with '.'\n"
    "Options:\n"
    "  --mode MODE   permission bits in octal, as chmod (default 0660)\n",
};

static const struct cli_cmd vas_add_cmd = {
    "vas add-seg", "VAS SEG [--ro]",
    "Record segment SEG in VAS (read-write unless --ro).",
    "Every process that attaches VAS afterwards sees SEG at its base. Fails if SEG\n"
    "overlaps a segment already in VAS.\n\n"
    "Options:\n"
    "  --ro   attach read-only (a shared lock while switched in; read-write takes an\n"
    "         exclusive one)\n",
};

static const struct cli_cmd vas_rmseg_cmd = {
    "vas rm-seg", "VAS SEG",
    "Remove segment SEG from VAS.",
    "The segment itself remains; processes already attached keep their view until they\n"
    "detach.\n",
};

static const struct cli_cmd vas_rm_cmd = {
    "vas rm", "NAME",
    "Delete a VAS.",
    "Its segments remain (delete them with 'exomem seg rm').\n",
};

/* The ids of VAS vas_name and segment seg_name; a failure is reported as "<action>: ..."
 * naming the one that was not found. */
static int find_pair(const char *vas_name, const char *seg_name, const char *action,
                     vasid_t *vid, segid_t *sid)
{
    int rc = vas_find(vas_name, vid);
    if (rc != 0)
        return cli_fail(rc, "%s: VAS '%s'", action, vas_name);
    rc = seg_find(seg_name, sid);
    if (rc != 0)
        return cli_fail(rc, "%s: segment '%s'", action, seg_name);
    return CLI_EXIT_OK;
}

static int run_vas_create(int argc, char **argv)
{
    const char *mode_s = NULL;
    const struct cli_opt opts[] = {{"mode", &mode_s, NULL}};
    const char *pos[1];
    size_t npos;
    int rc = cli_parse(&vas_create_cmd, argc - 1, argv + 1, opts, 1, pos, 1, 1, &npos);
    if (rc != CLI_CONTINUE)
        return rc;

    mode_t mode = 0660;
    if (mode_s && !cli_parse_mode(mode_s, &mode))
        return cli_usage(&vas_create_cmd, "invalid --mode '%s': expected octal 0000-7777",
                         mode_s);
    vasid_t vid;
    rc = vas_create(pos[0], mode, &vid);
    if (rc != 0)
        return cli_fail(rc, "create VAS '%s'", pos[0]);
    return CLI_EXIT_OK;
}

/* Add segment `seg` to VAS `vas` (read-only if `ro`) or, if not `add`, remove it; both are
 * looked up first, and errors name the action. */
static int change_membership(const char *vas, const char *seg, bool add, bool ro)
{
    char action[256];
    if (add)
        snprintf(action, sizeof action, "add segment '%s' to VAS '%s'", seg, vas);
    else
        snprintf(action, sizeof action, "remove segment '%s' from VAS '%s'", seg, vas);
    vasid_t vid;
    segid_t sid;
    int rc = find_pair(vas, seg, action, &vid, &sid);
    if (rc != CLI_EXIT_OK)
        return rc;
    rc = add ? seg_attach(vid, sid, ro ? SEG_RDONLY : SEG_RDWR) : seg_detach(vid, sid);
    if (rc != 0)
        return cli_fail(rc, "%s", action);
    return CLI_EXIT_OK;
}

static int run_vas_add(int argc, char **argv)
{
    bool ro = false;
    const struct cli_opt opts[] = {{"ro", NULL, &ro}};
    const char *pos[2];
    size_t npos;
    int rc = cli_parse(&vas_add_cmd, argc - 1, argv + 1, opts, 1, pos, 2, 2, &npos);
    if (rc != CLI_CONTINUE)
        return rc;
    return change_membership(pos[0], pos[1], true, ro);
}

static int run_vas_rmseg(int argc, char **argv)
{
    const char *pos[2];
    size_t npos;
    int rc = cli_parse(&vas_rmseg_cmd, argc - 1, argv + 1, NULL, 0, pos, 2, 2, &npos);
    if (rc != CLI_CONTINUE)
        return rc;
    return change_membership(pos[0], pos[1], false, false);
}

static int run_vas_rm(int argc, char **argv)
{
    const char *pos[1];
    size_t npos;
    int rc = cli_parse(&vas_rm_cmd, argc - 1, argv + 1, NULL, 0, pos, 1, 1, &npos);
    if (rc != CLI_CONTINUE)
        return rc;

    vasid_t vid;
    rc = vas_find(pos[0], &vid);
    if (rc == 0)
        rc = vas_delete(vid);
    if (rc != 0)
        return cli_fail(rc, "remove VAS '%s'", pos[0]);
    return CLI_EXIT_OK;
}

int run_vas(int argc, char **argv)
{
    static const struct cli_sub subs[] = {
        {"create", &vas_create_cmd, run_vas_create},
        {"add-seg", &vas_add_cmd, run_vas_add},
        {"rm-seg", &vas_rmseg_cmd, run_vas_rmseg},
        {"rm", &vas_rm_cmd, run_vas_rm},
    };
    return cli_dispatch(&vas_cmd, subs, sizeof subs / sizeof subs[0], argc - 1, argv + 1);
}
