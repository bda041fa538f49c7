/*
 * test_store_backends.c - the store's contract on both engines: a SQLite
 * file and a PostgreSQL server ($CORTEX_TEST_PG, a postgresql:// URL whose
 * user may create databases; ci/pg_server.sh starts one, .ci/run does).
 * Without it the server half prints SKIP with the reason and the SQLite
 * half still runs. On each engine:
 *   - migrations from every earlier schema version, with a run stored at
 *     that version kept (and given a UUID and row order by v13);
 *   - 8 writer processes at once, all of whose runs land whole;
 *   - a writer killed while writing its results leaves its run incomplete
 *     with no result rows (no partial run);
 *   - push twice = once: a second copy adds nothing, and the copy holds
 *     every row of every run;
 *   - a speculating run (schema v14) reads back whole, NULL where nothing
 *     was reported, and is not comparable with a run without speculation;
 * and across them: the same runs give the same gate (compare_runs: the
 * gate's statistics and verdicts) and the same trend history on both.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compare.h"
#include "db.h"
#include "db_int.h"
#include "env.h"
#include "fixture.h"
#include "results.h"
#include "store.h"
#include "store_gate.h"
#include "store_read.h"
#include "store_sync.h"
#include "validity.h"

static const run_verdict valid = {.valid = 1};
static const char *pg_base; /* $CORTEX_TEST_PG, or NULL */

/* A fresh store target named `name`: a file in the scratch directory, or a new database on the server. */
static const char *target(int pg, const char *name, char *out, size_t n) {
    if (!pg) {
        snprintf(out, n, "%s", fx_path("%s.db", name));
        unlink(out);
        return out;
    }
    char err[512], sql[256];
    db *d;
    if (db_open(pg_base, &d, err, sizeof err)) {
        CHECK(0, "connect to %s: %s", pg_base, err);
        return NULL;
    }
    snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS cxt_%s WITH (FORCE)", name);
    int rc = db_exec(d, sql);
    if (!rc) snprintf(sql, sizeof sql, "CREATE DATABASE cxt_%s", name), rc = db_exec(d, sql);
    CHECK(rc == 0, "create database cxt_%s: %s", name, db_errmsg(d));
    db_close(d);
    snprintf(out, n, "%s%sdbname=cxt_%s", pg_base, strchr(pg_base, '?') ? "&" : "?", name);
    return rc ? NULL : out;
}

static long long q_int(store *s, const char *sql) {
    db_stmt *st = db_prepare(store_db(s), sql);
    long long v = -1;
    if (st && db_step(st) == DB_ROW) v = db_column_int(st, 0);
    db_finalize(st);
    return v;
}

/* A run's metadata: workload `wl`, built from `commit`. */
static void meta_for(run_meta *m, const char *wl, const char *commit) {
    memset(m, 0, sizeof *m);
    snprintf(m->workload, sizeof m->workload, "%s", wl);
    snprintf(m->mode, sizeof m->mode, "closed");
    snprintf(m->model_sha256, sizeof m->model_sha256, "00");
    snprintf(m->git_commit, sizeof m->git_commit, "%s", commit);
    snprintf(m->testbed, sizeof m->testbed, "test-bed");
    m->threads = 1;
    m->reps = 4;
}

/* Four repetitions of `n_req` requests whose throughput is `tps` (+ a deterministic wobble). */
static void make_reps(rep_result *reps, int n_req, double tps, req_result *req) {
    for (int r = 0; r < 4; r++) {
        memset(&reps[r], 0, sizeof reps[r]);
        rep_set_metric(&reps[r], "tps", tps + r * 0.25);
        rep_set_metric(&reps[r], "ttft_ms_p50", 100.0 / tps + r * 0.001);
        rep_set_metric(&reps[r], "makespan_ms", 1000.0 + r);
        reps[r].req = req;
        reps[r].n_req = n_req;
    }
    for (int i = 0; i < n_req; i++) {
        memset(&req[i], 0, sizeof req[i]);
        req[i].idx = i;
        snprintf(req[i].item, sizeof req[i].item, "p%02d", i % 100);
        snprintf(req[i].state, sizeof req[i].state, "length");
        snprintf(req[i].token_hash, sizeof req[i].token_hash, "h%d", i % 100);
        req[i].gen_tokens = 16;
        req[i].prompt_tokens = 8;
        req[i].ttft_ms = 5 + i % 7;
        req[i].e2e_ms = 50 + i % 11;
        req[i].max_tokens = 16;
    }
}

