/*
 * test_store.c - the benchmark database: schema migrations from an empty and
 * from an older database, a run's two-step life (incomplete, then complete in
 * one transaction), counters the machine lacks stored as missing with their
 * reason (never 0), and refusal of databases newer than the code. Schema v5:
 * the hw table and the run's kernel ISA and hw row, from empty and from a v4
 * database with data. Schema v6: the run's KV cache configuration, from empty
 * and from a v5 database with data; a run stores its KV counters as metrics.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "counters.h"
#include "db.h"
#include "env.h"
#include "fixture.h"
#include "hw_store.h"
#include "prom.h"
#include "runner.h"
#include "store.h"
#include "store_gate.h"
#include "store_read.h"
#include "validity.h"

/* The runs written here are measurements unless a test says otherwise. */
static const run_verdict valid = {.valid = 1};


/* First column of the first row of a query, as an integer (or -1). */
static long long q_int(db *d, const char *sql) {
    db_stmt *st = db_prepare(d, sql);
    long long v = -1;
    if (st && db_step(st) == DB_ROW) v = db_column_int(st, 0);
    db_finalize(st);
    return v;
}

static const char *q_text(db *d, const char *sql, char *buf, size_t n) {
    db_stmt *st = db_prepare(d, sql);
    buf[0] = 0;
    if (st && db_step(st) == DB_ROW && db_column_text(st, 0)) snprintf(buf, n, "%s", db_column_text(st, 0));
    db_finalize(st);
    return buf;
}

static void check_integrity(db *dbh, const char *what) {
    char buf[64];
    CHECK(!strcmp(q_text(dbh, "PRAGMA integrity_check", buf, sizeof buf), "ok"), "%s: integrity_check says %s", what, buf);
    CHECK(q_int(dbh, "SELECT count(*) FROM pragma_foreign_key_check") == 0, "%s: foreign keys hold", what);
}

static void test_fresh(void) {
    const char *path = fx_path("fresh.db");
    char err[512];
    store *s;
    CHECK(store_open(path, &s, err, sizeof err) == 0, "open: %s", err);
    if (!s) return;
    CHECK(store_version(s) == STORE_SCHEMA_VERSION, "fresh database at version %d", store_version(s));
    char buf[32];
    CHECK(!strcmp(q_text(store_db(s), "PRAGMA journal_mode", buf, sizeof buf), "wal"), "WAL journal (%s)", buf);
    CHECK(q_int(store_db(s), "PRAGMA foreign_keys") == 1, "foreign keys on");
    CHECK(q_int(store_db(s), "SELECT count(*) FROM sqlite_master WHERE name IN ('runs','summary','canaries',"
                             "'adapter_stats','counters','requests','environments','rep_metrics','model_hashes','hw')") == 10,
          "all tables exist");
    CHECK(q_int(store_db(s), "SELECT count(*) FROM pragma_table_info('runs') WHERE name IN ('isa', 'hw_id')") == 2,
          "runs has the v5 columns isa and hw_id");
    CHECK(q_int(store_db(s), "SELECT count(*) FROM pragma_table_info('runs') WHERE name = 'kv_config'") == 1,
          "runs has the v6 column kv_config");
    check_integrity(store_db(s), "fresh");
    store_close(s);
    /* Reopening a current database changes nothing. */
    CHECK(store_open(path, &s, err, sizeof err) == 0 && store_version(s) == STORE_SCHEMA_VERSION, "reopen");
    store_close(s);
}

/* ---- migrations ---- */

/* One migration: a database made at schema version `from`, `seed` rows written into it, opened at `to` (0: the
 * current version). `absent` counts what the migrations add (0 before them); each `after` query then gives its
 * `want`: the old rows kept, the new columns NULL for them. `then`, when set, checks more on the migrated
 * database and returns it (reopened, or NULL after a failure). */
typedef struct {
    const char *sql, *what;
    long long want;
} store_query;

typedef struct {
    int from, to;
    const char *seed, *absent, *absent_what;
    store_query after[4];
    store *(*then)(store *s, const char *path);
} migration;

/* A new run's metadata for `workload` (the rest zero) and this machine's environment. */
static void new_run(run_meta *meta, env_info *env, const char *workload) {
    memset(meta, 0, sizeof *meta);
    snprintf(meta->workload, sizeof meta->workload, "%s", workload);
    env_collect(env);
}

/* The v4 -> v5 database at the current schema: a hw measurement lands in one row, tied to this machine's
 * environment (whose row the current code writes with the columns of the current schema: migrate on first);
 * runs point at the hw row, and deleting it leaves the run without the pointer. */
