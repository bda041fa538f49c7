/*
 * store_sync.c - see store_sync.h. Rows are copied column by column by name
 * (SELECT * on the source, INSERT naming the same columns on the target):
 * both stores were migrated to the same schema when they were opened, so
 * every column of one exists in the other, and a column added by a later
 * migration is copied without a change here. Values travel as exact text
 * (db_column_exact), which both engines read back to the same value.
 */
#include "store_sync.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "hx_err.h"
#include "store_row.h"

/* What becomes of one column of a copied row. */
typedef struct {
    const char *col;
    enum { COL_DROP, COL_SET } how; /* DROP: not copied (the target assigns it); SET: `val` (<= 0: NULL) */
    int64_t val;
} col_rule;

/* The child tables of a run, every row keyed by run_id. */
static const char *const RUN_TABLES[] = {"rep_metrics", "requests", "counters", "summary",
                                         "canaries", "adapter_stats", "server_metrics"};

static const col_rule *rule_for(const col_rule *r, int n, const char *col) {
    for (int i = 0; i < n; i++)
        if (!strcmp(r[i].col, col)) return &r[i];
    return NULL;
}

/* Insert the current row of `src` into `table` of `to` under the rules,
 * with `suffix` after VALUES (...); *id gets the first column of what it
 * returns (RETURNING id), when asked. */
static int copy_row(db *to, db_stmt *src, const char *table, const col_rule *rules, int n_rules, const char *suffix,
                    int64_t *id) {
    int n = db_column_count(src);
    size_t cap = 64 + strlen(table) + strlen(suffix) + (size_t)n * 48;
    char *sql = malloc(cap);
    if (!sql) return -1;
    size_t k = (size_t)snprintf(sql, cap, "INSERT INTO %s (", table);
    int used = 0;
    for (int i = 0; i < n; i++) {
        const col_rule *r = rule_for(rules, n_rules, db_column_name(src, i));
        if (r && r->how == COL_DROP) continue;
        k += (size_t)snprintf(sql + k, cap - k, "%s%s", used++ ? ", " : "", db_column_name(src, i));
    }
    k += (size_t)snprintf(sql + k, cap - k, ") VALUES (");
    for (int i = 0; i < used; i++) k += (size_t)snprintf(sql + k, cap - k, "%s?%d", i ? ", " : "", i + 1);
    snprintf(sql + k, cap - k, ") %s", suffix);
    db_stmt *ins = db_prepare(to, sql);
    free(sql);
    if (!ins) return -1;
    int p = 0;
    for (int i = 0; i < n; i++) {
        const col_rule *r = rule_for(rules, n_rules, db_column_name(src, i));
        if (r && r->how == COL_DROP) continue;
        p++;
        if (r) {
            if (r->val > 0) db_bind_int(ins, p, r->val);
            else db_bind_null(ins, p);
            continue;
        }
        char buf[40];
        db_bind_text(ins, p, db_column_exact(src, i, buf, sizeof buf));
    }
    int rc = db_step(ins);
    if (id) *id = rc == DB_ROW ? db_column_int(ins, 0) : -1;
    db_finalize(ins);
    return rc == DB_ERROR || (id && *id <= 0) ? -1 : 0;
}

/* The id in `d` of a one-integer query with one text parameter; 0 when no row, -1 on error. */
static int64_t id_where(db *d, const char *sql, const char *key) {
    db_stmt *st = db_prepare(d, sql);
    if (!st) return -1;
    db_bind_text(st, 1, key);
    int rc = db_step(st);
    int64_t id = rc == DB_ROW ? db_column_int(st, 0) : rc == DB_DONE ? 0 : -1;
    db_finalize(st);
    return id;
}

/* A text column of one row of `d` by id, into out ("" when NULL or no row). */
static int text_by_id(db *d, const char *sql, int64_t id, char *out, size_t n) {
    db_stmt *st = db_prepare(d, sql);
    if (!st) return -1;
    db_bind_int(st, 1, id);
    int rc = db_step(st);
    const char *t = rc == DB_ROW ? db_column_text(st, 0) : NULL;
    snprintf(out, n, "%s", t ? t : "");
    db_finalize(st);
    return rc == DB_ERROR ? -1 : 0;
}

