/*
 * compare_cmd.c - `cortex-bench compare` (see compare_cmd.h): resolve the two
 * run references, load the gate file for the verdict column, compare_runs.
 */
#include "compare_cmd.h"

#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "cli_util.h"
#include "compare.h"
#include "gatefile.h"
#include "store.h"

/* Resolve a run reference for compare: a run id, a tag (newest tagged run) or
 * a git commit prefix (newest complete run built from it). */
static int resolve_ref(store *s, const char *ref, int64_t *id) {
    if (cli_parse_id_quiet(ref, id) == 0) return 0;
    sqlite3_stmt *st;
    const char *sql = "SELECT id FROM runs WHERE status = 'complete' AND (id IN (SELECT run_id FROM tags WHERE name = ?1)"
                      " OR (length(?1) >= 4 AND git_commit LIKE ?1 || '%')) ORDER BY id DESC LIMIT 1";
    *id = 0;
    if (sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, ref, -1, SQLITE_TRANSIENT);
        if (sqlite3_step(st) == SQLITE_ROW) *id = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    return *id ? 0 : cli_fail(2, "'%s' is neither a run id, a tag, nor the commit of a complete run", ref);
}

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
    int rc = resolve_ref(s, pos[0], &a) || resolve_ref(s, pos[1], &b) ? 2 : compare_runs(s, a, b, force, have_gc ? &gc : NULL, stdout);
    store_close(s);
    return rc;
}
