/*
 * spec_run.c - decoding by speculation after a synthetic test's prompt, and
 * the speculation metrics of a repetition, for `run --spec` (see spec_run.h;
 * definitions: docs/metrics.md).
 */
#include "spec_run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hx_err.h"

/* See spec_run.h. */
int spec_hist_reserve(spec_seq *q, int n) {
    if (n <= q->hist_cap) return 0;
    int32_t *p = realloc(q->hist, sizeof(int32_t) * (size_t)n);
    if (!p) return -1;
    q->hist = p;
    q->hist_cap = n;
    return 0;
}

/* See spec_run.h. */
int spec_decode(spec_seq *q, int n_hist, const float *l, int max_gen, int stop, req_result *r, double issue_ms,
                char *err, size_t errlen) {
    if (spec_hist_reserve(q, n_hist + max_gen) ||
        !(r->itl_ms = malloc(sizeof(float) * (size_t)(max_gen > 1 ? max_gen - 1 : 1))))
        return hx_fail(err, errlen, "out of memory");
    cx_spec_stats s0, s1;
    cx_spec_get_stats(q->sp, &s0);
    cx_err e = {0};
    int tok = cx_sampler_sample(q->greedy, l), n = n_hist, gen = 1, rc = 0;
    double t_prev = runner_now_ms(), t_first = t_prev;
    r->ttft_ms = t_first - issue_ms;
    q->hist[n++] = tok;
    ctr_snap before;
    if (q->ctr) ctr_snapshot(q->ctr, &before);
    while (gen < max_gen && !(stop && cx_token_is_eog(q->m, tok))) {
        int32_t out[CX_SPEC_MAX_DRAFT + 1];
        int pos = cx_session_pos(q->s); /* n - 1: the last token chosen is not evaluated yet */
        int k = cx_spec_step(q->sp, q->s, q->greedy, q->hist, n, max_gen - gen, out, &e);
        if (k < 0) {
            rc = hx_fail_cx(err, errlen, &e);
            break;
        }
        double t = runner_now_ms(); /* every token of the step is known at its end */
        for (int i = 0; i < k; i++) {
            r->kv_attended += pos + i + 1; /* row i of the pass sits at position pos + i */
            r->itl_ms[r->n_itl++] = (float)(i ? 0.0 : t - t_prev);
            q->hist[n++] = tok = out[i];
            gen++;
        }
        t_prev = t;
    }
    if (q->ctr) {
        ctr_snap after;
        ctr_snapshot(q->ctr, &after);
        ctr_accumulate(q->decode, &before, &after);
    }
    if (rc) return rc;
    cx_spec_get_stats(q->sp, &s1);
    r->gen_tokens = gen;
    r->decode_ms = t_prev - t_first;
    r->e2e_ms = t_prev - issue_ms;
    r->tpot_ms = gen > 1 ? r->decode_ms / (gen - 1) : NAN;
    runner_token_hash(q->hist + n_hist, gen, r->token_hash);
    r->spec = 1;
    r->spec_passes = (int)(s1.steps - s0.steps);
    r->spec_verified = (int)(s1.verified - s0.verified);
    r->draft_tokens = (int)(s1.drafted - s0.drafted);
    r->accepted_tokens = (int)(s1.accepted - s0.accepted);
    r->draft_ms = (double)(s1.draft_ns - s0.draft_ns) / 1e6;
    r->verify_ms = (double)(s1.verify_ns - s0.verify_ns) / 1e6;
    return 0;
}

/* See spec_run.h. Sums over the requests that report speculation; a ratio
 * whose denominator is 0 (nothing drafted, nothing checked) is left out,
 * never written as 0. Over HTTP only drafted and accepted are known. */
void spec_metrics(rep_result *out) {
    double drafted = 0, accepted = 0, verified = 0, passes = 0, tokens = 0, draft_ms = 0, verify_ms = 0;
    int any = 0, local = 0;
    for (int i = 0; i < out->n_req; i++) {
        const req_result *q = &out->req[i];
        if (q->error[0] || !q->spec) continue;
        any = 1;
        drafted += q->draft_tokens;
        accepted += q->accepted_tokens;
        if (q->spec_passes < 0) continue; /* the server said no more */
        local = 1;
        verified += q->spec_verified;
        passes += q->spec_passes;
        tokens += q->gen_tokens - 1; /* the first comes from the prompt's pass */
        draft_ms += q->draft_ms;
        verify_ms += q->verify_ms;
    }
    if (!any) return;
    rep_set_metric(out, "spec_draft_tokens", drafted);
    rep_set_metric(out, "spec_accepted_tokens", accepted);
    if (drafted > 0) rep_set_metric(out, "spec_acceptance", accepted / drafted);
    if (!local) return;
    if (verified > 0) rep_set_metric(out, "spec_accepted_mean", accepted / verified);
    if (passes > 0) rep_set_metric(out, "spec_tokens_per_pass", tokens / passes);
    rep_set_metric(out, "spec_passes", passes);
    rep_set_metric(out, "spec_draft_ms", draft_ms);
    rep_set_metric(out, "spec_verify_ms", verify_ms);
}
