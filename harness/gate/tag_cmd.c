/*
 * tag_cmd.c - `cortex-bench tag RUN NAME`: name a complete run (RUN: an id,
 * a tag or a git commit, store_resolve_run), e.g. the gate's baseline.
 */
#include "gate_cmd.h"

#include <stdio.h>
#include <string.h>

#include "cli_util.h"
#include "store.h"
#include "store_read.h"

/* RUN and NAME are positional; --db is in cli_read_opts. */
int cmd_tag(void *opts, const cli_args *a) {
    const cli_read_opts *o = opts;
    const char *const *pos = a->flags->pos;
    int64_t id;
    if (a->flags->n_pos != 2) return cli_fail(2, "%s", "usage: cortex-bench tag RUN NAME [--db FILE]");
    store *s;
    if (cli_open_existing(o->db, &s)) return 1;
    char err[512];
    if (store_resolve_run(s, pos[0], 0, 0, &id, err, sizeof err)) {
        store_close(s);
        return cli_fail(2, "%s", err);
    }
    int rc = store_tag_run(s, id, pos[1]);
    store_close(s);
    if (rc) return cli_fail(1, "no complete run %s to tag", pos[0]);
    printf("tagged run %lld as '%s'\n", (long long)id, pos[1]);
    return 0;
}
