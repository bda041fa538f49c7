/*
 * trace_cmd.h - `cortex-bench trace`: write a synthetic request trace.
 */
#ifndef CB_TRACE_CMD_H
#define CB_TRACE_CMD_H

#include "trace_gen.h"

/* Its options: the generator's parameters (the flags in commands.c fill them) and -o. */
typedef struct trace_opts {
    trace_params p;
    const char *out; /* -o FILE, required */
} trace_opts;

/* The defaults (a one-minute chat-like trace over four adapters), which
 * `trace --help` shows. */
void trace_opts_init(void *o);
/* The subcommand (opts: a trace_opts, its flags parsed); 0, 1 (the file
 * could not be written) or 2 (bad flags). */
struct cli_args;
int cmd_trace(void *opts, const struct cli_args *a);

#endif
