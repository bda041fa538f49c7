/*
 * spec_accept.c - the accept/reject rule that makes speculation exact.
 *
 * Row i of the verify pass gives the target's distribution p (the sampler's
 * whole chain, cx_sampler_dist) for the token after draft[i-1]; the draft
 * proposed x = draft[i] from its distribution q (a point mass for the
 * lookup and for a greedy draft). The rule (Leviathan et al. 2023; Chen et
 * al. 2023):
 *
 *   accept x       with probability min(1, p(x) / q(x))
 *   on rejection   draw from the residual max(0, p - q), renormalised,
 *                  and stop
 *   all accepted   draw one more token from the last row's p
 *
 * makes every chosen token distributed exactly as the target alone would
 * choose it. Greedy is its special case: p is a point mass on the argmax,
 * so x is kept iff it is the argmax and the replacement is the argmax: the
 * output is the target's, token for token, with no random number drawn.
 * The sampler's penalties see each chosen token before the next row
 * (cx_sampler_accept), as they would one token at a time.
 */
#include <assert.h>

#include "spec.h"

/* p(x) over the survivors ids[0..m), 0 when x is not among them. */
static float prob_of(const int32_t *ids, const float *p, int m, int x) {
    for (int i = 0; i < m; i++)
        if (ids[i] == x) return p[i];
    return 0.0f;
}

/* See spec.h. */
int spec_accept(cx_spec *sp, const cx_model *m, cx_sampler *smp, const int32_t *draft, int k, const float *rows,
                int32_t *out, int *accepted) {
    int V = sp->V, n = 0, greedy = sampler_is_greedy(smp);
    *accepted = 0;
    for (int i = 0; i <= k; i++) {
        const int32_t *ids;
        const float *p;
        int cnt = cx_sampler_dist(smp, rows + (size_t)i * (size_t)V, &ids, &p);
        int tok, keep = 0;
        if (i == k) { /* every draft token kept: the target's own next token */
            tok = greedy ? ids[0] : cx_sampler_draw(smp, ids, p, cnt);
        } else {
            int x = draft[i];
            /* q: a point mass for the lookup and greedy drafts, else what the draft drew from */
            const int32_t *qid = sp->q_n && sp->q_n[i] > 0 ? sp->q_id + (size_t)i * (size_t)V : NULL;
            const float *qp = qid ? sp->q_p + (size_t)i * (size_t)V : NULL;
            int qn = qid ? sp->q_n[i] : 0;
            float px = prob_of(ids, p, cnt, x), qx = qid ? prob_of(qid, qp, qn, x) : 1.0f;
            assert(qx > 0 && "the draft drew x from q, so q(x) > 0");
            keep = px >= qx || (px > 0 && cx_sampler_uniform(smp) < (double)px / (double)qx);
            if (keep) {
                tok = x;
                (*accepted)++;
            } else if (greedy) {
                tok = ids[0];
            } else { /* the residual max(0, p - q) over p's survivors (q's mass elsewhere leaves none) */
                for (int j = 0; j < cnt; j++) {
                    float qy = qid ? prob_of(qid, qp, qn, ids[j]) : ids[j] == x ? 1.0f : 0.0f;
                    sp->resid[j] = p[j] - qy > 0 ? p[j] - qy : 0.0f;
                }
                tok = cx_sampler_draw(smp, ids, sp->resid, cnt);
            }
        }
        cx_sampler_accept(smp, tok);
        out[n++] = tok;
        if (!keep || cx_token_is_eog(m, tok)) break; /* the last row, a replaced draft token, or the end */
    }
    assert(n >= 1 && n <= k + 1 && *accepted <= n);
    return n;
}
