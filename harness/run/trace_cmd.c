/*
 * trace_cmd.c - `cortex-bench trace` (see trace_cmd.h): the flags (commands.c)
 * parsed onto trace_params, the checks across them, then trace_write
 * (trace_gen.c) does the work.
 */
#include "trace_cmd.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cli_util.h"
#include "workload.h"

/* See trace_cmd.h. --adapters 0 makes a plain trace for servers without adapters. */
void trace_opts_init(void *op) {
    trace_opts *o = op;
    memset(o, 0, sizeof *o);
    char err[256];
    o->p.requests = 64;
    o->p.rate = 1.0;
    o->p.zipf_s = 1.1;
    o->p.adapters = 4;
    o->p.seed = 1;
    trace_len_parse("uniform:32,256", "--prompt-len", &o->p.prompt_len, err, sizeof err);
    trace_len_parse("uniform:16,128", "--gen-len", &o->p.gen_len, err, sizeof err);
}

/* Check the flags together and write the trace and its sidecar. */
int cmd_trace(void *opts, const cli_args *a) {
    trace_opts *o = opts;
    trace_params *p = &o->p;
    char err[512];
    if (!o->out) return cli_fail(2, "%s", "trace needs -o FILE.jsonl");
    if (p->adapters == 0) { /* a plain trace: nothing for --zipf to shape; the sidecar records zipf 0 */
        if (cx_flags_given(a->flags, offsetof(trace_opts, p.zipf_s), sizeof p->zipf_s) && p->zipf_s != 0)
            return cli_fail(2, "--zipf %g: --adapters 0 writes a plain trace (every request adapter 0), no adapter"
                            " popularity to shape", p->zipf_s);
        p->zipf_s = 0;
    }
    char cmdline[2048]; /* as typed, for the sidecar: "cortex-bench trace ..." */
    cli_join_argv(a->argc, a->argv, cmdline, sizeof cmdline);
    if (trace_write(p, o->out, cmdline, err, sizeof err)) return cli_fail(1, "%s", err);
    fprintf(stderr, "wrote %s (%d requests) and its sidecar %s" WL_META_SUFFIX "\n", o->out, p->requests, o->out);
    return 0;
}