static void free_reps(rep_result *reps) {
    for (int r = 0; r < 4; r++) {
        reps[r].req = NULL;
        reps[r].n_req = 0;
        rep_free(&reps[r]);
    }
}

/* One complete run; its id, or -1. */
static int64_t write_run(store *s, const char *wl, const char *commit, double tps, int n_req) {
    env_info env;
    env_collect(&env);
    run_meta m;
    meta_for(&m, wl, commit);
    rep_result reps[4];
    req_result *req = calloc((size_t)n_req + 1, sizeof *req);
    make_reps(reps, n_req, tps, req);
    char err[512];
    int64_t id = -1;
    if (store_begin_run(s, &m, &env, &id, err, sizeof err) || store_finish_run(s, id, reps, 4, &valid, NULL, err, sizeof err)) {
        fprintf(stderr, "write run: %s\n", err);
        id = -1;
    }
    free_reps(reps);
    free(req);
    return id;
}

/* Every earlier version: a run stored there survives the migration to the current one. */
static void test_migrations(int pg, const char *eng) {
    for (int v = 1; v < STORE_SCHEMA_VERSION; v++) {
        char name[32], t[1024], err[512];
        snprintf(name, sizeof name, "mig%d", v);
        if (!target(pg, name, t, sizeof t)) return;
        store *s;
        CHECK(store_open_version(t, v, &s, err, sizeof err) == 0 && store_version(s) == v, "%s: create v%d: %s", eng, v, err);
        if (!s) continue;
        /* from v13 on a run is written with its UUID (older ones get theirs when the store migrates past v13) */
        int rc = db_exec(store_db(s), v >= 13 ? "INSERT INTO environments (fingerprint, cpu_model) VALUES ('abc', 'Old CPU');"
                                                "INSERT INTO runs (started_at, status, workload, env_id, threads, uuid)"
                                                " VALUES ('2026-01-01', 'complete', 'standard', 1, 2,"
                                                " '00000000-0000-4000-8000-000000000013');"
                                                "INSERT INTO rep_metrics (run_id, rep, name, value) VALUES (1, 0, 'tps', 12.5);"
                                              : "INSERT INTO environments (fingerprint, cpu_model) VALUES ('abc', 'Old CPU');"
                                                "INSERT INTO runs (started_at, status, workload, env_id, threads)"
                                                " VALUES ('2026-01-01', 'complete', 'standard', 1, 2);"
                                                "INSERT INTO rep_metrics (run_id, rep, name, value) VALUES (1, 0, 'tps', 12.5);");
        if (!rc && v >= 2)
            rc = db_exec(store_db(s), "INSERT INTO summary (run_id, name, n, median, min, max, mean, stddev)"
                                      " VALUES (1, 'tps', 1, 12.5, 12.5, 12.5, 12.5, 0);"
                                      "INSERT INTO summary (run_id, name, n, median, min, max, mean, stddev)"
                                      " VALUES (1, 'ttft_ms_p50', 1, 3, 3, 3, 3, 0);");
        CHECK(rc == 0, "%s: seed v%d: %s", eng, v, db_errmsg(store_db(s)));
        store_close(s);
        CHECK(store_open(t, &s, err, sizeof err) == 0 && store_version(s) == STORE_SCHEMA_VERSION, "%s: v%d migrates: %s",
              eng, v, err);
        if (!s) continue;
        CHECK(q_int(s, "SELECT threads FROM runs WHERE id = 1") == 2 &&
                  q_int(s, "SELECT count(*) FROM rep_metrics WHERE run_id = 1") == 1,
              "%s: v%d: the run and its metric kept", eng, v);
        CHECK(q_int(s, "SELECT count(*) FROM runs WHERE uuid IS NOT NULL AND length(uuid) = 36") == 1,
              "%s: v%d: the old run got a UUID", eng, v);
        if (v >= 2) {
            store_summary_row rows[4];
            int n = store_summary_load(s, 1, rows, 4);
            CHECK(n == 2 && !strcmp(rows[0].name, "tps") && !strcmp(rows[1].name, "ttft_ms_p50"),
                  "%s: v%d: summary rows keep their write order (%d)", eng, v, n);
        }
        store_run r;
        CHECK(store_run_load(s, 1, &r) == 1 && !strcmp(r.workload, "standard") && r.uuid[0],
              "%s: v%d: the run reads back", eng, v);
        /* v14: it did not speculate (NULL: "none", never another run's speculation), its requests say nothing */
        CHECK(!r.spec_config[0] && !r.spec_drafter[0] && isnan(r.spec_setup_ms) &&
                  q_int(s, "SELECT count(*) FROM runs WHERE spec_config IS NULL AND spec_setup_ms IS NULL") == 1,
              "%s: v%d: the old run did not speculate", eng, v);
        /* and it takes new runs */
        CHECK(write_run(s, "tg8", "aaaa1111", 10, 2) > 1, "%s: v%d: a new run after migrating", eng, v);
        store_close(s);
    }
}

