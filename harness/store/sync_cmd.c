/*
 * sync_cmd.c - see sync_cmd.h. Exit 0 when every selected run that could be
 * copied is in the target (copied now or before), 1 when a copy failed (the
 * runs copied before it stay; run the command again to resume), 2 on bad
 * usage or a store that cannot be opened.
 */
#include "sync_cmd.h"

#include <stdio.h>
#include <string.h>

#include "store.h"
#include "store_sync.h"

void sync_opts_init(void *op) {
    sync_opts *o = op;
    memset(o, 0, sizeof *o);
    o->db = cli_default_db();
}

/* Copy from `src` to `dst` (`verb` names the direction in messages). */
static int sync(const sync_opts *o, const char *src, const char *dst, int create_dst, const char *verb) {
    char err[1024];
    store *from = NULL, *to = NULL;
    if (!create_dst && cli_open_existing(src, &from)) return 2;
    if (create_dst) {
        if (store_open(src, &from, err, sizeof err)) return cli_fail(2, "%s", err);
        cli_ensure_default_dir(dst);
        if (store_open(dst, &to, err, sizeof err)) {
            store_close(from);
            return cli_fail(2, "%s", err);
        }
    } else if (store_open(dst, &to, err, sizeof err)) {
        store_close(from);
        return cli_fail(2, "%s", err);
    }
    store_selection sel = {o->workload, o->testbed, o->since, o->commit, (int)o->last};
    store_sync_stats st;
    int rc = store_sync_runs(from, to, &sel, &st, err, sizeof err);
    printf("%s %s -> %s: %d run%s copied, %d already there", verb, store_name(from), store_name(to), st.copied,
           st.copied == 1 ? "" : "s", st.present);
    if (st.incomplete) printf(", %d incomplete (running or killed: not copied)", st.incomplete);
    printf("\n");
    store_close(from);
    store_close(to);
    if (rc) return cli_fail(1, "%s (the runs copied before it are in place: run %s again to resume)", err, verb);
    return 0;
}

int cmd_push(void *opts, const cli_args *a) {
    const sync_opts *o = opts;
    if (a->flags->n_pos != 1) return cli_fail(2, "%s", "usage: cortex-bench push TARGET [--db FILE|URL] [selection]");
    return sync(o, o->db, a->flags->pos[0], 0, "push");
}

int cmd_pull(void *opts, const cli_args *a) {
    const sync_opts *o = opts;
    if (a->flags->n_pos != 1) return cli_fail(2, "%s", "usage: cortex-bench pull SOURCE [--db FILE|URL] [selection]");
    return sync(o, a->flags->pos[0], o->db, 1, "pull");
}
