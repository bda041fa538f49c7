/*
 * pass.c - the one pass driver (pass.h): the chunk a pass takes, adapters
 * prepared, each cache's blocks prepared, the forward pass, every session
 * committed, and the rollback of positions a caller does not keep.
 */
#include "pass.h"

#include <assert.h>
#include <stdint.h>

/* See pass.h. */
int pass_chunk(int pos, int want, int cap, int hot_blocks) {
    assert(pos >= 0 && want >= 0 && cap >= 0 && hot_blocks >= 0);
    int T = want < cap ? want : cap;
    int room = hot_blocks * KV_BLOCK - pos % KV_BLOCK; /* the first block is partly written already */
    return T < room ? T : room > 0 ? room : 0;
}

/* See pass.h. */
int pass_run(fwd_ws *ws, fwd_seg *seg, int n_seq, cx_session *const *owner, const int32_t *tokens, int rows,
             float *logits, pass_scratch *sc, cx_err *err) {
    int rc = lora_ws_prepare(&ws->lora, seg, n_seq, err); /* before any block moves: a failure changes nothing */
    if (rc) return rc;
    for (int g0 = 0, g1; g0 < n_seq; g0 = g1) { /* each cache's run of segments, prepared once */
        kv_cache *c = seg[g0].cache;
        for (g1 = g0; g1 < n_seq && seg[g1].cache == c; g1++) {
            sc->seqs[g1 - g0] = seg[g1].seq;
            sc->pos[g1 - g0] = seg[g1].pos;
            sc->T[g1 - g0] = seg[g1].T;
        }
        assert((g1 == n_seq || (uintptr_t)seg[g1].cache > (uintptr_t)c) && "segments sorted by cache");
        if ((rc = kv_prepare_batch(c, sc->seqs, sc->pos, sc->T, g1 - g0, err))) return rc;
    }
    fwd_pass(ws, seg, n_seq, tokens, rows, logits);
    for (int g = 0; g < n_seq; g++) { /* every session commits; the first failure is reported */
        assert(seg[g].seq == &owner[g]->seq && seg[g].pos == owner[g]->pos && "segment g is owner g's next positions");
        int r = session_commit(owner[g], tokens + seg[g].row, seg[g].T, rc ? NULL : err);
        if (!rc) rc = r;
    }
    return rc;
}

/* See pass.h. */
void pass_rollback(cx_session *s, int n_pos) {
    assert(n_pos >= 0 && n_pos <= s->pos && s->pos == s->seq.n_tokens);
    kv_truncate(s->cache, &s->seq, n_pos);
    assert(s->seq.n_tokens == n_pos && s->seq.n_blocks == (n_pos + KV_BLOCK - 1) / KV_BLOCK);
    s->pos = n_pos;
    s->last_reused = 0;
}
