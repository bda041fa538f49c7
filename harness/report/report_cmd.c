/*
 * report_cmd.c - `cortex-bench report`: parse the flags, open the database
 * (never creating one), write the report, say where.
 */
#include "report_cmd.h"

#include <stdio.h>
#include <string.h>

#include "cli_util.h"
#include "report.h"
#include "store.h"
#include "store_read.h"

/* report RUN [--baseline RUN|TAG] [--db FILE] [--out DIR] */
int cmd_report(int argc, char **argv) {
    static const char *const names[] = {"--baseline", "--db", "--out"};
    const char *vals[3] = {NULL, CLI_DEFAULT_DB, NULL}, *pos[1];
    int n_pos;
    int64_t run = 0, base = 0;
    if (cli_parse_flags(argc, argv, names, vals, 3, pos, 1, &n_pos)) return 2;
    if (n_pos != 1) return cli_fail(2, "%s", "report needs a run (an id, a tag or a git commit; cortex-bench list shows them)");
    store *s;
    if (cli_open_existing(vals[1], &s)) return 1;
    char err[1024];
    if (store_resolve_run(s, pos[0], 0, 0, &run, err, sizeof err) ||
        (vals[0] && store_resolve_run(s, vals[0], run, 0, &base, err, sizeof err))) {
        store_close(s);
        return cli_fail(1, "%s", err);
    }
    int rc = report_write(s, run, base, vals[2], err, sizeof err);
    store_close(s);
    if (rc) return cli_fail(1, "%s", err);
    if (vals[2]) printf("wrote %s/report.md\n", vals[2]);
    else printf("wrote reports/%lld/report.md\n", (long long)run);
    return 0;
}
