/*
 * store_read.c - typed readers of stored runs (see store_read.h). Every
 * query names its columns (aliases), read back by name (store_row.h).
 */
#include "store_read.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"
#include "store_row.h"
#include "hx_err.h"

const char *const STORE_PHASES[3] = {"prefill", "decode", "total"};

const char *store_errmsg(store *s) { return db_errmsg(store_db(s)); }

/* Every column of a run and its environment; a WHERE/ORDER clause follows. */
#define RUN_SELECT                                                                                                         \
    "SELECT r.id, r.status, r.started_at, r.finished_at, r.error, r.workload, r.workload_kind, r.workload_hash, r.mode,"   \
    " r.concurrency, r.model_path, r.model_sha256, r.model_name, r.model_type, r.model_params, r.model_bytes,"             \
    " r.threads, r.reps, r.warmup, r.n_ctx, r.pinned, r.git_commit, r.git_dirty, r.build_type, r.build_flags,"            \
    " r.counter_mode, r.compare_key, r.cmdline, r.isa, r.kv_config, r.env_id, r.hw_id,"                                   \
    " r.sched_config, r.rate, r.slo, r.sweep, r.endpoint, r.server, r.chat_format,"                                         \
    " r.validity, r.validity_reasons, r.allow_failures, r.affinity, r.cpus_allowed, r.cgroup_cpus, r.thp, r.load_before,"  \
    " r.load_after, r.server_build, r.server_cache, r.ignore_eos, r.uuid, r.testbed, r.numa, " STORE_MEASUREMENT("r") " AS measurement,"            \
    " r.spec_config, r.spec_drafter, r.spec_setup_ms,"                                                                       \
    " e.cpu_model, e.isa_flags, e.logical_cores, e.mem_bytes, e.kernel, e.compiler, e.governor, e.fingerprint,"           \
    " e.cpu_vendor, e.cpu_family, e.cpu_model_id, e.cpu_stepping, e.microcode"                                            \
    " FROM runs r LEFT JOIN environments e ON e.id = r.env_id"

/* Fill *r from the current row of a RUN_SELECT query. */
static void run_fill(db_stmt *st, store_run *r) {
    memset(r, 0, sizeof *r);
    r->id = row_int(st, "id");
    r->measurement = row_int(st, "measurement") == 1;
#define TEXT(field, col) row_copy(st, col, r->field, sizeof r->field)
    TEXT(status, "status");
    TEXT(started, "started_at");
    TEXT(finished, "finished_at");
    TEXT(error, "error");
    TEXT(workload, "workload");
    TEXT(kind, "workload_kind");
    TEXT(workload_hash, "workload_hash");
    TEXT(mode, "mode");
    TEXT(model_path, "model_path");
    TEXT(model_sha256, "model_sha256");
    TEXT(model, "model_name");
    TEXT(type, "model_type");
    TEXT(pinned, "pinned");
    TEXT(commit, "git_commit");
    TEXT(build_type, "build_type");
    TEXT(build_flags, "build_flags");
    TEXT(counter_mode, "counter_mode");
    TEXT(key, "compare_key");
    TEXT(cmdline, "cmdline");
    TEXT(isa, "isa");
    TEXT(kv_config, "kv_config");
    TEXT(sched_config, "sched_config");
    TEXT(slo, "slo");
    TEXT(endpoint, "endpoint");
    TEXT(server, "server");
    TEXT(chat_format, "chat_format");
    TEXT(cpu_model, "cpu_model");
    TEXT(isa_flags, "isa_flags");
    TEXT(kernel, "kernel");
    TEXT(compiler, "compiler");
    TEXT(governor, "governor");
    TEXT(fingerprint, "fingerprint");
    TEXT(validity, "validity");
    TEXT(validity_reasons, "validity_reasons");
    TEXT(affinity, "affinity");
    TEXT(thp, "thp");
    TEXT(load_before, "load_before");
    TEXT(load_after, "load_after");
    TEXT(server_build, "server_build");
    TEXT(server_cache, "server_cache");
    r->ignore_eos = (int)row_int(st, "ignore_eos");
    TEXT(cpu_vendor, "cpu_vendor");
    TEXT(uuid, "uuid");
    TEXT(testbed, "testbed");
    TEXT(numa, "numa");
    TEXT(microcode, "microcode");
    TEXT(spec_config, "spec_config");
    TEXT(spec_drafter, "spec_drafter");
#undef TEXT
    r->spec_setup_ms = row_num(st, "spec_setup_ms");
    r->allow_failures = row_null(st, "allow_failures") ? 0 : row_num(st, "allow_failures");
    r->cpus_allowed = (int)row_int(st, "cpus_allowed");
    r->cgroup_cpus = row_null(st, "cgroup_cpus") ? 0 : row_num(st, "cgroup_cpus");
    r->cpu_family = row_null(st, "cpu_family") ? -1 : (int)row_int(st, "cpu_family");
    r->cpu_model_id = row_null(st, "cpu_model_id") ? -1 : (int)row_int(st, "cpu_model_id");
    r->cpu_stepping = row_null(st, "cpu_stepping") ? -1 : (int)row_int(st, "cpu_stepping");
    r->concurrency = (int)row_int(st, "concurrency");
    r->model_params = row_int(st, "model_params");
    r->model_bytes = row_int(st, "model_bytes");
    r->threads = (int)row_int(st, "threads");
    r->reps = (int)row_int(st, "reps");
    r->warmup = (int)row_int(st, "warmup");
    r->n_ctx = (int)row_int(st, "n_ctx");
    r->dirty = (int)row_int(st, "git_dirty");
    r->env_id = row_int(st, "env_id");
    r->hw_id = row_int(st, "hw_id");
    r->logical_cores = (int)row_int(st, "logical_cores");
    r->mem_bytes = row_int(st, "mem_bytes");
    r->rate = row_null(st, "rate") ? 0 : row_num(st, "rate");
    r->sweep = row_int(st, "sweep");
}

