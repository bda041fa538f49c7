/*
 * eval_logits.h - the forward-pass tests' common step: a fresh session's
 * logits after a token sequence fed in chunks (one call: batched prefill; one
 * token a call: decode), so tests can compare the ways of getting there.
 */
#ifndef CX_EVAL_LOGITS_H
#define CX_EVAL_LOGITS_H

#include <string.h>

#include "cortex.h"
#include "testing.h"

/* Logits after `n` tokens, fed in chunks of `step` tokens, on `threads` threads. */
static int logits_after(cx_model *m, const int32_t *toks, int n, int step, int threads, float *out) {
    cx_session *s;
    cx_err err = {0};
    if (cx_session_new(m, 0, threads, &s, &err)) {
        CHECK(0, "session: %s", err.msg);
        return -1;
    }
    const float *l = NULL;
    for (int i = 0; i < n; i += step) {
        int k = n - i < step ? n - i : step;
        if (cx_eval(s, toks + i, k, &l, &err)) {
            CHECK(0, "eval: %s", err.msg);
            cx_session_free(s);
            return -1;
        }
    }
    memcpy(out, l, sizeof(float) * (size_t)cx_model_get_info(m)->n_vocab);
    cx_session_free(s);
    return 0;
}

#endif
