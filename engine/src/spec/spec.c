/*
 * spec.c - one sequence's speculation (cx_spec): the step (spec.h draws
 * it), the adaptive draft length, the statistics.
 *
 * The draft length. A draft of k tokens, each accepted with probability a
 * (given the ones before it were), yields on average
 *     E(k) = (1 - a^(k+1)) / (1 - a)
 * tokens per target pass, and the step costs
 *     C(k) = k * t_draft + t_pass1 + k * t_row
 * (t_draft: one drafted token; t_pass1: a one-row target pass; t_row: each
 * further row of the verify pass, small while the pass is bound by reading
 * the weights and growing once it is bound by arithmetic). spec_want picks
 * the k in 0..draft_max that maximises E(k) / C(k), from estimates decayed
 * over the last few dozen steps. k = 0 is a plain decode. Each estimate
 * needs its own kind of step: the first step of a sequence, and one in 32
 * after, is a plain decode (t_pass1, which a drafting run alone would never
 * time again), and a sequence that stopped drafting drafts two tokens every
 * 16 steps (acceptance and t_draft), so a text that becomes predictable is
 * noticed.
 */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../session.h"
#include "../util.h"
#include "spec.h"

#define DECAY 0.95 /* of the acceptance counts per step: about the last 20 steps weigh */

/* See cortex.h. */
int cx_spec_new(cx_drafter *d, int n_ctx, cx_spec **out, cx_err *err) { return spec_new(d, n_ctx, 1, out, err); }

/* See spec.h. */
int spec_new(cx_drafter *d, int n_ctx, int own_rows, cx_spec **out, cx_err *err) {
    *out = NULL;
    if (!d) return cx_fail(err, CX_EINVAL, "cx_spec_new: no drafter");
    if (n_ctx < 2) return cx_fail(err, CX_EINVAL, "cx_spec_new: a context of %d positions leaves nothing to draft", n_ctx);
    cx_spec *sp = calloc(1, sizeof *sp);
    if (!sp) return cx_fail(err, CX_ENOMEM, "out of memory");
    sp->d = d;
    sp->n_ctx = n_ctx;
    sp->V = d->target->info.n_vocab;
    size_t V = (size_t)sp->V, K = CX_SPEC_MAX_DRAFT;
    sp->rows = own_rows ? malloc(sizeof(float) * (K + 1) * V) : NULL;
    sp->feed = malloc(sizeof(int32_t) * (K + 1));
    int ok = (sp->rows || !own_rows) && sp->feed, rc = 0;
    if (ok && d->draft) {
        sp->dtok = malloc(sizeof(int32_t) * (size_t)n_ctx);
        ok = sp->dtok != NULL;
        if (ok) {
            cx_session_params spp = cx_session_defaults();
            spp.n_ctx = n_ctx;
            spp.n_threads = d->p.n_threads;
            /* prompts are fed in chunks, the drafts one token a pass; a scheduler's slot (no rows of its own)
             * is evaluated only through its spec_batch: no pass buffers of its own */
            spp.batch = own_rows ? 64 : 1;
            rc = cx_session_new_ex(d->draft, &spp, &sp->ds, err);
        }
    }
    if (!ok && !rc) rc = cx_fail(err, CX_ENOMEM, "out of memory for speculation over %d tokens of vocabulary", sp->V);
    if (rc) {
        cx_spec_free(sp);
        return rc;
    }
    sp->acc_n = 3; /* a prior of 0.6 acceptance, forgotten within a few steps */
    sp->rej_n = 2;
    sp->st.draft_len = d->p.draft_max;
    *out = sp;
    return 0;
}

/* See cortex.h. */
void cx_spec_free(cx_spec *sp) {
    if (!sp) return;
    cx_session_free(sp->ds);
    free(sp->dtok);
    free(sp->rows);
    free(sp->feed);
    free(sp);
}

/* See cortex.h. */
void cx_spec_reset(cx_spec *sp) {
    if (sp->ds) cx_session_reset(sp->ds);
}

/* E(k) / C(k) of the file comment. */
static double rate(const cx_spec *sp, int k, double a) {
    double e = a >= 1 ? k + 1 : (1 - pow(a, k + 1)) / (1 - a);
    return e / (k * sp->t_draft + sp->t_pass1 + k * sp->t_row);
}

/* See spec.h. */
int spec_want(cx_spec *sp, int room) {
    const cx_spec_params *p = &sp->d->p;
    int kmax = p->draft_max < room ? p->draft_max : room, best = 0;
    if (kmax < 1) return sp->st.draft_len = 0;
    if (!p->adapt) {
        best = kmax;
    } else if (sp->t_pass1 <= 0 || sp->plain_age >= 32) {
        best = 0; /* time a plain decode: the one-row pass every estimate is relative to */
    } else {
        double a = sp->acc_n / (sp->acc_n + sp->rej_n);
        for (int k = 1; k <= kmax; k++)
            if (rate(sp, k, a) > rate(sp, best, a)) best = k;
        if (best == 0 && ++sp->idle_steps >= 16) { /* measure the draft again now and then */
            sp->idle_steps = 0;
            best = kmax < 2 ? kmax : 2;
        }
    }
    if (best > 0 && best < p->draft_min) best = p->draft_min <= kmax ? p->draft_min : 0;
    sp->st.draft_len = best;
    return best;
}

