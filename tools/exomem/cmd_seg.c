/* `exomem seg create|rm`: make and delete segments. Every argument is checked before the
 * registry is touched, so bad input changes nothing. */
#include "commands.h"

#include <strings.h>

const struct cli_cmd seg_cmd = {
    "seg", "SUBCOMMAND [ARGS]",
    "Create and delete segments.",
    "",
};

static const struct cli_cmd seg_create_cmd = {
    "seg create",
    "NAME --base ADDR --size SIZE [--page 4k|thp|2m|1g] [--mode MODE] [--noreserve]",
    "Create a segment.",
    "Creates segment NAME of SIZE bytes at virtual address ADDR. It is visible only\n"
    "through a VAS ('exomem vas add-seg').\n\n"
    "Arguments:\n"
    "  NAME            1-63 characters of [A-Za-z0-9._-], not starting with '.'\n"
    "Options:\n"
    "  --base ADDR     base address, hexadecimal (0x300000000000) or decimal; a multiple\n"
    "                  of the page size (required)\n"
    "  --size SIZE     bytes, with an optional K, M, G or T suffix (powers of 1024),\n"
    "                  e.g. 1G, 512M, 4096; a multiple of the page size (required)\n"
    "  --page PAGE     page size: 4k (default), thp (4K-granular, transparent huge\n"
    "                  pages from a tmpfs that allows them), 2m or 1g (hugetlbfs and its\n"
    "                  pool; root gets a private mount and a pool grown on demand);\n"
    "                  see docs/hugepages.md\n"
    "  --mode MODE     permission bits in octal, as chmod (default 0660)\n"
    "  --noreserve     do not reserve the memory up front\n\n"
    "Example:\n"
    "  exomem seg create data --base 0x300000000000 --size 1G --mode 0600\n",
};

static const struct cli_cmd seg_rm_cmd = {
    "seg rm", "NAME",
    "Delete a segment and its data.",
    "Fails with exit code 6 while a VAS lists the segment ('exomem vas rm-seg' first) or a\n"
    "process holds its lock.\n",
};

static int run_seg_create(int argc, char **argv)
{
    const char *base_s = NULL, *size_s = NULL, *page_s = NULL, *mode_s = NULL;
    bool noreserve = false;
    const struct cli_opt opts[] = {
        {"base", &base_s, NULL}, {"size", &size_s, NULL}, {"page", &page_s, NULL},
        {"mode", &mode_s, NULL}, {"noreserve", NULL, &noreserve},
    };
    const char *pos[1];
    size_t npos;
    int rc = cli_parse(&seg_create_cmd, argc - 1, argv + 1, opts, sizeof opts / sizeof opts[0],
                       pos, 1, 1, &npos);
    if (rc != CLI_CONTINUE)
        return rc;

    const struct cli_cmd *c = &seg_create_cmd;
    uint64_t base, size;
    struct seg_opts sopts = {.page_size = SEG_PAGE_4K, .flags = noreserve ? SEG_NORESERVE : 0};
    mode_t mode = 0660;
    if (!base_s)
        return cli_usage(c, "missing --base ADDR");
    if (!size_s)
        return cli_usage(c, "missing --size SIZE");
    if (!cli_parse_addr(base_s, &base))
        return cli_usage(c, "invalid --base '%s': expected 0x<hex> or decimal", base_s);
    if (!cli_parse_size(size_s, &size))
        return cli_usage(c, "invalid --size '%s': expected a number with optional K/M/G/T",
                         size_s);
    if (size == 0)
        return cli_usage(c, "invalid --size '%s': must be more than 0", size_s);
    if (page_s && !strcasecmp(page_s, "thp"))
        sopts.flags |= SEG_THP;
    else if (page_s && !cli_parse_page(page_s, &sopts.page_size))
        return cli_usage(c, "invalid --page '%s': expected 4k, thp, 2m or 1g", page_s);
    if (mode_s && !cli_parse_mode(mode_s, &mode))
        return cli_usage(c, "invalid --mode '%s': expected octal 0000-7777", mode_s);

    segid_t sid;
    rc = seg_alloc_ex(pos[0], base, size, mode, &sopts, &sid);
    if (rc != 0)
        return cli_fail(rc, "create segment '%s'", pos[0]);
    return CLI_EXIT_OK;
}

static int run_seg_rm(int argc, char **argv)
{
    const char *pos[1];
    size_t npos;
    int rc = cli_parse(&seg_rm_cmd, argc - 1, argv + 1, NULL, 0, pos, 1, 1, &npos);
    if (rc != CLI_CONTINUE)
        return rc;

    segid_t sid;
    rc = seg_find(pos[0], &sid);
    if (rc == 0)
        rc = seg_delete(sid);
    if (rc != 0)
        return cli_fail(rc, "remove segment '%s'", pos[0]);
    return CLI_EXIT_OK;
}

int run_seg(int argc, char **argv)
{
    static const struct cli_sub subs[] = {
        {"create", &seg_create_cmd, run_seg_create},
        {"rm", &seg_rm_cmd, run_seg_rm},
    };
    return cli_dispatch(&seg_cmd, subs, sizeof subs / sizeof subs[0], argc - 1, argv + 1);
}
