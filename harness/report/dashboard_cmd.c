/*
 * dashboard_cmd.c - `cortex-bench dashboard`: parse the flags, open the
 * database (never creating one), write the site, say where.
 */
#include "report_cmd.h"

#include <stdio.h>

#include "cli_util.h"
#include "dashboard.h"
#include "store.h"

/* See report_cmd.h. */
void dashboard_opts_init(void *op) {
    dashboard_opts *o = op;
    o->db = cli_default_db();
    o->out = DASHBOARD_DEFAULT_DIR;
}

/* dashboard [--db FILE] [--out DIR] */
int cmd_dashboard(void *opts, const cli_args *a) {
    const dashboard_opts *o = opts;
    (void)a;
    store *s;
    if (cli_open_existing(o->db, &s)) return 1;
    char err[1024];
    int rc = dashboard_write(s, o->out, err, sizeof err);
    store_close(s);
    if (rc) return cli_fail(1, "%s", err);
    printf("wrote %s/index.html\n", o->out);
    return 0;
}