static store *then_v4(store *s, const char *path) {
    char err[512], buf[64];
    store_close(s);
    CHECK(store_open(path, &s, err, sizeof err) == 0, "migrate to the current schema: %s", err);
    if (!s) return NULL;
    db *dbh = store_db(s);
    env_info env;
    env_collect(&env);
    hw_result r;
    memset(&r, 0, sizeof r);
    r.threads = 2;
    r.reps = 3;
    r.buffer_bytes = 64 << 20;
    r.read[0].best = 10;
    r.read[1].best = 18;
    r.fp32_avx2[0].best = r.fp32_avx2[1].best = r.int8_avx2[0].best = r.int8_avx2[1].best = NAN;
    snprintf(r.avx512, sizeof r.avx512, "not available on this CPU");
    int64_t hid = 0;
    CHECK(hw_store_insert(s, &r, &env, &hid, err, sizeof err) == 0 && hid == 1, "hw row: %s", err);
    CHECK(q_int(dbh, "SELECT read_gbs = 18 AND read_gbs_1t = 10 AND fp32_gflops_avx2 IS NULL AND threads = 2 FROM hw") == 1,
          "figures stored; one not measured is NULL, not 0");
    CHECK(!strcmp(q_text(dbh, "SELECT avx512 FROM hw", buf, sizeof buf), "not available on this CPU"), "ISA status: %s", buf);
    CHECK(q_int(dbh, "SELECT count(*) FROM hw h JOIN environments e ON e.id = h.env_id WHERE e.fingerprint != 'abc'") == 1,
          "hw row belongs to this machine's environment");
    CHECK(db_exec(dbh, "UPDATE runs SET hw_id = 1 WHERE id = 1; DELETE FROM hw WHERE id = 1;") == 0 && q_int(dbh, "SELECT hw_id IS NULL FROM runs WHERE id = 1") == 1,
          "hw_id is set NULL when its row goes");
    return s;
}

/* v5 -> v6: new runs store their KV configuration. */
static store *then_v5(store *s, const char *path) {
    char err[512], buf[256];
    db *dbh = store_db(s);
    env_info env;
    run_meta meta;
    new_run(&meta, &env, "tg8");
    snprintf(meta.kv_config, sizeof meta.kv_config, "type=q8 prefix=on");
    int64_t id = 0;
    CHECK(store_begin_run(s, &meta, &env, &id, err, sizeof err) == 0 && id == 2, "new run: %s", err);
    CHECK(!strcmp(q_text(dbh, "SELECT kv_config FROM runs WHERE id = 2", buf, sizeof buf), "type=q8 prefix=on"),
          "new run stores its KV configuration (%s)", buf);
    return s;
}

/* v6 -> v7: the old run has no workload sidecar, new runs store theirs (or NULL); v8: a served run's
 * scheduler, rate, SLOs and sweep, NULL for the older run. */
static store *then_v6(store *s, const char *path) {
    char err[512], buf[256];
    db *dbh = store_db(s);
    CHECK(q_int(dbh, "SELECT workload_meta IS NULL FROM runs WHERE id = 1") == 1 && store_run_workload_meta(s, 1) == NULL,
          "old run: no workload sidecar");
    env_info env;
    run_meta meta;
    new_run(&meta, &env, "trace:t.jsonl");
    meta.workload_meta = "{\"format\": \"cortex-bench trace\", \"seed\": 9}";
    int64_t id = 0;
    CHECK(store_begin_run(s, &meta, &env, &id, err, sizeof err) == 0 && id == 2, "new run: %s", err);
    char *got = store_run_workload_meta(s, 2);
    CHECK(got && !strcmp(got, meta.workload_meta), "new run stores its workload sidecar (%s)", got ? got : "NULL");
    free(got);
    meta.workload_meta = NULL;
    CHECK(store_begin_run(s, &meta, &env, &id, err, sizeof err) == 0 && id == 3, "run without sidecar: %s", err);
    CHECK(q_int(dbh, "SELECT workload_meta IS NULL FROM runs WHERE id = 3") == 1, "no sidecar: NULL");
    snprintf(meta.sched_config, sizeof meta.sched_config, "seqs=8,batch=256,queue=1024");
    meta.rate = 2.5;
    snprintf(meta.slo, sizeof meta.slo, "ttft=500,tpot=50");
    meta.sweep = 3;
    CHECK(store_begin_run(s, &meta, &env, &id, err, sizeof err) == 0 && id == 4, "served run: %s", err);
    CHECK(!strcmp(q_text(dbh, "SELECT sched_config || '|' || rate || '|' || slo || '|' || sweep FROM runs WHERE id = 4",
                         buf, sizeof buf), "seqs=8,batch=256,queue=1024|2.5|ttft=500,tpot=50|3"),
          "served run's scheduler fields stored (%s)", buf);
    CHECK(q_int(dbh, "SELECT sched_config IS NULL AND rate IS NULL AND sweep IS NULL FROM runs WHERE id = 1") == 1,
          "old run: no scheduler fields");
    return s;
}

