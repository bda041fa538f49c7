/*
 * report_cmd.c - `cortex-bench report` and `cortex-bench dashboard`: parse
 * the flags, open the database (never creating one), write, say where.
 */
#include "report_cmd.h"

#include <stdio.h>
#include <string.h>

#include "cli_util.h"
#include "dashboard.h"
#include "report.h"
#include "store.h"

/* Parse `[POSITIONAL] --flag VALUE...` for the flags named in `names` (values
 * into `vals`); at most `max_pos` positional arguments. 0 or 2 after a message. */
static int rc_parse(int argc, char **argv, const char *const *names, const char **vals, int n_names, const char **pos,
                    int max_pos, int *n_pos) {
    *n_pos = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || !a[1]) {
            if (*n_pos >= max_pos) return cli_fail(2, "unexpected argument '%s'", a);
            pos[(*n_pos)++] = a;
            continue;
        }
        int k = -1;
        for (int j = 0; j < n_names; j++)
            if (!strcmp(a, names[j])) k = j;
        if (k < 0) return cli_fail(2, "unknown option '%s' (see cortex-bench --help)", a);
        if (i + 1 >= argc) return cli_fail(2, "%s needs a value", a);
        vals[k] = argv[++i];
    }
    return 0;
}

/* report RUN [--baseline RUN|TAG] [--db FILE] [--out DIR] */
int cmd_report(int argc, char **argv) {
    static const char *const names[] = {"--baseline", "--db", "--out"};
    const char *vals[3] = {NULL, CLI_DEFAULT_DB, NULL}, *pos[1];
    int n_pos;
    int64_t run, base = 0;
    if (rc_parse(argc, argv, names, vals, 3, pos, 1, &n_pos)) return 2;
    if (n_pos != 1) return cli_fail(2, "%s", "report needs a run id (cortex-bench list shows them)");
    if (cli_parse_id(pos[0], &run)) return 2;
    store *s;
    if (cli_open_existing(vals[1], &s)) return 1;
    char err[1024];
    if (vals[0] && report_resolve_run(s, vals[0], run, &base, err, sizeof err)) {
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

/* dashboard [--db FILE] [--out DIR] */
int cmd_dashboard(int argc, char **argv) {
    static const char *const names[] = {"--db", "--out"};
    const char *vals[2] = {CLI_DEFAULT_DB, NULL}, *pos[1];
    int n_pos;
    if (rc_parse(argc, argv, names, vals, 2, pos, 0, &n_pos)) return 2;
    store *s;
    if (cli_open_existing(vals[0], &s)) return 1;
    char err[1024];
    int rc = dashboard_write(s, vals[1], err, sizeof err);
    store_close(s);
    if (rc) return cli_fail(1, "%s", err);
    printf("wrote %s/index.html\n", vals[1] ? vals[1] : DASHBOARD_DEFAULT_DIR);
    return 0;
}
