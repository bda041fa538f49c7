/*
 * runner.h - replay a workload against the engine and time every token.
 *
 * The runner is also the scheduler. Prompt sets and traces are served one
 * request at a time (the engine can batch decode steps, cx_batch_eval, but no
 * scheduler admits requests into a running batch yet): requests queue FCFS
 * and their queueing delay shows up in TTFT, as a user would see it.
 *   - closed loop: `concurrency` clients; each issues its next request when its
 *     previous one completes (standard prompts: concurrency 1);
 *   - open loop: requests are issued at their trace arrival times whatever the
 *     engine's pace (real time: the runner sleeps while idle);
 *   - synthetic: llama-bench style pp N / tg N / pg N,M at KV depth D, or
 *     multiseq:N,C,G: N sessions on one KV cache, each prefilled with C
 *     tokens, then G greedy tokens decoded for each in turn (round-robin), so
 *     N long contexts are alive at once (the tiered cache's long-context
 *     test); batched:N,C,G the same with each decode round one batched pass
 *     over the N sequences (cx_batch_eval: continuous batching's decode).
 */
#ifndef CB_RUNNER_H
#define CB_RUNNER_H

#include "cortex.h"
#include "counters.h"
#include "results.h"
#include "workload.h"

enum { RUN_CLOSED, RUN_OPEN, RUN_SYNTHETIC };

typedef struct run_config {
    int mode;
    int concurrency;     /* closed loop */
    int threads, n_ctx;
    int ignore_eos;      /* generate exactly max_tokens (fixed work per request) */
    int test_prompt, test_gen, test_depth; /* synthetic */
    int progress;        /* draw a progress bar on stderr */
    const char *label;   /* progress bar prefix */
    const cx_kv_params *kv; /* the repetition's shared KV cache; NULL: cx_kv_defaults() */
    int n_seq;           /* synthetic multiseq:N,C,G: N sequences alive at once (0: a pp/tg/pg test) */
    int batched;         /* batched:N,C,G: decode rounds are one cx_batch_eval pass */
} run_config;

/* Parse "pp512", "tg128", "pg512,128" into sizes; 0 on success. */
int runner_parse_test(const char *name, int *n_prompt, int *n_gen);
/* Parse "multiseq:N,C,G" (N sequences on one KV cache, each prefilled with C
 * tokens, then G tokens decoded round-robin; *batched = 0) or "batched:N,C,G"
 * (decode rounds batched; *batched = 1); 0 on success. */
int runner_parse_multiseq(const char *name, int *n_seq, int *n_ctx, int *n_gen, int *batched);

/*
 * Run one repetition: a fresh KV cache (cfg->kv) shared by the repetition's
 * requests, so they reuse each other's cached prefixes when the prefix cache
 * is on, a session attached to it, every request of `wl` (or the one
 * synthetic test), metrics into `out`. Counters (may be NULL) are read at
 * phase boundaries. Per-request failures (a prompt longer than the context)
 * are recorded in the request, not returned; only engine errors fail the run.
 * The cache's counters become kv_* metrics (kv_metrics.h).
 */
int runner_rep(const cx_model *m, const wl_workload *wl, const run_config *cfg, ctr_set *ctr, int rep, int reps,
               rep_result *out, char *err, size_t errlen);

#endif
