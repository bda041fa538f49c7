/*
 * report_cmd.c - `cortex-bench report`: parse the flags, open the database
 * (never creating one), check the baseline (a VALID run comparable with RUN),
 * write the report (or, with --challenge, the challenge report: challenge.h),
 * say where. A report of an INVALID run is written (its outcomes only) and
 * exits CB_EXIT_INVALID, as every command given an INVALID run.
 */
#include "report_cmd.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "store_gate.h"

#include "challenge.h"
#include "cli_util.h"
#include "report.h"
#include "store.h"
#include "store_read.h"

/* After a report of run `id` was written: 0, or CB_EXIT_INVALID with one
 * line when the run is INVALID (the report shows its outcomes only). */
static int report_exit(store *s, int64_t id) {
    store_run r;
    if (store_run_load(s, id, &r) == 1 && !strcmp(r.validity, "invalid"))
        return cli_fail(CB_EXIT_INVALID, "run %lld is INVALID: %s; its report shows the request outcomes only",
                        (long long)id, r.validity_reasons);
    return CB_EXIT_OK;
}

/*
 * The baseline of `report RUN --baseline REF`: REF resolved as every command
 * resolves a run (runs of RUN's configuration first, never RUN itself for a
 * tag or commit), then held to what a comparison needs: a measurement
 * (complete and VALID) comparable with RUN (store_comparable: machine,
 * model, build, threads, workload bytes, ...) with RUN's configuration
 * (compare_key) and workload name. 0 with *base, or CB_EXIT_USAGE after one
 * line naming why not (CB_EXIT_FAILED on a database error).
 */
static int report_baseline(store *s, const char *ref, int64_t run, int64_t *base) {
    char err[1024], diff[512];
    store_run b, r;
    if (store_resolve_run(s, ref, run, run, base, err, sizeof err)) return cli_fail(CB_EXIT_USAGE, "--baseline: %s", err);
    if (store_run_load(s, *base, &b) != 1 || store_run_load(s, run, &r) != 1 ||
        store_comparable(s, *base, run, diff, sizeof diff) < 0)
        return cli_fail(CB_EXIT_FAILED, "--baseline %s: %s", ref, store_errmsg(s));
    long long id = (long long)*base;
    if (*base == run) return cli_fail(CB_EXIT_USAGE, "--baseline %s is run %lld itself", ref, id);
    if (!b.measurement) { /* STORE_MEASUREMENT: complete and VALID */
        if (strcmp(b.status, "complete"))
            return cli_fail(CB_EXIT_USAGE, "--baseline %s: run %lld is %s, not a measurement", ref, id, b.status);
        return cli_fail(CB_EXIT_USAGE, "--baseline %s: run %lld is INVALID, not a measurement: %s", ref, id,
                        *b.validity_reasons ? b.validity_reasons : "no verdict stored");
    }
    if (diff[0])
        return cli_fail(CB_EXIT_USAGE, "--baseline %s: run %lld is not comparable with run %lld: %s differ%s", ref, id,
                        (long long)run, diff, strchr(diff, ',') ? "" : "s");
    if (strcmp(b.key, r.key) || strcmp(b.workload, r.workload))
        return cli_fail(CB_EXIT_USAGE, "--baseline %s: run %lld is not comparable with run %lld: %s", ref, id,
                        (long long)run, strcmp(b.key, r.key) ? "the configuration (compare_key) differs" : "the workload differs");
    return 0;
}

/* The --challenge report: RUN resolved, challenge.md written. 0, 1 or 4 after the message. */
static int challenge_report(store *s, const char *ref, chal_opts o, const char *out, const char *cmdline) {
    o.cmdline = cmdline;
    int64_t run = 0;
    char err[1024], path[CHAL_PATH_BYTES];
    if (store_resolve_run(s, ref, 0, 0, &run, err, sizeof err)) return cli_fail(1, "%s", err);
    if (chal_report_write(s, run, &o, out, path, err, sizeof err)) return cli_fail(1, "%s", err);
    printf("wrote %s\n", path);
    return report_exit(s, run);
}

/* See report_cmd.h. */
void report_opts_init(void *op) {
    report_opts *o = op;
    memset(o, 0, sizeof *o);
    o->db = cli_default_db();
    o->chal.gbs = CHAL_DEFAULT_GBS;
    o->chal.cores = CHAL_DEFAULT_CORES;
    o->chal.mem_gb = CHAL_DEFAULT_MEM_GB;
}

/* report RUN [--baseline RUN|TAG] [--db FILE] [--out DIR], or
 * report --challenge RUN [--challenge-gbs GBS] [--challenge-cores N] [--challenge-mem GB] [--db FILE] [--out DIR] */
int cmd_report(void *opts, const cli_args *a) {
    const report_opts *o = opts;
    int n_pos = a->flags->n_pos;
    int64_t run = 0, base = 0;
    if (o->challenge && (n_pos || o->baseline))
        return cli_fail(2, "%s", n_pos ? "report --challenge RUN takes its run as the flag's value, not also as RUN"
                                       : "--baseline does not apply to --challenge (the baseline is 30 tokens/s)");
    int gbs = cx_flags_given(a->flags, offsetof(report_opts, chal.gbs), sizeof o->chal.gbs),
        cores = cx_flags_given(a->flags, offsetof(report_opts, chal.cores), sizeof o->chal.cores),
        mem = cx_flags_given(a->flags, offsetof(report_opts, chal.mem_gb), sizeof o->chal.mem_gb);
    if (!o->challenge && (gbs || cores || mem))
        return cli_fail(2, "%s applies to --challenge RUN", gbs ? "--challenge-gbs" : cores ? "--challenge-cores"
                                                                                    : "--challenge-mem");
    if (!o->challenge && n_pos != 1)
        return cli_fail(2, "%s", "report needs a run (an id, a tag or a git commit; cortex-bench list shows them)");
    store *s;
    if (cli_open_existing(o->db, &s)) return 1;
    if (o->challenge) {
        char cmdline[1024];
        cli_join_argv(a->argc, a->argv, cmdline, sizeof cmdline);
        int rc = challenge_report(s, o->challenge, o->chal, o->out, cmdline);
        store_close(s);
        return rc;
    }
    char err[1024];
    if (store_resolve_run(s, a->flags->pos[0], 0, 0, &run, err, sizeof err)) {
        store_close(s);
        return cli_fail(1, "%s", err);
    }
    int rc = o->baseline ? report_baseline(s, o->baseline, run, &base) : 0;
    if (rc) {
        store_close(s);
        return rc;
    }
    if (report_write(s, run, base, o->out, err, sizeof err)) {
        store_close(s);
        return cli_fail(1, "%s", err);
    }
    if (o->out) printf("wrote %s/report.md\n", o->out);
    else printf("wrote reports/%lld/report.md\n", (long long)run);
    rc = report_exit(s, run);
    store_close(s);
    return rc;
}