/* See store_read.h: the sweep's runs in id order (the saturation run first). */
int store_sweep_load(store *s, int64_t sweep, store_sweep_point **out, int *n) {
    *out = NULL;
    *n = 0;
    db_stmt *st = row_prepare(s,
        "SELECT r.id AS id, r.rate AS rate,"
        " (SELECT median FROM summary WHERE run_id = r.id AND name = 'request_rps') AS rps,"
        " (SELECT median FROM summary WHERE run_id = r.id AND name = 'output_tps') AS otps,"
        " (SELECT median FROM summary WHERE run_id = r.id AND name = 'ttft_ms_p50') AS t50,"
        " (SELECT median FROM summary WHERE run_id = r.id AND name = 'ttft_ms_p99') AS t99,"
        " (SELECT median FROM summary WHERE run_id = r.id AND name = 'tpot_ms_p50') AS p50,"
        " (SELECT median FROM summary WHERE run_id = r.id AND name = 'goodput_rps') AS good"
        " FROM runs r WHERE r.sweep = ?1 AND " STORE_MEASUREMENT("r") " ORDER BY r.id", sweep, 0);
    if (!st) return -1;
    int cap = 0, rc;
    while ((rc = db_step(st)) == DB_ROW) {
        if (row_grow((void **)out, *n, &cap, sizeof **out)) break;
        store_sweep_point *p = &(*out)[(*n)++];
        p->id = row_int(st, "id");
        p->rate = row_null(st, "rate") ? 0 : row_num(st, "rate");
        p->request_rps = row_num(st, "rps");
        p->output_tps = row_num(st, "otps");
        p->ttft_p50 = row_num(st, "t50");
        p->ttft_p99 = row_num(st, "t99");
        p->tpot_p50 = row_num(st, "p50");
        p->goodput_rps = row_num(st, "good");
    }
    db_finalize(st);
    return rc == DB_DONE ? 0 : -1;
}

int store_run_load(store *s, int64_t id, store_run *r) {
    memset(r, 0, sizeof *r);
    r->id = id;
    db_stmt *st = row_prepare(s, RUN_SELECT " WHERE r.id = ?1", id, 0);
    if (!st) return -1;
    int rc = db_step(st), found = rc == DB_ROW;
    if (found) run_fill(st, r);
    db_finalize(st);
    return found ? 1 : rc == DB_DONE ? 0 : -1;
}

int store_runs_all(store *s, store_run **out, int *n) {
    *out = NULL;
    *n = 0;
    db_stmt *st = row_prepare(s, RUN_SELECT " ORDER BY r.id", 0, 0);
    if (!st) return -1;
    int cap = 0, rc;
    while ((rc = db_step(st)) == DB_ROW) {
        if (row_grow((void **)out, *n, &cap, sizeof **out)) break;
        run_fill(st, &(*out)[(*n)++]);
    }
    db_finalize(st);
    return rc == DB_DONE ? 0 : -1;
}