/* Schema v14 on each engine: a speculating run keeps its configuration, drafter and making time, and its
 * requests their passes, drafts and times (NULL where a server reported no more than its draft counts); a
 * run without speculation keeps NULLs, and the two are not the same configuration to compare or the gate. */
static void test_spec(int pg, const char *eng) {
    char t[1024], err[512], diff[1024];
    if (!target(pg, "spec", t, sizeof t)) return;
    store *s;
    if (store_open(t, &s, err, sizeof err)) {
        CHECK(0, "%s: open: %s", eng, err);
        return;
    }
    int64_t plain = write_run(s, "standard", "aaaa1111", 10, 2);
    env_info env;
    env_collect(&env);
    run_meta m;
    meta_for(&m, "standard", "aaaa1111");
    snprintf(m.spec_config, sizeof m.spec_config, "ngram,max=8,min=0,adaptive");
    snprintf(m.spec_drafter, sizeof m.spec_drafter, "ngram 2..4");
    m.spec_setup_ms = 0.25;
    rep_result reps[4];
    req_result req[2];
    make_reps(reps, 2, 12, req);
    req[0].spec = 1; /* in-process: everything known */
    req[0].spec_passes = 9;
    req[0].spec_verified = 5;
    req[0].draft_tokens = 12;
    req[0].accepted_tokens = 6;
    req[0].draft_ms = 0.5;
    req[0].verify_ms = 4.25;
    req[1].spec = 1; /* a server's reply: the draft counts only */
    req[1].spec_passes = req[1].spec_verified = -1;
    req[1].draft_tokens = 7;
    req[1].accepted_tokens = 3;
    req[1].draft_ms = req[1].verify_ms = NAN;
    for (int r = 0; r < 4; r++) rep_set_metric(&reps[r], "spec_acceptance", 9.0 / 19.0);
    int64_t id = -1;
    CHECK(store_begin_run(s, &m, &env, &id, err, sizeof err) == 0 && store_finish_run(s, id, reps, 4, &valid, NULL, err, sizeof err) == 0,
          "%s: a speculating run is written: %s", eng, err);
    free_reps(reps);
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM requests WHERE run_id = %lld AND idx = 0 AND spec_passes = 9 AND"
             " spec_verified = 5 AND draft_tokens = 12 AND accepted_tokens = 6 AND draft_ms = 0.5 AND verify_ms = 4.25",
             (long long)id);
    CHECK(q_int(s, sql) == 4, "%s: its requests' speculation, every repetition (%lld)", eng, q_int(s, sql));
    snprintf(sql, sizeof sql, "SELECT count(*) FROM requests WHERE run_id = %lld AND idx = 1 AND spec_passes IS NULL AND"
             " spec_verified IS NULL AND draft_tokens = 7 AND accepted_tokens = 3 AND draft_ms IS NULL AND verify_ms IS NULL",
             (long long)id);
    CHECK(q_int(s, sql) == 4, "%s: what a server did not report is NULL, not 0 (%lld)", eng, q_int(s, sql));
    snprintf(sql, sizeof sql, "SELECT count(*) FROM requests WHERE run_id = %lld AND spec_passes IS NULL AND draft_tokens"
             " IS NULL AND draft_ms IS NULL", (long long)plain);
    CHECK(q_int(s, sql) == 8, "%s: a run without speculation has NULL there", eng);
    store_run r;
    CHECK(store_run_load(s, id, &r) == 1 && !strcmp(r.spec_config, "ngram,max=8,min=0,adaptive") &&
              !strcmp(r.spec_drafter, "ngram 2..4") && r.spec_setup_ms == 0.25,
          "%s: store_run_load reads the speculation back (%s, %s, %g)", eng, r.spec_config, r.spec_drafter, r.spec_setup_ms);
    CHECK(store_metric_median(s, id, "spec_acceptance") == 9.0 / 19.0, "%s: the acceptance, bit for bit", eng);
    CHECK(store_comparable(s, plain, id, diff, sizeof diff) == 0 &&
              !strcmp(diff, "speculative decoding (--spec): none vs ngram,max=8,min=0,adaptive"),
          "%s: with and without speculation differ in that alone (%s)", eng, diff);
    FILE *f = tmpfile();
    CHECK(f && compare_runs(s, plain, id, 0, NULL, f) == 2, "%s: compare refuses them (exit 2)", eng);
    if (f) fclose(f);
    store_close(s);
}

