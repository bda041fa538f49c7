/*
 * hw_cmd.h - `cortex-bench hw`: measure this machine's read bandwidth and
 * peak arithmetic (hw.h), print them, store them (hw_store.h) so that runs
 * report decode speed against the bandwidth roofline (roofline.h).
 */
#ifndef CB_HW_CMD_H
#define CB_HW_CMD_H

#include "hw.h"

/* hw's options (the flag table, harness/commands.c, fills them). */
typedef struct hw_cmd_opts {
    hw_opts hw;     /* --reps, --threads (--size sets its bytes) */
    long size_mib;  /* --size MiB */
    const char *db;
} hw_cmd_opts;
/* hw_opts_init's defaults (1 GiB, 5 passes, the CPUs this process may use), reports/cortex.db. */
void hw_cmd_opts_init(void *o);
/* The subcommand (opts: hw_cmd_opts). 0, 1 (measurement or database failed) or 2 (bad flag). */
struct cli_args;
int cmd_hw(void *opts, const struct cli_args *a);

#endif
