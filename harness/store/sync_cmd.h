/*
 * sync_cmd.h - `cortex-bench push TARGET` and `cortex-bench pull SOURCE`:
 * the store_sync.h copy from the command line (docs/harness.md, "Many
 * machines, one history").
 */
#ifndef CB_SYNC_CMD_H
#define CB_SYNC_CMD_H

#include "cli_util.h"

typedef struct sync_opts {
    const char *db;                                /* the local store (--db; $CORTEX_DB, else reports/cortex.db) */
    const char *workload, *testbed, *since, *commit; /* the selection (store_selection) */
    long last;
} sync_opts;

void sync_opts_init(void *o);
/* push TARGET: the runs of --db that TARGET lacks, into TARGET. */
int cmd_push(void *opts, const cli_args *a);
/* pull SOURCE: the selected runs of SOURCE that --db lacks, into --db (created when new). */
int cmd_pull(void *opts, const cli_args *a);

#endif