/* 8 processes writing 5 runs each at once: all 40 land, each whole. */
static void test_concurrent_writers(int pg, const char *eng) {
    char t[1024], err[512];
    if (!target(pg, "writers", t, sizeof t)) return;
    store *s;
    CHECK(store_open(t, &s, err, sizeof err) == 0, "%s: open: %s", eng, err); /* created and migrated once */
    store_close(s);
    pid_t kids[8];
    for (int k = 0; k < 8; k++) {
        kids[k] = fork();
        if (kids[k] == 0) {
            store *c;
            int bad = store_open(t, &c, err, sizeof err) != 0;
            for (int i = 0; i < 5 && !bad; i++) bad = write_run(c, "tg8", "aaaa1111", 10 + k, 20) <= 0;
            store_close(c);
            _exit(bad);
        }
    }
    int ok = 0;
    for (int k = 0; k < 8; k++) {
        int st;
        waitpid(kids[k], &st, 0);
        ok += WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    CHECK(ok == 8, "%s: all 8 writers succeeded (%d)", eng, ok);
    if (store_open(t, &s, err, sizeof err)) return;
    CHECK(q_int(s, "SELECT count(*) FROM runs WHERE status = 'complete'") == 40, "%s: 40 complete runs", eng);
    CHECK(q_int(s, "SELECT count(DISTINCT uuid) FROM runs") == 40, "%s: 40 distinct UUIDs", eng);
    CHECK(q_int(s, "SELECT count(*) FROM requests") == 40 * 4 * 20, "%s: every request row of every run", eng);
    CHECK(q_int(s, "SELECT count(*) FROM (SELECT run_id FROM summary GROUP BY run_id HAVING count(*) = 3) x") == 40,
          "%s: every run's summary whole", eng);
    store_close(s);
}

/* A writer killed in the middle of store_finish_run: its run stays incomplete with no results. */
static void test_killed_writer(int pg, const char *eng) {
    char t[1024], err[512];
    if (!target(pg, "killed", t, sizeof t)) return;
    store *s;
    if (store_open(t, &s, err, sizeof err)) {
        CHECK(0, "%s: open: %s", eng, err);
        return;
    }
    int64_t before = write_run(s, "tg8", "aaaa1111", 10, 2);
    store_close(s);
    int p[2];
    if (pipe(p)) return;
    pid_t kid = fork();
    if (kid == 0) {
        store *c;
        if (store_open(t, &c, err, sizeof err)) _exit(3);
        env_info env;
        env_collect(&env);
        run_meta m;
        meta_for(&m, "big", "aaaa1111");
        int n = 200000; /* seconds of inserts on either engine: the kill lands inside them */
        req_result *req = calloc((size_t)n, sizeof *req);
        rep_result reps[4];
        make_reps(reps, n, 10, req);
        int64_t id;
        if (store_begin_run(c, &m, &env, &id, err, sizeof err)) _exit(4);
        if (write(p[1], &id, sizeof id) != (ssize_t)sizeof id) _exit(5);
        store_finish_run(c, id, reps, 4, &valid, NULL, err, sizeof err);
        _exit(0);
    }
    close(p[1]);
    int64_t id = 0;
    CHECK(read(p[0], &id, sizeof id) == (ssize_t)sizeof id && id > before, "%s: the writer began run %lld", eng, (long long)id);
    close(p[0]);
    usleep(300 * 1000);
    kill(kid, SIGKILL);
    int st;
    waitpid(kid, &st, 0);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "%s: killed while writing (not finished before the kill)", eng);
    if (store_open(t, &s, err, sizeof err)) {
        CHECK(0, "%s: reopen after the kill: %s", eng, err);
        return;
    }
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM runs WHERE id = %lld AND status = 'incomplete'", (long long)id);
    CHECK(q_int(s, sql) == 1, "%s: the killed run is incomplete", eng);
    snprintf(sql, sizeof sql,
             "SELECT (SELECT count(*) FROM requests WHERE run_id = %lld) + (SELECT count(*) FROM rep_metrics WHERE run_id = %lld)"
             " + (SELECT count(*) FROM summary WHERE run_id = %lld)", (long long)id, (long long)id, (long long)id);
    CHECK(q_int(s, sql) == 0, "%s: and has no result rows (%lld)", eng, q_int(s, sql));
    CHECK(q_int(s, "SELECT count(*) FROM requests") == 4 * 2, "%s: the run before is whole", eng);
    CHECK(write_run(s, "tg8", "bbbb2222", 11, 2) > id, "%s: the store takes runs after the kill", eng);
    store_close(s);
}