/* v8 -> v9 and on: a run over HTTP stores its endpoint, server identity and /v1/models answer, its requests'
 * stream chunks and its server metrics, and is not comparable with the in-process run. */
static store *then_v8(store *s, const char *path) {
    char err[512], buf[256];
    db *dbh = store_db(s);
    env_info env;
    run_meta meta;
    new_run(&meta, &env, "standard");
    snprintf(meta.endpoint, sizeof meta.endpoint, "http://127.0.0.1:8080/v1");
    snprintf(meta.server, sizeof meta.server, "llama.cpp; models=m");
    meta.server_info = "{\"models\":{\"data\":[{\"id\":\"m\"}]}}";
    snprintf(meta.server_cache, sizeof meta.server_cache, "off");
    snprintf(meta.server_build, sizeof meta.server_build, "b1-probe");
    int64_t id = 0;
    CHECK(store_begin_run(s, &meta, &env, &id, err, sizeof err) == 0 && id == 2, "HTTP run: %s", err);
    rep_result rep;
    memset(&rep, 0, sizeof rep);
    req_result q;
    memset(&q, 0, sizeof q);
    snprintf(q.item, sizeof q.item, "p01");
    snprintf(q.state, sizeof q.state, "finished");
    q.gen_tokens = 8;
    q.stream_chunks = 4;
    prom_delta d = {"vllm:generation_tokens_total", 10, 18, 8};
    rep.req = &q;
    rep.n_req = 1;
    rep.http = 1;
    rep.srv = &d;
    rep.n_srv = 1;
    rep_set_metric(&rep, "requests", 1);
    rep_result reps[2];
    reps[0] = rep;
    reps[1] = rep;
    snprintf(reps[0].server_build, sizeof reps[0].server_build, "fp_a");
    snprintf(reps[1].server_build, sizeof reps[1].server_build, "fp_b, fp_a");
    CHECK(store_finish_run(s, id, reps, 2, &valid, NULL, err, sizeof err) == 0, "finish HTTP run: %s", err);
    CHECK(!strcmp(q_text(dbh, "SELECT server_build || ' ' || server_cache FROM runs WHERE id = 2", buf, sizeof buf),
                  "fp_a, fp_b off"), "the answers' fingerprints, distinct over repetitions, replace the probe's build (%s)",
          buf);
    CHECK(!strcmp(q_text(dbh, "SELECT endpoint || ' ' || server FROM runs WHERE id = 2", buf, sizeof buf),
                  "http://127.0.0.1:8080/v1 llama.cpp; models=m"), "endpoint and server stored (%s)", buf);
    CHECK(!strcmp(q_text(dbh, "SELECT json_extract(server_info, '$.models.data[0].id') FROM runs WHERE id = 2", buf,
                         sizeof buf), "m"), "server_info stored as JSON (%s)", buf);
    CHECK(q_int(dbh, "SELECT stream_chunks FROM requests WHERE run_id = 2") == 4, "stream chunks stored");
    CHECK(q_int(dbh, "SELECT delta = 8 AND before = 10 AND after = 18 FROM server_metrics WHERE run_id = 2 AND rep = 0"
                    " AND series = 'vllm:generation_tokens_total'") == 1, "server metric stored");
    store_run r;
    CHECK(store_run_load(s, 2, &r) == 1 && !strcmp(r.endpoint, meta.endpoint) && !strcmp(r.server, meta.server),
          "store_run_load reads the endpoint");
    store_server_metric *sm;
    int n = 0;
    CHECK(store_server_metrics_load(s, 2, &sm, &n) == 0 && n == 1 && sm[0].delta_mean == 8 && sm[0].after_last == 18,
          "store_server_metrics_load (%d)", n);
    free(sm);
    char diff[2048];
    CHECK(store_comparable(s, 1, 2, diff, sizeof diff) == 0 && strstr(diff, "endpoint (HTTP server or in-process)"),
          "HTTP and in-process runs differ in their endpoint (%s)", diff);
    /* a run whose answers name no build keeps the probe's; cache on and off do not compare; no record (an HTTP
     * run from before v12) counts as on */
    int64_t id3 = 0, id4 = 0;
    snprintf(meta.server_cache, sizeof meta.server_cache, "on");
    CHECK(store_begin_run(s, &meta, &env, &id3, err, sizeof err) == 0 &&
              store_finish_run(s, id3, &rep, 1, &valid, NULL, err, sizeof err) == 0, "cache-on run: %s", err);
    CHECK(!strcmp(q_text(dbh, "SELECT server_build FROM runs WHERE id = 3", buf, sizeof buf), "b1-probe"),
          "no fingerprint: the probe's build (%s)", buf);
    CHECK(store_comparable(s, 2, 3, diff, sizeof diff) == 0 && !strcmp(diff, "server prompt cache (--server-cache): off vs on"),
          "cache off and on differ in that alone (%s)", diff);
    meta.server_cache[0] = 0;
    meta.server_build[0] = 0;
    CHECK(store_begin_run(s, &meta, &env, &id4, err, sizeof err) == 0, "an HTTP run without a cache record: %s", err);
    CHECK(q_int(dbh, "SELECT server_build IS NULL AND server_cache IS NULL FROM runs WHERE id = 4") == 1,
          "nothing known: NULL");
    CHECK(store_comparable(s, 3, 4, diff, sizeof diff) == 0 && !strstr(diff, "server prompt cache"),
          "an HTTP run without a record compares with cache on (%s)", diff);
    CHECK(store_comparable(s, 2, 4, diff, sizeof diff) == 0 && strstr(diff, "server prompt cache"),
          "... not with cache off (%s)", diff);
    return s;
}

