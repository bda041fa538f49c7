/*
 * spec_run.h - speculative decoding in `cortex-bench run --spec` (docs/metrics.md,
 * "Speculative decoding"; the engine's side: cortex.h, cx_spec_step).
 *
 * A speculating sequence decodes greedily with cx_spec_step instead of one
 * cx_eval per token: each step drafts, checks the draft in one pass of the
 * model and keeps 1..draft+1 tokens. Timestamps stay per chosen token: the
 * tokens of one step share the step's end time, so their gaps after the
 * step's first token are 0 (ITL percentiles of a speculating run have many
 * zero gaps; TPOT and decode TPS are unaffected). Greedy output is the
 * model's, token for token, so the correctness canary (token_hash) of a
 * speculating run equals a plain run's: that comparison is the end-to-end
 * exactness check.
 *
 * The engine's request scheduler does not speculate, so with --spec a prompt
 * set or a trace is served one request at a time on one session (one
 * sequence: closed loop with one client, or open loop where a request waits
 * for the one before), and synthetic tgN and pgN,M decode with it after
 * their prompt.
 */
#ifndef CB_SPEC_RUN_H
#define CB_SPEC_RUN_H

#include "cortex.h"
#include "counters.h"
#include "kv_metrics.h"
#include "results.h"
#include "runner.h"
#include "workload.h"

/* One speculating sequence and what its decode is read with. */
typedef struct spec_seq {
    const cx_model *m;
    cx_session *s;       /* the sequence's session */
    cx_sampler *greedy;  /* temperature 0: the choice cx_spec_step checks drafts against */
    cx_spec *sp;         /* from the run's drafter; one for the repetition, reset per request (the statistics
                          * and the adaptive draft length carry over, as at a server's slot) */
    ctr_set *ctr;        /* counters read around each decode (NULL: none) */
    ctr_phase *decode;   /* ... accumulated here */
    int32_t *hist;       /* the sequence: what the session holds, then the tokens chosen */
    int hist_cap;
} spec_seq;

/* Room for n tokens of history in q->hist. 0, or -1 (out of memory). */
int spec_hist_reserve(spec_seq *q, int n);

/*
 * Decode after a prompt: q->s holds q->hist[0..n_hist) and l is its last
 * logits. The first token is sampled from l (the TTFT), then cx_spec_step
 * chooses the rest until max_gen tokens or, with `stop`, an end-of-generation
 * token (included, as the scheduler counts it). Fills r's timings from
 * issue_ms (ttft, decode, e2e, tpot, itl), gen_tokens, token_hash,
 * kv_attended and its speculation fields (the spec's statistics over this
 * decode). 0, or -1 with err (an engine error).
 */
int spec_decode(spec_seq *q, int n_hist, const float *l, int max_gen, int stop, req_result *r, double issue_ms,
                char *err, size_t errlen);

/*
 * A prompt set or trace served one request at a time on q->s (its cache
 * `cache`, peaks sampled into *peak after each request): closed loop (one
 * client: the next request is issued when one ends) or open loop (cfg->mode
 * RUN_OPEN or cfg->rate: each request issued at its arrival, waiting for the
 * one before). Prompts are tokenized before the clock starts; the prompt's
 * pass is counted into *prefill. Fills out->req; *makespan_ms from the start
 * to the last token. 0, or -1 with err (an engine error; a prompt that does
 * not fit is the request's error, not the run's).
 */
int spec_serve(spec_seq *q, const wl_workload *wl, const run_config *cfg, ctr_phase *prefill, rep_result *out,
               double *makespan_ms, kv_peak *peak, cx_kv_cache *cache, char *err, size_t errlen);

/* The repetition's speculation metrics (spec_*) from its requests' fields;
 * nothing when no request has any (docs/metrics.md). */
void spec_metrics(rep_result *out);

#endif