/* A server that dropped the connection while a run measured: the results still land (one reconnect at BEGIN). */
static void test_reconnect(void) {
    char t[1024], err[512];
    if (!target(1, "reconnect", t, sizeof t)) return;
    store *s;
    db *admin;
    if (store_open(t, &s, err, sizeof err) || db_open(pg_base, &admin, err, sizeof err)) {
        CHECK(0, "open: %s", err);
        return;
    }
    CHECK(write_run(s, "tg8", "aaaa1111", 10, 2) > 0, "a run before");
    CHECK(db_exec(admin, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'cxt_reconnect'"
                         " AND pid <> pg_backend_pid()") == 0, "the server ends the store's connection: %s", db_errmsg(admin));
    usleep(100 * 1000);
    CHECK(write_run(s, "tg8", "bbbb2222", 11, 2) > 0, "the next run is written after one reconnect");
    CHECK(q_int(s, "SELECT count(*) FROM runs WHERE status = 'complete'") == 2, "both runs whole");
    db_close(admin);
    store_close(s);
}

/* Row counts of every run table, for comparing a copy with its source. */
static void table_counts(store *s, long long *c) {
    static const char *const T[] = {"runs", "rep_metrics", "requests", "counters", "summary", "canaries", "adapter_stats",
                                    "server_metrics", "environments"};
    for (int i = 0; i < 9; i++) {
        char sql[96];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", T[i]);
        c[i] = q_int(s, sql);
    }
}