int store_list_runs(store *s, int limit, store_list_row **out, int *n) {
    *out = NULL;
    *n = 0;
    db_stmt *st = row_prepare(s,
        "SELECT r.id, r.started_at, r.status, r.workload, r.model_name, r.model_type, r.threads, r.reps,"
        " substr(r.git_commit, 1, 10) AS commit10, r.git_dirty, r.validity, r.endpoint IS NOT NULL AS http,"
        " (SELECT median FROM summary WHERE run_id = r.id AND name IN ('tps', 'output_tps') ORDER BY name = 'tps' DESC"
        "  LIMIT 1) AS tps FROM runs r ORDER BY r.id DESC LIMIT ?1", limit, 0);
    if (!st) return -1;
    int cap = 0, rc;
    while ((rc = db_step(st)) == DB_ROW) {
        if (row_grow((void **)out, *n, &cap, sizeof **out)) break;
        store_list_row *w = &(*out)[(*n)++];
        w->id = row_int(st, "id");
        row_copy(st, "started_at", w->started, sizeof w->started);
        row_copy(st, "status", w->status, sizeof w->status);
        row_copy(st, "workload", w->workload, sizeof w->workload);
        row_copy(st, "model_name", w->model, sizeof w->model);
        row_copy(st, "model_type", w->type, sizeof w->type);
        row_copy(st, "commit10", w->commit, sizeof w->commit);
        w->threads = (int)row_int(st, "threads");
        w->reps = (int)row_int(st, "reps");
        w->dirty = (int)row_int(st, "git_dirty");
        w->http = (int)row_int(st, "http");
        row_copy(st, "validity", w->validity, sizeof w->validity);
        w->tps = row_num(st, "tps");
    }
    db_finalize(st);
    return rc == DB_DONE ? 0 : -1;
}

int store_summary_load(store *s, int64_t run, store_summary_row *rows, int cap) {
    db_stmt *st = row_prepare(s, "SELECT name, median, min, max, stddev, n FROM summary WHERE run_id = ?1"
                                      " ORDER BY seq", run, 0);
    if (!st) return -1;
    int n = 0, rc;
    while (n < cap && (rc = db_step(st)) == DB_ROW) {
        store_summary_row *w = &rows[n++];
        row_copy(st, "name", w->name, sizeof w->name);
        w->med = row_num(st, "median");
        w->min = row_num(st, "min");
        w->max = row_num(st, "max");
        w->sd = row_num(st, "stddev");
        w->cnt = (int)row_int(st, "n");
    }
    db_finalize(st);
    return n;
}

