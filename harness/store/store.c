/*
 * store.c - SQLite persistence for cortex-bench (see store.h).
 */
#include "store.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "db.h"

#include "prom.h"
#include "validity.h"
#include "stats.h"
#include "store_row.h"
#include "hx_err.h"

struct store {
    db *db;
};

static int run_sql(store *s, const char *sql, const char *fmt, ...);

/* Schema history. Each step moves the database from version i to i+1 and runs
 * in the same transaction as the user_version bump. Append, never edit. */
static const char *const MIGRATIONS[] = {
    /* 0 -> 1: environments, runs, per-repetition metrics, requests, counters */
    "CREATE TABLE environments ("
    "  id INTEGER PRIMARY KEY, fingerprint TEXT NOT NULL UNIQUE, cpu_model TEXT, isa_flags TEXT,"
    "  logical_cores INTEGER, physical_cores INTEGER, mem_bytes INTEGER, kernel TEXT, compiler TEXT,"
    "  governor TEXT, hypervisor INTEGER, numa_nodes INTEGER, hostname TEXT);"
    "CREATE TABLE runs ("
    "  id INTEGER PRIMARY KEY, started_at TEXT NOT NULL, finished_at TEXT,"
    "  status TEXT NOT NULL CHECK (status IN ('incomplete', 'complete', 'failed')), error TEXT, pid INTEGER,"
    "  git_commit TEXT, git_dirty INTEGER, build_type TEXT, build_flags TEXT,"
    "  workload TEXT NOT NULL, workload_kind TEXT, workload_hash TEXT, mode TEXT, concurrency INTEGER,"
    "  model_path TEXT, model_sha256 TEXT, model_type TEXT, model_name TEXT, model_params INTEGER, model_bytes INTEGER,"
    "  threads INTEGER, reps INTEGER, warmup INTEGER, n_ctx INTEGER, pinned TEXT,"
    "  env_id INTEGER REFERENCES environments(id), compare_key TEXT, cmdline TEXT);"
    "CREATE TABLE rep_metrics ("
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, rep INTEGER NOT NULL,"
    "  name TEXT NOT NULL, value REAL, PRIMARY KEY (run_id, rep, name));"
    "CREATE TABLE requests ("
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, rep INTEGER NOT NULL, idx INTEGER NOT NULL,"
    "  item TEXT, adapter INTEGER, arrival_ms REAL, queue_ms REAL, prefill_ms REAL, ttft_ms REAL, decode_ms REAL,"
    "  e2e_ms REAL, tpot_ms REAL, prompt_tokens INTEGER, gen_tokens INTEGER, itl_ms TEXT, token_hash TEXT, error TEXT,"
    "  PRIMARY KEY (run_id, rep, idx));"
    "CREATE TABLE counters ("
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, rep INTEGER NOT NULL, phase TEXT NOT NULL,"
    "  name TEXT NOT NULL, value REAL, unit TEXT, status TEXT NOT NULL CHECK (status IN ('ok', 'missing')), reason TEXT,"
    "  PRIMARY KEY (run_id, rep, phase, name));"
    "CREATE INDEX runs_by_commit ON runs(git_commit);",
    /* 1 -> 2: summaries over repetitions, correctness canaries, per-adapter
     * latency, synthetic-test sizes, the model hash cache, the counter mode */
    "CREATE TABLE summary ("
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, name TEXT NOT NULL, n INTEGER,"
    "  median REAL, min REAL, max REAL, mean REAL, stddev REAL, PRIMARY KEY (run_id, name));"
    "CREATE TABLE canaries ("
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, item TEXT NOT NULL, token_hash TEXT,"
    "  gen_tokens INTEGER, stable INTEGER, PRIMARY KEY (run_id, item));"
    "CREATE TABLE adapter_stats ("
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, adapter INTEGER NOT NULL, requests INTEGER,"
    "  ttft_p50 REAL, ttft_p90 REAL, ttft_p99 REAL, itl_p50 REAL, itl_p90 REAL, itl_p99 REAL, e2e_p50 REAL,"
    "  PRIMARY KEY (run_id, adapter));"
    "CREATE TABLE model_hashes (path TEXT NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, sha256 TEXT NOT NULL,"
    "  PRIMARY KEY (path, size, mtime_ns));"
    "ALTER TABLE runs ADD COLUMN test_prompt INTEGER;"
    "ALTER TABLE runs ADD COLUMN test_gen INTEGER;"
    "ALTER TABLE runs ADD COLUMN test_depth INTEGER;"
    "ALTER TABLE runs ADD COLUMN counter_mode TEXT;",
    /* 2 -> 3: tags naming runs (e.g. 'baseline'), gate decisions and their
     * per-metric verdicts */
    "CREATE TABLE tags (name TEXT NOT NULL, run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
    "  created_at TEXT NOT NULL, PRIMARY KEY (name, run_id));"
    "CREATE TABLE gates ("
    "  id INTEGER PRIMARY KEY, created_at TEXT NOT NULL, base_run INTEGER REFERENCES runs(id) ON DELETE SET NULL,"
    "  cand_run INTEGER REFERENCES runs(id) ON DELETE SET NULL, mode TEXT NOT NULL, gate_file TEXT, gate_file_hash TEXT,"
    "  verdict TEXT NOT NULL CHECK (verdict IN ('pass', 'regression', 'error')), summary TEXT);"
    "CREATE TABLE verdicts ("
    "  gate_id INTEGER NOT NULL REFERENCES gates(id) ON DELETE CASCADE, metric TEXT NOT NULL,"
    "  direction TEXT, threshold REAL, base_median REAL, cand_median REAL, change REAL, ci_lo REAL, ci_hi REAL,"
    "  p_value REAL, n_base INTEGER, n_cand INTEGER,"
    "  verdict TEXT NOT NULL CHECK (verdict IN ('improved', 'unchanged', 'regressed', 'inconclusive')), note TEXT,"
    "  PRIMARY KEY (gate_id, metric));",
    /* 3 -> 4: whether generation stopped at end-of-text (it changes every
     * token count, so it decides comparability) */
    "ALTER TABLE runs ADD COLUMN ignore_eos INTEGER;",
    /* 4 -> 5: the machine's measured ceilings (`cortex-bench hw`: read
     * bandwidth, peak arithmetic per ISA), the kernel instruction set a run
     * used (it decides comparability), and the hw row its roofline came from */
    "CREATE TABLE hw ("
    "  id INTEGER PRIMARY KEY, env_id INTEGER NOT NULL REFERENCES environments(id), measured_at TEXT NOT NULL,"
    "  threads INTEGER NOT NULL, cpus TEXT, reps INTEGER NOT NULL, buffer_bytes INTEGER NOT NULL, llc_bytes INTEGER,"
    "  mem_isa TEXT, read_gbs_1t REAL, read_gbs_1t_median REAL, copy_gbs_1t REAL, triad_gbs_1t REAL,"
    "  read_gbs REAL, read_gbs_median REAL, copy_gbs REAL, triad_gbs REAL,"
    "  fp32_gflops_scalar_1t REAL, fp32_gflops_scalar REAL, fp32_gflops_avx2_1t REAL, fp32_gflops_avx2 REAL,"
    "  int8_gops_avx2_1t REAL, int8_gops_avx2 REAL, avx512 TEXT, vnni TEXT, notes TEXT);"
    "CREATE INDEX hw_by_env ON hw(env_id, id);"
    "ALTER TABLE runs ADD COLUMN isa TEXT;"
    "ALTER TABLE runs ADD COLUMN hw_id INTEGER REFERENCES hw(id) ON DELETE SET NULL;",
    /* 5 -> 6: the KV cache configuration a run used (kv_opts_config: hot
     * type, warm type, tier budgets, policy, prefix cache, spill); it decides
     * comparability. NULL for older runs, which used the default cache. */
    "ALTER TABLE runs ADD COLUMN kv_config TEXT;",
    /* 6 -> 7: the workload's sidecar (FILE.meta.json: how a trace was
     * generated), as JSON text; NULL when it has none. Provenance only: the
     * requests themselves are in workload_hash. */
    "ALTER TABLE runs ADD COLUMN workload_meta TEXT;",
    /* 7 -> 8: prompt sets and traces are served by the request scheduler:
     * its configuration, the open-loop rate, the goodput SLOs and the rate
     * sweep a run belongs to (the id of the sweep's saturation run); per
     * request its final state, priority class, preemptions and prompt
     * tokens served from the prefix cache. NULL for older runs. */
    "ALTER TABLE runs ADD COLUMN sched_config TEXT;"
    "ALTER TABLE runs ADD COLUMN rate REAL;"
    "ALTER TABLE runs ADD COLUMN slo TEXT;"
    "ALTER TABLE runs ADD COLUMN sweep INTEGER;"
    "ALTER TABLE requests ADD COLUMN state TEXT;"
    "ALTER TABLE requests ADD COLUMN priority INTEGER;"
    "ALTER TABLE requests ADD COLUMN preempted INTEGER;"
    "ALTER TABLE requests ADD COLUMN cached_tokens INTEGER;",
    /* 8 -> 9: runs measured over HTTP (run --endpoint): the server's base URL,
     * its identity (Server header and the models it lists: it decides
     * comparability) and its /v1/models answer as JSON; per request the
     * streamed chunks that carried text (gen_tokens is the server's usage
     * count); per repetition the server's /metrics series that changed.
     * NULL (no rows) for in-process runs. */
    "ALTER TABLE runs ADD COLUMN endpoint TEXT;"
    "ALTER TABLE runs ADD COLUMN server TEXT;"
    "ALTER TABLE runs ADD COLUMN server_info TEXT;"
    "ALTER TABLE requests ADD COLUMN stream_chunks INTEGER;"
    "CREATE TABLE server_metrics ("
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, rep INTEGER NOT NULL, series TEXT NOT NULL,"
    "  before REAL, after REAL, delta REAL, PRIMARY KEY (run_id, rep, series));",
    /* 9 -> 10: per adapter, its generated tokens and output throughput (those
     * tokens over the repetitions' makespans): with --adapters the ids are
     * real adapters (docs/lora.md). NULL for rows written before. */
    ("ALTER TABLE adapter_stats ADD COLUMN gen_tokens INTEGER;"
     "ALTER TABLE adapter_stats ADD COLUMN output_tps REAL;"),
    /* 10 -> 11: the chat format prompts were submitted in ("harmony": each
     * prompt of the challenge set as a gpt-oss user turn); NULL when the
     * prompts went in as plain text (every run before). */
    "ALTER TABLE runs ADD COLUMN chat_format TEXT;",
    /* 11 -> 12: honest verdicts (docs/harness.md, "VALID and INVALID").
     * Per run: whether it is a measurement at all (validity 'valid' or
     * 'invalid') and why not, the share of failed requests it was allowed;
     * the machine as the run saw it (the CPUs it could use, the cgroup's CPU
     * quota, transparent huge pages, load average before and after); over
     * HTTP the server's build (system_fingerprint) and whether its prompt
     * cache was allowed. Per environment the CPU's identity (vendor, family,
     * model, stepping, microcode). Per request the max_tokens it asked for
     * (state now says how it ended: stop, length, failed, rejected, timeout,
     * cancelled). Per verdict the two runs it judged. Runs stored before
     * are judged once here by the one rule their rows allow: a complete run
     * with a failed request is INVALID (truncation cannot be told without
     * max_tokens). */
    "ALTER TABLE runs ADD COLUMN validity TEXT CHECK (validity IN ('valid', 'invalid'));"
    "ALTER TABLE runs ADD COLUMN validity_reasons TEXT;"
    "ALTER TABLE runs ADD COLUMN allow_failures REAL;"
    "ALTER TABLE runs ADD COLUMN affinity TEXT;"
    "ALTER TABLE runs ADD COLUMN cpus_allowed INTEGER;"
    "ALTER TABLE runs ADD COLUMN cgroup_cpus REAL;"
    "ALTER TABLE runs ADD COLUMN thp TEXT;"
    "ALTER TABLE runs ADD COLUMN load_before TEXT;"
    "ALTER TABLE runs ADD COLUMN load_after TEXT;"
    "ALTER TABLE runs ADD COLUMN server_build TEXT;"
    "ALTER TABLE runs ADD COLUMN server_cache TEXT;"
    "ALTER TABLE environments ADD COLUMN cpu_vendor TEXT;"
    "ALTER TABLE environments ADD COLUMN cpu_family INTEGER;"
    "ALTER TABLE environments ADD COLUMN cpu_model_id INTEGER;"
    "ALTER TABLE environments ADD COLUMN cpu_stepping INTEGER;"
    "ALTER TABLE environments ADD COLUMN microcode TEXT;"
    "ALTER TABLE requests ADD COLUMN max_tokens INTEGER;"
    "ALTER TABLE verdicts ADD COLUMN base_run INTEGER;"
    "ALTER TABLE verdicts ADD COLUMN cand_run INTEGER;"
    "UPDATE runs SET validity = CASE WHEN EXISTS (SELECT 1 FROM requests q WHERE q.run_id = runs.id AND q.error IS NOT NULL)"
    "  THEN 'invalid' ELSE 'valid' END WHERE status = 'complete';"
    "UPDATE runs SET validity_reasons = (SELECT count(*) FROM requests q WHERE q.run_id = runs.id AND q.error IS NOT NULL)"
    "  || ' of ' || (SELECT count(*) FROM requests q WHERE q.run_id = runs.id) || ' requests failed (judged when the"
    " database moved to schema v12)' WHERE validity = 'invalid';",
    /* 12 -> 13: many machines, one history (docs/harness.md, "One schema,
     * two engines"). Per run: a UUID that names it in every store (push and
     * pull copy it, so a run never lands twice), its testbed (the machine
     * class its baselines are kept for: --testbed, else the CPU and core
     * count), and the engine's thread placement and NUMA policy. Summary
     * and counter rows get their write order (seq), which SQLite kept in
     * rowid and PostgreSQL has no column for. Filled for older rows by
     * backfill_v13. */
    "ALTER TABLE runs ADD COLUMN uuid TEXT;"
    "ALTER TABLE runs ADD COLUMN testbed TEXT;"
    "ALTER TABLE runs ADD COLUMN numa TEXT;"
    "CREATE UNIQUE INDEX runs_by_uuid ON runs(uuid);"
    "CREATE INDEX runs_by_testbed ON runs(testbed, workload);"
    "ALTER TABLE summary ADD COLUMN seq INTEGER;"
    "ALTER TABLE counters ADD COLUMN seq INTEGER;"
    "ALTER TABLE hw ADD COLUMN uuid TEXT;"
    "CREATE UNIQUE INDEX hw_by_uuid ON hw(uuid);",
    /* 13 -> 14: speculative decoding (run --spec; docs/metrics.md). Per run:
     * the speculation as configured (it decides comparability), the
     * drafter the engine made, and the time making it took (before the run,
     * in no request's time). Per request: the model's passes of its decode,
     * those that checked a draft, the draft tokens checked and accepted, the
     * time drafting and verifying; over HTTP the server's draft_n and
     * draft_n_accepted when it reports them. NULL for runs that did not
     * speculate and for every older row. The per-repetition figures
     * (spec_acceptance, ...) are rep_metrics rows, as every metric is. */
    "ALTER TABLE runs ADD COLUMN spec_config TEXT;"
    "ALTER TABLE runs ADD COLUMN spec_drafter TEXT;"
    "ALTER TABLE runs ADD COLUMN spec_setup_ms REAL;"
    "ALTER TABLE requests ADD COLUMN spec_passes INTEGER;"
    "ALTER TABLE requests ADD COLUMN spec_verified INTEGER;"
    "ALTER TABLE requests ADD COLUMN draft_tokens INTEGER;"
    "ALTER TABLE requests ADD COLUMN accepted_tokens INTEGER;"
    "ALTER TABLE requests ADD COLUMN draft_ms REAL;"
    "ALTER TABLE requests ADD COLUMN verify_ms REAL;",
};

