/*
 * store_gate.c - the gate's reads and writes (see store_gate.h). Queries name
 * their columns and rows are read by name (store_row.h).
 */
#include "store_gate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kv_opts.h"
#include "store_row.h"

/* Fields that must be equal, with the name printed when they are not, and
 * the word for a value not stored (NULL or empty; default "none"); no word
 * (NULL): compared only when both runs recorded it. */
static const struct { const char *sql, *name, *missing; } FIELDS[] = {
    {"e.cpu_model", "CPU model", "unknown"}, {"e.isa_flags", "ISA flags", "none"}, {"e.logical_cores", "core count", "unknown"},
    /* the silicon behind the brand string (schema v12; an environment recorded before has none, so is unknown) */
    {"e.cpu_vendor", "CPU vendor", "unknown"}, {"e.cpu_family", "CPU family", "unknown"},
    {"e.cpu_model_id", "CPU model number", "unknown"}, {"e.cpu_stepping", "CPU stepping", "unknown"},
    {"e.microcode", "microcode", "unknown"},
    {"r.model_sha256", "model file", "none"}, {"r.model_type", "quantization", "none"}, {"r.threads", "thread count", "none"},
    {"r.build_type", "build type", "none"}, {"r.n_ctx", "context size", "none"}, {"r.workload_hash", "workload", "none"},
    {"r.test_prompt", "test prompt size", "none"}, {"r.test_gen", "test generation size", "none"},
    {"r.test_depth", "test KV depth", "none"}, {"r.mode", "loop mode", "none"}, {"r.concurrency", "concurrency", "none"},
    {"r.ignore_eos", "end-of-text handling", "none"}, {"r.isa", "kernel instruction set (CORTEX_ISA)", "not recorded"},
    /* runs before schema v6 have none: they used the engine's default cache */
    {"coalesce(r.kv_config, '" KV_OPTS_DEFAULT_CONFIG "')", "KV cache configuration", "none"},
    /* served workloads (schema v8): what the scheduler was allowed, the offered load, the SLOs */
    {"r.sched_config", "scheduler configuration", "none"}, {"r.rate", "open-loop rate", "none"},
    {"r.slo", "goodput SLOs", "none"},
    /* runs over HTTP (schema v9): which server, and which software with which models behind it; an
     * in-process run (NULL) is never comparable with one over HTTP */
    {"coalesce(r.endpoint, 'in-process')", "endpoint (HTTP server or in-process)", "none"},
    {"r.server", "server identity", "none"},
    /* the machine as the run had it (schema v12): the CPUs it could use (taskset, --pin, cpusets), how
     * many, its cgroup's CPU quota (NULL: none), transparent huge pages; runs before have none recorded */
    {"r.affinity", "CPUs allowed", "not recorded"}, {"r.cpus_allowed", "number of CPUs allowed", "not recorded"},
    {"r.cgroup_cpus", "cgroup CPU quota", "none"}, {"r.thp", "transparent huge pages", "not recorded"},
    /* whether the server's prompt cache could serve the prompts (schema v12); runs over HTTP from before
     * asked nothing, as --server-cache on does */
    {"coalesce(r.server_cache, CASE WHEN r.endpoint IS NOT NULL THEN 'on' END)", "server prompt cache (--server-cache)",
     "none"},
    /* a run that tolerated failed requests measured fewer of them (schema v12) */
    {"r.allow_failures", "tolerated failures (--allow-failures)", "none"},
    /* the machine class (schema v13): a fleet's runners gate each against its own kind; runs from
     * before have none and are held to the machine fields above alone */
    {"r.testbed", "testbed", NULL},
    /* the engine's thread placement and NUMA policy (schema v13): a policy (--pin compact|spread) is a
     * configuration; a CPU list is the process's affinity, compared above */
    {"CASE WHEN r.pinned IN ('compact', 'spread') THEN r.pinned END", "thread placement (--pin policy)", "none"},
    {"r.numa", "NUMA policy (--numa)", NULL},
    /* speculative decoding (schema v14): other passes per token, other timings; a run without (NULL, every
     * run before) is "none", never the same configuration as one with it */
    {"r.spec_config", "speculative decoding (--spec)", "none"},
};
#define N_FIELDS (sizeof FIELDS / sizeof FIELDS[0])

/* See store_gate.h. One row per run: each field as text under its own alias
 * (f0, f1, ...), compared by name. */