int store_items_load(store *s, const store_run *r, store_item **items, int *n) {
    *items = NULL;
    *n = 0;
    db_stmt *st = row_prepare(s,
        "SELECT min(q.item) AS item, max(q.adapter) AS adapter, max(q.prompt_tokens) AS prompt_tokens,"
        " avg(CASE WHEN q.error IS NULL THEN q.gen_tokens END) AS gen_tokens,"
        " avg(CASE WHEN q.error IS NULL THEN q.queue_ms END) AS queue,"
        " avg(q.ttft_ms) AS ttft, avg(q.tpot_ms) AS tpot, avg(q.e2e_ms) AS e2e,"
        /* service time = e2e - queue; over HTTP the queue is not visible (NULL): e2e, as req_tps_* count it */
        " avg(CASE WHEN q.error IS NULL AND q.e2e_ms > coalesce(q.queue_ms, 0)"
        "  THEN q.gen_tokens / ((q.e2e_ms - coalesce(q.queue_ms, 0)) / 1000.0) END) AS tps,"
        " max(q.error) AS error, count(*) AS n, sum(CASE WHEN q.error IS NOT NULL THEN 1 ELSE 0 END) AS n_err,"
        " max(c.token_hash) AS hash, min(coalesce(q.state, '')) AS outcome_min, max(coalesce(q.state, '')) AS outcome_max,"
        " count(DISTINCT coalesce(q.state, '')) AS outcomes, max(q.max_tokens) AS max_tokens,"
        " max(c.stable) AS stable"
        " FROM requests q LEFT JOIN canaries c ON c.run_id = q.run_id AND c.item = q.item"
        " WHERE q.run_id = ?1 GROUP BY q.idx ORDER BY q.idx", r->id, 0);
    if (!st) return -1;
    int cap = 0, rc;
    while ((rc = db_step(st)) == DB_ROW) {
        if (row_grow((void **)items, *n, &cap, sizeof **items)) break;
        store_item *it = &(*items)[(*n)++];
        memset(it, 0, sizeof *it);
        row_copy(st, "item", it->item, sizeof it->item);
        it->adapter = (int)row_int(st, "adapter");
        it->prompt_tokens = (int)row_int(st, "prompt_tokens");
        it->gen_tokens = row_num(st, "gen_tokens");
        it->queue = row_num(st, "queue");
        it->ttft = row_num(st, "ttft");
        it->tpot = row_num(st, "tpot");
        it->e2e = row_num(st, "e2e");
        it->tps = row_num(st, "tps");
        row_copy(st, "error", it->error, sizeof it->error);
        it->n = (int)row_int(st, "n");
        it->n_err = (int)row_int(st, "n_err");
        row_copy(st, "hash", it->hash, sizeof it->hash);
        it->stable = row_null(st, "stable") ? -1 : (int)row_int(st, "stable");
        /* how its repetitions ended: one state, or the first and last of several in name order */
        int outcomes = (int)row_int(st, "outcomes");
        snprintf(it->outcome, sizeof it->outcome, "%s%s%s", row_text(st, "outcome_min"),
                 outcomes > 1 ? (outcomes > 2 ? "/../" : "/") : "", outcomes > 1 ? row_text(st, "outcome_max") : "");
        it->max_tokens = (int)row_int(st, "max_tokens");
    }
    db_finalize(st);
    if (rc != DB_DONE) return -1;
    if (!strcmp(r->mode, "synthetic")) {
        if (!(st = row_prepare(s, "SELECT avg(value) AS tps FROM rep_metrics WHERE run_id = ?1 AND name = 'tps'", r->id, 0)))
            return -1;
        double tps = db_step(st) == DB_ROW ? row_num(st, "tps") : NAN;
        db_finalize(st);
        for (int i = 0; i < *n; i++) (*items)[i].tps = tps;
    }
    return 0;
}

int store_counters_load(store *s, int64_t run, store_counter **out, int *n) {
    *out = NULL;
    *n = 0;
    db_stmt *st = row_prepare(s, "SELECT phase, name, max(unit) AS unit, count(*) AS n, sum(CASE WHEN status = 'ok' THEN 1 ELSE 0 END) AS n_ok,"
                                      " avg(CASE WHEN status = 'ok' THEN value END) AS value, max(reason) AS reason,"
                                      " min(seq) AS first FROM counters WHERE run_id = ?1 GROUP BY phase, name ORDER BY first",
                                   run, 0);
    if (!st) return -1;
    int cap = 0, rc;
    while ((rc = db_step(st)) == DB_ROW) {
        int ph = -1;
        for (int p = 0; p < 3; p++)
            if (!strcmp(row_text(st, "phase"), STORE_PHASES[p])) ph = p;
        if (ph < 0) continue;
        store_counter *k = NULL;
        for (int i = 0; i < *n; i++)
            if (!strcmp((*out)[i].name, row_text(st, "name"))) k = &(*out)[i];
        if (!k) {
            if (row_grow((void **)out, *n, &cap, sizeof **out)) break;
            k = &(*out)[(*n)++];
            memset(k, 0, sizeof *k);
            row_copy(st, "name", k->name, sizeof k->name);
            row_copy(st, "unit", k->unit, sizeof k->unit);
        }
        int cnt = (int)row_int(st, "n"), n_ok = (int)row_int(st, "n_ok");
        const char *why = row_text(st, "reason");
        k->seen[ph] = 1;
        k->ok[ph] = cnt > 0 && n_ok == cnt;
        k->v[ph] = row_num(st, "value");
        if (!k->ok[ph]) {
            if (n_ok > 0) snprintf(k->reason[ph], sizeof k->reason[ph], "counted in %d of %d repetitions: %s", n_ok, cnt, why);
            else snprintf(k->reason[ph], sizeof k->reason[ph], "%s", *why ? why : "not counted");
        }
    }
    db_finalize(st);
    return rc == DB_DONE ? 0 : -1;
}

