/*
 * show_cmd.c - `cortex-bench list` and `show` (see show_cmd.h): flags, the
 * database opened without creating it, the run reference resolved
 * (store_resolve_run), then show_list / show_run (show.c), or with
 * --requests export_requests (export.c).
 */
#include "show_cmd.h"

#include <stdio.h>

#include "cli_util.h"
#include "export.h"
#include "show.h"
#include "store.h"
#include "store_read.h"

/* The newest runs, as a table. */
int cmd_list(int argc, char **argv) {
    const char *db = CLI_DEFAULT_DB, *fmt = "md", *pos[1];
    long limit = 20;
    int force = 0;
    if (cli_parse_read_opts(argc, argv, &db, &fmt, &limit, &force, pos, 0)) return 2;
    store *s;
    char err[512];
    if (cli_open_existing(db, &s)) return 1;
    int rc = show_list(s, stdout, (int)limit, err, sizeof err);
    store_close(s);
    return rc ? cli_fail(1, "%s", err) : 0;
}

/* One run (an id, a tag or a git commit) in md, csv, json, jsonl or bmf;
 * with --requests, every request of it (export.c). */
int cmd_show(int argc, char **argv) {
    const char *db = CLI_DEFAULT_DB, *fmt = "md", *pos[1];
    int requests = 0;
    int64_t id;
    if (cli_parse_show_opts(argc, argv, &db, &fmt, &requests, pos)) return 2;
    if (requests ? !export_request_format_known(fmt) : !export_format_known(fmt))
        return cli_fail(2, "-o: unknown format '%s'%s (%s)", fmt, requests ? " for --requests" : "",
                        requests ? EXPORT_REQUEST_FORMATS : EXPORT_FORMATS);
    store *s;
    char err[512];
    if (cli_open_existing(db, &s)) return 1;
    int rc = store_resolve_run(s, pos[0], 0, 0, &id, err, sizeof err) ||
             (requests ? export_requests(s, id, fmt, stdout, err, sizeof err) : show_run(s, id, fmt, stdout, err, sizeof err));
    store_close(s);
    return rc ? cli_fail(1, "%s", err) : 0;
}