/* v13 -> v14: the old run did not speculate; a new run stores its speculation and its requests' drafts, and
 * is not comparable with the old run (nor its compare_key another's: run_cmd.c adds the speculation to it). */
static store *then_v13(store *s, const char *path) {
    char err[512], buf[256];
    db *dbh = store_db(s);
    store_run r;
    CHECK(store_run_load(s, 1, &r) == 1 && !r.spec_config[0] && isnan(r.spec_setup_ms), "old run: no speculation");
    env_info env;
    run_meta meta;
    new_run(&meta, &env, "standard");
    snprintf(meta.spec_config, sizeof meta.spec_config, "self:q4_0,max=8,min=2,fixed");
    snprintf(meta.spec_drafter, sizeof meta.spec_drafter, "self:q4_0 (636 MiB)");
    meta.spec_setup_ms = 1234.5;
    int64_t id = 0;
    CHECK(store_begin_run(s, &meta, &env, &id, err, sizeof err) == 0 && id == 2, "speculating run: %s", err);
    rep_result rep;
    memset(&rep, 0, sizeof rep);
    req_result q;
    memset(&q, 0, sizeof q);
    snprintf(q.item, sizeof q.item, "p01");
    snprintf(q.state, sizeof q.state, "length");
    q.gen_tokens = 9;
    q.spec = 1;
    q.spec_passes = 4;
    q.spec_verified = 3;
    q.draft_tokens = 24;
    q.accepted_tokens = 5;
    q.draft_ms = 1.5;
    q.verify_ms = 8;
    rep.req = &q;
    rep.n_req = 1;
    rep_set_metric(&rep, "spec_tokens_per_pass", 2);
    CHECK(store_finish_run(s, id, &rep, 1, &valid, NULL, err, sizeof err) == 0, "finish it: %s", err);
    CHECK(!strcmp(q_text(dbh, "SELECT spec_config || '|' || spec_drafter || '|' || spec_setup_ms FROM runs WHERE id = 2",
                         buf, sizeof buf), "self:q4_0,max=8,min=2,fixed|self:q4_0 (636 MiB)|1234.5"),
          "the speculation stored (%s)", buf);
    CHECK(q_int(dbh, "SELECT spec_passes = 4 AND spec_verified = 3 AND draft_tokens = 24 AND accepted_tokens = 5 AND"
                     " draft_ms = 1.5 AND verify_ms = 8 FROM requests WHERE run_id = 2") == 1, "its request's drafts stored");
    CHECK(store_metric_median(s, 2, "spec_tokens_per_pass") == 2, "its metrics are summary rows like any other");
    char diff[2048];
    CHECK(store_comparable(s, 1, 2, diff, sizeof diff) == 0 && strstr(diff, "speculative decoding (--spec): none vs self:q4_0"),
          "a speculating run is not the same configuration as one without (%s)", diff);
    return s;
}

/* Run 1's results: a metric, its summary and a tag. */
#define SEED_RESULTS                                                                                              \
    "INSERT INTO rep_metrics VALUES (1, 0, 'decode_tps', 20.5);"                                                 \
    "INSERT INTO summary (run_id, name, n, median, min, max, mean, stddev)"                                       \
    "  VALUES (1, 'decode_tps', 1, 20.5, 20.5, 20.5, 20.5, 0);"                                \
    "INSERT INTO tags VALUES ('baseline', 1, '2026-01-01');"

