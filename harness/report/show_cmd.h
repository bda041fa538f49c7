/*
 * show_cmd.h - `cortex-bench list` and `cortex-bench show RUN`.
 */
#ifndef CB_SHOW_CMD_H
#define CB_SHOW_CMD_H

struct cli_args;
/* list [--db FILE] [--limit N] (opts: a cli_read_opts): the newest runs. 0, 1 or 2 (bad flag). */
int cmd_list(void *opts, const struct cli_args *a);
/* show RUN [--db FILE] [-o md|csv|json|jsonl|bmf] [--requests]: one run, or
 * (--requests; md|csv|json|jsonl) every request of it. 0, 1 or 2 (bad flag). opts: a cli_read_opts. */
int cmd_show(void *opts, const struct cli_args *a);

#endif
