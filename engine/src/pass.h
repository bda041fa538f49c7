/*
 * pass.h - the one pass driver: every forward pass over KV-cached sessions
 * goes through pass_run, whether it comes from cx_eval / cx_eval_all (one
 * segment, session.c) or cx_batch_eval (one segment per session, batch.c,
 * which the scheduler calls). A pass is the same protocol wherever it
 * starts, written once here:
 *
 *   pass_chunk         how many of a segment's tokens one pass takes: the
 *                      caller's cap, and the blocks it writes fit the hot tier
 *   lora_ws_prepare    adapters' buffers, before any block moves (a failure
 *                      leaves the caches as they were)
 *   kv_prepare_batch   per cache, once over that cache's segments: blocks
 *                      appended, copied on write, moved between tiers,
 *                      pinned hot for the pass
 *   fwd_pass           the forward pass over every segment's rows; a segment
 *                      gets the logits of its last n_out positions (1: the
 *                      next token's; T: every position's, a multi-token
 *                      segment as speculative verification reads it)
 *   session_commit     per session: its positions committed, its view's
 *                      restore counters collected
 *   pass_rollback      afterwards, when the caller keeps fewer positions than
 *                      it fed (rejected draft tokens; cx_session_truncate)
 *
 * so cx_eval's and cx_batch_eval's bit-for-bit agreement rests on one copy
 * (test_batch checks it), and a feature of the pass (adapters, chunking,
 * rollback) is added in one place (test_pass checks multi-token segments
 * and rollback against sessions evaluated alone).
 */
#ifndef CX_PASS_H
#define CX_PASS_H

#include "session.h"

/* Scratch for pass_run, [n] each where n is the most segments of a pass:
 * one cache's sequences, positions and token counts for kv_prepare_batch. */
typedef struct pass_scratch {
    kv_seq **seqs;
    int *pos, *T;
} pass_scratch;

/* The tokens one pass takes of the `want` a sequence at position pos has
 * left: at most `cap`, and no more than the hot_blocks free hot-tier blocks
 * the pass still has can hold from pos (kv_prepare_batch pins every block a
 * pass writes hot). 0 when not even one token fits. */
int pass_chunk(int pos, int want, int cap, int hot_blocks);

/* One pass over segments seg[0..n_seq) with the caches locked: segment g
 * belongs to session owner[g], writes seg[g].T positions from seg[g].pos
 * whose tokens are tokens[seg[g].row ..]; the segments are sorted by cache
 * address, so each cache's are contiguous and the caches are prepared in the
 * order they were locked. The segments' logits rows go to `logits` (NULL:
 * the workspace's own, ws->logits). Every session commits even when one
 * fails; the first failure is returned. 0 or a CX_E* code. */
int pass_run(fwd_ws *ws, fwd_seg *seg, int n_seq, cx_session *const *owner, const int32_t *tokens, int rows,
             float *logits, pass_scratch *sc, cx_err *err);

/* Drop positions n_pos.. of s with its cache locked (0 <= n_pos <= its
 * position): the blocks past them unreferenced, the partial last block's
 * later rows forgotten (kv_truncate), so the next pass writes from n_pos.
 * The one way positions leave a session. */
void pass_rollback(cx_session *s, int n_pos);

#endif
