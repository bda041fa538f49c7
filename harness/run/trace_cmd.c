/*
 * trace_cmd.c - `cortex-bench trace` (see trace_cmd.h): the flags onto
 * trace_params, then trace_write (trace_gen.c) does the work.
 */
#include "trace_cmd.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cli_util.h"
#include "trace_gen.h"
#include "workload.h"

/* Parse the flags (defaults: a one-minute chat-like trace over four adapters;
 * --adapters 0: a plain trace for servers without adapters) and write the trace. */
int cmd_trace(int argc, char **argv) {
    trace_params p;
    memset(&p, 0, sizeof p);
    char err[512];
    p.requests = 64;
    p.rate = 1.0;
    p.zipf_s = 1.1;
    p.adapters = 4;
    p.seed = 1;
    trace_len_parse("uniform:32,256", "--prompt-len", &p.prompt_len, err, sizeof err);
    trace_len_parse("uniform:16,128", "--gen-len", &p.gen_len, err, sizeof err);
    const char *out = NULL;
    int zipf_given = 0;
    for (int i = 0; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long x;
        double d;
        if (!v) return cli_fail(2, "%s needs a value", a);
        if (!strcmp(a, "--requests")) { if (cli_parse_int(a, v, 1, 10000000, &x)) return 2; p.requests = (int)x; }
        else if (!strcmp(a, "--rate")) { if (cli_parse_double(a, v, 1e-6, 1e6, &d)) return 2; p.rate = d; }
        else if (!strcmp(a, "--zipf")) { if (cli_parse_double(a, v, 0, 100, &d)) return 2; p.zipf_s = d; zipf_given = 1; }
        else if (!strcmp(a, "--adapters")) { if (cli_parse_int(a, v, 0, 100000, &x)) return 2; p.adapters = (int)x; }
        else if (!strcmp(a, "--seed")) { if (cli_parse_int(a, v, 0, 0x7fffffffffffffffL, &x)) return 2; p.seed = (uint64_t)x; }
        else if (!strcmp(a, "--prompt-len")) { if (trace_len_parse(v, a, &p.prompt_len, err, sizeof err)) return cli_fail(2, "%s", err); }
        else if (!strcmp(a, "--gen-len")) { if (trace_len_parse(v, a, &p.gen_len, err, sizeof err)) return cli_fail(2, "%s", err); }
        else if (!strcmp(a, "--system-prefix")) { if (cli_parse_int(a, v, 0, TRACE_MAX_LEN / 2, &x)) return 2; p.system_prefix = (int)x; }
        else if (!strcmp(a, "--priorities")) { if (trace_prio_parse(v, &p, err, sizeof err)) return cli_fail(2, "%s", err); }
        else if (!strcmp(a, "--deadline-ms")) { if (cli_parse_double(a, v, 1e-3, 1e9, &d)) return 2; p.deadline_ms = d; }
        else if (!strcmp(a, "-o")) out = v;
        else return cli_fail(2, "trace: unknown option '%s' (cortex-bench trace --help lists them)", a);
    }
    if (!out) return cli_fail(2, "%s", "trace needs -o FILE.jsonl");
    if (p.adapters == 0) { /* a plain trace: nothing for --zipf to shape; the sidecar records zipf 0 */
        if (zipf_given && p.zipf_s != 0)
            return cli_fail(2, "--zipf %g: --adapters 0 writes a plain trace (every request adapter 0), no adapter"
                            " popularity to shape", p.zipf_s);
        p.zipf_s = 0;
    }
    char cmdline[2048]; /* as typed, for the sidecar: "cortex-bench trace ..." (argv[-2..-1] are ours) */
    cli_join_argv(argc + 2, argv - 2, cmdline, sizeof cmdline);
    if (trace_write(&p, out, cmdline, err, sizeof err)) return cli_fail(1, "%s", err);
    fprintf(stderr, "wrote %s (%d requests) and its sidecar %s" WL_META_SUFFIX "\n", out, p.requests, out);
    return 0;
}