/* Format an error as "DB: what: engine's message". */
static int store_fail(store *s, const char *what, char *err, size_t errlen) {
    return hx_fail(err, errlen, "%s: %s: %s", db_name(s->db), what, db_errmsg(s->db));
}

static int exec(store *s, const char *sql, const char *what, char *err, size_t errlen) {
    return db_exec(s->db, sql) ? store_fail(s, what, err, errlen) : 0;
}

int store_version(store *s) { return db_schema_version(s->db); }

/* 12 -> 13's data: a UUID for every run stored before, and the order rows
 * were written in (SQLite's rowid; on PostgreSQL the physical order of a
 * table never updated, which is the order of its inserts). */
static int backfill_v13(store *s) {
    static const char *const TABLES[][2] = {{"SELECT id FROM runs WHERE uuid IS NULL", "UPDATE runs SET uuid = ? WHERE id = ?"},
                                            {"SELECT id FROM hw WHERE uuid IS NULL", "UPDATE hw SET uuid = ? WHERE id = ?"}};
    for (int t = 0; t < 2; t++) {
        db_stmt *st = db_prepare(s->db, TABLES[t][0]);
        int rc = st ? 0 : -1;
        int64_t *ids = NULL;
        int n = 0, cap = 0;
        while (!rc && db_step(st) == DB_ROW) {
            if (row_grow((void **)&ids, n, &cap, sizeof *ids)) rc = -1;
            else ids[n++] = db_column_int(st, 0);
        }
        db_finalize(st);
        for (int i = 0; i < n && !rc; i++) {
            char u[37];
            rc = store_new_uuid(u) ? -1 : run_sql(s, TABLES[t][1], "ti", u, ids[i]);
        }
        free(ids);
        if (rc) return -1;
    }
    if (db_kind_of(s->db) == DB_SQLITE)
        return db_exec(s->db, "UPDATE summary SET seq = rowid; UPDATE counters SET seq = rowid;");
    return db_exec(s->db, "UPDATE summary t SET seq = x.n FROM (SELECT ctid AS c, row_number() OVER (ORDER BY ctid) AS n"
                          " FROM summary) x WHERE t.ctid = x.c;"
                          " UPDATE counters t SET seq = x.n FROM (SELECT ctid AS c, row_number() OVER (ORDER BY ctid) AS n"
                          " FROM counters) x WHERE t.ctid = x.c;");
}

