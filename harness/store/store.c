/*
 * store.c - SQLite persistence for cortex-bench (see store.h).
 */
#include "store.h"

#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "prom.h"
#include "validity.h"
#include "stats.h"
#include "store_row.h"
#include "hx_err.h"

struct store {
    sqlite3 *db;
    char path[1024];
};

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
};

/* Format an error as "DB: what: sqlite message". */
static int db_fail(store *s, const char *what, char *err, size_t errlen) {
    return hx_fail(err, errlen, "%s: %s: %s", s->path, what, s->db ? sqlite3_errmsg(s->db) : "cannot open");
}

static int exec(store *s, const char *sql, const char *what, char *err, size_t errlen) {
    char *msg = NULL;
    if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        hx_fail(err, errlen, "%s: %s: %s", s->path, what, msg ? msg : sqlite3_errmsg(s->db));
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

int store_version(store *s) {
    sqlite3_stmt *st;
    int v = -1;
    if (sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = (int)row_int(st, "user_version");
    sqlite3_finalize(st);
    return v;
}

/* Apply migrations up to `target`, each in its own immediate transaction so two
 * processes opening a fresh database cannot both migrate it. */
static int migrate(store *s, int target, char *err, size_t errlen) {
    int max = (int)(sizeof MIGRATIONS / sizeof MIGRATIONS[0]);
    for (;;) {
        if (exec(s, "BEGIN IMMEDIATE", "begin migration", err, errlen)) return -1;
        int v = store_version(s);
        if (v < 0 || v > max) {
            exec(s, "ROLLBACK", "rollback", err, errlen);
            return hx_fail(err, errlen,
                           "%s: schema version %d is newer than this cortex-bench understands (%d)", s->path, v, max);
        }
        if (v >= target) return exec(s, "COMMIT", "commit", err, errlen);
        char bump[64];
        snprintf(bump, sizeof bump, "PRAGMA user_version = %d", v + 1);
        if (exec(s, MIGRATIONS[v], "migrate schema", err, errlen) || exec(s, bump, "set schema version", err, errlen) ||
            exec(s, "COMMIT", "commit migration", err, errlen)) {
            sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
            return -1;
        }
    }
}

/* Switch to WAL. Two processes creating the same database race for this
 * pragma, and SQLite reports SQLITE_BUSY for it without consulting the busy
 * handler, so retry for up to the busy timeout. */
static int enable_wal(store *s, char *err, size_t errlen) {
    for (int attempt = 0;; attempt++) {
        int rc = sqlite3_exec(s->db, "PRAGMA journal_mode = WAL", NULL, NULL, NULL);
        if (rc == SQLITE_OK) return 0;
        if ((rc != SQLITE_BUSY && rc != SQLITE_LOCKED) || attempt >= 3000) return db_fail(s, "enable WAL", err, errlen);
        usleep(10000);
    }
}

int store_open_version(const char *path, int version, store **out, char *err, size_t errlen) {
    *out = NULL;
    store *s = calloc(1, sizeof *s);
    if (!s) return hx_fail(err, errlen, "out of memory");
    snprintf(s->path, sizeof s->path, "%s", path);
    if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
        hx_fail(err, errlen, "%s: cannot open database: %s", path, s->db ? sqlite3_errmsg(s->db) : "out of memory");
        store_close(s);
        return -1;
    }
    sqlite3_busy_timeout(s->db, 30000); /* concurrent runs wait for each other's short transactions */
    if (enable_wal(s, err, errlen) ||
        exec(s, "PRAGMA foreign_keys = ON", "enable foreign keys", err, errlen) ||
        exec(s, "PRAGMA synchronous = NORMAL", "set synchronous", err, errlen) || migrate(s, version, err, errlen)) {
        store_close(s);
        return -1;
    }
    *out = s;
    return 0;
}

int store_open(const char *path, store **out, char *err, size_t errlen) {
    return store_open_version(path, STORE_SCHEMA_VERSION, out, err, errlen);
}

void store_close(store *s) {
    if (!s) return;
    sqlite3_close(s->db);
    free(s);
}

sqlite3 *store_db(store *s) { return s->db; }

/* ISO-8601 UTC timestamp with milliseconds. */
static void now_iso(char *out, size_t n) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    size_t k = strftime(out, n, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + k, n - k, ".%03ldZ", ts.tv_nsec / 1000000);
}