int store_comparable(store *s, int64_t a, int64_t b, char *diff, size_t n) {
    char sql[4096] = "SELECT ";
    size_t k = strlen(sql);
    for (size_t f = 0; f < N_FIELDS; f++)
        k += (size_t)snprintf(sql + k, sizeof sql - k, "%s%s AS f%zu", f ? ", " : "", FIELDS[f].sql, f);
    snprintf(sql + k, sizeof sql - k, " FROM runs r LEFT JOIN environments e ON e.id = r.env_id WHERE r.id = ?1");
    db_stmt *st[2] = {NULL, NULL};
    int rc = 0;
    for (int side = 0; side < 2 && !rc; side++) {
        if (!(st[side] = db_prepare(store_db(s), sql))) rc = -1;
        else db_bind_int(st[side], 1, side ? b : a);
        if (!rc && db_step(st[side]) != DB_ROW) rc = -1;
    }
    if (n) diff[0] = 0;
    k = 0;
    for (size_t f = 0; f < N_FIELDS && !rc; f++) {
        char name[8];
        snprintf(name, sizeof name, "f%zu", f);
        const char *va = row_text(st[0], name), *vb = row_text(st[1], name);
        if (!FIELDS[f].missing && (!*va || !*vb)) continue;
        if (strcmp(va, vb) && k < n) /* long values (hashes, server identities) cut at 72 characters */
            k += (size_t)snprintf(diff + k, n - k, "%s%s: %.72s vs %.72s", k ? "; " : "", FIELDS[f].name,
                                  *va ? va : FIELDS[f].missing, *vb ? vb : FIELDS[f].missing);
    }
    db_finalize(st[0]);
    db_finalize(st[1]);
    return rc;
}

int store_common_metrics(store *s, int64_t a, int64_t b, char (**names)[40], int *n) {
    *names = NULL;
    *n = 0;
    db_stmt *st = row_prepare(s, "SELECT x.name FROM summary x JOIN summary y ON y.name = x.name"
                                   " WHERE x.run_id = ?1 AND y.run_id = ?2 ORDER BY x.seq", a, b);
    if (!st) return -1;
    int cap = 0, rc;
    while ((rc = db_step(st)) == DB_ROW) {
        if (row_grow((void **)names, *n, &cap, sizeof **names)) break;
        row_copy(st, "name", (*names)[(*n)++], sizeof **names);
    }
    db_finalize(st);
    return rc == DB_DONE ? 0 : -1;
}

int store_canary_pairs(store *s, int64_t base, int64_t cand, store_canary_pair **out, int *n) {
    *out = NULL;
    *n = 0;
    db_stmt *st = row_prepare(s, "SELECT x.item, x.token_hash AS base, y.token_hash AS cand FROM canaries x"
                                   " JOIN canaries y ON y.item = x.item JOIN runs rx ON rx.id = x.run_id"
                                   " JOIN runs ry ON ry.id = y.run_id"
                                   " WHERE x.run_id = ?1 AND y.run_id = ?2 AND rx.model_sha256 = ry.model_sha256", base, cand);
    if (!st) return -1;
    int cap = 0, rc;
    while ((rc = db_step(st)) == DB_ROW) {
        if (row_grow((void **)out, *n, &cap, sizeof **out)) break;
        store_canary_pair *p = &(*out)[(*n)++];
        row_copy(st, "item", p->item, sizeof p->item);
        row_copy(st, "base", p->base, sizeof p->base);
        row_copy(st, "cand", p->cand, sizeof p->cand);
    }
    db_finalize(st);
    return rc == DB_DONE ? 0 : -1;
}

int store_latest_canaries(store *s, store_canary **out, int *n) {
    *out = NULL;
    *n = 0;
    db_stmt *st = row_prepare(s, "SELECT x.item, x.token_hash FROM canaries x"
                                   " WHERE x.run_id = (SELECT max(run_id) FROM canaries c WHERE c.item = x.item)"
                                   " ORDER BY x.item", 0, 0);
    if (!st) return -1;
    int cap = 0, rc;
    while ((rc = db_step(st)) == DB_ROW) {
        if (row_grow((void **)out, *n, &cap, sizeof **out)) break;
        store_canary *c = &(*out)[(*n)++];
        row_copy(st, "item", c->item, sizeof c->item);
        row_copy(st, "token_hash", c->hash, sizeof c->hash);
    }
    db_finalize(st);
    return rc == DB_DONE ? 0 : -1;
}

/* Bind id to parameter i, NULL when 0 (none). */
static void bind_run(db_stmt *st, int i, int64_t id) {
    if (id > 0) db_bind_int(st, i, id);
    else db_bind_null(st, i);
}

