/*
 * report_cmd.h - the `cortex-bench report` and `cortex-bench dashboard`
 * subcommands (flag parsing around report.h and dashboard.h).
 */
#ifndef CB_REPORT_CMD_H
#define CB_REPORT_CMD_H

#include "challenge.h"

struct cli_args;

/* report's options (the flag table, harness/commands.c, fills them); RUN is
 * its positional argument. */
typedef struct report_opts {
    const char *baseline, *db, *out;
    const char *challenge; /* --challenge RUN: the challenge report instead */
    chal_opts chal;        /* --challenge-gbs, --challenge-cores, --challenge-mem */
} report_opts;
void report_opts_init(void *o);

/* dashboard's options. */
typedef struct dashboard_opts {
    const char *db, *out;
} dashboard_opts;
void dashboard_opts_init(void *o);

/* `cortex-bench report RUN [--baseline RUN|TAG] [--db FILE] [--out DIR]`
 * (opts: report_opts): writes DIR/report.md (default reports/RUN/). 0, 1
 * (run missing, database, file or gnuplot error), 2 (bad flag) or 4 (an
 * INVALID run). */
int cmd_report(void *opts, const struct cli_args *a);
/* `cortex-bench dashboard [--db FILE] [--out DIR]` (opts: dashboard_opts):
 * writes DIR/index.html (default dashboards/site/). 0, 1 or 2. */
int cmd_dashboard(void *opts, const struct cli_args *a);

#endif
