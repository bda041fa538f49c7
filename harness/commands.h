/*
 * commands.h - the tables of cortex-bench (commands.c): its subcommands,
 * which bench_main dispatches on, and the flags of all of them, which
 * cli_command_main parses and prints each subcommand's --help from.
 */
#ifndef CB_COMMANDS_H
#define CB_COMMANDS_H

#include "cli_util.h"

/* Every subcommand, in the order `cortex-bench --help` lists them; ends with
 * an entry whose name is NULL. */
extern const cli_command bench_commands[];
/* Every flag of every subcommand (cx_flag.cmds: which), n_bench_flags of them. */
extern const cx_flag *const bench_flags;
extern const int n_bench_flags;

#endif