/* The target's id of the source's environment `env` (copied when new); -1 on error. */
static int64_t copy_env(db *from, db *to, int64_t env) {
    db_stmt *src = db_prepare(from, "SELECT * FROM environments WHERE id = ?1");
    if (!src) return -1;
    db_bind_int(src, 1, env);
    int64_t id = -1;
    if (db_step(src) == DB_ROW) {
        char fp[80];
        snprintf(fp, sizeof fp, "%s", row_text(src, "fingerprint"));
        const col_rule drop_id = {"id", COL_DROP, 0};
        if (!copy_row(to, src, "environments", &drop_id, 1, "ON CONFLICT (fingerprint) DO NOTHING", NULL))
            id = id_where(to, "SELECT id FROM environments WHERE fingerprint = ?1", fp);
    }
    db_finalize(src);
    return id;
}

/* The target's id of the source's hw row `hw` (copied with its environment when new); -1 on error. */
static int64_t copy_hw(db *from, db *to, int64_t hw) {
    db_stmt *src = db_prepare(from, "SELECT * FROM hw WHERE id = ?1");
    if (!src) return -1;
    db_bind_int(src, 1, hw);
    int64_t id = -1;
    if (db_step(src) == DB_ROW) {
        char uuid[40];
        snprintf(uuid, sizeof uuid, "%s", row_text(src, "uuid"));
        id = id_where(to, "SELECT id FROM hw WHERE uuid = ?1", uuid);
        if (id == 0) {
            int64_t env = copy_env(from, to, row_int(src, "env_id"));
            col_rule rules[] = {{"id", COL_DROP, 0}, {"env_id", COL_SET, env}};
            if (env <= 0 || copy_row(to, src, "hw", rules, 2, "RETURNING id", &id)) id = -1;
        }
    }
    db_finalize(src);
    return id;
}

/* Every hw row of the source's environment `env` into the target (those it lacks): a machine's
 * ceilings travel with its runs, also those measured after them (which the runs do not point at). */
static int copy_env_hw(db *from, db *to, int64_t env) {
    db_stmt *st = db_prepare(from, "SELECT id FROM hw WHERE env_id = ?1 ORDER BY id");
    if (!st) return -1;
    db_bind_int(st, 1, env);
    int rc = 0, step;
    while (!rc && (step = db_step(st)) == DB_ROW) rc = copy_hw(from, to, db_column_int(st, 0)) > 0 ? 0 : -1;
    if (!rc && step == DB_ERROR) rc = -1;
    db_finalize(st);
    return rc;
}

/* Copy run `id` of `from` and all its rows into `to`, in the caller's transaction; -1 on error. */
static int copy_run(db *from, db *to, int64_t id) {
    db_stmt *src = db_prepare(from, "SELECT * FROM runs WHERE id = ?1");
    if (!src) return -1;
    db_bind_int(src, 1, id);
    int rc = db_step(src) == DB_ROW ? 0 : -1;
    int64_t new_id = -1, env = 0, hw = 0, sweep = 0, src_sweep = 0;
    if (!rc) {
        if (!row_null(src, "env_id") && ((env = copy_env(from, to, row_int(src, "env_id"))) <= 0 ||
                                          copy_env_hw(from, to, row_int(src, "env_id"))))
            rc = -1;
        if (!rc && !row_null(src, "hw_id") && (hw = copy_hw(from, to, row_int(src, "hw_id"))) <= 0) rc = -1;
        src_sweep = row_null(src, "sweep") ? 0 : row_int(src, "sweep");
        if (!rc && src_sweep > 0 && src_sweep != id) { /* a sweep's runs point at its saturation run, copied first */
            char uuid[40];
            rc = text_by_id(from, "SELECT uuid FROM runs WHERE id = ?1", src_sweep, uuid, sizeof uuid);
            if (!rc && *uuid) sweep = id_where(to, "SELECT id FROM runs WHERE uuid = ?1", uuid);
            if (sweep < 0) rc = -1;
        }
    }
    if (!rc) {
        col_rule rules[] = {{"id", COL_DROP, 0}, {"env_id", COL_SET, env}, {"hw_id", COL_SET, hw}, {"sweep", COL_SET, sweep}};
        rc = copy_row(to, src, "runs", rules, 4, "RETURNING id", &new_id);
    }
    db_finalize(src);
    if (!rc && src_sweep == id) { /* the saturation run names itself */
        db_stmt *st = db_prepare(to, "UPDATE runs SET sweep = ?1 WHERE id = ?1");
        if (st) db_bind_int(st, 1, new_id);
        rc = st && db_step(st) == DB_DONE ? 0 : -1;
        db_finalize(st);
    }
    for (size_t t = 0; t < sizeof RUN_TABLES / sizeof RUN_TABLES[0] && !rc; t++) {
        char sql[96];
        snprintf(sql, sizeof sql, "SELECT * FROM %s WHERE run_id = ?1", RUN_TABLES[t]);
        db_stmt *rows = db_prepare(from, sql);
        if (!rows) return -1;
        db_bind_int(rows, 1, id);
        const col_rule run_id = {"run_id", COL_SET, new_id};
        int step;
        while (!rc && (step = db_step(rows)) == DB_ROW) rc = copy_row(to, rows, RUN_TABLES[t], &run_id, 1, "", NULL);
        if (!rc && step == DB_ERROR) rc = -1;
        db_finalize(rows);
    }
    return rc;
}

