/*
 * store_eval.c - see store_eval.h.
 */
#include "store_eval.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_row.h"

/* A run's median of summary metric NAME, as a column of the query. */
#define MEDIAN(name, alias) " (SELECT median FROM summary WHERE run_id = r.id AND name = '" name "') AS " alias

int store_eval_runs(store *s, const char *model, store_eval_run **out, int *n) {
    *out = NULL;
    *n = 0;
    db_stmt *st = db_prepare(store_db(s),
        "SELECT r.id AS id, r.env_id AS env_id, coalesce(r.testbed, 'env-' || substr(e.fingerprint, 1, 12)) AS testbed,"
        " e.fingerprint AS fingerprint, r.isa AS isa, r.pinned AS pinned, r.numa AS numa, r.workload AS workload,"
        " r.workload_kind AS kind, r.model_name AS model, r.model_sha256 AS model_sha256, r.started_at AS started,"
        " r.threads AS threads, e.logical_cores AS logical_cores,"
        " coalesce((SELECT median FROM summary WHERE run_id = r.id AND name = 'tps'),"
        "  (SELECT median FROM summary WHERE run_id = r.id AND name = 'output_tps')) AS tps," MEDIAN("decode_tps", "decode_tps") "," MEDIAN("peak_rss_mib", "rss") ","
        MEDIAN("gen_tokens", "gen_tokens") "," MEDIAN("bytes_per_token", "bpt") "," MEDIAN("flops_per_token", "fpt") ","
        MEDIAN("roofline_frac", "roof") ","
        " (SELECT avg(value) FROM counters WHERE run_id = r.id AND name = 'energy-pkg' AND phase = 'total'"
        "  AND status = 'ok') AS energy,"
        " (SELECT max(reason) FROM counters WHERE run_id = r.id AND name = 'energy-pkg' AND status = 'missing')"
        "  AS energy_reason"
        " FROM runs r LEFT JOIN environments e ON e.id = r.env_id"
        " WHERE " STORE_MEASUREMENT("r") " AND (CAST(?1 AS TEXT) IS NULL OR r.model_name LIKE ?1 || '%'"
        "  OR r.model_sha256 LIKE ?1 || '%')"
        " ORDER BY testbed, r.isa, r.pinned, r.numa, r.workload, r.threads, r.id");
    if (!st) return -1;
    db_bind_text(st, 1, model && *model ? model : NULL);
    int cap = 0, rc;
    while ((rc = db_step(st)) == DB_ROW) {
        if (row_grow((void **)out, *n, &cap, sizeof **out)) {
            rc = DB_ERROR;
            break;
        }
        store_eval_run *r = &(*out)[(*n)++];
        memset(r, 0, sizeof *r);
        r->id = row_int(st, "id");
        r->env_id = row_int(st, "env_id");
#define TEXT(field, col) row_copy(st, col, r->field, sizeof r->field)
        TEXT(testbed, "testbed");
        TEXT(fingerprint, "fingerprint");
        TEXT(isa, "isa");
        TEXT(pinned, "pinned");
        TEXT(numa, "numa");
        TEXT(workload, "workload");
        TEXT(kind, "kind");
        TEXT(model, "model");
        TEXT(model_sha256, "model_sha256");
        TEXT(started, "started");
        TEXT(energy_reason, "energy_reason");
#undef TEXT
        r->threads = (int)row_int(st, "threads");
        r->logical_cores = (int)row_int(st, "logical_cores");
        r->tps = row_num(st, "tps");
        r->decode_tps = row_num(st, "decode_tps");
        r->peak_rss_mib = row_num(st, "rss");
        r->gen_tokens = row_num(st, "gen_tokens");
        r->bytes_per_token = row_num(st, "bpt");
        r->flops_per_token = row_num(st, "fpt");
        r->roofline_frac = row_num(st, "roof");
        r->energy_j = row_num(st, "energy");
    }
    db_finalize(st);
    if (rc != DB_DONE) {
        free(*out);
        *out = NULL;
        *n = 0;
        return -1;
    }
    return 0;
}
