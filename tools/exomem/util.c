/* Exit codes, error messages, option parsing and strict number parsing for the CLI. */
#include "util.h"

#include "internal.h"   /* exo_parse_size */

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int cli_exit_code(int code)
{
    if (code < 0)
        code = -code;
    switch (code) {
    case EXO_OK:
        return CLI_EXIT_OK;
    case EXO_ENOENT:
        return CLI_EXIT_NOTFOUND;
    case EXO_EACCES:
    case EXO_EPERM:
        return CLI_EXIT_DENIED;
    case EXO_EEXIST:
        return CLI_EXIT_EXISTS;
    case EXO_EBUSY:
    case EXO_EINUSE:
        return CLI_EXIT_BUSY;
    /* The library's verdicts on what the user typed: nothing was changed, fix the input. */
    case EXO_EBADNAME:
    case EXO_ENAMETOOLONG:
    case EXO_EALIGN:
    case EXO_ESIZE:
    case EXO_EPAGESIZE:
        return CLI_EXIT_USAGE;
    default:
        return CLI_EXIT_FAIL;
    }
}

int cli_fail(int code, const char *what_fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, what_fmt);
    vsnprintf(what, sizeof what, what_fmt, ap);
    va_end(ap);

    const char *msg = exomem_strerror(code);
    const char *detail = exomem_last_error();
    if (detail && *detail && strcmp(detail, msg) != 0)
        fprintf(stderr, "exomem: %s: %s (%s)\n", what, msg, detail);
    else
        fprintf(stderr, "exomem: %s: %s\n", what, msg);
    return cli_exit_code(code);
}

/* "exomem seg create" or just "exomem" for the top level (empty path). */
static void print_prog(const struct cli_cmd *cmd, FILE *out)
{
    fputs("exomem", out);
    if (cmd->path && *cmd->path)
        fprintf(out, " %s", cmd->path);
}

int cli_usage(const struct cli_cmd *cmd, const char *fmt, ...)
{
    va_list ap;
    fputs("exomem: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nusage: ", stderr);
    print_prog(cmd, stderr);
    fprintf(stderr, " %s\nTry '", cmd->synopsis);
    print_prog(cmd, stderr);
    fputs(" --help' for more information.\n", stderr);
    return CLI_EXIT_USAGE;
}

void cli_help(const struct cli_cmd *cmd, FILE *out)
{
    fputs("usage: ", out);
    print_prog(cmd, out);
    fprintf(out, " %s\n\n%s\n", cmd->synopsis, cmd->summary);
    if (cmd->help && *cmd->help)
        fprintf(out, "\n%s", cmd->help);
}

static bool is_help(const char *a)
{
    return !strcmp(a, "--help") || !strcmp(a, "-h");
}

/* The option whose name is the first len characters of `name`, or -1. */
static int find_opt(const struct cli_opt *opts, size_t nopts, const char *name, size_t len)
{
    for (size_t i = 0; i < nopts; i++)
        if (strlen(opts[i].name) == len && !strncmp(opts[i].name, name, len))
            return (int)i;
    return -1;
}

int cli_parse(const struct cli_cmd *cmd, int argc, char **argv, const struct cli_opt *opts,
              size_t nopts, const char **pos, size_t min_pos, size_t max_pos, size_t *npos)
{
    /* --help wins over any other problem on the line, as users expect. */
    for (int i = 0; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (is_help(argv[i])) {
            cli_help(cmd, stdout);
            return CLI_EXIT_OK;
        }
    }

    enum { MAX_OPTS = 16 };
    bool seen[MAX_OPTS] = {false};
    if (nopts > MAX_OPTS)
        nopts = MAX_OPTS;
    bool options_done = false;
    *npos = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (options_done || a[0] != '-' || a[1] == '\0') {
            if (*npos >= max_pos)
                return cli_usage(cmd, "unexpected argument '%s'", a);
            pos[(*npos)++] = a;
            continue;
        }
        if (!strcmp(a, "--")) {
            options_done = true;
            continue;
        }
        if (a[1] != '-')
            return cli_usage(cmd, "unknown option '%s'", a);
        const char *name = a + 2;
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        int k = find_opt(opts, nopts, name, len);
        if (k < 0)
            return cli_usage(cmd, "unknown option '--%.*s'", (int)len, name);
        const struct cli_opt *o = &opts[k];
        if (seen[k])
            return cli_usage(cmd, "option --%s given more than once", o->name);
        seen[k] = true;
        if (!o->value) {
            if (eq)
                return cli_usage(cmd, "option --%s takes no value", o->name);
            *o->flag = true;
            continue;
        }
        if (eq) {
            *o->value = eq + 1;
        } else if (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) {
            *o->value = argv[++i];
        } else {
            return cli_usage(cmd, "option --%s needs a value", o->name);
        }
    }
    if (*npos < min_pos)
        return cli_usage(cmd, "missing argument");
    return CLI_CONTINUE;
}

