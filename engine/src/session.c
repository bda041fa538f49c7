/*
 * session.c - sessions (cortex.h): one sequence in a KV cache, evaluated by
 * cx_eval in passes of up to `batch` tokens in the session's own workspace.
 *
 * A session owns its block table, its view and its workspace, all allocated
 * once in cx_session_new_ex, so evaluating tokens does not allocate. Its
 * cache is its own or shared with other sessions; every call that changes
 * the cache holds the cache's lock.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "lora/lora.h"
#include "pass.h"
#include "session.h"
#include "util.h"

/* Free every buffer of a (possibly half-built) session, giving its blocks
 * back to the cache (and the cache itself when it is the session's own). */
void cx_session_free(cx_session *s) {
    if (!s) return;
    if (s->cache) {
        pthread_mutex_lock(&s->cache->lock);
        kv_release(s->cache, &s->seq);
        s->cache->sessions--;
        pthread_mutex_unlock(&s->cache->lock);
        if (s->cache->owned) kv_cache_destroy(s->cache);
    }
    kv_seq_free(&s->seq);
    kv_view_free(&s->view);
    fwd_ws_free(&s->ws);
    free(s);
}

/* See cortex.h. */
cx_session_params cx_session_defaults(void) {
    cx_session_params p;
    memset(&p, 0, sizeof p);
    p.n_threads = 1;
    p.kv = cx_kv_defaults();
    return p;
}

/* See cortex.h: a session with its own default cache (f32, unlimited, no prefix cache). */
int cx_session_new(const cx_model *m, int n_ctx, int n_threads, cx_session **out, cx_err *err) {
    cx_session_params p = cx_session_defaults();
    p.n_ctx = n_ctx;
    p.n_threads = n_threads;
    return cx_session_new_ex(m, &p, out, err);
}

/* Attach session s to its cache (shared, or a new private one for n_ctx
 * positions) and allocate its block table and view. */
static int attach_cache(cx_session *s, const cx_model *m, const cx_session_params *p, int n_ctx, cx_err *err) {
    if (p->cache) {
        s->cache = p->cache;
    } else {
        int rc = kv_cache_create(m, &p->kv, (n_ctx + KV_BLOCK - 1) / KV_BLOCK + 1, 1, &s->cache, err);
        if (rc) return rc;
    }
    pthread_mutex_lock(&s->cache->lock);
    s->cache->sessions++;
    pthread_mutex_unlock(&s->cache->lock);
    if (kv_seq_init(&s->seq, n_ctx) || kv_view_init(&s->view, s->cache, n_ctx, s->ws.n_threads))
        return cx_fail(err, CX_ENOMEM, "out of memory for the block table of a %d-token session", n_ctx);
    return 0;
}

