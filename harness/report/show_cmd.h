/*
 * show_cmd.h - `cortex-bench list` and `cortex-bench show RUN`.
 */
#ifndef CB_SHOW_CMD_H
#define CB_SHOW_CMD_H

/* list [--db FILE] [--limit N]: the newest runs. 0, 1 or 2 (bad flag). */
int cmd_list(int argc, char **argv);
/* show RUN [--db FILE] [-o md|csv|json|jsonl|bmf] [--requests]: one run, or
 * (--requests; md|csv|json|jsonl) every request of it. 0, 1 or 2 (bad flag). */
int cmd_show(int argc, char **argv);

#endif