/* Prepare, bind positional values from a format ("t" text, "i" int64, "d"
 * double, "n" null), step once; returns 0 on SQLITE_DONE/ROW. */
static int run_sql(store *s, const char *sql, const char *fmt, ...) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) return -1;
    va_list ap;
    va_start(ap, fmt);
    for (int i = 0; fmt[i]; i++) {
        switch (fmt[i]) {
        case 't': sqlite3_bind_text(st, i + 1, va_arg(ap, const char *), -1, SQLITE_TRANSIENT); break;
        case 'i': sqlite3_bind_int64(st, i + 1, va_arg(ap, int64_t)); break;
        case 'd': {
            double d = va_arg(ap, double);
            if (isnan(d)) sqlite3_bind_null(st, i + 1);
            else sqlite3_bind_double(st, i + 1, d);
            break;
        }
        default: sqlite3_bind_null(st, i + 1); break;
        }
    }
    va_end(ap);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : -1;
}

int64_t store_env_id(store *s, const env_info *e) {
    char fp[65];
    env_fingerprint(e, fp);
    /* the CPU's identity (schema v12): NULL where unknown (no number or word stands for "we could not
     * tell"; an environment recorded before v12 reads the same, and store_comparable says "unknown") */
    if (run_sql(s, "INSERT OR IGNORE INTO environments (fingerprint, cpu_model, isa_flags, logical_cores, physical_cores,"
                   " mem_bytes, kernel, compiler, governor, hypervisor, numa_nodes, hostname, cpu_vendor, cpu_family,"
                   " cpu_model_id, cpu_stepping, microcode)"
                   " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", "tttiiitttiit" "tdddt", fp, e->cpu_model, e->isa_flags,
                (int64_t)e->logical_cores, (int64_t)e->physical_cores, (int64_t)e->mem_bytes, e->kernel, e->compiler,
                e->governor, (int64_t)e->hypervisor, (int64_t)e->numa_nodes, e->hostname,
                strcmp(e->cpu_vendor, "unknown") ? e->cpu_vendor : NULL,
                e->cpu_family >= 0 ? (double)e->cpu_family : NAN, e->cpu_model_id >= 0 ? (double)e->cpu_model_id : NAN,
                e->cpu_stepping >= 0 ? (double)e->cpu_stepping : NAN,
                strcmp(e->microcode, "unknown") ? e->microcode : NULL))
        return -1;
    sqlite3_stmt *st;
    int64_t id = -1;
    if (sqlite3_prepare_v2(s->db, "SELECT id FROM environments WHERE fingerprint = ?", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, fp, -1, SQLITE_TRANSIENT);
        if (sqlite3_step(st) == SQLITE_ROW) id = row_int(st, "id");
    }
    sqlite3_finalize(st);
    return id;
}

