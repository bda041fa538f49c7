/*
 * pass.h - the one pass driver: every forward pass over KV-cached sessions
 * goes through pass_run, whether it comes from cx_eval / cx_eval_all (one
 * segment, session.c) or cx_batch_eval (one segment per session, batch.c,
 * which the scheduler calls). A pass is the same protocol wherever it
 * starts, written once here:
 *
 *   lora_ws_prepare    adapters' buffers, before any block moves (a failure
 *                      leaves the caches as they were)
 *   kv_prepare_batch   per cache, once over that cache's segments: blocks
 *                      appended, copied on write, moved between tiers,
 *                      pinned hot for the pass
 *   fwd_pass           the forward pass over every segment's rows
 *   session_commit     per session: its positions committed, its view's
 *                      restore counters collected
 *
 * so cx_eval's and cx_batch_eval's bit-for-bit agreement rests on one copy
 * (test_batch checks it), and a feature of the pass (adapters, chunking, a
 * later rollback) is added in one place.
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

/* One pass over segments seg[0..n_seq) with the caches locked: segment g
 * belongs to session owner[g], writes seg[g].T positions from seg[g].pos
 * whose tokens are tokens[seg[g].row ..]; the segments are sorted by cache
 * address, so each cache's are contiguous and the caches are prepared in the
 * order they were locked. Every session commits even when
 * one fails; the first failure is returned. 0 or a CX_E* code. */
int pass_run(fwd_ws *ws, fwd_seg *seg, int n_seq, cx_session *const *owner, const int32_t *tokens, int rows,
             pass_scratch *sc, cx_err *err);

#endif
