/*
 * spec_accept.c - the accept/reject rule that makes speculation exact.
 *
 * Row i of the verify pass gives the target's distribution p (the sampler's
 * whole chain) for the token after draft[i-1]; every draft token x =
 * draft[i] is a point mass (the lookup's continuation, the draft model's
 * argmax). The rule (Leviathan et al. 2023; Chen et al. 2023) for a point
 * mass q on x:
 *
 *   accept x       with probability min(1, p(x) / q(x)) = p(x)
 *   on rejection   draw from the residual max(0, p - q), renormalised: p
 *                  without x, and stop
 *   all accepted   draw one more token from the last row's p
 *
 * is carried out by drawing the row's token from p exactly as a plain
 * decode step draws it (cx_sampler_sample: one uniform of the sampler's
 * stream) and keeping x iff that token is x: the token is x with
 * probability p(x), and otherwise a draw from p given it is not x, the
 * residual. So every chosen token is the one the target alone would have
 * chosen from the same stream: a seeded sampled run is the plain run, token
 * for token, whatever was drafted and however long the drafts were (the
 * adaptive length's timings cannot change the output). Greedy is the case
 * where p is a point mass on the argmax and no random number is drawn. The
 * sampler's penalties see each chosen token before the next row
 * (cx_sampler_accept), as they would one token at a time.
 */
#include <assert.h>

#include "spec.h"

/* See spec.h. */
int spec_accept(cx_spec *sp, const cx_model *m, cx_sampler *smp, const int32_t *draft, int k, const float *rows,
                int32_t *out, int *accepted) {
    int n = 0;
    *accepted = 0;
    for (int i = 0; i <= k; i++) {
        int tok = cx_sampler_sample(smp, rows + (size_t)i * (size_t)sp->V);
        int keep = i < k && tok == draft[i];
        cx_sampler_accept(smp, tok);
        out[n++] = tok;
        *accepted += keep;
        if (!keep || cx_token_is_eog(m, tok)) break; /* the last row, a replaced draft token, or the end */
    }
    assert(n >= 1 && n <= k + 1 && *accepted <= n);
    return n;
}
