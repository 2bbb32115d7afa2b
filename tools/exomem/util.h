/* Shared machinery of the exomem command-line tool: exit codes, error reporting, option
 * parsing and strict parsing of numbers (addresses, sizes, page sizes, modes). */
#ifndef EXOMEM_CLI_UTIL_H
#define EXOMEM_CLI_UTIL_H

#include <exomem/exomem.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* Exit codes, for scripts (also listed by `exomem --help` and in docs/cli.md):
 *   0  success
 *   1  the operation failed (an exomem error without a more specific code below)
 *   2  usage error: unknown command or option, missing or malformed argument, and the
 *      library's verdicts on bad input (EXO_EBADNAME, EXO_ENAMETOOLONG, EXO_EALIGN,
 *      EXO_ESIZE, EXO_EPAGESIZE); nothing was changed
 *   3  not found (EXO_ENOENT)
 *   4  permission denied (EXO_EACCES, EXO_EPERM)
 *   5  exists already (EXO_EEXIST)
 *   6  busy or in use (EXO_EBUSY, EXO_EINUSE)
 */
enum cli_exit {
    CLI_EXIT_OK = 0,
    CLI_EXIT_FAIL = 1,
    CLI_EXIT_USAGE = 2,
    CLI_EXIT_NOTFOUND = 3,
    CLI_EXIT_DENIED = 4,
    CLI_EXIT_EXISTS = 5,
    CLI_EXIT_BUSY = 6,
};

/* cli_parse() result meaning "arguments are fine, go on" (every exit code is >= 0). */
#define CLI_CONTINUE (-1)

/* What one command or subcommand is called and what it does, for usage and --help. */
struct cli_cmd {
    const char *path;       /* command words, e.g. "seg create" */
    const char *synopsis;   /* arguments, e.g. "NAME --base ADDR --size SIZE" */
    const char *summary;    /* one line for the command lists */
    const char *help;       /* the rest of --help: arguments, options, examples */
};

/* One long option ("--name VALUE", "--name=VALUE" or, for flags, "--name"). */
struct cli_opt {
    const char *name;       /* without the leading "--" */
    const char **value;     /* receives the value of a value option; NULL for a flag */
    bool *flag;             /* set to true when a flag option is given; NULL for values */
};

/* A subcommand of a command group (e.g. "create" of "seg"). */
struct cli_sub {
    const char *word;
    const struct cli_cmd *cmd;
    int (*run)(int argc, char **argv);   /* argv[0] is the subcommand word */
};

/* Map a (negative or positive) exomem code to the exit code scripts see. */
int cli_exit_code(int code);

/* Report a failed library call on stderr as
 *   exomem: <what>: <exomem_strerror(code)> (<exomem_last_error()>)
 * (the detail only when it says something more) and return cli_exit_code(code). */
int cli_fail(int code, const char *what_fmt, ...) __attribute__((format(printf, 2, 3)));

/* Report a usage error for cmd on stderr with its synopsis; returns CLI_EXIT_USAGE. */
int cli_usage(const struct cli_cmd *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Print cmd's full --help text on out. */
void cli_help(const struct cli_cmd *cmd, FILE *out);

/* Parse the arguments of cmd (argv[0..argc), after the command words) against opts.
 * Positional arguments go to pos[0..max_pos); between min_pos and max_pos are required.
 * "--help"/"-h" prints cmd's help and returns CLI_EXIT_OK; "--" ends the options. Every
 * option may appear at most once. Returns CLI_CONTINUE when the arguments are acceptable,
 * else the exit code to return (after printing the problem). */
int cli_parse(const struct cli_cmd *cmd, int argc, char **argv, const struct cli_opt *opts,
              size_t nopts, const char **pos, size_t min_pos, size_t max_pos, size_t *npos);

/* Run the subcommand of `group` named by argv[0] (argv[0..argc) after the group word).
 * "--help" or "-h" lists the subcommands; a missing or unknown one is a usage error. */
int cli_dispatch(const struct cli_cmd *group, const struct cli_sub *subs, size_t nsubs,
                 int argc, char **argv);

/* Strict number parsing; each returns false for anything but the documented forms.
 * Address: hexadecimal "0x..." or decimal, no sign, no suffix, no overflow. */
bool cli_parse_addr(const char *s, uint64_t *out);

/* Size: decimal (or 0x hex) with an optional K, M, G or T suffix (powers of 1024, either
 * case, optionally followed by "iB" or "B"); no sign, no leading zeros (they would read as
 * octal), no overflow. */
bool cli_parse_size(const char *s, uint64_t *out);

/* Page size: a size (as above) equal to 4K, 2M or 1G, e.g. "4k", "2M", "1g", "4096". */
bool cli_parse_page(const char *s, uint64_t *out);

/* Mode: octal digits only (as chmod: "660", "0660", "2775"), value at most 07777. */
bool cli_parse_mode(const char *s, mode_t *out);

#endif