/* Push a file's runs to `to_pg`'s engine twice, pull them back: once is all. */
static void test_push_twice(int pg, const char *eng) {
    char src[1024], dst[1024], back[1024], err[512];
    if (!target(0, "pushsrc", src, sizeof src) || !target(pg, "pushdst", dst, sizeof dst) ||
        !target(0, "pullback", back, sizeof back))
        return;
    store *a, *b, *c;
    if (store_open(src, &a, err, sizeof err) || store_open(dst, &b, err, sizeof err) || store_open(back, &c, err, sizeof err)) {
        CHECK(0, "%s: open: %s", eng, err);
        return;
    }
    for (int i = 0; i < 3; i++) write_run(a, i == 2 ? "pp8" : "tg8", i ? "bbbb2222" : "aaaa1111", 10 + i, 5);
    env_info env;
    env_collect(&env);
    run_meta m;
    meta_for(&m, "tg8", "cccc3333");
    int64_t inc;
    store_begin_run(a, &m, &env, &inc, err, sizeof err); /* left incomplete: not copied */
    store_sync_stats st;
    CHECK(store_sync_runs(a, b, NULL, &st, err, sizeof err) == 0 && st.copied == 3 && st.present == 0 && st.incomplete == 1,
          "%s: first push copies 3 runs, skips the incomplete one (%d, %d, %d): %s", eng, st.copied, st.present,
          st.incomplete, err);
    CHECK(store_sync_runs(a, b, NULL, &st, err, sizeof err) == 0 && st.copied == 0 && st.present == 3,
          "%s: second push copies nothing (%d copied, %d present)", eng, st.copied, st.present);
    long long ca[9], cb[9];
    store_fail_run(a, inc, "abandoned"); /* now complete in the sense of finished: failed runs travel too */
    CHECK(store_sync_runs(a, b, NULL, &st, err, sizeof err) == 0 && st.copied == 1, "%s: a failed run is copied", eng);
    table_counts(a, ca);
    table_counts(b, cb);
    CHECK(!memcmp(ca, cb, sizeof ca), "%s: the copy holds every row (runs %lld/%lld, requests %lld/%lld, summary %lld/%lld)",
          eng, ca[0], cb[0], ca[2], cb[2], ca[4], cb[4]);
    store_selection sel = {.workload = "tg8"};
    CHECK(store_sync_runs(b, c, &sel, &st, err, sizeof err) == 0 && st.copied == 3, "%s: pull a selection (%d): %s", eng,
          st.copied, err);
    CHECK(q_int(c, "SELECT count(*) FROM runs WHERE workload = 'pp8'") == 0, "%s: only the selection", eng);
    store_close(a);
    store_close(b);
    store_close(c);
}

/* compare_runs' output (the gate's statistics and verdicts) for runs a and b of s, into buf. */
static void gate_text(store *s, int64_t a, int64_t b, char *buf, size_t n) {
    FILE *f = tmpfile();
    buf[0] = 0;
    if (!f) return;
    compare_runs(s, a, b, 0, NULL, f);
    rewind(f);
    size_t k = fread(buf, 1, n - 1, f);
    buf[k] = 0;
    fclose(f);
}

/* The same runs on both engines: the same gate and the same trend. */
static void test_same_answers(void) {
    char lite[1024], srv[1024], err[512];
    if (!target(0, "same", lite, sizeof lite) || !target(1, "same", srv, sizeof srv)) return;
    store *a, *b;
    if (store_open(lite, &a, err, sizeof err) || store_open(srv, &b, err, sizeof err)) {
        CHECK(0, "open: %s", err);
        return;
    }
    const char *commits[] = {"aaaa1111", "bbbb2222", "cccc3333", "dddd4444", "eeee5555", "ffff6666"};
    for (int i = 0; i < 6; i++) write_run(a, "tg8", commits[i], i < 3 ? 100 : 80, 6); /* a step at the 4th commit */
    store_sync_stats st;
    CHECK(store_sync_runs(a, b, NULL, &st, err, sizeof err) == 0 && st.copied == 6, "push the runs to the server: %s", err);
    static char ga[16384], gb[16384];
    gate_text(a, 3, 4, ga, sizeof ga);
    gate_text(b, 3, 4, gb, sizeof gb);
    CHECK(ga[0] && !strcmp(ga, gb), "compare_runs prints the same on both engines:\n--- sqlite\n%s\n--- postgresql\n%s", ga, gb);
    CHECK(strstr(ga, "tps") != NULL, "the comparison covers tps");
    store_history_point *ha = NULL, *hb = NULL;
    int na = 0, nb = 0;
    CHECK(store_metric_history(a, "tps", "tg8", &ha, &na) == 0 && store_metric_history(b, "tps", "tg8", &hb, &nb) == 0 &&
              na == 6 && nb == 6, "trend history: 6 points on both (%d, %d)", na, nb);
    int same = na == nb;
    for (int i = 0; same && i < na; i++)
        same = ha[i].median == hb[i].median && !strcmp(ha[i].commit, hb[i].commit) && !strcmp(ha[i].key, hb[i].key);
    CHECK(same, "the same medians, commits and series, bit for bit");
    double va[8], vb[8];
    size_t nva = store_metric_values(a, 4, "tps", va, 8), nvb = store_metric_values(b, 4, "tps", vb, 8);
    CHECK(nva == 4 && nvb == 4 && !memcmp(va, vb, sizeof(double) * 4), "the gate's samples are equal bit for bit");
    free(ha);
    free(hb);
    store_close(a);
    store_close(b);
}