/* An estimate decayed towards a new measurement (the first one taken as it is). */
static void ema(double *e, double v) { *e = *e > 0 ? 0.8 * *e + 0.2 * v : v; }

/* See spec.h. */
void spec_observe(cx_spec *sp, int k, int accepted, int n, int64_t draft_ns, int64_t verify_ns, int rows_in_pass) {
    cx_spec_stats *st = &sp->st;
    st->steps++;
    st->tokens += n;
    st->draft_ns += draft_ns;
    st->verify_ns += verify_ns;
    double tv = (double)verify_ns * 1e-9;
    if (k > 0) {
        st->verified++;
        st->drafted += k;
        st->accepted += accepted;
        sp->acc_n = sp->acc_n * DECAY + accepted;
        sp->rej_n = sp->rej_n * DECAY + (accepted < k); /* a draft ends at its first rejection */
        if (sp->caught_up <= k + 1) /* not a prompt's prefill on the draft model */
            ema(&sp->t_draft, (double)draft_ns * 1e-9 / k);
        if (sp->t_pass1 > 0) ema(&sp->t_row, fmax(0.0, (tv - sp->t_pass1) / k));
        sp->idle_steps = 0;
    }
    if (k == 0) { /* a plain decode: this sequence's one row (its share of a shared pass) */
        ema(&sp->t_pass1, tv);
        sp->plain_age = 0;
    } else {
        sp->plain_age++;
    }
    (void)rows_in_pass;
    st->acceptance = st->drafted ? (double)st->accepted / (double)st->drafted : 0;
    st->mean_accepted = st->verified ? (double)st->accepted / (double)st->verified : 0;
    st->tokens_per_pass = st->steps ? (double)st->tokens / (double)st->steps : 0;
}

/* See cortex.h. */
void cx_spec_get_stats(const cx_spec *sp, cx_spec_stats *out) { *out = sp->st; }

/* See cortex.h. */
const float *cx_spec_logits(const cx_spec *sp, int i) {
    assert(i >= 0 && i <= CX_SPEC_MAX_DRAFT && sp->rows && "a cx_spec of cx_spec_new (the scheduler's keep no rows)");
    return sp->rows + (size_t)i * (size_t)sp->V;
}

/* See cortex.h. */
int cx_spec_step(cx_spec *sp, cx_session *s, cx_sampler *smp, const int32_t *hist, int n_hist, int max_out,
                 int32_t *out, cx_err *err) {
    int P = cx_session_pos(s);
    if (s->m != sp->d->target) return cx_fail(err, CX_EINVAL, "cx_spec_step: the session's model is not the drafter's target");
    if (!sp->rows) return cx_fail(err, CX_EINVAL, "cx_spec_step: this cx_spec belongs to a scheduler (no rows of its own)");
    if (n_hist != P + 1)
        return cx_fail(err, CX_EINVAL, "cx_spec_step: the history has %d tokens, the session holds %d positions "
                       "(it must hold all but the last)", n_hist, P);
    if (max_out < 1) return cx_fail(err, CX_EINVAL, "cx_spec_step: room for %d tokens", max_out);
    if (P + 1 > cx_session_n_ctx(s))
        return cx_fail(err, CX_ECTX, "cx_spec_step: the context (%d) is full", cx_session_n_ctx(s));
    int room = cx_session_n_ctx(s) - P - 1;
    if (room > max_out - 1) room = max_out - 1;
    if (room > sp->n_ctx - P - 1) room = sp->n_ctx - P - 1;
    int want = spec_want(sp, room), k = 0, rc = 0;
    int64_t t0 = cx_now_ns();
    if (want > 0 && (k = spec_draft(sp, smp, hist, n_hist, want, sp->feed + 1, err)) < 0) return k;
    if (k < sp->d->p.draft_min) k = 0;
    int64_t t1 = cx_now_ns();
    sp->feed[0] = hist[n_hist - 1];
    s->ws.decode_order = 1; /* each row as decode would compute it: the output stays the target's */
    rc = cx_eval_all(s, sp->feed, k + 1, sp->rows, err);
    s->ws.decode_order = 0;
    int64_t t2 = cx_now_ns();
    if (rc) {
        cx_session_truncate(s, P, NULL);
        return rc;
    }
    int accepted = 0;
    int n = spec_accept(sp, s->m, smp, sp->feed + 1, k, sp->rows, out, &accepted);
    rc = cx_session_truncate(s, P + n, err);
    assert(rc == 0 && "P + n <= P + k + 1, the positions just evaluated");
    spec_observe(sp, k, accepted, n, t1 - t0, t2 - t1, k + 1);
    return n;
}
