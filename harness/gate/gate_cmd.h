/*
 * gate_cmd.h - the regression-gate subcommands of cortex-bench, one file
 * each: gate_cmd.c, tag_cmd.c, calibrate_cmd.c, trend_cmd.c. Their options
 * (the flag table, harness/commands.c, fills them) and defaults; each
 * command gets its options parsed and the command line (cli_util.h).
 */
#ifndef CB_GATE_CMD_H
#define CB_GATE_CMD_H

struct cli_args;

/* gate's options. */
typedef struct gate_opts {
    const char *model, *baseline, *gate_file, *db, *junit, *summary, *threads, *det_mode;
    const char *step_summary; /* --step-summary FILE; NULL: $GITHUB_STEP_SUMMARY when set (report/summary.h) */
    const char *baseline_bin; /* wall-clock A/B: measure this binary interleaved with ourselves */
    int deterministic;        /* --mode wallclock|deterministic: 1 for deterministic */
    int record_baseline;  /* record this run as the baseline of its configuration (no judging) */
    int advance_baseline; /* judge; on a pass, the VALID, quiet candidates become the baselines */
    double baseline_instructions; /* deterministic: a count measured elsewhere (ci/baseline.sh); NAN: none */
} gate_opts;
/* The defaults: the tag 'baseline', ci/gates.conf, reports/cortex.db, --det-mode auto. */
void gate_opts_init(void *o);

/* calibrate's options. */
typedef struct calibrate_opts {
    const char *model, *db, *gate_file, *threads;
    const char *workload; /* one workload instead of the gate file's (NULL) */
    long pairs;
} calibrate_opts;
void calibrate_opts_init(void *o);

/* trend's options; the metric is its positional argument. */
typedef struct trend_opts {
    const char *db, *workload, *chart;
    const char *gate_file; /* NULL: ci/gates.conf when present */
} trend_opts;
void trend_opts_init(void *o);

/* gate --model M ... (opts: gate_opts): 0 pass, 1 regression, 2 error, 3 no
 * instruction counter, 4 an INVALID candidate. */
int cmd_gate(void *opts, const struct cli_args *a);
/* tag RUN NAME [--db FILE] (opts: cli_read_opts): 0, 1 (no such complete run) or 2. */
int cmd_tag(void *opts, const struct cli_args *a);
/* calibrate --model M [--pairs N] [--workload W] ... (opts: calibrate_opts): 0, 1 or 2. */
int cmd_calibrate(void *opts, const struct cli_args *a);
/* trend METRIC [--workload W] [--chart DIR] [--db FILE] (opts: trend_opts): 0, 1 or 2. */
int cmd_trend(void *opts, const struct cli_args *a);

#endif
