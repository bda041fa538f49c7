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
 * Synthetic tgN and pgN,M decode this way after their prompt, on their one
 * session. Prompt sets and traces are served by the engine's request
 * scheduler, which speculates inside continuous batching (serve.c): its
 * tokens and timestamps follow the same rules, and each request's counters
 * fill the same fields (spec_passes there counts every pass of its decode,
 * speculative or not).
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

/* The repetition's speculation metrics (spec_*) from its requests' fields;
 * nothing when no request has any (docs/metrics.md). */
void spec_metrics(rep_result *out);

#endif
