/*
 * bench_main.c - the `cortex-bench` program: find the subcommand in the
 * command table (commands.c) and run it through cli_command_main, which
 * parses its flags from the flag table (commands.c) and answers -h/--help
 * the same way for every one.
 */
#include <stdio.h>
#include <string.h>

#include "cli_util.h"
#include "commands.h"

/* The list of subcommands, each with its arguments and what it does. */
static void usage(FILE *out) {
    fprintf(out, "usage: cortex-bench <command> [options]   (cortex-bench <command> --help: its flags)\n\ncommands:\n");
    for (const cli_command *c = bench_commands; c->name; c++) {
        char head[64];
        snprintf(head, sizeof head, "%s%s%s", c->name, *c->args ? " " : "", c->args);
        fprintf(out, "  %-20s %s\n", head, c->summary);
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    for (const cli_command *c = bench_commands; c->name; c++)
        if (!strcmp(cmd, c->name)) return cli_command_main(c, bench_flags, n_bench_flags, argc, argv);
    return cli_fail(2, "unknown command '%s' (cortex-bench --help lists them)", cmd);
}