/* What a migration step may do after its SQL (a data change SQL cannot say once for both engines). */
static int (*const BACKFILL[])(store *) = {[12] = backfill_v13};

/* Apply migrations up to `target`, each in its own write transaction, which
 * holds the schema lock so two processes opening a fresh database cannot
 * both migrate it. */
static int migrate(store *s, int target, char *err, size_t errlen) {
    int max = (int)(sizeof MIGRATIONS / sizeof MIGRATIONS[0]);
    for (;;) {
        if (db_begin(s->db) || db_lock_schema(s->db)) {
            store_fail(s, "begin migration", err, errlen);
            db_rollback(s->db);
            return -1;
        }
        int v = store_version(s);
        if (v < 0 || v > max) {
            if (v < 0) store_fail(s, "read the schema version", err, errlen);
            else hx_fail(err, errlen, "%s: schema version %d is newer than this cortex-bench understands (%d)",
                         db_name(s->db), v, max);
            db_rollback(s->db);
            return -1;
        }
        if (v >= target) return exec(s, "COMMIT", "commit", err, errlen);
        const char *what = db_exec_ddl(s->db, MIGRATIONS[v]) ? "migrate schema"
                           : v < (int)(sizeof BACKFILL / sizeof BACKFILL[0]) && BACKFILL[v] && BACKFILL[v](s)
                               ? "fill the new columns"
                           : db_set_schema_version(s->db, v + 1) ? "set schema version"
                           : db_commit(s->db)                    ? "commit migration"
                                                                 : NULL;
        if (what) {
            char why[160];
            snprintf(why, sizeof why, "%s to v%d", what, v + 1);
            store_fail(s, why, err, errlen);
            db_rollback(s->db);
            return -1;
        }
    }
}

