/*
 * hwreport_cmd.c - `cortex-bench hwreport`: the hardware-evaluation report
 * (hwreport.h) of the machines in a store. Exit 0 with the report written,
 * 1 when there is nothing to report or it cannot be written, 2 on bad usage.
 */
#include "hwreport.h"

#include <stdio.h>
#include <string.h>

void hwreport_opts_init(void *op) {
    hwreport_opts *o = op;
    memset(o, 0, sizeof *o);
    o->db = cli_default_db();
    o->p.out_dir = "reports/hwreport";
}

int cmd_hwreport(void *opts, const cli_args *a) {
    const hwreport_opts *o = opts;
    (void)a;
    store *s;
    if (cli_open_existing(o->db, &s)) return 1;
    char err[1024] = "", md[4096];
    int rc = hwreport_write(s, &o->p, md, sizeof md, err, sizeof err);
    store_close(s);
    if (rc) return cli_fail(strstr(err, "--price") ? 2 : 1, "%s", err);
    printf("wrote %s (and index.html, charts) in %s\n", md, o->p.out_dir);
    return 0;
}
