/*
 * spec.h - speculative decoding's insides (cortex.h has the API,
 * docs/speculative.md the design). The files of engine/src/spec/:
 *   spec.c         cx_spec: one sequence's step (draft, verify, accept,
 *                  roll back), the adaptive draft length, the statistics
 *   spec_accept.c  the accept/reject rule over the target's rows of logits
 *   spec_draft.c   cx_drafter: the lookup, a draft model, a self-draft made
 *                  at load; drafting with a model, its KV kept in step
 *   spec_ngram.c   prompt lookup
 *
 * One step of a sequence whose session holds positions 0..P-1 and whose
 * last chosen token t = hist[P] is not evaluated yet:
 *
 *   spec_want    how long a draft pays now (acceptance, draft and verify times)
 *   spec_draft   d[0..k): the lookup's continuation, or the draft model's
 *                argmaxes (its cache first rolled back to what it shares
 *                with hist, then fed the rest)
 *   verify       one target pass over t, d[0..k) at P..P+k with every row's
 *                logits, summed in decode's order (batch_eval_rows or
 *                cx_eval_all with ws.decode_order): row i predicts what
 *                follows d[i-1] (row 0: what follows t)
 *   spec_accept  row by row: the row's token drawn as a plain decode step
 *                draws it, d[i] kept while it is that token; the first
 *                other token ends the step; all kept: one more token from
 *                row k. n = accepted + 1 tokens
 *   rollback     the session keeps P + n positions (t and the accepted
 *                drafts; the last token chosen is the next step's t)
 *   spec_observe the step's counts and times into the statistics and the
 *                adaptive length's estimates
 *
 * The scheduler (sched_step.c) runs the same functions, with the verify
 * segments of several sequences in one pass.
 */
#ifndef CX_SPEC_H
#define CX_SPEC_H

#include <stdint.h>

#include "cortex.h"

struct cx_drafter {
    cx_spec_params p;
    const cx_model *target;
    cx_model *draft;       /* CX_SPEC_SELF and CX_SPEC_MODEL: owned; NULL for the lookup */
    char desc[320];
};

struct cx_spec {
    cx_drafter *d;
    int n_ctx, V;
    /* model drafters: the draft's own sequence, kept in step with the target's */
    cx_session *ds;
    int32_t *dtok;         /* [n_ctx] the tokens ds holds */
    /* the verify pass */
    float *rows;           /* [(CX_SPEC_MAX_DRAFT + 1) * V] logits of the last step's rows (NULL: spec_new without) */
    int32_t *feed;         /* [CX_SPEC_MAX_DRAFT + 1] the last chosen token, then the draft */
    /* the adaptive length's estimates */
    double acc_n, rej_n;   /* decayed counts of accepted draft tokens and of rejections */
    double t_pass1;        /* seconds of a one-row target pass (0: not measured yet) */
    double t_row;          /* extra seconds per extra verified row */
    double t_draft;        /* seconds per drafted token */
    int idle_steps;        /* steps since a draft was last verified (to measure again) */
    int plain_age;         /* steps since a plain decode last timed t_pass1 */
    int caught_up;         /* tokens the draft model was fed to catch up before the last draft (the
                              first draft's is the whole prompt: not a drafting cost to learn from) */
    cx_spec_stats st;
};

/* spec.c */
/* cx_spec_new; own_rows 0: no buffer for the verify pass's rows (the
 * scheduler's passes keep them in its batch: (draft_max + 1) x n_vocab
 * floats saved per slot), so cx_spec_step and cx_spec_logits are not used. */
int spec_new(cx_drafter *d, int n_ctx, int own_rows, cx_spec **out, cx_err *err);
/* The draft length worth drafting now, at most `room` (0: decode one token). */
int spec_want(cx_spec *sp, int room);
/* Draft up to k tokens continuing hist[0..n) into draft[], for the target's
 * sampler smp (a draft model proposes what smp's next draws would choose:
 * sampler_draft_pick); returns how many (0..k) or a CX_E* code. */
int spec_draft(cx_spec *sp, cx_sampler *smp, const int32_t *hist, int n, int k, int32_t *draft, cx_err *err);
/* A step's outcome: k drafted and checked (0: plain decode), `accepted` kept,
 * n tokens chosen, the draft's and the pass's nanoseconds (verify_ns is this
 * sequence's share when the pass was shared). */
void spec_observe(cx_spec *sp, int k, int accepted, int n, int64_t draft_ns, int64_t verify_ns, int rows_in_pass);

/* spec_draft.c: drafting several sequences with the drafter's model at once
 * (the scheduler's drafts), one pass of the draft model per round over
 * every sequence still drafting:
 *   spec_batch_clear, then spec_batch_add per sequence, spec_batch_run,
 *   spec_batch_got per sequence. */
typedef struct spec_batch spec_batch;
/* For up to cap sequences of model drafter d, passes of up to max_tokens
 * (>= cap) tokens. */
int spec_batch_new(const cx_drafter *d, int cap, int max_tokens, spec_batch **out, cx_err *err);
void spec_batch_free(spec_batch *w);
void spec_batch_clear(spec_batch *w);
/* Sequence sp (of a model drafter) continuing hist[0..n) is to draft up to
 * k >= 1 tokens into draft[] for the target's sampler smp (hist, draft and
 * smp stay the caller's until spec_batch_got). Its index. */
int spec_batch_add(spec_batch *w, cx_spec *sp, cx_sampler *smp, const int32_t *hist, int n, int k, int32_t *draft);
/* Draft for every sequence added. Each drafts what spec_draft would draft
 * for it alone (the draft's logits may differ in their last bits where its
 * kernels sum several rows in another order). 0, or a CX_E* code (the draft
 * model's: no sequence's draft is usable). */
int spec_batch_run(spec_batch *w, cx_err *err);
/* After spec_batch_run: how many tokens sequence j drafted, and (ns) its
 * share of the draft model's passes, in nanoseconds. */
int spec_batch_got(const spec_batch *w, int j, int64_t *ns);
/* Passes of the draft model since spec_batch_new. */
int64_t spec_batch_passes(const spec_batch *w);

/* spec_accept.c */
/* The rule over rows[0..k] (V floats each) for draft[0..k): writes the
 * chosen tokens to out (1..k+1; ends at the first end-of-generation token
 * of model m) and *accepted (the draft tokens kept). Every chosen token is
 * cx_sampler_accept'ed. */
int spec_accept(cx_spec *sp, const cx_model *m, cx_sampler *smp, const int32_t *draft, int k, const float *rows,
                int32_t *out, int *accepted);

/* sampler.c */
/* A draft model's proposal for the target sampler's draw `ahead` draws from
 * now (0: its next): its chain (penalties off) over the draft's logits and
 * the noise that draw will read, so the draft proposes the token the target
 * draws whenever the two agree; greedy: the argmax. *q (q not NULL): the
 * draft's probability of it. Uses s's scratch. */
int sampler_draft_pick(cx_sampler *s, const float *logits, int ahead, float *q);

/* spec_ngram.c */
/* Prompt lookup: the last g tokens of hist[0..n) (g from gmax down to
 * gmin) found earlier in hist, latest occurrence first; the up to k tokens
 * that followed it go to out. Returns how many (0: no suffix recurs). */
int spec_ngram_draft(const int32_t *hist, int n, int gmin, int gmax, int k, int32_t *out);

#endif
