/* exomem: command-line management of the exomem registry (segments and VASes).
 *
 *   exomem ls [--json]
 *   exomem show [seg|vas] NAME [--json]
 *   exomem seg create NAME --base ADDR --size SIZE [--page 4k|2m|1g] [--mode MODE]
 *   exomem seg rm NAME
 *   exomem vas create NAME [--mode MODE]
 *   exomem vas add-seg VAS SEG [--ro]
 *   exomem vas rm-seg VAS SEG
 *   exomem vas rm NAME
 *   exomem run --heap-segment SIZE [--page 4k|2m|1g] [--base ADDR] [--heap-in WHO] -- PROGRAM [ARGS]
 *   exomem pager stats PID [--json]
 *
 * Exit codes (enum cli_exit in util.h): 0 ok, 1 operation failed, 2 usage error (including
 * bad names, alignment, size and page size), 3 not found, 4 permission denied, 5 exists
 * already, 6 busy or in use. Success is silent except for ls and show. Uses the public
 * API only (plus exo_parse_size for sizes).
 */
#include "commands.h"

#include <string.h>

static const struct cli_cmd top_cmd = {
    "", "[--help | --version] COMMAND [ARGS]",
    "Manage exomem segments and virtual address spaces (VASes); look at pager regions.",
    "",
};

static const char top_help[] =
    "\nThe registry is the directory $EXOMEM_ROOT (default /dev/shm/exomem-<your uid>).\n\n"
    "Commands:\n"
    "  ls [--json]                      list all segments and VASes\n"
    "  show [seg|vas] NAME [--json]     show a segment and/or VAS in detail\n"
    "  seg create NAME --base ADDR --size SIZE [--page 4k|2m|1g] [--mode MODE]\n"
    "             [--noreserve]         create a segment (mode default 0660)\n"
    "  seg rm NAME                      delete a segment\n"
    "  vas create NAME [--mode MODE]    create an empty VAS (mode default 0660)\n"
    "  vas add-seg VAS SEG [--ro]       record a segment in a VAS (read-write unless --ro)\n"
    "  vas rm-seg VAS SEG               remove a segment from a VAS\n"
    "  vas rm NAME                      delete a VAS (its segments remain)\n"
    "  run --heap-segment SIZE [--page 4k|2m|1g] [--base ADDR] [--heap-in WHO] -- PROGRAM\n"
    "      [ARGS]                       run PROGRAM with its malloc heap in one segment\n"
    "  pager stats PID [--json]         counters of a running process's pager regions\n\n"
    "Options:\n"
    "  -h, --help       this help; 'exomem COMMAND [SUBCOMMAND] --help' for one command\n"
    "  -V, --version    print the version\n\n"
    "ADDR is hexadecimal (0x...) or decimal; SIZE takes a K, M, G or T suffix; MODE is\n"
    "octal. Commands that change the registry print nothing when they succeed.\n\n"
    "Exit status:\n"
    "  0  success\n"
    "  1  the operation failed (other exomem errors, e.g. overlap, no huge pages)\n"
    "  2  usage error: unknown command or option, missing or malformed argument, bad\n"
    "     name (invalid character, too long), misaligned base or size, bad page size\n"
    "  3  not found\n"
    "  4  permission denied\n"
    "  5  exists already\n"
    "  6  busy or in use (segment listed in a VAS, lock held)\n"
    "Errors go to stderr as 'exomem: <what failed>: <reason> (<detail>)'. A command that\n"
    "fails changes nothing.\n";

static void print_help(void)
{
    cli_help(&top_cmd, stdout);
    fputs(top_help, stdout);
}

int main(int argc, char **argv)
{
    static const struct cli_sub commands[] = {
        {"ls", &ls_cmd, run_ls},
        {"show", &show_cmd, run_show},
        {"seg", &seg_cmd, run_seg},
        {"vas", &vas_cmd, run_vas},
        {"run", &run_cmd, run_run},
        {"pager", &pager_cmd, run_pager},
    };
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
                      !strcmp(argv[1], "help"))) {
        print_help();
        return CLI_EXIT_OK;
    }
    if (argc >= 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V"))) {
        printf("exomem %s\n", EXOMEM_VERSION);
        return CLI_EXIT_OK;
    }
    int rc = cli_dispatch(&top_cmd, commands, sizeof commands / sizeof commands[0], argc - 1,
                          argv + 1);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        perror("exomem: write");
        return CLI_EXIT_FAIL;
    }
    return rc;
}
