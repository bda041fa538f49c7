/*
 * show_cmd.c - `cortex-bench list` and `show` (see show_cmd.h): their flags
 * parsed into cli_read_opts (commands.c), the database opened without
 * creating it, the run reference resolved (store_resolve_run), then
 * show_list / show_run (show.c), or with --requests export_requests (export.c).
 */
#include "show_cmd.h"

#include <stdio.h>

#include "cli_util.h"
#include "export.h"
#include "show.h"
#include "store.h"
#include "store_read.h"

/* The newest runs, as a table. */
int cmd_list(void *opts, const cli_args *a) {
    const cli_read_opts *o = opts;
    (void)a;
    store *s;
    char err[512];
    if (cli_open_existing(o->db, &s)) return 1;
    int rc = show_list(s, stdout, (int)o->limit, err, sizeof err);
    store_close(s);
    return rc ? cli_fail(1, "%s", err) : 0;
}

/* One run (an id, a tag or a git commit) in md, csv, json, jsonl or bmf;
 * with --requests, every request of it (export.c). */
int cmd_show(void *opts, const cli_args *a) {
    const cli_read_opts *o = opts;
    const char *fmt = o->fmt;
    int64_t id;
    if (a->flags->n_pos != 1) return cli_fail(2, "%s", "expected a run id");
    if (o->requests ? !export_request_format_known(fmt) : !export_format_known(fmt))
        return cli_fail(2, "-o: unknown format '%s'%s (%s)", fmt, o->requests ? " for --requests" : "",
                        o->requests ? EXPORT_REQUEST_FORMATS : EXPORT_FORMATS);
    store *s;
    char err[512];
    if (cli_open_existing(o->db, &s)) return 1;
    const char *run = a->flags->pos[0];
    int rc = store_resolve_run(s, run, 0, 0, &id, err, sizeof err) ||
             (o->requests ? export_requests(s, id, fmt, stdout, err, sizeof err) : show_run(s, id, fmt, stdout, err, sizeof err));
    store_close(s);
    return rc ? cli_fail(1, "%s", err) : 0;
}
