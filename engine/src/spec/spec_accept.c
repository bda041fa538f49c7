/*
 * spec_accept.c - the accept/reject rule that makes speculation exact.
 *
 * Row i of the verify pass gives the target's logits for the token after
 * draft[i-1]. The row's token is drawn exactly as a plain decode step draws
 * it (cx_sampler_sample: the sampler's chain, then its draw number n, which
 * reads the noise g(seed, n, token): sampler.c), and the draft token is
 * kept iff it is that token; the first other token ends the step, and when
 * every draft token is kept the last row draws one more. Each chosen token
 * costs one draw, as in plain decoding, so every chosen token is the very
 * token the target alone chooses at that position with that seed: a seeded
 * run with speculation is the plain run, token for token, whatever was
 * drafted and however long the drafts were (the adaptive length's timings
 * change nothing). Greedy is the case without noise.
 *
 * Acceptance comes from the drafts: a draft model proposes, for row j, what
 * the target's draw n + j would choose were the draft's logits the target's
 * (sampler_draft_pick: the same chain and the same noise). With Gumbel-max
 * draws that is a coupling of the two distributions: the draft is accepted
 * with probability P[argmax(log q + g) = argmax(log p + g)], 1 when q = p
 * and at least (1 - TV) / (1 + TV) (Daliri et al. 2024, "drafter-invariant
 * speculative decoding"), against the standard rule's 1 - TV (Leviathan et
 * al. 2023, Chen et al. 2023: accept with min(1, p/q), else draw from the
 * residual), which needs draws of its own and so makes the output depend on
 * the drafts. The lookup's drafts are point masses. The sampler's penalties
 * see each chosen token before the next row (cx_sampler_accept), as they
 * would one token at a time.
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