/* Append x to *v (count *n, capacity *cap); -1 when out of memory. */
static int push(double **v, size_t *n, size_t *cap, double x) {
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 256;
        double *p = realloc(*v, c * sizeof *p);
        if (!p) return -1;
        *v = p;
        *cap = c;
    }
    (*v)[(*n)++] = x;
    return 0;
}

int store_latency_samples(store *s, int64_t run, int itl, double **v, size_t *n) {
    *v = NULL;
    *n = 0;
    db_stmt *st = row_prepare(s, itl ? "SELECT itl_ms AS x FROM requests WHERE run_id = ?1 AND error IS NULL AND itl_ms IS NOT NULL"
                                          : "SELECT ttft_ms AS x FROM requests WHERE run_id = ?1 AND error IS NULL AND ttft_ms IS NOT NULL",
                                   run, 0);
    if (!st) return -1;
    size_t cap = 0;
    int rc, oom = 0;
    while (!oom && (rc = db_step(st)) == DB_ROW) {
        if (!itl) {
            oom = push(v, n, &cap, row_num(st, "x"));
            continue;
        }
        /* A JSON array of numbers, as store_finish_run writes it. */
        const char *p = row_text(st, "x");
        while (*p && !oom) {
            if (*p == '[' || *p == ']' || *p == ',' || *p == ' ' || *p == '\n' || *p == '\t') {
                p++;
                continue;
            }
            char *end;
            double x = strtod(p, &end);
            if (end == p) break; /* not a number: stop reading this array */
            if (isfinite(x)) oom = push(v, n, &cap, x);
            p = end;
        }
    }
    db_finalize(st);
    if (oom || rc != DB_DONE) {
        free(*v);
        *v = NULL;
        *n = 0;
        return -1;
    }
    if (*n) stats_sort(*v, *n);
    return 0;
}

int store_request_times(store *s, int64_t run, store_request_time **out, int *n) {
    *out = NULL;
    *n = 0;
    db_stmt *st = row_prepare(s, "SELECT arrival_ms / 1000.0 AS arrival_s, ttft_ms, e2e_ms, queue_ms, decode_ms, rep,"
                                      " idx, prompt_tokens, gen_tokens, item, token_hash, error, state, max_tokens,"
                                      " cached_tokens, stream_chunks IS NOT NULL AS http, tpot_ms, adapter,"
                                      " spec_passes, spec_verified, draft_tokens, accepted_tokens, draft_ms, verify_ms"
                                      " FROM requests WHERE run_id = ?1 ORDER BY rep, idx", run, 0);
    if (!st) return -1;
    int cap = 0, rc;
    while ((rc = db_step(st)) == DB_ROW) {
        if (row_grow((void **)out, *n, &cap, sizeof **out)) break;
        store_request_time *t = &(*out)[(*n)++];
        t->arrival_s = row_num(st, "arrival_s");
        t->ttft_ms = row_num(st, "ttft_ms");
        t->e2e_ms = row_num(st, "e2e_ms");
        t->queue_ms = row_num(st, "queue_ms");
        t->decode_ms = row_num(st, "decode_ms");
        t->rep = (int)row_int(st, "rep");
        t->idx = (int)row_int(st, "idx");
        t->prompt_tokens = (int)row_int(st, "prompt_tokens");
        t->gen_tokens = (int)row_int(st, "gen_tokens");
        t->failed = *row_text(st, "error") || row_null(st, "ttft_ms") || row_null(st, "e2e_ms");
        row_copy(st, "item", t->item, sizeof t->item);
        row_copy(st, "token_hash", t->token_hash, sizeof t->token_hash);
        row_copy(st, "state", t->state, sizeof t->state);
        t->max_tokens = (int)row_int(st, "max_tokens");
        t->cached_tokens = (int)row_int(st, "cached_tokens");
        t->http = (int)row_int(st, "http");
        t->tpot_ms = row_num(st, "tpot_ms");
        t->adapter = row_null(st, "adapter") ? -1 : (int)row_int(st, "adapter");
        t->spec_passes = row_null(st, "spec_passes") ? -1 : (int)row_int(st, "spec_passes");
        t->spec_verified = row_null(st, "spec_verified") ? -1 : (int)row_int(st, "spec_verified");
        t->draft_tokens = row_null(st, "draft_tokens") ? -1 : (int)row_int(st, "draft_tokens");
        t->accepted_tokens = row_null(st, "accepted_tokens") ? -1 : (int)row_int(st, "accepted_tokens");
        t->draft_ms = row_num(st, "draft_ms");
        t->verify_ms = row_num(st, "verify_ms");
        row_copy(st, "error", t->error, sizeof t->error);
    }
    db_finalize(st);
    return rc == DB_DONE ? 0 : -1;
}

