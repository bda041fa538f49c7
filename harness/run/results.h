/*
 * results.h - what one benchmark run measures, in memory, before the store
 * writes it. The runner fills these; store.c persists them; report code reads
 * them back. Definitions of every metric: docs/metrics.md.
 */
#ifndef CB_RESULTS_H
#define CB_RESULTS_H

#include <stddef.h>
#include <stdint.h>

#define CB_MAX_METRICS 128
#define CB_MAX_COUNTER_ROWS 64

/* One request (a prompt of the standard set, a trace entry, or one synthetic test). */
typedef struct req_result {
    int idx;
    char item[64];          /* prompt id, trace id, or test name ("pp512") */
    int adapter;            /* trace adapter id; -1 when none */
    double arrival_ms;      /* when it was issued, from the start of the repetition */
    double queue_ms;        /* issued -> service start */
    double prefill_ms;      /* prompt evaluation */
    double ttft_ms;         /* issued -> first generated token */
    double decode_ms;       /* first -> last generated token */
    double e2e_ms;          /* issued -> last token */
    double tpot_ms;         /* decode_ms / (gen_tokens - 1) */
    int prompt_tokens, gen_tokens;
    float *itl_ms;          /* gaps between consecutive generated tokens: gen_tokens - 1 */
    int n_itl;
    double kv_attended;     /* sum over the timed decode steps of the KV positions each attended */
    double expert_bytes;    /* synthetic tests: expert weight bytes the timed prompt pass read (0: none, dense) */
    char token_hash[17];    /* FNV-1a 64 of the generated ids: the correctness canary */
    char error[200];        /* non-empty: the request failed (e.g. prompt longer than context) */
    char state[12];         /* how it ended (validity.h): "stop", "length", "failed", "rejected", "timeout",
                             * "cancelled"; schema v12 (older rows say "finished" for both stop and length) */
    int max_tokens;         /* the tokens it asked for (a truncated request generated fewer); schema v12 */
    int priority;           /* its scheduling class (trace "priority") */
    int preempted;          /* times the scheduler dropped and recomputed its blocks */
    int cached_tokens;      /* prompt tokens served from the prefix cache (over HTTP: the server's own cache,
                             * from usage.prompt_tokens_details.cached_tokens or timings.cache_n) */
    int stream_chunks;      /* over HTTP (--endpoint): streamed chunks that carried text, each one token for
                             * the ITL; gen_tokens is then the server's usage count (chunks without one) */
    /* Speculative decoding (schema v14; docs/metrics.md): in-process with --spec, or over HTTP when the
     * server's "timings" carried draft_n and draft_n_accepted. spec 0: none of it known (stored NULL). */
    int spec;
    int spec_passes;        /* target passes of its decode (cx_spec_step calls); -1: not reported (HTTP) */
    int spec_verified;      /* of them, those that checked a draft; -1: not reported */
    int draft_tokens;       /* draft tokens checked */
    int accepted_tokens;    /* ... and accepted */
    double draft_ms, verify_ms; /* time drafting, time in the target's passes; NAN: not reported */
} req_result;

typedef struct metric {
    char name[40];
    double value;
} metric;

/* A counter over one phase ("prefill", "decode", "total"): a value, or missing with a reason. */
typedef struct counter_row {
    char phase[12];
    char name[24];
    char unit[8];
    int ok;
    double value;
    char reason[160];
} counter_row;

typedef struct prom_delta prom_delta; /* prom.h */

typedef struct rep_result {
    req_result *req;
    int n_req;
    metric m[CB_MAX_METRICS];
    int n_m;
    counter_row ctr[CB_MAX_COUNTER_ROWS];
    int n_ctr;
    int http;               /* measured over HTTP (--endpoint): stream_chunks and srv apply */
    prom_delta *srv;        /* over HTTP: the server's /metrics series that changed during the repetition */
    int n_srv;
    char server_build[128]; /* over HTTP: the system_fingerprints its answers carried, distinct, ", "-separated
                             * (rep_add_build); "" none. store_finish_run makes them runs.server_build */
} rep_result;

