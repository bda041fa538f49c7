/*
 * batch.c - continuous batching: one forward pass over several sessions
 * (cx_batch_eval, cortex.h).
 *
 * Each session contributes a segment: its next tokens (one when it is
 * decoding, a chunk of its prompt when it is prefilling). The rows of all
 * segments share every weight read, which is what makes decoding N
 * sequences together cheaper than decoding them in turn: at batch size 1
 * decode is bound by reading the weights, and N rows read them once.
 * Attention stays per sequence (fwd_pass).
 *
 * Sessions may use different caches. The segments are ordered by cache so
 * each cache's sequences are prepared together (kv_prepare_batch: their
 * blocks moved and pinned in one step) and the caches are locked in address
 * order, so two batches over the same caches cannot deadlock. Every array a
 * pass needs is allocated by cx_batch_new: evaluating allocates nothing.
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pass.h"
#include "util.h"

struct cx_batch {
    fwd_ws ws;                /* its model (ws.m), rows per pass over all segments (ws.batch) */
    fwd_seg *seg;             /* [max_tokens] segments of the current pass, ordered by cache */
    int *order;               /* [max_tokens] input index of each segment */
    int32_t *tokens;          /* [max_tokens] the pass's tokens, segment after segment */
    cx_session **owner;       /* [max_tokens] the session of each segment */
    pass_scratch sc;          /* [max_tokens] pass_run's scratch */
    const float **logits;     /* [max_tokens] what cx_batch_eval hands back: row i of ws.logits */
    int *out0;                /* [max_tokens] batch_eval_rows: each session's first row of logits */
};

/* See cortex.h. */
void cx_batch_pool_stats(const cx_batch *b, cx_pool_stats *out) { tp_stats_get(b->ws.pool, out); }

/* See cortex.h. */
void cx_batch_free(cx_batch *b) {
    if (!b) return;
    fwd_ws_free(&b->ws);
    free(b->seg);
    free(b->order);
    free(b->tokens);
    free(b->owner);
    free(b->sc.seqs);
    free(b->sc.pos);
    free(b->sc.T);
    free((void *)b->logits);
    free(b->out0);
    free(b);
}

/* See cortex.h. */
int cx_batch_new(const cx_model *m, int max_tokens, int n_threads, cx_batch **out, cx_err *err) {
    return batch_new_rows(m, max_tokens, max_tokens, n_threads, out, err);
}

/* See session.h. */
int batch_new_rows(const cx_model *m, int max_tokens, int n_out, int n_threads, cx_batch **out, cx_err *err) {
    *out = NULL;
    int rc = fwd_check_setup(&n_threads, err);
    if (rc) return rc;
    if (max_tokens < 1 || max_tokens > FWD_MAX_BATCH)
        return cx_fail(err, CX_EINVAL, "batch size %d is out of range (1..%d)", max_tokens, FWD_MAX_BATCH);
    assert(n_out >= 1 && n_out <= max_tokens && "rows of logits: at least one, at most a row per token");
    cx_batch *b = calloc(1, sizeof *b);
    if (!b) return cx_fail(err, CX_ENOMEM, "out of memory");
    rc = fwd_ws_init(&b->ws, m, max_tokens, n_out, n_threads, err);
    if (rc) {
        free(b);
        return rc;
    }
    size_t n = (size_t)max_tokens;
    b->seg = calloc(n, sizeof *b->seg);
    b->order = calloc(n, sizeof *b->order);
    b->tokens = calloc(n, sizeof *b->tokens);
    b->owner = calloc(n, sizeof *b->owner);
    b->sc.seqs = calloc(n, sizeof *b->sc.seqs);
    b->sc.pos = calloc(n, sizeof *b->sc.pos);
    b->sc.T = calloc(n, sizeof *b->sc.T);
    b->logits = calloc(n, sizeof *b->logits);
    b->out0 = calloc(n, sizeof *b->out0);
    if (!b->out0 || !b->seg || !b->order || !b->tokens || !b->owner || !b->sc.seqs || !b->sc.pos || !b->sc.T || !b->logits) {
        cx_batch_free(b);
        return cx_fail(err, CX_ENOMEM, "out of memory for a batch of %d tokens", max_tokens);
    }
    for (size_t i = 0; i < n; i++) b->logits[i] = b->ws.logits + i * (size_t)m->info.n_vocab;
    *out = b;
    return 0;
}

/* See session.h: every row may be its own run (one sequence a token). */
int batch_lora_reserve(cx_batch *b, int rank_sum, cx_err *err) {
    return lora_ws_reserve(&b->ws.lora, b->ws.batch, b->ws.batch, 1, rank_sum, err);
}

/* Check the request before anything is locked or changed. */
static int check_request(const cx_batch *b, cx_session *const *ss, const int32_t *const *tokens, const int *n,
                         int n_seq, cx_err *err) {
    if (n_seq < 1) return cx_fail(err, CX_EINVAL, "cx_batch_eval: no sessions");
    int total = 0, rc = 0;
    for (int i = 0; i < n_seq && !rc; i++) {
        if (!ss[i]) rc = cx_fail(err, CX_EINVAL, "cx_batch_eval: session %d is NULL", i);
        else if (ss[i]->m != b->ws.m) rc = cx_fail(err, CX_EINVAL, "cx_batch_eval: session %d belongs to another model", i);
        else if (ss[i]->in_batch) rc = cx_fail(err, CX_EINVAL, "cx_batch_eval: session %d appears twice", i);
        else if ((rc = session_check_tokens(ss[i], tokens[i], n[i], err))) break;
        else if ((total += n[i]) > b->ws.batch)
            rc = cx_fail(err, CX_EINVAL, "cx_batch_eval: %d or more tokens exceed the batch size %d", total,
                         b->ws.batch);
        if (!rc) ss[i]->in_batch = 1;
    }
    for (int i = 0; i < n_seq; i++)
        if (ss[i]) ss[i]->in_batch = 0;
    return rc;
}