static const migration migrations[] = {
    {1, 0,
     "INSERT INTO environments (fingerprint, cpu_model) VALUES ('abc', 'Old CPU');"
     "INSERT INTO runs (started_at, status, workload, env_id, threads) VALUES ('2026-01-01', 'complete', 'standard', 1, 2);"
     "INSERT INTO rep_metrics VALUES (1, 0, 'output_tps', 12.5);",
     "SELECT count(*) FROM sqlite_master WHERE name = 'summary'", "v1 has no summary table",
     {{"SELECT threads FROM runs WHERE id = 1", "old run kept", 2},
      {"SELECT count(*) FROM rep_metrics WHERE run_id = 1", "old metrics kept", 1},
      {"SELECT test_prompt IS NULL FROM runs WHERE id = 1", "new column added, NULL for old rows", 1},
      {"SELECT count(*) FROM summary", "new table exists and is empty", 0}},
     NULL},
    /* v4 -> v5: the run and its results kept, its kernel ISA unknown (NULL, so it is never taken for a run of
     * a known ISA), the hw table empty; then at the current schema it takes rows */
    {4, 5,
     "INSERT INTO environments (fingerprint, cpu_model) VALUES ('abc', 'Old CPU');"
     "INSERT INTO runs (started_at, status, workload, env_id, threads, ignore_eos)"
     "  VALUES ('2026-01-01', 'complete', 'tg8', 1, 2, 1);"
     SEED_RESULTS,
     "SELECT count(*) FROM sqlite_master WHERE name = 'hw'", "v4 has no hw table",
     {{"SELECT threads = 2 AND ignore_eos = 1 FROM runs WHERE id = 1", "old run kept", 1},
      {"SELECT (SELECT count(*) FROM summary WHERE run_id = 1) = 1 AND (SELECT count(*) FROM tags) = 1",
       "old summary and tag kept", 1},
      {"SELECT isa IS NULL AND hw_id IS NULL FROM runs WHERE id = 1", "old run: ISA and hw row unknown", 1},
      {"SELECT count(*) FROM hw", "hw table exists and is empty", 0}},
     then_v4},
    /* v5 -> v6: the run, its results and tags kept, its KV configuration NULL (it used the default cache,
     * which compare takes it for) */
    {5, 0,
     "INSERT INTO environments (fingerprint, cpu_model) VALUES ('abc', 'Old CPU');"
     "INSERT INTO runs (started_at, status, workload, env_id, threads, ignore_eos, isa)"
     "  VALUES ('2026-01-01', 'complete', 'tg8', 1, 2, 1, 'avx2');"
     SEED_RESULTS,
     "SELECT count(*) FROM pragma_table_info('runs') WHERE name = 'kv_config'", "v5 has no kv_config",
     {{"SELECT threads = 2 AND isa = 'avx2' FROM runs WHERE id = 1", "old run kept", 1},
      {"SELECT (SELECT count(*) FROM summary WHERE run_id = 1) = 1 AND (SELECT count(*) FROM tags) = 1 AND "
       "(SELECT count(*) FROM rep_metrics WHERE run_id = 1) = 1", "old metrics, summary and tag kept", 1},
      {"SELECT kv_config IS NULL FROM runs WHERE id = 1", "old run: KV configuration NULL", 1}},
     then_v5},
    /* v6 -> v7: the run kept with no workload sidecar */
    {6, 0,
     "INSERT INTO environments (fingerprint, cpu_model) VALUES ('abc', 'Old CPU');"
     "INSERT INTO runs (started_at, status, workload, env_id, threads, kv_config)"
     "  VALUES ('2026-01-01', 'complete', 'trace:t.jsonl', 1, 2, 'type=f32');",
     "SELECT count(*) FROM pragma_table_info('runs') WHERE name = 'workload_meta'", "v6 has no workload_meta",
     {{"SELECT threads = 2 AND kv_config = 'type=f32' FROM runs WHERE id = 1", "old run kept", 1}},
     then_v6},
    /* v8 -> v9: the run kept as an in-process run (endpoint NULL) */
    {8, 0,
     "INSERT INTO environments (fingerprint, cpu_model) VALUES ('abc', 'Old CPU');"
     "INSERT INTO runs (started_at, status, workload, env_id, threads, sched_config)"
     "  VALUES ('2026-01-01', 'complete', 'standard', 1, 2, 'seqs=8,batch=256,queue=1024');",
     "SELECT count(*) FROM sqlite_master WHERE name = 'server_metrics'", "v8 has no server_metrics",
     {{"SELECT endpoint IS NULL AND server IS NULL AND threads = 2 FROM runs WHERE id = 1", "old run kept, in-process", 1}},
     then_v8},
    /* v13 -> v14: the run kept, with no speculation (NULL) */
    {13, 0,
     "INSERT INTO environments (fingerprint, cpu_model) VALUES ('abc', 'Old CPU');"
     "INSERT INTO runs (uuid, started_at, status, workload, env_id, threads, testbed)"
     "  VALUES ('00000000-0000-4000-8000-000000000001', '2026-01-01', 'complete', 'standard', 1, 2, 'bed');",
     "SELECT count(*) FROM pragma_table_info('requests') WHERE name IN ('draft_tokens', 'spec_passes')",
     "v13 has no speculation columns",
     {{"SELECT threads = 2 AND testbed = 'bed' FROM runs WHERE id = 1", "old run kept", 1},
      {"SELECT spec_config IS NULL AND spec_drafter IS NULL AND spec_setup_ms IS NULL FROM runs WHERE id = 1",
       "old run: no speculation", 1}},
     then_v13},
};