int store_begin_run(store *s, const run_meta *m, const env_info *e, int64_t *run_id, char *err, size_t errlen) {
    char now[40];
    now_iso(now, sizeof now);
    if (exec(s, "BEGIN IMMEDIATE", "begin run", err, errlen)) return -1;
    int64_t env = store_env_id(s, e);
    if (env < 0 ||
        run_sql(s, "INSERT INTO runs (started_at, status, pid, git_commit, git_dirty, build_type, build_flags, workload,"
                   " workload_kind, workload_hash, mode, concurrency, model_path, model_sha256, model_type, model_name,"
                   " model_params, model_bytes, threads, reps, warmup, n_ctx, pinned, env_id, compare_key, cmdline,"
                   " test_prompt, test_gen, test_depth, counter_mode, ignore_eos, isa, hw_id, kv_config, workload_meta,"
                   " sched_config, rate, slo, sweep, endpoint, server, server_info, chat_format, allow_failures,"
                   " affinity, cpus_allowed, cgroup_cpus, thp, load_before, server_build, server_cache)"
                   " VALUES (?, 'incomplete', ?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,"
                   "?,?,?,?,?,?,?,?)",
                "titittttttittttiiiiiitittiiititdtttdtdtttt" "dtddtttt", now, (int64_t)getpid(), m->git_commit, (int64_t)m->git_dirty,
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
                m->server_cache[0] ? m->server_cache : NULL)) {
        db_fail(s, "record run", err, errlen);
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    *run_id = sqlite3_last_insert_rowid(s->db);
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
        if (run_sql(s, "INSERT INTO summary VALUES (?,?,?,?,?,?,?,?)", "itiddddd", id, name, (int64_t)m, su.median,
                    su.min, su.max, su.mean, m > 1 ? su.stddev : 0.0)) {
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
        if (run_sql(s, "INSERT OR IGNORE INTO canaries VALUES (?,?,?,?,?)", "ittii", id, q->item, q->token_hash,
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
        rc = run_sql(s, "INSERT INTO adapter_stats VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", "iiidddddddid", id, (int64_t)a,
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
    if (exec(s, "BEGIN IMMEDIATE", "begin results", err, errlen)) return -1;
    const char *what = "write metrics";
    int rc = 0;
    for (int r = 0; r < n_reps && !rc; r++) {
        const rep_result *rp = &reps[r];
        for (int k = 0; k < rp->n_m && !rc; k++)
            rc = run_sql(s, "INSERT INTO rep_metrics VALUES (?,?,?,?)", "iitd", id, (int64_t)r, rp->m[k].name,
                         rp->m[k].value);
        what = "write requests";
        for (int i = 0; i < rp->n_req && !rc; i++) {
            const req_result *q = &rp->req[i];
            char *itl = itl_json(q);
            rc = !itl || run_sql(s, "INSERT INTO requests (run_id, rep, idx, item, adapter, arrival_ms, queue_ms,"
                                    " prefill_ms, ttft_ms, decode_ms, e2e_ms, tpot_ms, prompt_tokens, gen_tokens, itl_ms,"
                                    " token_hash, error, state, priority, preempted, cached_tokens, stream_chunks,"
                                    " max_tokens)"
                                    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                                 "iiitiddddddd" "iittt" "tiii" "dd", id, (int64_t)r, (int64_t)q->idx, q->item,
                                 (int64_t)q->adapter, q->arrival_ms, q->queue_ms, q->prefill_ms, q->ttft_ms, q->decode_ms,
                                 q->e2e_ms, q->tpot_ms, (int64_t)q->prompt_tokens, (int64_t)q->gen_tokens, itl,
                                 q->token_hash, q->error[0] ? q->error : NULL, q->state[0] ? q->state : NULL,
                                 (int64_t)q->priority, (int64_t)q->preempted, (int64_t)q->cached_tokens,
                                 rp->http ? (double)q->stream_chunks : NAN,
                                 q->max_tokens > 0 ? (double)q->max_tokens : NAN);
            free(itl);
        }
        what = "write server metrics";
        for (int k = 0; k < rp->n_srv && !rc; k++)
            rc = run_sql(s, "INSERT INTO server_metrics VALUES (?,?,?,?,?,?)", "iitddd", id, (int64_t)r, rp->srv[k].name,
                         rp->srv[k].before, rp->srv[k].after, rp->srv[k].delta);
        what = "write counters";
        for (int c = 0; c < rp->n_ctr && !rc; c++) {
            const counter_row *k = &rp->ctr[c];
            rc = run_sql(s, "INSERT INTO counters VALUES (?,?,?,?,?,?,?,?)", "iittdttt", id, (int64_t)r, k->phase,
                         k->name, k->ok ? k->value : NAN, k->unit, k->ok ? "ok" : "missing", k->ok ? NULL : k->reason);
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
    now_iso(now, sizeof now);
    if (!rc)
        what = "complete run",
        rc = run_sql(s, "UPDATE runs SET status = 'complete', finished_at = ?, validity = ?, validity_reasons = ?,"
                        " load_after = ? WHERE id = ?", "tttti", now, v->valid ? "valid" : "invalid",
                     v->valid ? (v->note[0] ? v->note : NULL) : v->reasons, load_after && *load_after ? load_after : NULL, id);
    if (rc) {
        db_fail(s, what, err, errlen);
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    return exec(s, "COMMIT", "commit results", err, errlen);
}

int store_fail_run(store *s, int64_t id, const char *reason) {
    char now[40];
    now_iso(now, sizeof now);
    return run_sql(s, "UPDATE runs SET status = 'failed', error = ?, finished_at = ? WHERE id = ?", "tti", reason, now, id);
}

int store_cached_hash(store *s, const char *path, int64_t size, int64_t mtime, char out[65]) {
    sqlite3_stmt *st;
    int found = 0;
    if (sqlite3_prepare_v2(s->db, "SELECT sha256 FROM model_hashes WHERE path = ? AND size = ? AND mtime_ns = ?", -1, &st,
                           NULL) != SQLITE_OK)
        return 0;
    sqlite3_bind_text(st, 1, path, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 2, size);
    sqlite3_bind_int64(st, 3, mtime);
    if (sqlite3_step(st) == SQLITE_ROW) {
        snprintf(out, 65, "%s", row_text(st, "sha256"));
        found = 1;
    }
    sqlite3_finalize(st);
    return found;
}

void store_cache_hash(store *s, const char *path, int64_t size, int64_t mtime, const char *hex) {
    run_sql(s, "INSERT OR REPLACE INTO model_hashes VALUES (?,?,?,?)", "tiit", path, size, mtime, hex);
}

/* See store.h. */
int store_run_set_sweep(store *s, int64_t id, int64_t sweep) {
    return run_sql(s, "UPDATE runs SET sweep = ? WHERE id = ?", "ii", sweep, id);
}

/* See store.h. INSERT OR REPLACE: a tag names one run, the newest given. */
int store_tag_run(store *s, int64_t id, const char *name) {
    sqlite3_stmt *st;
    int rc = -1;
    char now[32];
    time_t t = time(NULL);
    strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
    if (sqlite3_prepare_v2(s->db, "INSERT OR REPLACE INTO tags (name, run_id, created_at) SELECT ?, id, ? FROM runs"
                                        " WHERE id = ? AND " STORE_MEASUREMENT("runs"), -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 2, now, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(st, 3, id);
        if (sqlite3_step(st) == SQLITE_DONE && sqlite3_changes(s->db) == 1) rc = 0;
        sqlite3_finalize(st);
    }
    return rc;
}

/* See store.h. One transaction: the tag leaves every other run of the same
 * configuration (compare_key) and workload, then names `id`. */
int store_move_tag(store *s, int64_t id, const char *name, int64_t *previous) {
    char err[256];
    sqlite3_stmt *st;
    *previous = 0;
    if (exec(s, "BEGIN IMMEDIATE", "begin tag", err, sizeof err)) return -1;
    if (sqlite3_prepare_v2(s->db, "SELECT max(t.run_id) AS prev FROM tags t JOIN runs r ON r.id = t.run_id"
                                  " JOIN runs me ON me.id = ?2 WHERE t.name = ?1 AND t.run_id != ?2"
                                  " AND r.compare_key IS me.compare_key AND r.workload = me.workload", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(st, 2, id);
        if (sqlite3_step(st) == SQLITE_ROW) *previous = row_int(st, "prev");
    }
    sqlite3_finalize(st);
    int rc = run_sql(s, "DELETE FROM tags WHERE name = ?1 AND run_id != ?2 AND run_id IN (SELECT r.id FROM runs r"
                        " JOIN runs me ON me.id = ?2 WHERE r.compare_key IS me.compare_key AND r.workload = me.workload)",
                     "ti", name, id);
    if (!rc) rc = store_tag_run(s, id, name);
    if (rc) {
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    return exec(s, "COMMIT", "commit tag", err, sizeof err);
}

/* See store.h. */
char *store_run_workload_meta(store *s, int64_t id) {
    sqlite3_stmt *st;
    char *meta = NULL;
    if (sqlite3_prepare_v2(s->db, "SELECT workload_meta FROM runs WHERE id = ?", -1, &st, NULL) != SQLITE_OK) return NULL;
    sqlite3_bind_int64(st, 1, id);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) {
        const char *t = (const char *)sqlite3_column_text(st, 0);
        size_t n = t ? strlen(t) : 0;
        meta = t ? malloc(n + 1) : NULL;
        if (meta) memcpy(meta, t, n + 1);
    }
    sqlite3_finalize(st);
    return meta;
}
