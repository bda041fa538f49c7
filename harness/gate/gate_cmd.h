/*
 * gate_cmd.h - the regression-gate subcommands of cortex-bench (gate_cmd.c).
 */
#ifndef CB_GATE_CMD_H
#define CB_GATE_CMD_H

/* cortex-bench gate --model M [--mode wallclock|deterministic] [--baseline REF] [--gate-file F]
 *                   [--junit FILE] [--summary FILE.md] [--db FILE] [-t T] [--baseline-instructions N] */
int cmd_gate(int argc, char **argv);
/* cortex-bench tag RUN NAME */
int cmd_tag(int argc, char **argv);
/* cortex-bench calibrate --model M [--pairs N] [--workload W] */
int cmd_calibrate(int argc, char **argv);
/* cortex-bench trend METRIC [--workload W] */
int cmd_trend(int argc, char **argv);

#endif
