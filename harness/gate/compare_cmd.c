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
int cmd_compare(int argc, char **argv) {
    const char *db = CLI_DEFAULT_DB, *fmt = "md", *pos[2], *gate_file = "ci/gates.conf";
    long limit = 0;
    int force = 0;
    for (int i = 0; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--gate-file")) { /* taken out before the common parser sees it */
            gate_file = argv[i + 1];
            memmove(argv + i, argv + i + 2, sizeof(char *) * (size_t)(argc - i - 2));
            argc -= 2;
            break;
        }
    if (cli_parse_read_opts(argc, argv, &db, &fmt, &limit, &force, pos, 2)) return 2;
    gate_conf gc;
    char err[512];
    int have_gc = gate_conf_load(gate_file, &gc, err, sizeof err) == 0;
    if (!have_gc && strcmp(gate_file, "ci/gates.conf")) return cli_fail(2, "%s", err);
    store *s;
    if (cli_open_existing(db, &s)) return 1;
    int64_t a, b;
    int rc = store_resolve_run(s, pos[0], 0, 0, &a, err, sizeof err) || store_resolve_run(s, pos[1], 0, 0, &b, err, sizeof err)
                 ? cli_fail(2, "%s", err)
                 : compare_runs(s, a, b, force, have_gc ? &gc : NULL, stdout);
    store_close(s);
    return rc;
}