/* See store_read.h. `IS` compares NULLs as equal (older runs lack columns). */
int store_run_siblings(store *s, int64_t run, int64_t *ids, int cap) {
    db_stmt *st = row_prepare(s,
        "SELECT o.id AS id, o.threads AS threads, o.id = r.id AS self FROM runs r JOIN runs o"
        " ON (o.id = r.id OR (" STORE_MEASUREMENT("o") " AND o.threads IS DISTINCT FROM r.threads))"
        " AND o.workload_hash IS NOT DISTINCT FROM r.workload_hash AND o.model_sha256 IS NOT DISTINCT FROM r.model_sha256"
        " AND o.git_commit IS NOT DISTINCT FROM r.git_commit AND o.git_dirty IS NOT DISTINCT FROM r.git_dirty AND o.build_type IS NOT DISTINCT FROM r.build_type"
        " AND o.build_flags IS NOT DISTINCT FROM r.build_flags AND o.env_id IS NOT DISTINCT FROM r.env_id AND o.isa IS NOT DISTINCT FROM r.isa AND o.kv_config IS NOT DISTINCT FROM r.kv_config"
        " AND o.sched_config IS NOT DISTINCT FROM r.sched_config AND o.mode IS NOT DISTINCT FROM r.mode AND o.concurrency IS NOT DISTINCT FROM r.concurrency"
        " AND o.n_ctx IS NOT DISTINCT FROM r.n_ctx AND o.ignore_eos IS NOT DISTINCT FROM r.ignore_eos AND o.rate IS NOT DISTINCT FROM r.rate AND o.endpoint IS NOT DISTINCT FROM r.endpoint"
        " AND o.spec_config IS NOT DISTINCT FROM r.spec_config"
        " WHERE r.id = ?1 ORDER BY o.threads, self DESC, o.id DESC", run, 0);
    if (!st) return -1;
    int n = 0, last_threads = -1, rc;
    while ((rc = db_step(st)) == DB_ROW && n < cap) {
        int t = (int)row_int(st, "threads");
        if (t == last_threads) continue; /* an older run at a thread count already taken */
        last_threads = t;
        ids[n++] = row_int(st, "id");
    }
    db_finalize(st);
    return rc == DB_ROW || rc == DB_DONE ? n : -1;
}

int store_adapters_load(store *s, int64_t run, store_adapter **out, int *n) {
    *out = NULL;
    *n = 0;
    db_stmt *st = row_prepare(s, "SELECT adapter, requests, ttft_p50, ttft_p90, ttft_p99, itl_p50, itl_p90, itl_p99,"
                                      " e2e_p50, gen_tokens, output_tps FROM adapter_stats WHERE run_id = ?1 ORDER BY adapter", run, 0);
    if (!st) return -1;
    int cap = 0, rc;
    while ((rc = db_step(st)) == DB_ROW) {
        if (row_grow((void **)out, *n, &cap, sizeof **out)) break;
        store_adapter *a = &(*out)[(*n)++];
        a->adapter = (int)row_int(st, "adapter");
        a->requests = (int)row_int(st, "requests");
        a->ttft_p50 = row_num(st, "ttft_p50");
        a->ttft_p90 = row_num(st, "ttft_p90");
        a->ttft_p99 = row_num(st, "ttft_p99");
        a->itl_p50 = row_num(st, "itl_p50");
        a->itl_p90 = row_num(st, "itl_p90");
        a->itl_p99 = row_num(st, "itl_p99");
        a->e2e_p50 = row_num(st, "e2e_p50");
        a->gen_tokens = row_null(st, "gen_tokens") ? -1 : row_int(st, "gen_tokens");
        a->output_tps = row_num(st, "output_tps");
    }
    db_finalize(st);
    return rc == DB_DONE ? 0 : -1;
}

double store_metric_median(store *s, int64_t run, const char *name) {
    db_stmt *st = row_prepare(s, "SELECT median FROM summary WHERE run_id = ?1 AND name = ?2", run, 0);
    double v = NAN;
    if (!st) return v;
    db_bind_text(st, 2, name);
    if (db_step(st) == DB_ROW) v = row_num(st, "median");
    db_finalize(st);
    return v;
}

