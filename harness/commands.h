/*
 * commands.h - the table of cortex-bench subcommands (commands.c), which
 * bench_main dispatches on and which gives every subcommand its --help.
 */
#ifndef CB_COMMANDS_H
#define CB_COMMANDS_H

#include "cli_util.h"

/* Every subcommand, in the order `cortex-bench --help` lists them; ends with
 * an entry whose name is NULL. */
extern const cli_command bench_commands[];

#endif
