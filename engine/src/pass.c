/*
 * pass.c - the one pass driver (pass.h): adapters prepared, each cache's
 * blocks prepared, the forward pass, every session committed.
 */
#include "pass.h"

#include <assert.h>
#include <stdint.h>

/* See pass.h. */
int pass_run(fwd_ws *ws, fwd_seg *seg, int n_seq, cx_session *const *owner, const int32_t *tokens, int rows,
             pass_scratch *sc, cx_err *err) {
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
    fwd_pass(ws, seg, n_seq, tokens, rows);
    for (int g = 0; g < n_seq; g++) { /* every session commits; the first failure is reported */
        int r = session_commit(owner[g], tokens + seg[g].row, seg[g].T, rc ? NULL : err);
        if (!rc) rc = r;
    }
    return rc;
}