size_t store_metric_values(store *s, int64_t run, const char *name, double *out, size_t cap) {
    db_stmt *st = row_prepare(s, "SELECT value FROM rep_metrics WHERE run_id = ?1 AND name = ?2 AND value IS NOT NULL"
                                      " ORDER BY rep", run, 0);
    size_t n = 0;
    if (!st) return 0;
    db_bind_text(st, 2, name);
    while (n < cap && db_step(st) == DB_ROW) out[n++] = row_num(st, "value");
    db_finalize(st);
    return n;
}

/* Is `ref` a whole decimal number (a run id)? */
static int is_run_id(const char *ref, int64_t *id) {
    char *end;
    errno = 0;
    long long x = strtoll(ref, &end, 10);
    if (!*ref || *end || errno || ref[0] == '-' || ref[0] == '+' || ref[0] == ' ') return 0;
    *id = x;
    return 1;
}

int store_resolve_run(store *s, const char *ref, int64_t like, int64_t skip, int64_t *id, char *err, size_t errlen) {
    int64_t x;
    int number = is_run_id(ref, &x);
    if (number) {
        store_run r;
        int found = x > 0 ? store_run_load(s, x, &r) : 0;
        if (found < 0) return hx_fail(err, errlen, "run %s: %s", ref, store_errmsg(s));
        if (found) {
            *id = x;
            return 0;
        }
        /* no such run: an all-digit tag or commit prefix (1234567...) may still name one */
    }
    /* A tag; else (no such tag) a commit prefix of a complete run. */
    db_stmt *st = row_prepare(s,
        "SELECT r.id AS id FROM runs r LEFT JOIN runs me ON me.id = ?1"
        " WHERE r.id != ?3 AND (r.id IN (SELECT run_id FROM tags WHERE name = ?2)"
        "    OR (NOT EXISTS (SELECT 1 FROM tags WHERE name = ?2) AND length(?2) >= 4 AND " STORE_MEASUREMENT("r")
        "        AND r.git_commit LIKE ?2 || '%'))"
        " ORDER BY (r.compare_key IS NOT DISTINCT FROM me.compare_key AND r.workload = me.workload) DESC,"
        " (r.testbed IS NOT DISTINCT FROM me.testbed AND r.workload = me.workload) DESC, r.workload = me.workload DESC,"
        " (SELECT max(created_at) FROM tags t WHERE t.run_id = r.id AND t.name = ?2) DESC, r.id DESC LIMIT 1", like, 0);
    if (!st) return hx_fail(err, errlen, "run %s: %s", ref, store_errmsg(s));
    db_bind_text(st, 2, ref);
    db_bind_int(st, 3, skip);
    int rc = db_step(st);
    if (rc == DB_ROW) *id = row_int(st, "id");
    else if (rc == DB_DONE && number) hx_fail(err, errlen, "no run %s in the database", ref);
    else if (rc == DB_DONE) hx_fail(err, errlen,
                                        "'%s' is neither a run id, a tag, nor the commit of a complete run", ref);
    else hx_fail(err, errlen, "run %s: %s", ref, store_errmsg(s));
    db_finalize(st);
    return rc == DB_ROW ? 0 : -1;
}

/* See store_read.h. */
int store_server_metrics_load(store *s, int64_t run, store_server_metric **out, int *n) {
    *out = NULL;
    *n = 0;
    db_stmt *st = row_prepare(s, "SELECT series, avg(delta) AS delta_mean, count(*) AS reps,"
                                   " (SELECT after FROM server_metrics y WHERE y.run_id = x.run_id AND y.series = x.series"
                                   " ORDER BY rep DESC LIMIT 1) AS after_last"
                                   " FROM server_metrics x WHERE run_id = ?1 GROUP BY series ORDER BY series", run, 0);
    if (!st) return -1;
    int cap = 0, rc;
    while ((rc = db_step(st)) == DB_ROW) {
        if (row_grow((void **)out, *n, &cap, sizeof **out)) break;
        store_server_metric *m = &(*out)[(*n)++];
        row_copy(st, "series", m->series, sizeof m->series);
        m->delta_mean = row_num(st, "delta_mean");
        m->after_last = row_num(st, "after_last");
        m->reps = (int)row_int(st, "reps");
    }
    db_finalize(st);
    return rc == DB_DONE ? 0 : -1;
}