int64_t store_gate_insert(store *s, const store_gate_row *g, const store_verdict_row *v, int n) {
    db *d = store_db(s);
    char now[32];
    time_t t = time(NULL);
    strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
    if (db_begin(d)) return -1;
    int64_t id = -1;
    db_stmt *st = db_prepare(d, "INSERT INTO gates (created_at, base_run, cand_run, mode, gate_file, gate_file_hash, verdict,"
                                " summary) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) RETURNING id");
    if (st) {
        db_bind_text(st, 1, now);
        bind_run(st, 2, g->base_run);
        bind_run(st, 3, g->cand_run);
        db_bind_text(st, 4, g->mode);
        db_bind_text(st, 5, g->gate_file);
        db_bind_text(st, 6, g->gate_file_hash);
        db_bind_text(st, 7, g->verdict);
        db_bind_text(st, 8, g->summary);
        if (db_step(st) == DB_ROW) id = db_column_int(st, 0);
        db_finalize(st);
    }
    /* a metric judged twice keeps its last verdict */
    st = id > 0 ? db_prepare(d, "INSERT INTO verdicts (gate_id, metric, direction, threshold, base_median, cand_median,"
                                " change, ci_lo, ci_hi, p_value, n_base, n_cand, verdict, note, base_run, cand_run)"
                                " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)"
                                " ON CONFLICT (gate_id, metric) DO UPDATE SET direction = excluded.direction,"
                                " threshold = excluded.threshold, base_median = excluded.base_median,"
                                " cand_median = excluded.cand_median, change = excluded.change, ci_lo = excluded.ci_lo,"
                                " ci_hi = excluded.ci_hi, p_value = excluded.p_value, n_base = excluded.n_base,"
                                " n_cand = excluded.n_cand, verdict = excluded.verdict, note = excluded.note,"
                                " base_run = excluded.base_run, cand_run = excluded.cand_run")
                  : NULL;
    int ok = id > 0 && st;
    for (int i = 0; ok && i < n; i++) {
        db_reset(st);
        db_bind_int(st, 1, id);
        db_bind_text(st, 2, v[i].metric);
        db_bind_text(st, 3, v[i].direction);
        db_bind_double(st, 4, v[i].threshold);
        db_bind_double(st, 5, v[i].base_median);
        db_bind_double(st, 6, v[i].cand_median);
        db_bind_double(st, 7, v[i].change);
        db_bind_double(st, 8, v[i].ci_lo);
        db_bind_double(st, 9, v[i].ci_hi);
        db_bind_double(st, 10, v[i].p);
        db_bind_int(st, 11, v[i].n_base);
        db_bind_int(st, 12, v[i].n_cand);
        db_bind_text(st, 13, v[i].verdict);
        db_bind_text(st, 14, v[i].note);
        bind_run(st, 15, v[i].base_run);
        bind_run(st, 16, v[i].cand_run);
        ok = db_step(st) == DB_DONE;
    }
    db_finalize(st);
    if (ok && !db_commit(d)) return id;
    db_rollback(d);
    return -1;
}

int store_gates_recent(store *s, int limit, store_gate_row **out, int *n) {
    *out = NULL;
    *n = 0;
    db_stmt *st = row_prepare(s, "SELECT g.id, g.created_at, g.base_run, g.cand_run, g.mode, g.gate_file, g.gate_file_hash,"
                                   " g.verdict, g.summary, r.git_commit, r.workload FROM gates g"
                                   " LEFT JOIN runs r ON r.id = g.cand_run ORDER BY g.id DESC LIMIT ?1", limit, 0);
    if (!st) return -1;
    int cap = 0, rc;
    while ((rc = db_step(st)) == DB_ROW) {
        if (row_grow((void **)out, *n, &cap, sizeof **out)) break;
        store_gate_row *g = &(*out)[(*n)++];
        g->id = row_int(st, "id");
        g->base_run = row_int(st, "base_run");
        g->cand_run = row_int(st, "cand_run");
        row_copy(st, "created_at", g->created, sizeof g->created);
        row_copy(st, "mode", g->mode, sizeof g->mode);
        row_copy(st, "gate_file", g->gate_file, sizeof g->gate_file);
        row_copy(st, "gate_file_hash", g->gate_file_hash, sizeof g->gate_file_hash);
        row_copy(st, "verdict", g->verdict, sizeof g->verdict);
        row_copy(st, "summary", g->summary, sizeof g->summary);
        row_copy(st, "git_commit", g->cand_commit, sizeof g->cand_commit);
        row_copy(st, "workload", g->cand_workload, sizeof g->cand_workload);
    }
    db_finalize(st);
    return rc == DB_DONE ? 0 : -1;
}

