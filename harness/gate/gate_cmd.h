/*
 * gate_cmd.h - the regression-gate subcommands of cortex-bench, one file
 * each: gate_cmd.c, tag_cmd.c, calibrate_cmd.c, trend_cmd.c. Their flags and
 * usage: harness/commands.c. Each takes argv without the command word.
 */
#ifndef CB_GATE_CMD_H
#define CB_GATE_CMD_H

/* gate --model M ...: 0 pass, 1 regression, 2 error, 3 no instruction counter. */
int cmd_gate(int argc, char **argv);
/* tag RUN NAME [--db FILE]: 0, 1 (no such complete run) or 2. */
int cmd_tag(int argc, char **argv);
/* calibrate --model M [--pairs N] [--workload W] ...: 0, 1 or 2. */
int cmd_calibrate(int argc, char **argv);
/* trend METRIC [--workload W] [--chart DIR] [--db FILE]: 0, 1 or 2. */
int cmd_trend(int argc, char **argv);

#endif
