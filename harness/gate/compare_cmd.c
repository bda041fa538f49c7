/*
 * compare_cmd.c - `cortex-bench compare` (see compare_cmd.h): resolve the two
 * run references (store_resolve_run), load the gate file for the verdict column, compare_runs.
 */
#include "compare_cmd.h"

#include <stdio.h>
#include <string.h>

#include "cli_util.h"
#include "compare.h"
#include "gatefile.h"
#include "store.h"
#include "store_read.h"

/* Compare two runs (ids, tags or commits) with the gate's statistics. The
 * default gate file is optional; one named with --gate-file must load. */
int cmd_compare(void *opts, const cli_args *a) {
    const cli_read_opts *o = opts;
    if (a->flags->n_pos != 2) return cli_fail(2, "%s", "expected two run ids");
    const char *const *pos = a->flags->pos;
    gate_conf gc;
    char err[512];
    int have_gc = gate_conf_load(o->gate_file, &gc, err, sizeof err) == 0;
    if (!have_gc && strcmp(o->gate_file, "ci/gates.conf")) return cli_fail(2, "%s", err);
    store *s;
    if (cli_open_existing(o->db, &s)) return 1;
    int64_t ra, rb;
    /* CAND first: a tag or commit naming BASE then picks the run most like the candidate (its configuration,
     * its testbed), as the gate picks a baseline, so a fleet's runners are each held to their own kind */
    int rc = store_resolve_run(s, pos[1], 0, 0, &rb, err, sizeof err) || store_resolve_run(s, pos[0], rb, 0, &ra, err, sizeof err)
                 ? cli_fail(2, "%s", err)
                 : compare_runs(s, ra, rb, o->force, have_gc ? &gc : NULL, stdout);
    store_close(s);
    return rc;
}