int store_open_version(const char *path, int version, store **out, char *err, size_t errlen) {
    *out = NULL;
    store *s = calloc(1, sizeof *s);
    if (!s) return hx_fail(err, errlen, "out of memory");
    if (db_open(path, &s->db, err, errlen) || migrate(s, version, err, errlen)) {
        store_close(s);
        return -1;
    }
    *out = s;
    return 0;
}

int store_open(const char *path, store **out, char *err, size_t errlen) {
    return store_open_version(path, STORE_SCHEMA_VERSION, out, err, errlen);
}

int store_is_url(const char *target) { return db_is_url(target); }

void store_close(store *s) {
    if (!s) return;
    db_close(s->db);
    free(s);
}

db *store_db(store *s) { return s->db; }
const char *store_name(store *s) { return db_name(s->db); }


/* Prepare, bind positional values from a format ("t" text, NULL for
 * NULL; "i" int64; "d" double, NAN for NULL), step once; 0 on success.
 * With `id`, the first column of the first row (INSERT ... RETURNING id)
 * into *id. */
static int vrun_sql(store *s, int64_t *id, const char *sql, const char *fmt, va_list ap) {
    db_stmt *st = db_prepare(s->db, sql);
    if (!st) return -1;
    for (int i = 0; fmt[i]; i++) {
        switch (fmt[i]) {
        case 't': db_bind_text(st, i + 1, va_arg(ap, const char *)); break;
        case 'i': db_bind_int(st, i + 1, va_arg(ap, int64_t)); break;
        case 'd': db_bind_double(st, i + 1, va_arg(ap, double)); break;
        default: db_bind_null(st, i + 1); break;
        }
    }
    int rc = db_step(st);
    if (id) *id = rc == DB_ROW ? db_column_int(st, 0) : -1;
    db_finalize(st);
    return rc == DB_DONE || rc == DB_ROW ? 0 : -1;
}

