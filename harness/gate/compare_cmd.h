/*
 * compare_cmd.h - `cortex-bench compare BASE CAND`.
 */
#ifndef CB_COMPARE_CMD_H
#define CB_COMPARE_CMD_H

/* compare BASE CAND [--db FILE] [--force] [--gate-file F]: BASE and CAND are
 * run ids, tags or git commits (opts: a cli_read_opts). 0, 1 or 2 (bad flag or
 * reference). */
struct cli_args;
int cmd_compare(void *opts, const struct cli_args *a);

#endif