/* The selected runs of `from`, oldest first: ids and statuses. */
typedef struct {
    int64_t id;
    char uuid[40];
    int incomplete;
} sel_run;

static int select_runs(db *from, const store_selection *sel, sel_run **out, int *n) {
    *out = NULL;
    *n = 0;
    db_stmt *st = db_prepare(from, "SELECT id, uuid, status FROM runs WHERE (CAST(?1 AS TEXT) IS NULL OR workload = ?1)"
                                   " AND (CAST(?2 AS TEXT) IS NULL OR testbed = ?2) AND (CAST(?3 AS TEXT) IS NULL OR started_at >= ?3)"
                                   " AND (CAST(?4 AS TEXT) IS NULL OR git_commit LIKE ?4 || '%') ORDER BY id DESC LIMIT ?5");
    if (!st) return -1;
    db_bind_text(st, 1, sel && sel->workload && *sel->workload ? sel->workload : NULL);
    db_bind_text(st, 2, sel && sel->testbed && *sel->testbed ? sel->testbed : NULL);
    db_bind_text(st, 3, sel && sel->since && *sel->since ? sel->since : NULL);
    db_bind_text(st, 4, sel && sel->commit && *sel->commit ? sel->commit : NULL);
    db_bind_int(st, 5, sel && sel->last > 0 ? sel->last : INT64_MAX);
    int cap = 0, rc;
    while ((rc = db_step(st)) == DB_ROW) {
        if (row_grow((void **)out, *n, &cap, sizeof **out)) {
            rc = DB_ERROR;
            break;
        }
        sel_run *r = &(*out)[(*n)++];
        r->id = row_int(st, "id");
        row_copy(st, "uuid", r->uuid, sizeof r->uuid);
        r->incomplete = !strcmp(row_text(st, "status"), "incomplete");
    }
    db_finalize(st);
    for (int i = 0; i < *n / 2; i++) { /* oldest first: a sweep's saturation run before its other runs */
        sel_run t = (*out)[i];
        (*out)[i] = (*out)[*n - 1 - i];
        (*out)[*n - 1 - i] = t;
    }
    return rc == DB_DONE ? 0 : -1;
}

int store_sync_runs(store *sfrom, store *sto, const store_selection *sel, store_sync_stats *stats, char *err,
                    size_t errlen) {
    db *from = store_db(sfrom), *to = store_db(sto);
    memset(stats, 0, sizeof *stats);
    sel_run *runs;
    int n;
    if (select_runs(from, sel, &runs, &n))
        return hx_fail(err, errlen, "%s: select runs: %s", db_name(from), db_errmsg(from));
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        if (runs[i].incomplete) {
            stats->incomplete++;
            continue;
        }
        if (!runs[i].uuid[0]) {
            rc = hx_fail(err, errlen, "%s: run %lld has no UUID", db_name(from), (long long)runs[i].id);
            break;
        }
        int64_t there = id_where(to, "SELECT id FROM runs WHERE uuid = ?1", runs[i].uuid);
        if (there < 0) {
            rc = hx_fail(err, errlen, "%s: look up run %s: %s", db_name(to), runs[i].uuid, db_errmsg(to));
            break;
        }
        if (there > 0) {
            stats->present++;
            continue;
        }
        if (db_begin(to) || copy_run(from, to, runs[i].id) || db_commit(to)) {
            char why[512];
            snprintf(why, sizeof why, "%s", db_errmsg(to)[0] ? db_errmsg(to) : db_errmsg(from));
            db_rollback(to);
            /* another copy may have landed the same run meanwhile: the UUID is unique, so that is no error */
            if (id_where(to, "SELECT id FROM runs WHERE uuid = ?1", runs[i].uuid) > 0) {
                stats->present++;
                continue;
            }
            rc = hx_fail(err, errlen, "copy run %lld (%s) from %s to %s: %s", (long long)runs[i].id, runs[i].uuid,
                         db_name(from), db_name(to), why);
            break;
        }
        stats->copied++;
    }
    free(runs);
    return rc;
}
