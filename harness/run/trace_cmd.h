/*
 * trace_cmd.h - `cortex-bench trace`: write a synthetic request trace.
 */
#ifndef CB_TRACE_CMD_H
#define CB_TRACE_CMD_H

/* Flags as commands.c lists them (argv without the command word); 0, 1 (the
 * file could not be written) or 2 (bad flag). */
int cmd_trace(int argc, char **argv);

#endif