/* 1 if session a goes after b: by cache address, then by adapter set (its
 * salt), so each cache's sequences are together and, within them, those
 * sharing adapters (one LoRA run each, lora/lora_pass.c). */
static int after(const cx_session *a, const cx_session *b) {
    if (a->cache != b->cache) return (uintptr_t)a->cache > (uintptr_t)b->cache;
    return a->seq.salt > b->seq.salt;
}

/* Order input indices (insertion sort: stable, in place, no allocation). */
static void order_by_cache(int *order, cx_session *const *ss, int n_seq) {
    for (int i = 0; i < n_seq; i++) {
        int v = order[i] = i, j = i;
        while (j > 0 && after(ss[order[j - 1]], ss[v])) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = v;
    }
}

/* Lock (or unlock) each distinct cache of the ordered segments once, in address order. */
static void lock_caches(cx_batch *b, int n_seq, int lock) {
    for (int g = 0; g < n_seq; g++)
        if (g == 0 || b->seg[g].cache != b->seg[g - 1].cache) {
            if (lock) pthread_mutex_lock(&b->seg[g].cache->lock);
            else pthread_mutex_unlock(&b->seg[g].cache->lock);
        }
}

/* With the caches locked: prefix reuse per session (not for a segment that
 * wants several rows of logits: each of its positions is computed), then the
 * pass (pass_run). Session i's rows of logits start at row out0[i]. */
static int eval_locked(cx_batch *b, cx_session *const *ss, const int32_t *const *tokens, const int *n,
                       const int *n_out, const int *out0, int n_seq, cx_err *err) {
    int rows = 0;
    for (int g = 0; g < n_seq; g++) {
        int i = b->order[g];
        cx_session *s = ss[i];
        int want = n_out ? n_out[i] : 1;
        int reused = want > 1 ? (s->last_reused = 0) : session_take_prefix(s, tokens[i], n[i]);
        fwd_seg *sg = &b->seg[g];
        sg->pos = s->pos;
        sg->T = n[i] - reused;
        sg->row = rows;
        sg->out = out0 ? out0[i] : i;
        sg->n_out = want;
        sg->lora = s->lora;
        sg->n_lora = s->n_lora;
        assert(sg->T >= 1 && rows + sg->T <= b->ws.batch); /* checked by check_request; the last token is computed */
        memcpy(b->tokens + rows, tokens[i] + reused, sizeof(int32_t) * (size_t)sg->T);
        rows += sg->T;
    }
    return pass_run(&b->ws, b->seg, n_seq, b->owner, b->tokens, rows, NULL, &b->sc, err);
}

/* cx_batch_eval, with n_out[i] rows of logits for session i (NULL: one
 * each) starting at row out0[i] of the workspace's logits. */
static int batch_eval(cx_batch *b, cx_session *const *sessions, const int32_t *const *tokens, const int *n,
                      const int *n_out, const int *out0, int n_seq, cx_err *err) {
    int rc = check_request(b, sessions, tokens, n, n_seq, err);
    if (rc) return rc;
    assert(n_seq <= b->ws.batch && n_seq <= b->ws.n_out); /* every session has a token and a logits row */
    order_by_cache(b->order, sessions, n_seq);
    for (int g = 0; g < n_seq; g++) {
        cx_session *s = sessions[b->order[g]];
        b->owner[g] = s;
        b->seg[g].cache = s->cache;
        b->seg[g].seq = &s->seq;
        b->seg[g].view = &s->view;
    }
    lock_caches(b, n_seq, 1);
    rc = eval_locked(b, sessions, tokens, n, n_out, out0, n_seq, err);
    lock_caches(b, n_seq, 0);
    return rc;
}

/* See cortex.h. */
int cx_batch_eval(cx_batch *b, cx_session *const *sessions, const int32_t *const *tokens, const int *n, int n_seq,
                  const float ***logits, cx_err *err) {
    int rc = batch_eval(b, sessions, tokens, n, NULL, NULL, n_seq, err);
    if (rc) return rc;
    if (logits) *logits = b->logits;
    return 0;
}

/* See session.h. */
int batch_eval_rows(cx_batch *b, cx_session *const *sessions, const int32_t *const *tokens, const int *n,
                    const int *n_out, int n_seq, int decode_order, const float **rows, cx_err *err) {
    int at = 0;
    for (int i = 0; i < n_seq; i++) {
        if (n_out[i] < 1 || n_out[i] > n[i])
            return cx_fail(err, CX_EINVAL, "batch_eval_rows: session %d asks for %d rows of logits from %d tokens", i,
                           n_out[i], n[i]);
        b->out0[i] = at;
        at += n_out[i];
    }
    if (at > b->ws.n_out)
        return cx_fail(err, CX_EINVAL, "batch_eval_rows: %d rows of logits exceed the batch's %d", at, b->ws.n_out);
    b->ws.decode_order = decode_order;
    int rc = batch_eval(b, sessions, tokens, n, n_out, b->out0, n_seq, err);
    b->ws.decode_order = 0;
    if (rc) return rc;
    for (int i = 0; i < n_seq; i++) rows[i] = b->logits[b->out0[i]];
    return 0;
}