static int run_sql(store *s, const char *sql, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = vrun_sql(s, NULL, sql, fmt, ap);
    va_end(ap);
    return rc;
}

/* The same, for a query of one integer (an INSERT ... RETURNING id, a
 * SELECT id): its first row's first column, or -1 when there is none. */
static int64_t sql_int(store *s, const char *sql, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int64_t id = -1;
    int rc = vrun_sql(s, &id, sql, fmt, ap);
    va_end(ap);
    return rc ? -1 : id;
}

int64_t store_env_id(store *s, const env_info *e) {
    char fp[65];
    env_fingerprint(e, fp);
    /* the CPU's identity (schema v12): NULL where unknown (no number or word stands for "we could not
     * tell"; an environment recorded before v12 reads the same, and store_comparable says "unknown") */
    if (run_sql(s, "INSERT INTO environments (fingerprint, cpu_model, isa_flags, logical_cores, physical_cores,"
                   " mem_bytes, kernel, compiler, governor, hypervisor, numa_nodes, hostname, cpu_vendor, cpu_family,"
                   " cpu_model_id, cpu_stepping, microcode)"
                   " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING", "tttiiitttiit" "tdddt", fp, e->cpu_model, e->isa_flags,
                (int64_t)e->logical_cores, (int64_t)e->physical_cores, (int64_t)e->mem_bytes, e->kernel, e->compiler,
                e->governor, (int64_t)e->hypervisor, (int64_t)e->numa_nodes, e->hostname,
                strcmp(e->cpu_vendor, "unknown") ? e->cpu_vendor : NULL,
                e->cpu_family >= 0 ? (double)e->cpu_family : NAN, e->cpu_model_id >= 0 ? (double)e->cpu_model_id : NAN,
                e->cpu_stepping >= 0 ? (double)e->cpu_stepping : NAN,
                strcmp(e->microcode, "unknown") ? e->microcode : NULL))
        return -1;
    return sql_int(s, "SELECT id FROM environments WHERE fingerprint = ?", "t", fp);
}

int store_begin_run(store *s, const run_meta *m, const env_info *e, int64_t *run_id, char *err, size_t errlen) {
    char now[40];
    store_now(now, sizeof now);
    char uuid[37];
    if (store_new_uuid(uuid)) return hx_fail(err, errlen, "%s: record run: no random bytes for its UUID", db_name(s->db));
    if (db_begin(s->db)) return store_fail(s, "begin run", err, errlen);
    int64_t env = store_env_id(s, e);
    *run_id = env < 0 ? -1 :
        sql_int(s, "INSERT INTO runs (uuid, testbed, numa, started_at, status, pid, git_commit, git_dirty, build_type, build_flags, workload,"
                   " workload_kind, workload_hash, mode, concurrency, model_path, model_sha256, model_type, model_name,"
                   " model_params, model_bytes, threads, reps, warmup, n_ctx, pinned, env_id, compare_key, cmdline,"
                   " test_prompt, test_gen, test_depth, counter_mode, ignore_eos, isa, hw_id, kv_config, workload_meta,"
                   " sched_config, rate, slo, sweep, endpoint, server, server_info, chat_format, allow_failures,"
                   " affinity, cpus_allowed, cgroup_cpus, thp, load_before, server_build, server_cache, spec_config,"
                   " spec_drafter, spec_setup_ms)"
                   " VALUES (?,?,?,?, 'incomplete', ?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,"
                   "?,?,?,?,?,?,?,?,?,?,?) RETURNING id",
                "ttt" "titittttttittttiiiiiitittiiititdtttdtdtttt" "dtddtttt" "ttd", uuid, m->testbed[0] ? m->testbed : NULL,
                m->numa[0] ? m->numa : NULL, now, (int64_t)getpid(), m->git_commit, (int64_t)m->git_dirty,
                m->build_type, m->build_flags, m->workload, m->workload_kind, m->workload_hash, m->mode,
                (int64_t)m->concurrency, m->model_path, m->model_sha256, m->model_type, m->model_name,
                (int64_t)m->model_params, (int64_t)m->model_bytes, (int64_t)m->threads, (int64_t)m->reps,
                (int64_t)m->warmup, (int64_t)m->n_ctx, m->pinned, env, m->compare_key, m->cmdline,
                (int64_t)m->test_prompt, (int64_t)m->test_gen, (int64_t)m->test_depth, m->counter_mode,
                (int64_t)m->ignore_eos, m->isa[0] ? m->isa : NULL,
                m->hw_id > 0 ? (double)m->hw_id : NAN /* NULL; the INTEGER column stores the id as an integer */,
                m->kv_config[0] ? m->kv_config : NULL, m->workload_meta, m->sched_config[0] ? m->sched_config : NULL,
                m->rate > 0 ? m->rate : NAN, m->slo[0] ? m->slo : NULL, m->sweep > 0 ? (double)m->sweep : NAN,
                m->endpoint[0] ? m->endpoint : NULL, m->server[0] ? m->server : NULL, m->server_info,
                m->chat_format[0] ? m->chat_format : NULL, m->allow_failures > 0 ? m->allow_failures : NAN,
                m->affinity[0] ? m->affinity : NULL, m->cpus_allowed > 0 ? (double)m->cpus_allowed : NAN,
                m->cgroup_cpus > 0 ? m->cgroup_cpus : NAN, m->thp[0] ? m->thp : NULL,
                m->load_before[0] ? m->load_before : NULL, m->server_build[0] ? m->server_build : NULL,
                m->server_cache[0] ? m->server_cache : NULL, m->spec_config[0] ? m->spec_config : NULL,
                m->spec_drafter[0] ? m->spec_drafter : NULL, m->spec_config[0] ? m->spec_setup_ms : NAN);
    if (*run_id < 0) {
        store_fail(s, "record run", err, errlen);
        db_rollback(s->db);
        return -1;
    }
    return exec(s, "COMMIT", "commit run", err, errlen);
}

