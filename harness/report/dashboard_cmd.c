/*
 * dashboard_cmd.c - `cortex-bench dashboard`: parse the flags, open the
 * database (never creating one), write the site, say where.
 */
#include "report_cmd.h"

#include <stdio.h>

#include "cli_util.h"
#include "dashboard.h"
#include "store.h"

/* dashboard [--db FILE] [--out DIR] */
int cmd_dashboard(int argc, char **argv) {
    static const char *const names[] = {"--db", "--out"};
    const char *vals[2] = {CLI_DEFAULT_DB, NULL}, *pos[1];
    int n_pos;
    if (cli_parse_flags(argc, argv, names, vals, 2, pos, 0, &n_pos)) return 2;
    store *s;
    if (cli_open_existing(vals[0], &s)) return 1;
    char err[1024];
    int rc = dashboard_write(s, vals[1], err, sizeof err);
    store_close(s);
    if (rc) return cli_fail(1, "%s", err);
    printf("wrote %s/index.html\n", vals[1] ? vals[1] : DASHBOARD_DEFAULT_DIR);
    return 0;
}
