/*
 * store_read.h - typed readers of stored runs, for reports, the dashboard,
 * `show` and the gate: a run's identity, its items (requests grouped by
 * position), counters, latency samples, request timings, per-adapter
 * statistics and metric values; and the one resolver of a run reference
 * that every command taking RUN uses. Readers return 1/0 (found/missing) or
 * 0 on success, and -1 on a database error (store_errmsg says which).
 */
#ifndef CB_STORE_READ_H
#define CB_STORE_READ_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

/* A run: its runs row and its environment (environments row). */
typedef struct store_run {
    int64_t id, env_id, hw_id, model_params, model_bytes, mem_bytes;
    char status[16], workload[256], kind[24], mode[16], commit[48], key[80], started[40], model[160], type[16];
    char finished[40], error[512], workload_hash[72], model_path[512], model_sha256[72], pinned[128], build_type[32];
    char build_flags[512], counter_mode[32], cmdline[1024], isa[32], kv_config[512];
    char cpu_model[128], isa_flags[512], kernel[128], compiler[128], governor[32], fingerprint[72];
    char uuid[40], testbed[96], numa[64]; /* schema v13: the run's name in every store, its machine class, NUMA policy */
    char sched_config[96], slo[96]; /* served runs (schema v8); "" otherwise */
    char endpoint[512], server[256]; /* runs over HTTP (schema v9): the base URL and the server's identity; "" in-process */
    char chat_format[16];   /* schema v11: "harmony" when prompts went in as harmony user turns; "" plain */
    /* schema v12: "valid" or "invalid" ("" for a run that never completed), and why (validity.h: INVALID's
     * reasons, or what a VALID run's --allow-failures tolerated); the machine as the run saw it; over HTTP
     * the server's build and whether its prompt cache was allowed ("off", "on") */
    char validity[16], validity_reasons[1024];
    double allow_failures, cgroup_cpus;
    char affinity[256], thp[16], load_before[48], load_after[48], server_build[128], server_cache[8];
    int cpus_allowed, ignore_eos;
    char cpu_vendor[32], microcode[32];
    int cpu_family, cpu_model_id, cpu_stepping; /* -1: not recorded */
    int dirty, reps, threads, warmup, n_ctx, concurrency, logical_cores;
    double rate;    /* open loop at this Poisson rate; 0: none */
    int64_t sweep;  /* the rate sweep's saturation run; 0: not in a sweep */
    int measurement; /* STORE_MEASUREMENT (store.h): complete and VALID; the only runs shown with figures */
    /* schema v14, --spec: the speculation as configured ("" none), the drafter made, making it (NAN: none) */
    char spec_config[160], spec_drafter[160];
    double spec_setup_ms;
} store_run;

/* One run of a rate sweep: the offered rate (0: the closed-loop saturation
 * run) and what it achieved (medians over repetitions; NAN when missing). */
typedef struct store_sweep_point {
    int64_t id;
    double rate, request_rps, output_tps, ttft_p50, ttft_p99, tpot_p50, goodput_rps;
} store_sweep_point;

/* One row of `list`: a run with its headline throughput. */
typedef struct store_list_row {
    int64_t id;
    char started[40], status[16], workload[256], model[160], type[16], commit[16];
    int threads, reps, dirty;
    int http;             /* measured over HTTP: the threads are the server's */
    char validity[16];    /* "valid", "invalid", "" (incomplete, failed, or before schema v12) */
    double tps; /* median tps (synthetic tests) or output_tps, NAN when none */
} store_list_row;

/* A summary row: one metric over a run's repetitions. */
typedef struct store_summary_row {
    char name[40];
    double med, min, max, sd;
    int cnt;
} store_summary_row;

/* One item (prompt, trace request, synthetic test): means over repetitions. */
typedef struct store_item {
    char item[64];
    int adapter, prompt_tokens, n, n_err, stable;   /* stable: 1, 0, -1 unknown */
    double gen_tokens, queue, ttft, tpot, e2e, tps; /* NAN when no repetition served it */
    char error[200], hash[24];
    char outcome[48];   /* its repetitions' outcomes (validity.h), distinct ones joined by '/', e.g. "length" */
    int max_tokens;     /* asked for (0: not recorded) */
} store_item;

/* One counter over the phases prefill, decode, total (STORE_PHASES). */
typedef struct store_counter {
    char name[48], unit[16];
    int ok[3], seen[3];
    double v[3];
    char reason[3][200];
} store_counter;
extern const char *const STORE_PHASES[3];

