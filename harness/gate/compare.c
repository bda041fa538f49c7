/*
 * compare.c - compare two runs (see compare.h): may they be compared at all,
 * what moved (medians, change, bootstrap CI, U test, the gate's verdict for
 * every metric the gate file names), and did the tokens change.
 */
#include "compare.h"

#include <math.h>
#include <sqlite3.h>
#include <string.h>

#include "gate.h"
#include "kv_opts.h"
#include "significance.h"

/* Fields that must be equal, with the name printed when they are not. */
static const struct { const char *sql, *name; } FIELDS[] = {
    {"e.cpu_model", "CPU model"}, {"e.isa_flags", "ISA flags"}, {"e.logical_cores", "core count"},
    {"r.model_sha256", "model file"}, {"r.model_type", "quantization"}, {"r.threads", "thread count"},
    {"r.build_type", "build type"}, {"r.n_ctx", "context size"}, {"r.workload_hash", "workload"},
    {"r.test_prompt", "test prompt size"}, {"r.test_gen", "test generation size"}, {"r.test_depth", "test KV depth"},
    {"r.mode", "loop mode"}, {"r.concurrency", "concurrency"}, {"r.ignore_eos", "end-of-text handling"},
    {"r.isa", "kernel instruction set (CORTEX_ISA)"},
    /* runs before schema v6 have none: they used the engine's default cache */
    {"coalesce(r.kv_config, '" KV_OPTS_DEFAULT_CONFIG "')", "KV cache configuration"},
};

int compare_check(store *s, int64_t a, int64_t b, char *diff, size_t n) {
    sqlite3 *db = store_db(s);
    diff[0] = 0;
    size_t k = 0;
    for (size_t f = 0; f < sizeof FIELDS / sizeof FIELDS[0]; f++) {
        char sql[512];
        snprintf(sql, sizeof sql, "SELECT %s FROM runs r LEFT JOIN environments e ON e.id = r.env_id WHERE r.id = ?",
                 FIELDS[f].sql);
        sqlite3_stmt *st;
        const unsigned char *va = NULL;
        char sa[512] = "";
        int found = 0;
        for (int side = 0; side < 2; side++) {
            if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return -1;
            sqlite3_bind_int64(st, 1, side ? b : a);
            if (sqlite3_step(st) == SQLITE_ROW) {
                found++;
                va = sqlite3_column_text(st, 0);
                if (!side) snprintf(sa, sizeof sa, "%s", va ? (const char *)va : "");
                else if (strcmp(sa, va ? (const char *)va : "") && k < n)
                    k += (size_t)snprintf(diff + k, n - k, "%s%s", k ? ", " : "", FIELDS[f].name);
            }
            sqlite3_finalize(st);
        }
        if (found < 2) return -1;
    }
    return 0;
}

int compare_runs(store *s, int64_t a, int64_t b, int force, const gate_conf *gc, FILE *out) {
    sqlite3 *db = store_db(s);
    char diff[512];
    if (compare_check(s, a, b, diff, sizeof diff) < 0) {
        fprintf(stderr, "cortex-bench: compare: run %lld or %lld is not in the database\n", (long long)a, (long long)b);
        return 2;
    }
    if (diff[0] && !force) {
        fprintf(stderr, "cortex-bench: runs %lld and %lld are not comparable: %s differ (--force to compare anyway)\n",
                (long long)a, (long long)b, diff);
        return 2;
    }
    if (diff[0]) fprintf(out, "**FLAGGED: not comparable (%s differ); compared because of --force.**\n\n", diff);
    sqlite3_stmt *st;
    const char *sql = "SELECT x.name FROM summary x JOIN summary y ON y.name = x.name"
                      " WHERE x.run_id = ? AND y.run_id = ? ORDER BY x.rowid";
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return 2;
    sqlite3_bind_int64(st, 1, a);
    sqlite3_bind_int64(st, 2, b);
    fprintf(out, "| metric | run %lld (median) | run %lld (median) | change | 95%% CI | p (U test) | verdict |\n"
                 "| --- | ---: | ---: | ---: | --- | ---: | --- |\n", (long long)a, (long long)b);
    int regressed = 0;
    static double va[1024], vb[1024];
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        size_t na = gate_values(s, a, name, va, 1024), nb = gate_values(s, b, name, vb, 1024);
        const gate_metric *rule = gc ? gate_conf_metric(gc, name) : NULL;
        gate_metric plain;
        if (!rule) { /* not gated: statistics without a verdict */
            memset(&plain, 0, sizeof plain);
            snprintf(plain.name, sizeof plain.name, "%s", name);
            plain.threshold = 1e300;
        }
        gate_verdict v;
        gate_judge(rule ? rule : &plain, va, na, vb, nb, gc ? gc->alpha : 0.05, gc ? gc->bootstrap : 2000, &v);
        double p = v.p;
        if (isnan(p) && na > 1 && nb > 1) sig_mann_whitney(va, na, vb, nb, NULL, &p);
        char ch[32] = "", ci[64] = "", pv[32] = "-";
        if (!isnan(v.change)) snprintf(ch, sizeof ch, "%+.1f%%", v.change * 100);
        if (!isnan(v.ci_lo)) snprintf(ci, sizeof ci, "[%+.1f%%, %+.1f%%]", v.ci_lo * 100, v.ci_hi * 100);
        if (!isnan(p)) snprintf(pv, sizeof pv, "%.4f", p);
        regressed += rule && v.v == GATE_REGRESSED;
        fprintf(out, "| %s | %.3f | %.3f | %s | %s | %s | %s |\n", name, v.base_median, v.cand_median, ch, ci, pv,
                rule ? gate_v_name(v.v) : "(not gated)");
    }
    sqlite3_finalize(st);
    /* Correctness canaries: same model, same item, different greedy tokens. */
    const char *csql = "SELECT x.item, x.token_hash, y.token_hash FROM canaries x JOIN canaries y ON y.item = x.item"
                       " JOIN runs rx ON rx.id = x.run_id JOIN runs ry ON ry.id = y.run_id"
                       " WHERE x.run_id = ? AND y.run_id = ? AND rx.model_sha256 = ry.model_sha256"
                       " AND x.token_hash != y.token_hash";
    int changed = 0;
    if (sqlite3_prepare_v2(db, csql, -1, &st, NULL) != SQLITE_OK) return 2;
    sqlite3_bind_int64(st, 1, a);
    sqlite3_bind_int64(st, 2, b);
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (!changed++) fprintf(out, "\n**Correctness canary changed** (same model, different greedy tokens):\n\n");
        fprintf(out, "- %s: %s -> %s\n", (const char *)sqlite3_column_text(st, 0), (const char *)sqlite3_column_text(st, 1),
                (const char *)sqlite3_column_text(st, 2));
    }
    sqlite3_finalize(st);
    return changed || regressed ? 1 : 0;
}