/* Everything that identifies a run and decides what it may be compared with. */
typedef struct run_meta {
    char workload[256];     /* "standard", "pp512", "trace:prompts/traces/x.jsonl" */
    char workload_kind[16]; /* "prompts", "trace", "synthetic" */
    char workload_hash[65];
    char mode[16];          /* "closed", "open", "synthetic" */
    int concurrency;
    char model_path[512];
    char model_sha256[65];
    char model_type[16];
    char model_name[128];
    uint64_t model_params, model_bytes;
    int threads, reps, warmup, n_ctx;
    int test_prompt, test_gen, test_depth; /* synthetic tests: pp/tg/pg sizes and KV depth */
    int ignore_eos;         /* 1: generation ran to max_tokens whatever the model said */
    char pinned[64];        /* --pin: the CPU list the process was confined to, or the engine's pin policy
                             * ("compact", "spread"); "" when neither */
    char numa[64];          /* the NUMA policy and what it met ("interleave nodes=0-1", "default (one NUMA
                             * node)", "interleave (one NUMA node: no effect)", "interleave nodes=0-1
                             * (mapped: not placed)": the weights were mapped from the file); "" over HTTP */
    char testbed[96];       /* the machine class baselines are kept for (--testbed; else env_testbed) */
    char git_commit[48];
    int git_dirty;
    char build_type[16];
    char build_flags[256];
    char counter_mode[32];
    char isa[32];           /* the engine's kernel instruction set (cx_isa): "scalar", "avx2", "avx512",
                             * "avx512vnni"; "+hp" when the weights sit in huge pages, "+hpx8" or
                             * "+hpx16" when also repacked (cx_model_info.weights_memory) */
    int64_t hw_id;          /* the hw row the roofline figures came from; 0 = none */
    char cmdline[1024];
    char kv_config[256];    /* the KV cache configuration (kv_opts_config), schema v6 */
    const char *workload_meta; /* the workload's sidecar JSON (wl_workload.meta, borrowed), NULL when
                                * none; schema v7. Not in compare_key: workload_hash covers the requests */
    char sched_config[384]; /* served workloads: the scheduler ("seqs=8,batch=256,queue=1024"), schema v8 */
    double rate;            /* open loop at this Poisson rate (requests/s); 0: the trace's times or closed loop */
    char slo[96];           /* goodput's SLOs ("ttft=500,tpot=50"); "" when none */
    int64_t sweep;          /* a rate sweep's runs share the id of its saturation run; 0: none */
    char endpoint[512];     /* --endpoint: the server's base URL ("http://host:port/v1"); "" in-process. Schema v9 */
    char server[256];       /* its identity: the Server header and the models it lists; decides comparability */
    const char *server_info; /* the /v1/models answer and Server header as JSON (borrowed), NULL in-process */
    char chat_format[16];   /* "harmony": prompts submitted as harmony user turns (the challenge on gpt-oss); "" plain. Schema v11 */
    double allow_failures;  /* --allow-failures: the share of failed or truncated requests tolerated (0: none); v12 */
    char server_cache[8];   /* over HTTP: "off" (asked not to reuse cached prompts, the default) or "on"; "" in-process */
    char server_build[128]; /* over HTTP: the server's build (system_fingerprint of its answers); "" unknown */
    /* The machine as the run saw it (env_run_state, schema v12): */
    char affinity[256];     /* the CPUs the process may use, as a list ("0-1") */
    int cpus_allowed;       /* how many */
    double cgroup_cpus;     /* the cgroup's CPU quota in CPUs (cpu.max); 0: none */
    char thp[16];           /* transparent huge pages: "always", "madvise", "never", or "unknown" */
    char load_before[48], load_after[48]; /* /proc/loadavg's three averages at the start and the end */
    /* Speculative decoding (--spec, schema v14); "" and 0 without it (and over HTTP, where it is the server's): */
    char spec_config[160];  /* what decides the numbers ("ngram,max=8,min=0,adaptive"; run_cmd.c spec_config) */
    char spec_drafter[160]; /* the drafter as the engine describes it (cx_drafter_describe) */
    double spec_setup_ms;   /* making the drafter (a self-draft quantizes the model), before any request */
    char compare_key[65];   /* sha256 of everything that must match for a comparison */
} run_meta;

/* Set a named metric in a repetition (replacing an existing one). */
void rep_set_metric(rep_result *r, const char *name, double value);
/* Value of a named metric, or NAN. */
double rep_get_metric(const rep_result *r, const char *name);
/* Add `build` to the ", "-separated list of distinct builds in list[cap]
 * unless it is there already; a build that does not fit whole is left out
 * and the list ends in ", ..." so that it says there were more. */
void rep_add_build(char *list, size_t cap, const char *build);
/* Free the per-request arrays of a repetition. */
void rep_free(rep_result *r);

#endif