/* ITL gaps as a JSON array of milliseconds with microsecond precision. */
static char *itl_json(const req_result *r) {
    size_t cap = 16 + (size_t)r->n_itl * 16, k = 0;
    char *buf = malloc(cap);
    if (!buf) return NULL;
    buf[k++] = '[';
    for (int i = 0; i < r->n_itl; i++) k += (size_t)snprintf(buf + k, cap - k, i ? ",%.3f" : "%.3f", r->itl_ms[i]);
    snprintf(buf + k, cap - k, "]");
    return buf;
}

/* Median/min/max/mean/stddev over repetitions of every metric of rep 0. */
static int write_summary(store *s, int64_t id, const rep_result *reps, int n_reps) {
    double *v = malloc(sizeof(double) * (size_t)n_reps);
    if (!v) return -1;
    for (int k = 0; k < reps[0].n_m; k++) {
        const char *name = reps[0].m[k].name;
        size_t m = 0;
        for (int r = 0; r < n_reps; r++) {
            double x = rep_get_metric(&reps[r], name);
            if (!isnan(x)) v[m++] = x;
        }
        if (!m) continue;
        stats_summary su;
        stats_summarize(v, m, &su);
        if (run_sql(s, "INSERT INTO summary (run_id, name, n, median, min, max, mean, stddev, seq)"
                       " VALUES (?,?,?,?,?,?,?,?,?)", "itidddddi", id, name, (int64_t)m, su.median, su.min, su.max,
                    su.mean, m > 1 ? su.stddev : 0.0, (int64_t)k)) {
            free(v);
            return -1;
        }
    }
    free(v);
    return 0;
}

/* One canary per item: the hash of its greedy tokens, and whether every
 * repetition produced the same (a greedy engine must). */
static int write_canaries(store *s, int64_t id, const rep_result *reps, int n_reps) {
    for (int i = 0; i < reps[0].n_req; i++) {
        const req_result *q = &reps[0].req[i];
        if (q->error[0] || !q->token_hash[0]) continue;
        int stable = 1;
        for (int r = 1; r < n_reps; r++)
            if (i < reps[r].n_req && strcmp(reps[r].req[i].token_hash, q->token_hash)) stable = 0;
        if (run_sql(s, "INSERT INTO canaries (run_id, item, token_hash, gen_tokens, stable) VALUES (?,?,?,?,?)"
                       " ON CONFLICT DO NOTHING", "ittii", id, q->item, q->token_hash,
                    (int64_t)q->gen_tokens, (int64_t)stable))
            return -1;
    }
    return 0;
}

/* Per adapter, over all reps: requests, percentiles of TTFT, ITL and
 * end-to-end latency, generated tokens and their rate over the makespans. */
static int write_adapter_stats(store *s, int64_t id, const rep_result *reps, int n_reps) {
    int max_a = -1;
    size_t total_req = 0, total_itl = 0;
    double makespan_s = 0;
    for (int r = 0; r < n_reps; r++) {
        double ms = rep_get_metric(&reps[r], "makespan_ms");
        if (ms > 0) makespan_s += ms / 1e3;
    }
    for (int r = 0; r < n_reps; r++)
        for (int i = 0; i < reps[r].n_req; i++) {
            if (reps[r].req[i].adapter > max_a) max_a = reps[r].req[i].adapter;
            total_req++;
            total_itl += (size_t)reps[r].req[i].n_itl;
        }
    if (max_a < 0) return 0;
    double *ttft = malloc(sizeof(double) * (total_req + 1)), *e2e = malloc(sizeof(double) * (total_req + 1));
    double *itl = malloc(sizeof(double) * (total_itl + 1));
    int rc = (ttft && e2e && itl) ? 0 : -1;
    for (int a = 0; a <= max_a && !rc; a++) {
        size_t nt = 0, ni = 0;
        int64_t gen = 0;
        for (int r = 0; r < n_reps; r++)
            for (int i = 0; i < reps[r].n_req; i++) {
                const req_result *q = &reps[r].req[i];
                if (q->adapter != a || q->error[0]) continue;
                gen += q->gen_tokens;
                ttft[nt] = q->ttft_ms;
                e2e[nt++] = q->e2e_ms;
                for (int k = 0; k < q->n_itl; k++) itl[ni++] = q->itl_ms[k];
            }
        if (!nt) continue;
        stats_sort(ttft, nt);
        stats_sort(e2e, nt);
        stats_sort(itl, ni);
        double nanv = NAN;
        rc = run_sql(s, "INSERT INTO adapter_stats (run_id, adapter, requests, ttft_p50, ttft_p90, ttft_p99, itl_p50,"
                        " itl_p90, itl_p99, e2e_p50, gen_tokens, output_tps) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", "iiidddddddid", id, (int64_t)a,
                     (int64_t)nt, stats_percentile(ttft, nt, 50), stats_percentile(ttft, nt, 90),
                     stats_percentile(ttft, nt, 99), ni ? stats_percentile(itl, ni, 50) : nanv,
                     ni ? stats_percentile(itl, ni, 90) : nanv, ni ? stats_percentile(itl, ni, 99) : nanv,
                     stats_percentile(e2e, nt, 50), gen, makespan_s > 0 ? (double)gen / makespan_s : nanv);
    }
    free(ttft);
    free(e2e);
    free(itl);
    return rc;
}

