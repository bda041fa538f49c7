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
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "counters.h"
#include "cortex_tools.h"
#include "env.h"
#include "hw_store.h"
#include "prom.h"
#include "runner.h"
#include "store.h"
#include "store_gate.h"
#include "store_read.h"
#include "testing.h"
#include "validity.h"

/* The runs written here are measurements unless a test says otherwise. */
static const run_verdict valid = {.valid = 1};

static char dir[] = "/tmp/cortex-store-XXXXXX";

/* First column of the first row of a query, as an integer (or -1). */
static long long q_int(sqlite3 *db, const char *sql) {
    sqlite3_stmt *st;
    long long v = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

static const char *q_text(sqlite3 *db, const char *sql, char *buf, size_t n) {
    sqlite3_stmt *st;
    buf[0] = 0;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
        sqlite3_column_text(st, 0))
        snprintf(buf, n, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return buf;
}

static void check_integrity(sqlite3 *db, const char *what) {
    char buf[64];
    CHECK(!strcmp(q_text(db, "PRAGMA integrity_check", buf, sizeof buf), "ok"), "%s: integrity_check says %s", what, buf);
    CHECK(q_int(db, "SELECT count(*) FROM pragma_foreign_key_check") == 0, "%s: foreign keys hold", what);
}

static void test_fresh(void) {
    char path[256], err[512];
    snprintf(path, sizeof path, "%s/fresh.db", dir);
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

/* A version-1 database with a run in it migrates to the current schema and keeps the run. */
static void test_migrate_from_v1(void) {
    char path[256], err[512];
    snprintf(path, sizeof path, "%s/old.db", dir);
    store *s;
    CHECK(store_open_version(path, 1, &s, err, sizeof err) == 0 && store_version(s) == 1, "create v1: %s", err);
    if (!s) return;
    CHECK(sqlite3_exec(store_db(s),
                       "INSERT INTO environments (fingerprint, cpu_model) VALUES ('abc', 'Old CPU');"
                       "INSERT INTO runs (started_at, status, workload, env_id, threads) VALUES ('2026-01-01', 'complete', 'standard', 1, 2);"
                       "INSERT INTO rep_metrics VALUES (1, 0, 'output_tps', 12.5);",
                       NULL, NULL, NULL) == SQLITE_OK, "seed v1 rows");
    CHECK(q_int(store_db(s), "SELECT count(*) FROM sqlite_master WHERE name = 'summary'") == 0, "v1 has no summary table");
    store_close(s);
    CHECK(store_open(path, &s, err, sizeof err) == 0, "migrate: %s", err);
    if (!s) return;
    CHECK(store_version(s) == STORE_SCHEMA_VERSION, "migrated to %d", store_version(s));
    CHECK(q_int(store_db(s), "SELECT threads FROM runs WHERE id = 1") == 2, "old run kept");
    CHECK(q_int(store_db(s), "SELECT count(*) FROM rep_metrics WHERE run_id = 1") == 1, "old metrics kept");
    CHECK(q_int(store_db(s), "SELECT test_prompt IS NULL FROM runs WHERE id = 1") == 1, "new column added, NULL for old rows");
    CHECK(q_int(store_db(s), "SELECT count(*) FROM summary") == 0, "new table exists and is empty");
    check_integrity(store_db(s), "migrated");
    store_close(s);
}

/* A version-4 database with a run in it migrates to v5: the run and its
 * results are kept, its kernel ISA is unknown (NULL, so it is never taken
 * for a run of a known ISA), the hw table starts empty and takes rows. */
static void test_migrate_from_v4(void) {
    char path[256], err[512], buf[64];
    snprintf(path, sizeof path, "%s/v4.db", dir);
    store *s;
    CHECK(store_open_version(path, 4, &s, err, sizeof err) == 0 && store_version(s) == 4, "create v4: %s", err);
    if (!s) return;
    sqlite3 *db = store_db(s);
    CHECK(sqlite3_exec(db,
                       "INSERT INTO environments (fingerprint, cpu_model) VALUES ('abc', 'Old CPU');"
                       "INSERT INTO runs (started_at, status, workload, env_id, threads, ignore_eos)"
                       "  VALUES ('2026-01-01', 'complete', 'tg8', 1, 2, 1);"
                       "INSERT INTO rep_metrics VALUES (1, 0, 'decode_tps', 20.5);"
                       "INSERT INTO summary VALUES (1, 'decode_tps', 1, 20.5, 20.5, 20.5, 20.5, 0);"
                       "INSERT INTO tags VALUES ('baseline', 1, '2026-01-01');",
                       NULL, NULL, NULL) == SQLITE_OK, "seed v4 rows: %s", sqlite3_errmsg(db));
    CHECK(q_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'hw'") == 0, "v4 has no hw table");
    store_close(s);
    CHECK(store_open_version(path, 5, &s, err, sizeof err) == 0, "migrate: %s", err);
    if (!s) return;
    db = store_db(s);
    CHECK(store_version(s) == 5, "migrated to 5 (%d)", store_version(s));
    CHECK(q_int(db, "SELECT threads FROM runs WHERE id = 1") == 2 && q_int(db, "SELECT ignore_eos FROM runs WHERE id = 1") == 1,
          "old run kept");
    CHECK(q_int(db, "SELECT count(*) FROM summary WHERE run_id = 1") == 1 && q_int(db, "SELECT count(*) FROM tags") == 1,
          "old summary and tag kept");
    CHECK(q_int(db, "SELECT isa IS NULL AND hw_id IS NULL FROM runs WHERE id = 1") == 1, "old run: ISA and hw row unknown");
    CHECK(q_int(db, "SELECT count(*) FROM hw") == 0, "hw table exists and is empty");
    /* A measurement lands in one row, tied to this machine's environment (whose row the current code
     * writes with the columns of the current schema: migrate on first). */
    store_close(s);
    CHECK(store_open(path, &s, err, sizeof err) == 0, "migrate to the current schema: %s", err);
    if (!s) return;
    db = store_db(s);
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
    CHECK(q_int(db, "SELECT read_gbs = 18 AND read_gbs_1t = 10 AND fp32_gflops_avx2 IS NULL AND threads = 2 FROM hw") == 1,
          "figures stored; one not measured is NULL, not 0");
    CHECK(!strcmp(q_text(db, "SELECT avx512 FROM hw", buf, sizeof buf), "not available on this CPU"), "ISA status: %s", buf);
    CHECK(q_int(db, "SELECT count(*) FROM hw h JOIN environments e ON e.id = h.env_id WHERE e.fingerprint != 'abc'") == 1,
          "hw row belongs to this machine's environment");
    /* Runs point at the hw row; deleting it leaves the run, without the pointer. */
    CHECK(sqlite3_exec(db, "UPDATE runs SET hw_id = 1 WHERE id = 1; DELETE FROM hw WHERE id = 1;", NULL, NULL, NULL) ==
              SQLITE_OK && q_int(db, "SELECT hw_id IS NULL FROM runs WHERE id = 1") == 1,
          "hw_id is set NULL when its row goes");
    check_integrity(db, "migrated from v4");
    store_close(s);
}

/* A version-5 database with a run in it migrates to v6: the run, its
 * results and tags are kept, its KV configuration is NULL (it used the
 * default cache, which compare takes it for), and new runs store theirs. */
static void test_migrate_from_v5(void) {
    char path[256], err[512], buf[256];
    snprintf(path, sizeof path, "%s/v5.db", dir);
    store *s;
    CHECK(store_open_version(path, 5, &s, err, sizeof err) == 0 && store_version(s) == 5, "create v5: %s", err);
    if (!s) return;
    sqlite3 *db = store_db(s);
    CHECK(sqlite3_exec(db,
                       "INSERT INTO environments (fingerprint, cpu_model) VALUES ('abc', 'Old CPU');"
                       "INSERT INTO runs (started_at, status, workload, env_id, threads, ignore_eos, isa)"
                       "  VALUES ('2026-01-01', 'complete', 'tg8', 1, 2, 1, 'avx2');"
                       "INSERT INTO rep_metrics VALUES (1, 0, 'decode_tps', 20.5);"
                       "INSERT INTO summary VALUES (1, 'decode_tps', 1, 20.5, 20.5, 20.5, 20.5, 0);"
                       "INSERT INTO tags VALUES ('baseline', 1, '2026-01-01');",
                       NULL, NULL, NULL) == SQLITE_OK, "seed v5 rows: %s", sqlite3_errmsg(db));
    CHECK(q_int(db, "SELECT count(*) FROM pragma_table_info('runs') WHERE name = 'kv_config'") == 0, "v5 has no kv_config");
    store_close(s);
    CHECK(store_open(path, &s, err, sizeof err) == 0, "migrate: %s", err);
    if (!s) return;
    db = store_db(s);
    CHECK(store_version(s) == STORE_SCHEMA_VERSION, "migrated to %d (%d)", STORE_SCHEMA_VERSION, store_version(s));
    CHECK(q_int(db, "SELECT threads FROM runs WHERE id = 1") == 2 &&
              !strcmp(q_text(db, "SELECT isa FROM runs WHERE id = 1", buf, sizeof buf), "avx2"),
          "old run kept");
    CHECK(q_int(db, "SELECT count(*) FROM summary WHERE run_id = 1") == 1 && q_int(db, "SELECT count(*) FROM tags") == 1 &&
              q_int(db, "SELECT count(*) FROM rep_metrics WHERE run_id = 1") == 1,
          "old metrics, summary and tag kept");
    CHECK(q_int(db, "SELECT kv_config IS NULL FROM runs WHERE id = 1") == 1, "old run: KV configuration NULL");
    env_info env;
    env_collect(&env);
    run_meta meta;
    memset(&meta, 0, sizeof meta);
    snprintf(meta.workload, sizeof meta.workload, "tg8");
    snprintf(meta.kv_config, sizeof meta.kv_config, "type=q8 prefix=on");
    int64_t id = 0;
    CHECK(store_begin_run(s, &meta, &env, &id, err, sizeof err) == 0 && id == 2, "new run: %s", err);
    CHECK(!strcmp(q_text(db, "SELECT kv_config FROM runs WHERE id = 2", buf, sizeof buf), "type=q8 prefix=on"),
          "new run stores its KV configuration (%s)", buf);
    check_integrity(db, "migrated from v5");
    store_close(s);
}

/* A version-6 database with a run in it migrates to v7: the run is kept
 * with no workload sidecar (NULL), and new runs store theirs (or NULL). */
static void test_migrate_from_v6(void) {
    char path[256], err[512], buf[256];
    snprintf(path, sizeof path, "%s/v6.db", dir);
    store *s;
    CHECK(store_open_version(path, 6, &s, err, sizeof err) == 0 && store_version(s) == 6, "create v6: %s", err);
    if (!s) return;
    sqlite3 *db = store_db(s);
    CHECK(sqlite3_exec(db,
                       "INSERT INTO environments (fingerprint, cpu_model) VALUES ('abc', 'Old CPU');"
                       "INSERT INTO runs (started_at, status, workload, env_id, threads, kv_config)"
                       "  VALUES ('2026-01-01', 'complete', 'trace:t.jsonl', 1, 2, 'type=f32');",
                       NULL, NULL, NULL) == SQLITE_OK, "seed v6 rows: %s", sqlite3_errmsg(db));
    CHECK(q_int(db, "SELECT count(*) FROM pragma_table_info('runs') WHERE name = 'workload_meta'") == 0,
          "v6 has no workload_meta");
    store_close(s);
    CHECK(store_open(path, &s, err, sizeof err) == 0, "migrate: %s", err);
    if (!s) return;
    db = store_db(s);
    CHECK(store_version(s) == STORE_SCHEMA_VERSION, "migrated to %d (%d)", STORE_SCHEMA_VERSION, store_version(s));
    CHECK(q_int(db, "SELECT threads FROM runs WHERE id = 1") == 2 &&
              !strcmp(q_text(db, "SELECT kv_config FROM runs WHERE id = 1", buf, sizeof buf), "type=f32"),
          "old run kept");
    CHECK(q_int(db, "SELECT workload_meta IS NULL FROM runs WHERE id = 1") == 1 && store_run_workload_meta(s, 1) == NULL,
          "old run: no workload sidecar");
    env_info env;
    env_collect(&env);
    run_meta meta;
    memset(&meta, 0, sizeof meta);
    snprintf(meta.workload, sizeof meta.workload, "trace:t.jsonl");
    meta.workload_meta = "{\"format\": \"cortex-bench trace\", \"seed\": 9}";
    int64_t id = 0;
    CHECK(store_begin_run(s, &meta, &env, &id, err, sizeof err) == 0 && id == 2, "new run: %s", err);
    char *got = store_run_workload_meta(s, 2);
    CHECK(got && !strcmp(got, meta.workload_meta), "new run stores its workload sidecar (%s)", got ? got : "NULL");
    free(got);
    meta.workload_meta = NULL;
    CHECK(store_begin_run(s, &meta, &env, &id, err, sizeof err) == 0 && id == 3, "run without sidecar: %s", err);
    CHECK(q_int(db, "SELECT workload_meta IS NULL FROM runs WHERE id = 3") == 1, "no sidecar: NULL");
    /* v8: a served run's scheduler, rate, SLOs and sweep; NULL for the older run */
    snprintf(meta.sched_config, sizeof meta.sched_config, "seqs=8,batch=256,queue=1024");
    meta.rate = 2.5;
    snprintf(meta.slo, sizeof meta.slo, "ttft=500,tpot=50");
    meta.sweep = 3;
    CHECK(store_begin_run(s, &meta, &env, &id, err, sizeof err) == 0 && id == 4, "served run: %s", err);
    CHECK(!strcmp(q_text(db, "SELECT sched_config || '|' || rate || '|' || slo || '|' || sweep FROM runs WHERE id = 4",
                         buf, sizeof buf), "seqs=8,batch=256,queue=1024|2.5|ttft=500,tpot=50|3"),
          "served run's scheduler fields stored (%s)", buf);
    CHECK(q_int(db, "SELECT sched_config IS NULL AND rate IS NULL AND sweep IS NULL FROM runs WHERE id = 1") == 1,
          "old run: no scheduler fields");
    check_integrity(db, "migrated from v6");
    store_close(s);
}

/* A database from a newer cortex-bench is refused, not damaged. */
/* A version-8 database with a run migrates to v9: the run is kept as an
 * in-process run (endpoint NULL); a run over HTTP stores its endpoint,
 * server identity and /v1/models answer, its requests' stream chunks and
 * its server metrics, and is not comparable with the in-process run. */
static void test_migrate_from_v8(void) {
    char path[256], err[512], buf[256];
    snprintf(path, sizeof path, "%s/v8.db", dir);
    store *s;
    CHECK(store_open_version(path, 8, &s, err, sizeof err) == 0 && store_version(s) == 8, "create v8: %s", err);
    if (!s) return;
    sqlite3 *db = store_db(s);
    CHECK(sqlite3_exec(db,
                       "INSERT INTO environments (fingerprint, cpu_model) VALUES ('abc', 'Old CPU');"
                       "INSERT INTO runs (started_at, status, workload, env_id, threads, sched_config)"
                       "  VALUES ('2026-01-01', 'complete', 'standard', 1, 2, 'seqs=8,batch=256,queue=1024');",
                       NULL, NULL, NULL) == SQLITE_OK, "seed v8 rows: %s", sqlite3_errmsg(db));
    CHECK(q_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'server_metrics'") == 0, "v8 has no server_metrics");
    store_close(s);
    CHECK(store_open(path, &s, err, sizeof err) == 0, "migrate: %s", err);
    if (!s) return;
    db = store_db(s);
    CHECK(store_version(s) == STORE_SCHEMA_VERSION, "migrated to %d (%d)", STORE_SCHEMA_VERSION, store_version(s));
    CHECK(q_int(db, "SELECT endpoint IS NULL AND server IS NULL AND threads = 2 FROM runs WHERE id = 1") == 1,
          "old run kept, in-process");
    env_info env;
    env_collect(&env);
    run_meta meta;
    memset(&meta, 0, sizeof meta);
    snprintf(meta.workload, sizeof meta.workload, "standard");
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
    CHECK(!strcmp(q_text(db, "SELECT server_build || ' ' || server_cache FROM runs WHERE id = 2", buf, sizeof buf),
                  "fp_a, fp_b off"), "the answers' fingerprints, distinct over repetitions, replace the probe's build (%s)",
          buf);
    CHECK(!strcmp(q_text(db, "SELECT endpoint || ' ' || server FROM runs WHERE id = 2", buf, sizeof buf),
                  "http://127.0.0.1:8080/v1 llama.cpp; models=m"), "endpoint and server stored (%s)", buf);
    CHECK(!strcmp(q_text(db, "SELECT json_extract(server_info, '$.models.data[0].id') FROM runs WHERE id = 2", buf,
                         sizeof buf), "m"), "server_info stored as JSON (%s)", buf);
    CHECK(q_int(db, "SELECT stream_chunks FROM requests WHERE run_id = 2") == 4, "stream chunks stored");
    CHECK(q_int(db, "SELECT delta = 8 AND before = 10 AND after = 18 FROM server_metrics WHERE run_id = 2 AND rep = 0"
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
    CHECK(!strcmp(q_text(db, "SELECT server_build FROM runs WHERE id = 3", buf, sizeof buf), "b1-probe"),
          "no fingerprint: the probe's build (%s)", buf);
    CHECK(store_comparable(s, 2, 3, diff, sizeof diff) == 0 && !strcmp(diff, "server prompt cache (--server-cache): off vs on"),
          "cache off and on differ in that alone (%s)", diff);
    meta.server_cache[0] = 0;
    meta.server_build[0] = 0;
    CHECK(store_begin_run(s, &meta, &env, &id4, err, sizeof err) == 0, "an HTTP run without a cache record: %s", err);
    CHECK(q_int(db, "SELECT server_build IS NULL AND server_cache IS NULL FROM runs WHERE id = 4") == 1,
          "nothing known: NULL");
    CHECK(store_comparable(s, 3, 4, diff, sizeof diff) == 0 && !strstr(diff, "server prompt cache"),
          "an HTTP run without a record compares with cache on (%s)", diff);
    CHECK(store_comparable(s, 2, 4, diff, sizeof diff) == 0 && strstr(diff, "server prompt cache"),
          "... not with cache off (%s)", diff);
    check_integrity(db, "migrated from v8");
    store_close(s);
}

static void test_newer_refused(void) {
    char path[256], err[512] = "";
    snprintf(path, sizeof path, "%s/new.db", dir);
    sqlite3 *db;
    sqlite3_open(path, &db);
    sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL);
    sqlite3_close(db);
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
    char path[256], mpath[256], err[512];
    snprintf(path, sizeof path, "%s/runs.db", dir);
    snprintf(mpath, sizeof mpath, "%s/tiny.gguf", dir);
    cx_err ce = {0};
    cx_model *m = NULL;
    CHECK(cx_synth_write(cx_shape_find("test-tiny"), CX_TYPE_Q8_0, 1, mpath, &ce) == 0 &&
          cx_model_load(mpath, NULL, &m, &ce) == 0, "model: %s", ce.msg);
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
    sqlite3 *db = store_db(s);
    CHECK(q_int(db, "SELECT count(*) FROM counters WHERE status = 'ok'") == 0, "no counter claims a value");
    CHECK(q_int(db, "SELECT count(*) FROM counters WHERE status = 'missing' AND value IS NULL AND length(reason) > 0") ==
              q_int(db, "SELECT count(*) FROM counters") && q_int(db, "SELECT count(*) FROM counters") > 0,
          "every counter missing, NULL, with a reason");
    CHECK(strstr(q_text(db, "SELECT reason FROM counters WHERE name = 'cycles' LIMIT 1", buf, sizeof buf), "ENOSYS") != NULL,
          "reason names the error: %s", buf);
    CHECK(q_int(db, "SELECT count(*) FROM rep_metrics WHERE name = 'tps'") == 2, "tps per repetition");
    CHECK(q_int(db, "SELECT n FROM summary WHERE name = 'tps'") == 2, "summary over 2 repetitions");
    CHECK(q_int(db, "SELECT stable FROM canaries WHERE item = 'tg8'") == 1, "greedy canary stable across repetitions");
    CHECK(q_int(db, "SELECT gen_tokens FROM requests WHERE rep = 1") == 8, "8 tokens generated");
    CHECK(q_int(db, "SELECT json_array_length(itl_ms) FROM requests WHERE rep = 0") == 7, "7 inter-token gaps stored");
    /* tg8 after BOS (position 0): the first token is evaluated at position
     * 1, the 7 timed decode steps at positions 2..8 attend 3..9 positions: mean 6. */
    CHECK(q_int(db, "SELECT count(*) FROM rep_metrics WHERE name = 'decode_ctx_mean' AND value = 6") == 2,
          "mean KV positions attended per decode step");
    snprintf(sql, sizeof sql, "SELECT isa FROM runs WHERE id = %lld", (long long)id);
    CHECK(!strcmp(q_text(db, sql, buf, sizeof buf), "scalar"), "the run's kernel ISA is stored (%s)", buf);
    CHECK(q_int(db, "SELECT count(*) FROM rep_metrics WHERE name IN ('kv_hits_hot', 'kv_peak_bytes_hot')"
                    " AND value > 0") == 4, "KV counters stored as metrics, each repetition");
    CHECK(q_int(db, "SELECT count(*) FROM rep_metrics WHERE name = 'kv_prefix_hit_rate'") == 0,
          "no prefix hit rate without the prefix cache");
    snprintf(sql, sizeof sql, "SELECT status FROM runs WHERE id = %lld", (long long)id);
    check_integrity(db, "after run");
    /* A failed run is marked failed with its reason. */
    int64_t id2 = 0;
    store_begin_run(s, &meta, &env, &id2, err, sizeof err);
    store_fail_run(s, id2, "engine exploded");
    snprintf(sql, sizeof sql, "SELECT status || ': ' || error FROM runs WHERE id = %lld", (long long)id2);
    CHECK(!strcmp(q_text(db, sql, buf, sizeof buf), "failed: engine exploded"), "failed run: %s", buf);
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
    char path[256], err[512];
    snprintf(path, sizeof path, "%s/resolve.db", dir);
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
    char path[256], err[512];
    snprintf(path, sizeof path, "%s/verdicts.db", dir);
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
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    test_resolve();
    test_verdict_runs();
    test_fresh();
    test_migrate_from_v1();
    test_migrate_from_v4();
    test_migrate_from_v5();
    test_migrate_from_v6();
    test_migrate_from_v8();
    test_newer_refused();
    test_run_lifecycle();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
})