/* Each migration: the seeded database migrates, keeps its rows and stays consistent. */
static void test_migrations(void) {
    for (size_t i = 0; i < sizeof migrations / sizeof migrations[0]; i++) {
        const migration *m = &migrations[i];
        int to = m->to ? m->to : STORE_SCHEMA_VERSION;
        const char *path = fx_path("v%d.db", m->from);
        char err[512], what[64];
        store *s;
        CHECK(store_open_version(path, m->from, &s, err, sizeof err) == 0 && store_version(s) == m->from,
              "create v%d: %s", m->from, err);
        if (!s) continue;
        db *dbh = store_db(s);
        CHECK(db_exec(dbh, m->seed) == 0, "seed v%d rows: %s", m->from, db_errmsg(dbh));
        CHECK(q_int(dbh, m->absent) == 0, "%s", m->absent_what);
        store_close(s);
        CHECK(store_open_version(path, to, &s, err, sizeof err) == 0, "migrate v%d: %s", m->from, err);
        if (!s) continue;
        dbh = store_db(s);
        CHECK(store_version(s) == to, "v%d migrated to %d (%d)", m->from, to, store_version(s));
        for (int k = 0; k < 4 && m->after[k].sql; k++)
            CHECK(q_int(dbh, m->after[k].sql) == m->after[k].want, "v%d: %s", m->from, m->after[k].what);
        if (m->then && !(s = m->then(s, path))) continue;
        snprintf(what, sizeof what, "migrated from v%d", m->from);
        check_integrity(store_db(s), what);
        store_close(s);
    }
}

/* A database from a newer cortex-bench is refused, not damaged. */
static void test_newer_refused(void) {
    const char *path = fx_path("new.db");
    char err[512] = "";
    db *dbh;
    if (db_open(path, &dbh, err, sizeof err) == 0) {
        db_exec(dbh, "PRAGMA user_version = 99");
        db_close(dbh);
    }
    store *s;
    CHECK(store_open(path, &s, err, sizeof err) != 0 && strstr(err, "newer"), "newer schema refused: %s", err);
    CHECK(store_open("/nonexistent-dir/x.db", &s, err, sizeof err) != 0 && strstr(err, "/nonexistent-dir/x.db"),
          "unwritable path named: %s", err);
}

/* Fill the fields a run needs. */
static void meta_for(run_meta *m, const char *wl) {
    memset(m, 0, sizeof *m);
    snprintf(m->workload, sizeof m->workload, "%s", wl);
    snprintf(m->mode, sizeof m->mode, "synthetic");
    snprintf(m->model_sha256, sizeof m->model_sha256, "00");
    m->threads = 1;
    m->reps = 2;
    snprintf(m->isa, sizeof m->isa, "scalar");
}

/* A real repetition with every counter forced unavailable: each is stored as
 * missing with its reason, none as 0; the run goes incomplete -> complete. */