int store_finish_run(store *s, int64_t id, const rep_result *reps, int n_reps, const run_verdict *v,
                     const char *load_after, char *err, size_t errlen) {
    if (db_begin(s->db)) return store_fail(s, "begin results", err, errlen);
    const char *what = "write metrics";
    int rc = 0;
    int64_t seq = 0; /* the counters' write order */
    for (int r = 0; r < n_reps && !rc; r++) {
        const rep_result *rp = &reps[r];
        for (int k = 0; k < rp->n_m && !rc; k++)
            rc = run_sql(s, "INSERT INTO rep_metrics (run_id, rep, name, value) VALUES (?,?,?,?)", "iitd", id, (int64_t)r, rp->m[k].name,
                         rp->m[k].value);
        what = "write requests";
        for (int i = 0; i < rp->n_req && !rc; i++) {
            const req_result *q = &rp->req[i];
            char *itl = itl_json(q);
            rc = !itl || run_sql(s, "INSERT INTO requests (run_id, rep, idx, item, adapter, arrival_ms, queue_ms,"
                                    " prefill_ms, ttft_ms, decode_ms, e2e_ms, tpot_ms, prompt_tokens, gen_tokens, itl_ms,"
                                    " token_hash, error, state, priority, preempted, cached_tokens, stream_chunks,"
                                    " max_tokens, spec_passes, spec_verified, draft_tokens, accepted_tokens, draft_ms,"
                                    " verify_ms)"
                                    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                                 "iiitiddddddd" "iittt" "tiii" "dd" "dddddd", id, (int64_t)r, (int64_t)q->idx, q->item,
                                 (int64_t)q->adapter, q->arrival_ms, q->queue_ms, q->prefill_ms, q->ttft_ms, q->decode_ms,
                                 q->e2e_ms, q->tpot_ms, (int64_t)q->prompt_tokens, (int64_t)q->gen_tokens, itl,
                                 q->token_hash, q->error[0] ? q->error : NULL, q->state[0] ? q->state : NULL,
                                 (int64_t)q->priority, (int64_t)q->preempted, (int64_t)q->cached_tokens,
                                 rp->http ? (double)q->stream_chunks : NAN,
                                 q->max_tokens > 0 ? (double)q->max_tokens : NAN,
                                 /* speculation: NULL when it did not speculate or (over HTTP) the server did not say */
                                 q->spec && q->spec_passes >= 0 ? (double)q->spec_passes : NAN,
                                 q->spec && q->spec_verified >= 0 ? (double)q->spec_verified : NAN,
                                 q->spec ? (double)q->draft_tokens : NAN, q->spec ? (double)q->accepted_tokens : NAN,
                                 q->spec ? q->draft_ms : NAN, q->spec ? q->verify_ms : NAN);
            free(itl);
        }
        what = "write server metrics";
        for (int k = 0; k < rp->n_srv && !rc; k++)
            rc = run_sql(s, "INSERT INTO server_metrics (run_id, rep, series, before, after, delta) VALUES (?,?,?,?,?,?)", "iitddd", id, (int64_t)r, rp->srv[k].name,
                         rp->srv[k].before, rp->srv[k].after, rp->srv[k].delta);
        what = "write counters";
        for (int c = 0; c < rp->n_ctr && !rc; c++) {
            const counter_row *k = &rp->ctr[c];
            rc = run_sql(s, "INSERT INTO counters (run_id, rep, phase, name, value, unit, status, reason, seq)"
                            " VALUES (?,?,?,?,?,?,?,?,?)", "iittdttti", id, (int64_t)r, k->phase, k->name,
                         k->ok ? k->value : NAN, k->unit, k->ok ? "ok" : "missing", k->ok ? NULL : k->reason, seq++);
        }
    }
    if (!rc) { /* over HTTP: the builds the answers named (system_fingerprint) replace what the probe said */
        char builds[sizeof reps[0].server_build] = "";
        for (int r = 0; r < n_reps; r++)
            for (const char *p = reps[r].server_build; *p;) {
                const char *e = strstr(p, ", ");
                char one[sizeof builds];
                snprintf(one, sizeof one, "%.*s", (int)(e ? (size_t)(e - p) : strlen(p)), p);
                rep_add_build(builds, sizeof builds, one);
                p = e ? e + 2 : p + strlen(p);
            }
        what = "write the server's build";
        if (builds[0]) rc = run_sql(s, "UPDATE runs SET server_build = ? WHERE id = ?", "ti", builds, id);
    }
    if (!rc && n_reps > 0) {
        what = "write summary";
        rc = write_summary(s, id, reps, n_reps);
        if (!rc) what = "write canaries", rc = write_canaries(s, id, reps, n_reps);
        if (!rc) what = "write adapter statistics", rc = write_adapter_stats(s, id, reps, n_reps);
    }
    char now[40];
    store_now(now, sizeof now);
    if (!rc)
        what = "complete run",
        rc = run_sql(s, "UPDATE runs SET status = 'complete', finished_at = ?, validity = ?, validity_reasons = ?,"
                        " load_after = ? WHERE id = ?", "tttti", now, v->valid ? "valid" : "invalid",
                     v->valid ? (v->note[0] ? v->note : NULL) : v->reasons, load_after && *load_after ? load_after : NULL, id);
    if (rc) {
        store_fail(s, what, err, errlen);
        db_rollback(s->db);
        return -1;
    }
    return exec(s, "COMMIT", "commit results", err, errlen);
}

