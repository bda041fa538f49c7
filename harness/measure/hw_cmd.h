/*
 * hw_cmd.h - `cortex-bench hw`: measure this machine's read bandwidth and
 * peak arithmetic (hw.h), print them, store them (hw_store.h) so that runs
 * report decode speed against the bandwidth roofline (roofline.h).
 */
#ifndef CB_HW_CMD_H
#define CB_HW_CMD_H

/* The subcommand: argv after "hw". 0, 1 (measurement or database failed) or 2 (bad flag). */
int cmd_hw(int argc, char **argv);

#endif