int store_verdicts_load(store *s, int64_t gate, store_verdict_row **out, int *n) {
    *out = NULL;
    *n = 0;
    /* the verdict's own runs (schema v12), else the gate's (rows stored before) */
    db_stmt *st = row_prepare(s, "SELECT v.metric, v.verdict, v.change, v.ci_lo, v.ci_hi, v.p_value, v.base_median,"
                                   " v.cand_median, v.threshold, v.direction, v.n_base, v.n_cand, v.note,"
                                   " coalesce(v.base_run, g.base_run) AS base_run, coalesce(v.cand_run, g.cand_run) AS cand_run"
                                   " FROM verdicts v JOIN gates g ON g.id = v.gate_id WHERE v.gate_id = ?1"
                                   " ORDER BY CASE v.verdict WHEN 'regressed' THEN 0 WHEN 'inconclusive' THEN 1"
                                   " WHEN 'improved' THEN 2 ELSE 3 END, v.metric", gate, 0);
    if (!st) return -1;
    int cap = 0, rc;
    while ((rc = db_step(st)) == DB_ROW) {
        if (row_grow((void **)out, *n, &cap, sizeof **out)) break;
        store_verdict_row *v = &(*out)[(*n)++];
        row_copy(st, "metric", v->metric, sizeof v->metric);
        row_copy(st, "verdict", v->verdict, sizeof v->verdict);
        row_copy(st, "direction", v->direction, sizeof v->direction);
        row_copy(st, "note", v->note, sizeof v->note);
        v->change = row_num(st, "change");
        v->ci_lo = row_num(st, "ci_lo");
        v->ci_hi = row_num(st, "ci_hi");
        v->p = row_num(st, "p_value");
        v->base_median = row_num(st, "base_median");
        v->cand_median = row_num(st, "cand_median");
        v->threshold = row_num(st, "threshold");
        v->n_base = (int)row_int(st, "n_base");
        v->n_cand = (int)row_int(st, "n_cand");
        v->base_run = row_int(st, "base_run");
        v->cand_run = row_int(st, "cand_run");
    }
    db_finalize(st);
    return rc == DB_DONE ? 0 : -1;
}

int store_metric_history(store *s, const char *name, const char *workload, store_history_point **out, int *n) {
    *out = NULL;
    *n = 0;
    db_stmt *st = db_prepare(store_db(s), "SELECT r.compare_key, r.workload, r.id, substr(r.git_commit, 1, 10) AS commit10,"
                                          " r.git_dirty, m.median FROM runs r JOIN summary m ON m.run_id = r.id AND m.name = ?1"
                                          " WHERE " STORE_MEASUREMENT("r") " AND (CAST(?2 AS TEXT) IS NULL OR r.workload = ?2)"
                                          " ORDER BY r.compare_key, r.workload, r.id");
    if (!st) return -1;
    db_bind_text(st, 1, name);
    if (workload) db_bind_text(st, 2, workload);
    else db_bind_null(st, 2);
    int cap = 0, rc;
    while ((rc = db_step(st)) == DB_ROW) {
        if (row_grow((void **)out, *n, &cap, sizeof **out)) break;
        store_history_point *p = &(*out)[(*n)++];
        row_copy(st, "compare_key", p->key, sizeof p->key);
        row_copy(st, "workload", p->workload, sizeof p->workload);
        row_copy(st, "commit10", p->commit, sizeof p->commit);
        p->run = row_int(st, "id");
        p->dirty = (int)row_int(st, "git_dirty");
        p->median = row_num(st, "median");
    }
    db_finalize(st);
    return rc == DB_DONE ? 0 : -1;
}

int store_metric_known(store *s, const char *name, const char *workload) {
    db_stmt *st = db_prepare(store_db(s), "SELECT 1 FROM summary m JOIN runs r ON r.id = m.run_id WHERE m.name = ?1"
                                          " AND (CAST(?2 AS TEXT) IS NULL OR r.workload = ?2) LIMIT 1");
    if (!st) return -1;
    db_bind_text(st, 1, name);
    if (workload) db_bind_text(st, 2, workload);
    else db_bind_null(st, 2);
    int rc = db_step(st);
    db_finalize(st);
    return rc == DB_ROW ? 1 : rc == DB_DONE ? 0 : -1;
}
