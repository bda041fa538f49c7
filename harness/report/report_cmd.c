/*
 * report_cmd.c - `cortex-bench report`: parse the flags, open the database
 * (never creating one), write the report (or, with --challenge, the
 * challenge report: challenge.h), say where.
 */
#include "report_cmd.h"

#include <stdio.h>
#include <string.h>

#include "challenge.h"
#include "cli_util.h"
#include "report.h"
#include "store.h"
#include "store_read.h"

/* The --challenge report: RUN resolved, the projection's options checked,
 * challenge.md written. 0, 1 or 2 after the message. */
static int challenge_report(store *s, const char *ref, const char *const *v, const char *out, const char *cmdline) {
    chal_opts o = {CHAL_DEFAULT_GBS, CHAL_DEFAULT_CORES, CHAL_DEFAULT_MEM_GB, cmdline};
    long cores = o.cores;
    if ((v[0] && cli_parse_double("--challenge-gbs", v[0], 0.01, 100000, &o.gbs)) ||
        (v[1] && cli_parse_int("--challenge-cores", v[1], 1, 4096, &cores)) ||
        (v[2] && cli_parse_double("--challenge-mem", v[2], 0.01, 1e6, &o.mem_gb)))
        return 2;
    o.cores = (int)cores;
    int64_t run = 0;
    char err[1024], path[CHAL_PATH_BYTES];
    if (store_resolve_run(s, ref, 0, 0, &run, err, sizeof err)) return cli_fail(1, "%s", err);
    if (chal_report_write(s, run, &o, out, path, err, sizeof err)) return cli_fail(1, "%s", err);
    printf("wrote %s\n", path);
    return 0;
}

/* report RUN [--baseline RUN|TAG] [--db FILE] [--out DIR], or
 * report --challenge RUN [--challenge-gbs GBS] [--challenge-cores N] [--challenge-mem GB] [--db FILE] [--out DIR] */
int cmd_report(int argc, char **argv) {
    static const char *const names[] = {"--baseline", "--db", "--out", "--challenge", "--challenge-gbs",
                                        "--challenge-cores", "--challenge-mem"};
    const char *vals[7] = {NULL, CLI_DEFAULT_DB, NULL, NULL, NULL, NULL, NULL}, *pos[1];
    int n_pos;
    int64_t run = 0, base = 0;
    if (cli_parse_flags(argc, argv, names, vals, 7, pos, 1, &n_pos)) return 2;
    if (vals[3] && (n_pos || vals[0]))
        return cli_fail(2, "%s", n_pos ? "report --challenge RUN takes its run as the flag's value, not also as RUN"
                                       : "--baseline does not apply to --challenge (the baseline is 30 tokens/s)");
    if (!vals[3] && (vals[4] || vals[5] || vals[6]))
        return cli_fail(2, "%s applies to --challenge RUN", vals[4] ? "--challenge-gbs" : vals[5] ? "--challenge-cores"
                                                                                          : "--challenge-mem");
    if (!vals[3] && n_pos != 1)
        return cli_fail(2, "%s", "report needs a run (an id, a tag or a git commit; cortex-bench list shows them)");
    store *s;
    if (cli_open_existing(vals[1], &s)) return 1;
    if (vals[3]) {
        char cmdline[1024];
        cli_join_argv(argc + 2, argv - 2, cmdline, sizeof cmdline);
        int rc = challenge_report(s, vals[3], vals + 4, vals[2], cmdline);
        store_close(s);
        return rc;
    }
    char err[1024];
    if (store_resolve_run(s, pos[0], 0, 0, &run, err, sizeof err) ||
        (vals[0] && store_resolve_run(s, vals[0], run, 0, &base, err, sizeof err))) {
        store_close(s);
        return cli_fail(1, "%s", err);
    }
    int rc = report_write(s, run, base, vals[2], err, sizeof err);
    store_close(s);
    if (rc) return cli_fail(1, "%s", err);
    if (vals[2]) printf("wrote %s/report.md\n", vals[2]);
    else printf("wrote reports/%lld/report.md\n", (long long)run);
    return 0;
}