/* One request of one repetition: latency-over-time charts, the challenge report's per-prompt medians. */
typedef struct store_request_time {
    double arrival_s, ttft_ms, e2e_ms;
    double queue_ms, decode_ms;  /* NAN when not recorded (queue_ms over HTTP) */
    int rep, idx, failed;        /* failed: an error, or no latency recorded */
    int prompt_tokens, gen_tokens;
    char item[64], token_hash[24], error[200];
    char state[12];              /* how it ended (validity.h); "finished" in rows before schema v12 */
    int max_tokens;              /* asked for; 0 in rows before schema v12 */
    int cached_tokens, http;     /* prompt tokens from a cache; 1: measured over HTTP */
    double tpot_ms;              /* NAN when not recorded (fewer than two tokens, a failure) */
    int adapter;                 /* the trace's adapter id; -1 for prompt sets and synthetic tests */
    /* speculative decoding (schema v14): -1 / NAN when not recorded (no speculation, or over HTTP) */
    int spec_passes, spec_verified, draft_tokens, accepted_tokens;
    double draft_ms, verify_ms;
} store_request_time;

/* Per-adapter latency of a trace run (adapter_stats row), NAN when absent. */
typedef struct store_adapter {
    int adapter, requests;
    double ttft_p50, ttft_p90, ttft_p99, itl_p50, itl_p90, itl_p99, e2e_p50;
    int64_t gen_tokens;     /* schema v10; -1 when the row predates it */
    double output_tps;      /* its generated tokens over the repetitions' makespans (NAN: unknown) */
} store_adapter;

/* One series of a server's /metrics over a run's repetitions (schema v9). */
typedef struct store_server_metric {
    char series[512];
    double delta_mean, after_last; /* the change during a repetition (mean over them); the value after the last */
    int reps;                      /* repetitions in which it changed */
} store_server_metric;

/* SQLite's last error message on this store. */
const char *store_errmsg(store *s);

/* Run `id`: 1 found, 0 missing, -1 error. */
int store_run_load(store *s, int64_t id, store_run *r);
/* Every run, by id (malloc'd; free() it). 0 or -1. */
int store_runs_all(store *s, store_run **out, int *n);
/* Every complete run of rate sweep `sweep` (malloc'd array), saturation run first; 0 or -1. */
int store_sweep_load(store *s, int64_t sweep, store_sweep_point **out, int *n);
/* The newest `limit` runs, newest first (malloc'd; free() it). 0 or -1. */
int store_list_runs(store *s, int limit, store_list_row **out, int *n);
/* A run's summary rows in stored order, at most `cap`: how many, or -1. */
int store_summary_load(store *s, int64_t run, store_summary_row *rows, int cap);
/* The items of run r (malloc'd array into *items, count *n; free() it). For
 * synthetic tests an item's tps is the test's mean `tps`. 0 or -1. */
int store_items_load(store *s, const store_run *r, store_item **items, int *n);
/* Counters per name and phase: the mean over repetitions when every
 * repetition counted it, else missing with a reason. 0 or -1. */
int store_counters_load(store *s, int64_t run, store_counter **out, int *n);
/* Latency samples of served requests, ascending: TTFT per request, or every
 * inter-token gap (`itl`). 0, or -1 (error, or out of memory: *v NULL). */
int store_latency_samples(store *s, int64_t run, int itl, double **v, size_t *n);
/* Every request of every repetition, in order. 0 or -1. */
int store_request_times(store *s, int64_t run, store_request_time **out, int *n);
/* The runs like `run` at other thread counts: the newest complete run per
 * thread count with the same workload bytes, model file, commit and build,
 * machine, kernels, KV and scheduler configuration, loop, context,
 * end-of-text handling and speculation (everything compare_key holds but
 * the threads).
 * `run` itself and at most cap - 1 others into ids, by thread count; how
 * many, or -1. */
int store_run_siblings(store *s, int64_t run, int64_t *ids, int cap);
/* Per-adapter statistics, by adapter. 0 or -1. */
int store_adapters_load(store *s, int64_t run, store_adapter **out, int *n);
/* The server metrics that changed during run `run`'s repetitions, by series
 * (malloc'd; free() it; none for in-process runs). 0 or -1. */
int store_server_metrics_load(store *s, int64_t run, store_server_metric **out, int *n);
/* The median over repetitions of metric `name` (summary), NAN when absent. */
double store_metric_median(store *s, int64_t run, const char *name);
/* Values of metric `name` per repetition (rep_metrics), at most cap; how many. */
size_t store_metric_values(store *s, int64_t run, const char *name, double *out, size_t cap);

/*
 * Resolve a run reference, the same forms for every command: a run id (when
 * that run exists), else a tag, else a git commit prefix of 4 or more
 * characters (complete runs built from it), never run `skip` (0: none) for a
 * tag or commit. Among several runs, those of run `like`'s configuration
 * (compare_key and workload) come first, then of its workload, then the
 * newest; like = 0: the newest. 0 with *id, or -1 with one line naming `ref`
 * in err.
 */
int store_resolve_run(store *s, const char *ref, int64_t like, int64_t skip, int64_t *id, char *err, size_t errlen);

#endif
