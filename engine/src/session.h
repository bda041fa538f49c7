/*
 * session.h - a session: one sequence (its block table in a KV cache, the
 * view attention reads it through) and its own workspace for cx_eval.
 * Shared by session.c and batch.c, which evaluates several sessions in one
 * pass.
 */
#ifndef CX_SESSION_H
#define CX_SESSION_H

#include "forward.h"

struct cx_session {
    const cx_model *m;
    int n_ctx, pos;
    fwd_ws ws;                /* cx_eval's passes (batch rows: min(n_ctx, params.batch)) */
    kv_cache *cache;          /* the KV cache: the session's own or shared */
    kv_seq seq;               /* this sequence's block table */
    kv_view view;             /* attention's f32 view of one layer of it */
    int last_reused;          /* tokens the last evaluation took from the prefix cache */
    int no_prefix;            /* 1: take no cached prefix blocks (the scheduler's cx_request.no_prefix_cache) */
    int in_batch;             /* set while cx_batch_eval checks for repeated sessions */
    cx_lora_use lora[CX_LORA_MAX_SET]; /* the adapters its tokens apply (cx_session_set_lora) */
    int n_lora;
};

/* Take the cached prefix blocks that continue s with tokens[0..n) (cache
 * locked): the position advances past them; returns how many (< n; 0 with
 * s->no_prefix set). */
int session_take_prefix(cx_session *s, const int32_t *tokens, int n);
/* After a pass wrote positions pos..pos+T-1 (tokens[0..T)): commit them,
 * advance, and collect the view's restore counters; CX_EIO (naming the spill
 * file if any) when a cold page could not be read back. */
int session_commit(cx_session *s, const int32_t *tokens, int T, cx_err *err);
/* Check tokens[0..n) for evaluation at s's position: count, context, vocabulary. 0 or CX_E*. */
int session_check_tokens(const cx_session *s, const int32_t *tokens, int n, cx_err *err);

/* Reserve the batch's room for adapters whose ranks over one input sum to
 * rank_sum, one adapter per sequence (the scheduler's case), so its passes
 * never grow a buffer. 0 or CX_ENOMEM. (batch.c) */
int batch_lora_reserve(cx_batch *b, int rank_sum, cx_err *err);

/* cx_batch_eval with n_out[i] rows of logits for session i: those after
 * each of its last n_out[i] tokens (1 <= n_out[i] <= n[i]; a session asking
 * for more than one takes no cached prefix), rows[i] pointing at the first
 * (n_vocab floats apart), valid until the batch's next call. decode_order 1:
 * every product sums as one-token decode does (kern_act.decode_order), so
 * each row equals the logits of feeding the tokens one at a time
 * (speculative verification). 0 or CX_E*. (batch.c) */
/* cx_batch_new with room for n_out rows of logits per pass (1..max_tokens;
 * cx_batch_new: max_tokens): a batch whose passes ask for fewer rows than
 * they have tokens (one per sequence, say) holds n_out x n_vocab floats
 * instead of max_tokens x n_vocab. */
int batch_new_rows(const cx_model *m, int max_tokens, int n_out, int n_threads, cx_batch **out, cx_err *err);
int batch_eval_rows(cx_batch *b, cx_session *const *sessions, const int32_t *const *tokens, const int *n,
                    const int *n_out, int n_seq, int decode_order, const float **rows, cx_err *err);

#endif
