/*
 * run_cmd.h - `cortex-bench run`: options, and executing a run so that other
 * commands (gate, calibrate) can run workloads the same way.
 */
#ifndef CB_RUN_CMD_H
#define CB_RUN_CMD_H

#include <stdint.h>

#include "cortex.h"
#include "results.h"

#define RUN_MAX_THREADS 32
#define RUN_MAX_RATES 16
#define RUN_MAX_RUNS 128   /* thread counts x rates (a sweep: its saturation run and 6 rates) */

typedef struct run_opts {
    const char *model, *tokenizer, *workload, *db, *fmt, *pin, *threads;
    const char *testbed; /* --testbed (else $CORTEX_TESTBED, else env_testbed) */
    const char *step_summary; /* --step-summary FILE (summary.h); NULL: $GITHUB_STEP_SUMMARY when set */
    long reps, warmup, depth, concurrency, ctx;
    int mode, respect_eos, no_progress;
    double allow_failures; /* --allow-failures SHARE: failed or truncated requests tolerated (validity.h) */
    long max_seqs, max_batch_tokens, max_queue; /* the scheduler (--max-seqs ...) */
    int sched_given;  /* one of them was given: refused for synthetic tests (run_opts_check) */
    int kv_given;     /* a --kv-* flag or --prefix-cache was given: refused with --endpoint (run_opts_check) */
    const char *endpoint, *api_key, *adapter_names; /* --endpoint URL (then --model names the served model),
                                                       --api-key K, --adapter-names N1,N2,...: endpoint.h */
    int server_cache;         /* --server-cache off|on: 1 lets the server use its prompt cache */
    int server_cache_given;
    const char *rate; /* --rate R[,R...]|sweep, NULL: none */
    const char *slo;  /* --slo ttft=MS,tpot=MS[,e2e=MS], NULL: none */
    const char *adapters;  /* --adapters DIR|synth:K,RANK, NULL: trace adapter ids are labels only */
    int64_t lora_budget;   /* --lora-budget BYTES (0: unlimited; run_opts_check makes "unlimited" 0) */
    int lora_split;        /* --lora-batching split: one adapter per step (llama.cpp's way) */
    int lora_type;         /* --lora-type: adapters' in-memory type (-1: auto) */
    int lora_type_given;
    int pin_policy;         /* --pin POLICY: CX_PIN_* (CX_PIN_NONE also without --pin, or with a CPU list) */
    const char *pin_cpus;   /* --pin CPULIST: the process is confined to it (env_pin_cpus); NULL otherwise */
    int numa;               /* --numa: CX_NUMA_* */
    int numa_given;
    cx_kv_params kv;  /* --kv-* and --prefix-cache (kv_opts.h) */
    cx_spec_params spec; /* --spec (kind: CX_SPEC_NONE without it), --draft, --draft-max, --draft-min (spec_run.h) */
    int spec_fixed;      /* --draft-fixed: every draft --draft-max long (spec.adapt 0) */
    long spec_max_batch; /* --spec-max-batch: the scheduler speculates while at most this many sequences decode */
    int argc;       /* the whole command line, recorded with the run */
    char **argv;
} run_opts;


/* Defaults: standard workload, 3 repetitions after 1 warm-up, reports/cortex.db,
 * the engine's own scheduler (cx_sched_defaults) and KV cache (cx_kv_defaults).
 * `run --help` shows these values. (void *: the command table's init.) */
void run_opts_init(void *o);
/* After the flags were parsed into o (f: which were given): the *_given
 * fields set, and the checks across flags (--model or --endpoint, the flags
 * only HTTP runs take, -o, --max-batch-tokens against --max-seqs). 0, or 2
 * after printing the problem. */
struct cx_flags;
int run_opts_check(run_opts *o, const struct cx_flags *f);
/* Run: one stored run per thread count (and per --rate), ids into `ids` (RUN_MAX_RUNS
 * entries). CB_EXIT_OK, CB_EXIT_FAILED, CB_EXIT_USAGE or CB_EXIT_INVALID (a run is
 * INVALID: stored so, the others still run), after printing why. */
int run_execute(const run_opts *o, int64_t *ids, int *n_ids);
/* One run of workload `wl` through run_execute, as the gate and calibrate
 * run their workloads (no progress line, one thread count); `argc`/`argv` is
 * the command line recorded with it. The run id (which may be an INVALID
 * run: the caller checks), or -1 after printing why. */
int64_t run_once(const char *model, const char *wl, const char *db, const char *threads, int reps, int warmup, int argc,
                 char **argv);
/* run_endpoint.c: the --endpoint half of run_execute's checks: the flags
 * that apply in-process only refused, the URL, the adapter names against
 * the workload `wl` (NULL: a synthetic test, refused), the server probed
 * (ep_probe); the server's fields of *meta. 0, or the exit code after the
 * message (2: bad input, 1: the server cannot be measured). */
struct ep_target;
struct wl_workload;
int run_endpoint_open(const run_opts *o, const struct wl_workload *wl, struct ep_target *t, run_meta *meta);
/* The `run` subcommand (opts: a run_opts, its flags parsed): check,
 * execute, then print the results table. */
struct cli_args;
int cmd_run(void *opts, const struct cli_args *a);

#endif