/* See cortex.h. */
int cx_session_new_ex(const cx_model *m, const cx_session_params *sp, cx_session **out, cx_err *err) {
    const cx_model_info *h = &m->info;
    *out = NULL;
    int n_ctx = sp->n_ctx, n_threads = sp->n_threads;
    int rc = fwd_check_setup(&n_threads, err);
    if (rc) return rc;
    if (sp->cache && sp->cache->m != m) return cx_fail(err, CX_EINVAL, "the shared KV cache belongs to another model");
    if (!sp->cache && (rc = kv_check_params(m, &sp->kv, err))) return rc;
    if (n_ctx <= 0) n_ctx = h->n_ctx < CX_DEFAULT_CTX ? h->n_ctx : CX_DEFAULT_CTX;
    if (n_ctx > h->n_ctx) n_ctx = h->n_ctx;
    if (sp->batch < 0 || sp->batch > FWD_MAX_BATCH)
        return cx_fail(err, CX_EINVAL, "session batch %d is out of range (0..%d)", sp->batch, FWD_MAX_BATCH);
    int batch = sp->batch ? sp->batch : FWD_MAX_BATCH;
    if (batch > n_ctx) batch = n_ctx;
    cx_session *s = calloc(1, sizeof *s);
    if (!s) return cx_fail(err, CX_ENOMEM, "out of memory");
    rc = fwd_ws_init(&s->ws, m, batch, 1, n_threads, err);
    if (rc) {
        free(s);
        return rc;
    }
    s->m = m;
    s->n_ctx = n_ctx;
    rc = attach_cache(s, m, sp, n_ctx, err);
    if (rc) {
        cx_session_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

/* See cortex.h: the blocks go back to the cache (cached prefixes stay indexed). */
void cx_session_reset(cx_session *s) {
    pthread_mutex_lock(&s->cache->lock);
    kv_release(s->cache, &s->seq);
    pthread_mutex_unlock(&s->cache->lock);
    s->pos = 0;
    s->last_reused = 0;
    assert(s->seq.n_blocks == 0 && s->seq.n_tokens == 0);
}

/* See cortex.h. The logits are not copied: dst's are valid after its next cx_eval. */
int cx_session_fork(cx_session *dst, const cx_session *src, cx_err *err) {
    if (dst == src) return cx_fail(err, CX_EINVAL, "a session cannot fork into itself");
    if (dst->cache != src->cache)
        return cx_fail(err, CX_EINVAL, "cx_session_fork: the sessions use different KV caches");
    if (src->pos > dst->n_ctx)
        return cx_fail(err, CX_ECTX, "cx_session_fork: %d positions exceed the context length %d", src->pos,
                       dst->n_ctx);
    pthread_mutex_lock(&dst->cache->lock);
    kv_fork(dst->cache, &dst->seq, &src->seq);
    pthread_mutex_unlock(&dst->cache->lock);
    dst->pos = src->pos;
    dst->last_reused = 0;
    memcpy(dst->lora, src->lora, sizeof dst->lora); /* its keys and values were computed under them */
    dst->n_lora = src->n_lora;
    dst->seq.salt = src->seq.salt;
    assert(dst->seq.n_tokens == dst->pos && dst->seq.n_blocks == src->seq.n_blocks);
    return 0;
}

/* See cortex.h. */
void cx_session_kv_stats(const cx_session *s, cx_kv_stats *out) {
    pthread_mutex_lock(&s->cache->lock);
    kv_stats(s->cache, out);
    pthread_mutex_unlock(&s->cache->lock);
    out->last_reused = s->last_reused;
}

int cx_session_pos(const cx_session *s) { return s->pos; }
uint64_t cx_session_expert_bytes(const cx_session *s) { return s->ws.moe.bytes; }

/* See cortex.h. */
void cx_session_pool_stats(const cx_session *s, cx_pool_stats *out) { tp_stats_get(s->ws.pool, out); }
int cx_session_n_ctx(const cx_session *s) { return s->n_ctx; }

/* See session.h. */
int session_check_tokens(const cx_session *s, const int32_t *tokens, int n, cx_err *err) {
    if (n <= 0) return cx_fail(err, CX_EINVAL, "nothing to evaluate (0 tokens)");
    if (n > s->n_ctx - s->pos)
        return cx_fail(err, CX_ECTX, "%d tokens at position %d exceed the context length %d", n, s->pos, s->n_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= s->m->info.n_vocab)
            return cx_fail(err, CX_EINVAL, "token id %d is outside the vocabulary (0..%d)", tokens[i],
                           s->m->info.n_vocab - 1);
    return 0;
}

/* See session.h. */
int session_take_prefix(cx_session *s, const int32_t *tokens, int n) {
    int reused = s->no_prefix ? 0 : kv_match(s->cache, &s->seq, tokens, n);
    assert(reused >= 0 && reused < n && s->pos + reused <= s->n_ctx); /* the last token is always computed */
    s->last_reused = reused;
    s->pos += reused;
    return reused;
}

/* See session.h. */
int session_commit(cx_session *s, const int32_t *tokens, int T, cx_err *err) {
    kv_cache *c = s->cache;
    assert(T >= 1 && s->pos + T <= s->n_ctx);
    kv_commit(c, &s->seq, s->pos, T, tokens);
    s->pos += T;
    if (kv_view_collect(&s->view, c))
        return cx_fail(err, CX_EIO, "a cold KV page could not be read back%s%s", c->p.spill_path ? " from " : "",
                       c->p.spill_path ? c->p.spill_path : "");
    return 0;
}

/* cx_eval / cx_eval_all with the cache locked: take cached prefix blocks
 * (not for `all`, which wants every position computed), then passes of at
 * most `batch` tokens (fewer when the hot tier cannot hold the blocks of a
 * full batch: pass_chunk), each run by pass_run (pass.h: the protocol
 * cx_batch_eval's passes follow too) as a batch of one segment. With `all`
 * each segment has the logits of every position, written into all[i..i+T);
 * otherwise the last pass's last position's go to the workspace's row 0.
 * Inline, so cx_eval's copy folds `all` away (the deterministic gate counts it). */
static inline int eval_locked(cx_session *s, const int32_t *tokens, int n, float *all, cx_err *err) {
    kv_cache *c = s->cache;
    kv_seq *seq1;
    int pos1, T1;
    pass_scratch sc = {&seq1, &pos1, &T1};
    for (int i = all ? 0 : session_take_prefix(s, tokens, n); i < n;) {
        int T = pass_chunk(s->pos, n - i, s->ws.batch, c->slots[KV_HOT].n);
        assert(T >= 1 && "the hot tier holds at least the blocks of one pass (kv_cache_new)");
        int n_out = all ? T : i + T == n;
        fwd_seg seg = {c, &s->seq, &s->view, s->pos, T, 0, 0, n_out, s->lora, s->n_lora};
        float *logits = all ? all + (size_t)i * (size_t)s->m->info.n_vocab : NULL;
        int rc = pass_run(&s->ws, &seg, 1, &s, tokens + i, T, logits, &sc, err);
        if (rc) return rc;
        i += T;
    }
    return 0;
}

/* See cortex.h. */
int cx_eval(cx_session *s, const int32_t *tokens, int n, const float **logits, cx_err *err) {
    int rc = session_check_tokens(s, tokens, n, err);
    if (rc) return rc;
    assert(s->pos == s->seq.n_tokens); /* the session's position is its sequence's length */
    pthread_mutex_lock(&s->cache->lock);
    rc = eval_locked(s, tokens, n, NULL, err);
    pthread_mutex_unlock(&s->cache->lock);
    if (rc) return rc;
    if (logits) *logits = s->ws.logits;
    return 0;
}

/* See cortex.h. */
int cx_eval_all(cx_session *s, const int32_t *tokens, int n, float *logits, cx_err *err) {
    if (!logits) return cx_fail(err, CX_EINVAL, "cx_eval_all needs a logits array (%d x %d floats)", n,
                                s->m->info.n_vocab);
    int rc = session_check_tokens(s, tokens, n, err);
    if (rc) return rc;
    pthread_mutex_lock(&s->cache->lock);
    s->last_reused = 0;
    rc = eval_locked(s, tokens, n, logits, err);
    pthread_mutex_unlock(&s->cache->lock);
    return rc;
}

/* See cortex.h. */
int cx_session_set_lora(cx_session *s, const cx_lora_use *uses, int n, cx_err *err) {
    if (n < 0 || n > CX_LORA_MAX_SET)
        return cx_fail(err, CX_EINVAL, "%d adapters on one sequence (0..%d)", n, CX_LORA_MAX_SET);
    if (s->pos != 0)
        return cx_fail(err, CX_EINVAL, "adapters change only on an empty session (it holds %d positions)", s->pos);
    for (int i = 0; i < n; i++) {
        if (!uses[i].lora) return cx_fail(err, CX_EINVAL, "adapter %d is NULL", i);
        if (uses[i].lora->m != s->m) return cx_fail(err, CX_EINVAL, "adapter %d belongs to another model", i);
    }
    if (n) memcpy(s->lora, uses, sizeof *uses * (size_t)n);
    s->n_lora = n;
    s->seq.salt = lora_set_salt(uses, n);
    return 0;
}

/* See cortex.h. */
int cx_session_truncate(cx_session *s, int n_pos, cx_err *err) {
    if (n_pos < 0 || n_pos > s->pos)
        return cx_fail(err, CX_EINVAL, "cannot truncate a session of %d positions to %d (0..%d)", s->pos, n_pos,
                       s->pos);
    pthread_mutex_lock(&s->cache->lock);
    pass_rollback(s, n_pos);
    pthread_mutex_unlock(&s->cache->lock);
    return 0;
}