static void list_subcommands(const struct cli_cmd *group, const struct cli_sub *subs,
                             size_t nsubs, FILE *out)
{
    cli_help(group, out);
    fputs("\nSubcommands:\n", out);
    for (size_t i = 0; i < nsubs; i++)
        fprintf(out, "  %s %s\n        %s\n", subs[i].word, subs[i].cmd->synopsis,
                subs[i].cmd->summary);
    fputs("\nRun '", out);
    print_prog(group, out);
    fputs(" SUBCOMMAND --help' for the details of one.\n", out);
}

int cli_dispatch(const struct cli_cmd *group, const struct cli_sub *subs, size_t nsubs,
                 int argc, char **argv)
{
    if (argc < 1)
        return cli_usage(group, *group->path ? "missing subcommand" : "missing command");
    if (is_help(argv[0])) {
        list_subcommands(group, subs, nsubs, stdout);
        return CLI_EXIT_OK;
    }
    for (size_t i = 0; i < nsubs; i++)
        if (!strcmp(argv[0], subs[i].word))
            return subs[i].run(argc, argv);
    if (argv[0][0] == '-')
        return cli_usage(group, "unknown option '%s'", argv[0]);
    return cli_usage(group, "unknown %s '%s'", *group->path ? "subcommand" : "command", argv[0]);
}

/* strtoull over a string already checked to hold only digits of `base`. */
static bool digits_to_u64(const char *digits, int base, uint64_t *out)
{
    errno = 0;
    char *end;
    unsigned long long v = strtoull(digits, &end, base);
    if (errno || *end != '\0' || end == digits)
        return false;
    *out = v;
    return true;
}

bool cli_parse_addr(const char *s, uint64_t *out)
{
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        const char *d = s + 2;
        if (!*d)
            return false;
        for (const char *p = d; *p; p++)
            if (!isxdigit((unsigned char)*p))
                return false;
        return digits_to_u64(d, 16, out);
    }
    if (!*s)
        return false;
    for (const char *p = s; *p; p++)
        if (!isdigit((unsigned char)*p))
            return false;
    return digits_to_u64(s, 10, out);
}

bool cli_parse_size(const char *s, uint64_t *out)
{
    /* exo_parse_size reads "010" as octal 8: refuse the surprise instead. */
    if (!isdigit((unsigned char)s[0]) || (s[0] == '0' && isdigit((unsigned char)s[1])))
        return false;
    return exo_parse_size(s, out) == 0;
}

bool cli_parse_page(const char *s, uint64_t *out)
{
    uint64_t v;
    if (!cli_parse_size(s, &v))
        return false;
    if (v != SEG_PAGE_4K && v != SEG_PAGE_2M && v != SEG_PAGE_1G)
        return false;
    *out = v;
    return true;
}

bool cli_parse_mode(const char *s, mode_t *out)
{
    size_t n = strlen(s);
    if (n == 0 || n > 12)
        return false;
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '7')
            return false;
    uint64_t v;
    if (!digits_to_u64(s, 8, &v) || v > 07777)
        return false;
    *out = (mode_t)v;
    return true;
}