static void test_run_lifecycle(void) {
    const char *path = fx_path("runs.db");
    char err[512];
    cx_model *m = fx_synth_model(cx_shape_find("test-tiny"), CX_TYPE_Q8_0, 1, "tiny.gguf", NULL);
    if (!m) return;
    ctr_test_inject(CTR_INJECT_ENOSYS);
    ctr_set *ctr = ctr_open(err, sizeof err);
    ctr_test_inject(CTR_INJECT_NONE);
    store *s;
    CHECK(store_open(path, &s, err, sizeof err) == 0, "open: %s", err);
    if (!s) { cx_model_free(m); ctr_close(ctr); return; }
    env_info env;
    env_collect(&env);
    run_meta meta;
    meta_for(&meta, "tg8");
    int64_t id = 0;
    CHECK(store_begin_run(s, &meta, &env, &id, err, sizeof err) == 0 && id > 0, "begin: %s", err);
    char buf[64], sql[256];
    snprintf(sql, sizeof sql, "SELECT status FROM runs WHERE id = %lld", (long long)id);
    CHECK(!strcmp(q_text(store_db(s), sql, buf, sizeof buf), "incomplete"), "a started run is incomplete (%s)", buf);
    run_config cfg = {0};
    cfg.mode = RUN_SYNTHETIC;
    cfg.threads = 1;
    cfg.ignore_eos = 1;
    cfg.test_gen = 8;
    cfg.label = "test";
    rep_result reps[2];
    cfg.reps_total = 2;
    for (int r = 0; r < 2; r++) {
        cfg.rep_index = r;
        CHECK(runner_rep(m, NULL, &cfg, ctr, &reps[r], err, sizeof err) == 0, "rep %d: %s", r, err);
    }
    CHECK(store_finish_run(s, id, reps, 2, &valid, NULL, err, sizeof err) == 0, "finish: %s", err);
    CHECK(!strcmp(q_text(store_db(s), sql, buf, sizeof buf), "complete"), "finished run is complete (%s)", buf);
    db *dbh = store_db(s);
    CHECK(q_int(dbh, "SELECT count(*) FROM counters WHERE status = 'ok'") == 0, "no counter claims a value");
    CHECK(q_int(dbh, "SELECT count(*) FROM counters WHERE status = 'missing' AND value IS NULL AND length(reason) > 0") ==
              q_int(dbh, "SELECT count(*) FROM counters") && q_int(dbh, "SELECT count(*) FROM counters") > 0,
          "every counter missing, NULL, with a reason");
    CHECK(strstr(q_text(dbh, "SELECT reason FROM counters WHERE name = 'cycles' LIMIT 1", buf, sizeof buf), "ENOSYS") != NULL,
          "reason names the error: %s", buf);
    CHECK(q_int(dbh, "SELECT count(*) FROM rep_metrics WHERE name = 'tps'") == 2, "tps per repetition");
    CHECK(q_int(dbh, "SELECT n FROM summary WHERE name = 'tps'") == 2, "summary over 2 repetitions");
    CHECK(q_int(dbh, "SELECT stable FROM canaries WHERE item = 'tg8'") == 1, "greedy canary stable across repetitions");
    CHECK(q_int(dbh, "SELECT gen_tokens FROM requests WHERE rep = 1") == 8, "8 tokens generated");
    CHECK(q_int(dbh, "SELECT json_array_length(itl_ms) FROM requests WHERE rep = 0") == 7, "7 inter-token gaps stored");
    /* tg8 after BOS (position 0): the first token is evaluated at position
     * 1, the 7 timed decode steps at positions 2..8 attend 3..9 positions: mean 6. */
    CHECK(q_int(dbh, "SELECT count(*) FROM rep_metrics WHERE name = 'decode_ctx_mean' AND value = 6") == 2,
          "mean KV positions attended per decode step");
    snprintf(sql, sizeof sql, "SELECT isa FROM runs WHERE id = %lld", (long long)id);
    CHECK(!strcmp(q_text(dbh, sql, buf, sizeof buf), "scalar"), "the run's kernel ISA is stored (%s)", buf);
    CHECK(q_int(dbh, "SELECT count(*) FROM rep_metrics WHERE name IN ('kv_hits_hot', 'kv_peak_bytes_hot')"
                    " AND value > 0") == 4, "KV counters stored as metrics, each repetition");
    CHECK(q_int(dbh, "SELECT count(*) FROM rep_metrics WHERE name = 'kv_prefix_hit_rate'") == 0,
          "no prefix hit rate without the prefix cache");
    snprintf(sql, sizeof sql, "SELECT status FROM runs WHERE id = %lld", (long long)id);
    check_integrity(dbh, "after run");
    /* A failed run is marked failed with its reason. */
    int64_t id2 = 0;
    store_begin_run(s, &meta, &env, &id2, err, sizeof err);
    store_fail_run(s, id2, "engine exploded");
    snprintf(sql, sizeof sql, "SELECT status || ': ' || error FROM runs WHERE id = %lld", (long long)id2);
    CHECK(!strcmp(q_text(dbh, sql, buf, sizeof buf), "failed: engine exploded"), "failed run: %s", buf);
    for (int r = 0; r < 2; r++) rep_free(&reps[r]);
    store_close(s);
    ctr_close(ctr);
    cx_model_free(m);
}

/* One complete run of workload `wl` built from `commit`, with no results. */
static int64_t resolver_run(store *s, const char *wl, const char *commit) {
    env_info env;
    env_collect(&env);
    run_meta meta;
    meta_for(&meta, wl);
    snprintf(meta.git_commit, sizeof meta.git_commit, "%s", commit);
    char err[256];
    int64_t id = 0;
    if (store_begin_run(s, &meta, &env, &id, err, sizeof err) || store_finish_run(s, id, NULL, 0, &valid, NULL, err, sizeof err)) return -1;
    return id;
}

/* store_resolve_run: the same reference forms (id, tag, commit prefix) for
 * every command; a tag prefers runs like `like`; `skip` is never chosen. */
