/*
 * runner.h - replay a workload against the engine and time every token.
 *
 *   - prompt sets and traces go through the engine's request scheduler
 *     (serve.c, cx_sched): up to max_seqs sequences decoded together, each
 *     step one batched pass, as a server would serve them; or, with
 *     cfg->endpoint, to another server over HTTP (endpoint.h), issued the
 *     same way;
 *       closed loop: `concurrency` clients, each issuing its next request
 *       when its previous one ended (standard prompts: concurrency 1);
 *       open loop: requests issued at their trace arrival times, or at
 *       Poisson arrivals of `rate` per second, whatever the engine's pace
 *       (real time: the runner sleeps while idle);
 *   - synthetic: llama-bench style pp N / tg N / pg N,M at KV depth D, or
 *     multiseq:N,C,G: N sessions on one KV cache, each prefilled with C
 *     tokens, then G greedy tokens decoded for each in turn (round-robin), so
 *     N long contexts are alive at once (the tiered cache's long-context
 *     test); batched:N,C,G the same with each decode round one batched pass
 *     over the N sequences (cx_batch_eval: continuous batching's decode);
 *   - with a drafter (run --spec): decoding by speculation: prompt sets and
 *     traces through the scheduler, which speculates inside continuous
 *     batching (serve.c); tgN and pgN,M after their prompt, by cx_spec_step
 *     on their one session (spec_run.h).
 */
#ifndef CB_RUNNER_H
#define CB_RUNNER_H

#include "cortex.h"
#include "counters.h"
#include "kv_metrics.h"
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
    int max_seqs, max_batch_tokens, max_queue; /* the scheduler (prompt sets and traces) */
    double rate;         /* > 0: open loop at Poisson arrivals of this many requests/s */
    double slo_ttft_ms, slo_tpot_ms, slo_e2e_ms; /* goodput's SLOs; 0: not set */
    const struct adapter_set *adapters; /* LoRA adapters for trace ids 1..n (adapters.h), or NULL */
    int64_t lora_budget; /* bytes of resident adapters, 0: unlimited */
    int lora_split;      /* one adapter per scheduler step */
    int lora_type;       /* adapters' in-memory type (cx_lora_params.type; -1: auto) */
    int rep_index, reps_total; /* the repetition being run (progress bar) */
    const struct ep_target *endpoint; /* --endpoint: replay over HTTP (endpoint.h); NULL: in-process */
    int harmony;         /* served prompts go in as harmony user turns (serve.c; the challenge on gpt-oss) */
    cx_drafter *drafter; /* --spec: the run's drafter (one cx_spec per sequence is made from it); NULL: none */
    int spec_max_batch;  /* --spec-max-batch: the scheduler speculates while at most this many sequences
                          * decode (0: the engine's default, CX_SCHED_SPEC_MAX_BATCH) */
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
int runner_rep(const cx_model *m, const wl_workload *wl, const run_config *cfg, ctr_set *ctr, rep_result *out,
               char *err, size_t errlen);

/* serve.c: a prompt set or trace through a scheduler made for the repetition
 * (returned in *sched for its cache's counters, *cache; the caller frees it);
 * fills out->req and the scheduler's metrics, the KV byte peaks into *peak. */
int serve_rep(const cx_model *m, const wl_workload *wl, const run_config *cfg, rep_result *out, double *makespan_ms,
              kv_peak *peak, cx_kv_cache **cache, cx_sched **sched, char *err, size_t errlen);

/* serve.c: request w's prompt as the model's token ids (BOS first; with
 * `harmony` as one harmony user turn), malloc'd into *ids, *n of them (free
 * *ids either way). 0, or -1 with err ("request ID: ..."). */
int serve_prompt_ids(const cx_model *m, const wl_request *w, int harmony, int32_t **ids, int *n, char *err,
                     size_t errlen);

/* The open loop's issue times, in ms after the start, one per request of
 * wl (malloc'd; NULL on no memory): Poisson arrivals at `rate` requests/s
 * when rate > 0 (the same for every repetition and every run: a fixed
 * seed), else the trace's arrival times. serve.c and endpoint_rep.c both
 * issue by them. */
double *runner_arrivals(const wl_workload *wl, double rate);
/* The context each sequence really gets: `asked` (<= 0: CX_DEFAULT_CTX),
 * capped at the model's, as the engine caps a session's. */
int runner_n_ctx(const cx_model *m, int asked);
/* Milliseconds on the monotonic clock (CLOCK_MONOTONIC: the scheduler's ns timestamps / 1e6). */
double runner_now_ms(void);
/* The correctness canary of a token sequence: FNV-1a 64 of the ids, 16 hex digits. */
void runner_token_hash(const int32_t *tokens, int n, char out[17]);
/* Redraw the progress line: request `done` of n, in repetition cfg->rep_index of cfg->reps_total. */
void runner_progress(const run_config *cfg, int done, int n);

#endif
