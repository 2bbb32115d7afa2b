/* The top-level commands of the exomem tool; main.c dispatches to them. Each run function
 * takes argv[0] = its own command word and returns an exit code (see util.h). */
#ifndef EXOMEM_CLI_COMMANDS_H
#define EXOMEM_CLI_COMMANDS_H

#include "util.h"

extern const struct cli_cmd ls_cmd, show_cmd, seg_cmd, vas_cmd, run_cmd, pager_cmd;

int run_ls(int argc, char **argv);
int run_show(int argc, char **argv);
int run_seg(int argc, char **argv);
int run_vas(int argc, char **argv);
int run_run(int argc, char **argv);
int run_pager(int argc, char **argv);

#endif