int store_fail_run(store *s, int64_t id, const char *reason) {
    char now[40];
    store_now(now, sizeof now);
    return run_sql(s, "UPDATE runs SET status = 'failed', error = ?, finished_at = ? WHERE id = ?", "tti", reason, now, id);
}

int store_cached_hash(store *s, const char *path, int64_t size, int64_t mtime, char out[65]) {
    db_stmt *st = db_prepare(s->db, "SELECT sha256 FROM model_hashes WHERE path = ? AND size = ? AND mtime_ns = ?");
    int found = 0;
    if (!st) return 0;
    db_bind_text(st, 1, path);
    db_bind_int(st, 2, size);
    db_bind_int(st, 3, mtime);
    if (db_step(st) == DB_ROW) {
        snprintf(out, 65, "%s", row_text(st, "sha256"));
        found = 1;
    }
    db_finalize(st);
    return found;
}

void store_cache_hash(store *s, const char *path, int64_t size, int64_t mtime, const char *hex) {
    run_sql(s, "INSERT INTO model_hashes (path, size, mtime_ns, sha256) VALUES (?,?,?,?)"
               " ON CONFLICT (path, size, mtime_ns) DO UPDATE SET sha256 = excluded.sha256", "tiit", path, size, mtime, hex);
}

/* See store.h. */
int store_run_set_sweep(store *s, int64_t id, int64_t sweep) {
    return run_sql(s, "UPDATE runs SET sweep = ? WHERE id = ?", "ii", sweep, id);
}

/* See store.h. A tag given again to the same run is dated anew. */
int store_tag_run(store *s, int64_t id, const char *name) {
    char now[32];
    time_t t = time(NULL);
    strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
    db_stmt *st = db_prepare(s->db, "INSERT INTO tags (name, run_id, created_at) SELECT ?1, id, ?2 FROM runs"
                                    " WHERE id = ?3 AND " STORE_MEASUREMENT("runs")
                                    " ON CONFLICT (name, run_id) DO UPDATE SET created_at = excluded.created_at");
    int rc = -1;
    if (!st) return -1;
    db_bind_text(st, 1, name);
    db_bind_text(st, 2, now);
    db_bind_int(st, 3, id);
    if (db_step(st) == DB_DONE && db_changes(st) == 1) rc = 0;
    db_finalize(st);
    return rc;
}

/* See store.h. One transaction: the tag leaves every other run of the same
 * configuration (compare_key) and workload, then names `id`. */
int store_move_tag(store *s, int64_t id, const char *name, int64_t *previous) {
    char err[256];
    *previous = 0;
    if (db_begin(s->db)) return store_fail(s, "begin tag", err, sizeof err);
    db_stmt *st = db_prepare(s->db, "SELECT max(t.run_id) AS prev FROM tags t JOIN runs r ON r.id = t.run_id"
                                    " JOIN runs me ON me.id = ?2 WHERE t.name = ?1 AND t.run_id != ?2"
                                    " AND r.compare_key IS NOT DISTINCT FROM me.compare_key AND r.workload = me.workload");
    if (st) {
        db_bind_text(st, 1, name);
        db_bind_int(st, 2, id);
        if (db_step(st) == DB_ROW) *previous = row_int(st, "prev");
    }
    db_finalize(st);
    int rc = run_sql(s, "DELETE FROM tags WHERE name = ?1 AND run_id != ?2 AND run_id IN (SELECT r.id FROM runs r"
                        " JOIN runs me ON me.id = ?2 WHERE r.compare_key IS NOT DISTINCT FROM me.compare_key"
                        " AND r.workload = me.workload)",
                     "ti", name, id);
    if (!rc) rc = store_tag_run(s, id, name);
    if (rc) {
        db_rollback(s->db);
        return -1;
    }
    return exec(s, "COMMIT", "commit tag", err, sizeof err);
}

/* See store.h. */
char *store_run_workload_meta(store *s, int64_t id) {
    db_stmt *st = db_prepare(s->db, "SELECT workload_meta FROM runs WHERE id = ?");
    char *meta = NULL;
    if (!st) return NULL;
    db_bind_int(st, 1, id);
    if (db_step(st) == DB_ROW && !db_column_null(st, 0)) {
        const char *t = db_column_text(st, 0);
        size_t n = strlen(t);
        meta = malloc(n + 1);
        if (meta) memcpy(meta, t, n + 1);
    }
    db_finalize(st);
    return meta;
}