/* The text translations db.c applies for PostgreSQL (no server needed). */
static void test_translations(void) {
    int n = 0;
    char *t = db_translate_params("SELECT ?, ?3, ? FROM x WHERE a = '?' AND b = \"?c\" -- ?\n AND c = ?1", &n);
    CHECK(t && !strcmp(t, "SELECT $1, $3, $4 FROM x WHERE a = '?' AND b = \"?c\" -- ?\n AND c = $1") && n == 4,
          "parameters: ? takes one more than the largest so far; quotes and comments kept (%s, %d)", t ? t : "NULL", n);
    free(t);
    t = db_translate_params("SELECT 'it''s ?', ?", &n);
    CHECK(t && !strcmp(t, "SELECT 'it''s ?', $1") && n == 1, "a doubled quote stays inside its literal (%s)", t ? t : "NULL");
    free(t);
    t = db_translate_ddl("CREATE TABLE a (id INTEGER PRIMARY KEY, n INTEGER, x REAL, realm TEXT DEFAULT 'REAL', pinteger INT)");
    CHECK(t && !strcmp(t, "CREATE TABLE a (id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, n BIGINT, x DOUBLE PRECISION,"
                          " realm TEXT DEFAULT 'REAL', pinteger INT)"),
          "DDL: whole words outside literals (%s)", t ? t : "NULL");
    free(t);
    char u[256];
    db_mask_url("postgresql://bench:s3cret@db.example:5432/cortex?sslmode=require", u, sizeof u);
    CHECK(!strcmp(u, "postgresql://bench:***@db.example:5432/cortex?sslmode=require"), "password hidden: %s", u);
    db_mask_url("postgres:///cortex?host=/tmp/x&password=abc&user=u", u, sizeof u);
    CHECK(!strcmp(u, "postgres:///cortex?host=/tmp/x&password=***&user=u"), "password parameter hidden: %s", u);
    db_mask_url("postgresql://bench@db/cortex", u, sizeof u);
    CHECK(!strcmp(u, "postgresql://bench@db/cortex"), "no password: unchanged (%s)", u);
    char err[512];
    db *d;
    CHECK(db_open("postgresql://nobody:pw@127.0.0.1:1/none?connect_timeout=2", &d, err, sizeof err) != 0 &&
              strstr(err, "postgresql://nobody:***@127.0.0.1:1/none") && !strstr(err, "pw@") && strstr(err, "cannot connect"),
          "an unreachable server: one line naming it, without its password: %s", err);
}

static void run_all(int pg) {
    const char *eng = pg ? "postgresql" : "sqlite";
    test_migrations(pg, eng);
    test_spec(pg, eng);
    test_concurrent_writers(pg, eng);
    test_killed_writer(pg, eng);
    test_push_twice(pg, eng);
}

TEST_MAIN({
    pg_base = getenv("CORTEX_TEST_PG");
    if (pg_base && !*pg_base) pg_base = NULL;
    test_translations();
    run_all(0);
    if (pg_base) {
        run_all(1);
        test_same_answers();
        test_reconnect();
    } else {
        printf("SKIP: the PostgreSQL half: CORTEX_TEST_PG is not set (ci/pg_server.sh start DIR prints a URL for it)\n");
    }
    fx_cleanup();
})
