/*
 * report_cmd.h - the `cortex-bench report` and `cortex-bench dashboard`
 * subcommands (flag parsing around report.h and dashboard.h).
 */
#ifndef CB_REPORT_CMD_H
#define CB_REPORT_CMD_H

/* `cortex-bench report RUN [--baseline RUN|TAG] [--db FILE] [--out DIR]`
 * (argv without the command word): writes DIR/report.md (default
 * reports/RUN/). 0, 1 (run missing, database, file or gnuplot error) or 2
 * (bad flag). */
int cmd_report(int argc, char **argv);

/* `cortex-bench dashboard [--db FILE] [--out DIR]` (argv without the command
 * word): writes DIR/index.html (default dashboards/site/). 0, 1 or 2. */
int cmd_dashboard(int argc, char **argv);

#endif