static void test_resolve(void) {
    const char *path = fx_path("resolve.db");
    char err[512];
    store *s;
    CHECK(store_open(path, &s, err, sizeof err) == 0, "open: %s", err);
    if (!s) return;
    int64_t a = resolver_run(s, "tg8", "aaaa1111"), b = resolver_run(s, "pp8", "bbbb2222"),
            c = resolver_run(s, "tg8", "bbbb2222"), d = resolver_run(s, "tg8", "24317990"), id = 0;
    CHECK(a > 0 && b > a && c > b && d > c, "four runs");
    CHECK(store_resolve_run(s, "2431799", 0, 0, &id, err, sizeof err) == 0 && id == d,
          "an all-digit commit prefix that is no run id: %s", err);
    CHECK(store_tag_run(s, a, "base") == 0 && store_tag_run(s, b, "base") == 0, "two runs tagged 'base'");
    char ref[32];
    snprintf(ref, sizeof ref, "%lld", (long long)b);
    CHECK(store_resolve_run(s, ref, 0, 0, &id, err, sizeof err) == 0 && id == b, "a run id");
    CHECK(store_resolve_run(s, "999", 0, 0, &id, err, sizeof err) == -1 && strstr(err, "no run 999"), "a missing id: %s", err);
    CHECK(store_resolve_run(s, "base", 0, 0, &id, err, sizeof err) == 0 && id == b, "a tag: its newest run");
    CHECK(store_resolve_run(s, "base", c, 0, &id, err, sizeof err) == 0 && id == a, "a tag: the run like `like` (tg8)");
    CHECK(store_resolve_run(s, "bbbb", 0, 0, &id, err, sizeof err) == 0 && id == c, "a commit prefix: its newest run");
    CHECK(store_resolve_run(s, "bbbb", 0, c, &id, err, sizeof err) == 0 && id == b, "never `skip`");
    CHECK(store_resolve_run(s, "bbb", 0, 0, &id, err, sizeof err) == -1, "a commit prefix needs 4 characters");
    CHECK(store_resolve_run(s, "nope", 0, 0, &id, err, sizeof err) == -1 && strstr(err, "'nope'") && !strchr(err, '\n'),
          "neither: one line naming it: %s", err);
    store_close(s);
}

/* A gate's verdicts keep the runs each one judged (schema v12); a verdict
 * without them (0: a row from before) reads back as the gate's pair. */
static void test_verdict_runs(void) {
    const char *path = fx_path("verdicts.db");
    char err[512];
    store *s;
    CHECK(store_open(path, &s, err, sizeof err) == 0, "open: %s", err);
    if (!s) return;
    int64_t a = resolver_run(s, "tg8", "aaaa1111"), b = resolver_run(s, "tg8", "bbbb2222"),
            c = resolver_run(s, "pp8", "aaaa1111"), d = resolver_run(s, "pp8", "bbbb2222");
    store_gate_row g;
    memset(&g, 0, sizeof g);
    g.base_run = c, g.cand_run = d; /* the gate row holds one pair; its verdicts span two */
    snprintf(g.mode, sizeof g.mode, "wallclock");
    snprintf(g.verdict, sizeof g.verdict, "pass");
    store_verdict_row v[2];
    memset(v, 0, sizeof v);
    snprintf(v[0].metric, sizeof v[0].metric, "tg8/tps");
    snprintf(v[1].metric, sizeof v[1].metric, "pp8/tps");
    for (int i = 0; i < 2; i++) {
        snprintf(v[i].verdict, sizeof v[i].verdict, "unchanged");
        v[i].threshold = v[i].base_median = v[i].cand_median = v[i].change = v[i].ci_lo = v[i].ci_hi = v[i].p = NAN;
    }
    v[0].base_run = a, v[0].cand_run = b; /* its own pair */
    int64_t gid = store_gate_insert(s, &g, v, 2);
    CHECK(gid > 0, "gate stored");
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM verdicts WHERE gate_id = %lld AND base_run IS NULL", (long long)gid);
    CHECK(q_int(store_db(s), sql) == 1, "0 is stored as NULL");
    store_verdict_row *r;
    int n;
    CHECK(store_verdicts_load(s, gid, &r, &n) == 0 && n == 2, "two verdicts");
    for (int i = 0; i < n; i++) {
        if (!strcmp(r[i].metric, "tg8/tps")) CHECK(r[i].base_run == a && r[i].cand_run == b, "its own runs");
        else CHECK(r[i].base_run == c && r[i].cand_run == d, "none stored: the gate's");
    }
    free(r);
    store_close(s);
}

TEST_MAIN({
    test_resolve();
    test_verdict_runs();
    test_fresh();
    test_migrations();
    test_newer_refused();
    test_run_lifecycle();
    fx_cleanup();
})
