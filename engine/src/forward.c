/*
 * forward.c - the Llama transformer, one token at a time, read top to bottom.
 *
 *   x = embed(token)
 *   for each layer:
 *       h = rmsnorm(x) ; q,k,v = h·Wq, h·Wk, h·Wv ; rope(q, k) ; cache k,v
 *       x += Wo · attention(q, cached k, cached v)      (grouped-query heads)
 *       h = rmsnorm(x) ; x += Wdown · (silu(h·Wgate) * (h·Wup))
 *   logits = rmsnorm(x) · Wout
 *
 * A session owns one sequence: its KV cache and every scratch buffer, all
 * allocated once in cx_session_new so evaluating a token does not allocate.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "model.h"
#include "quant.h"
#include "threadpool.h"
#include "util.h"

struct cx_session {
    const cx_model *m;
    int n_ctx, pos;
    tp_pool *pool;
    float *x, *xb, *xb2, *hb, *hb2, *q, *k, *v, *att, *logits;
    float *k_cache, *v_cache; /* [layer][position][kv_dim] */
    double *inv_freq;         /* RoPE frequency of each pair in a head */
    double *acc;              /* attention output accumulators, n_embd */
    float *mem;               /* the one allocation behind all of the above */
#ifdef CORTEX_TEST_KNOBS
    double slowdown_pct;      /* test knob CORTEX_SLOWDOWN_PCT (see knob_slowdown) */
    float *knob_y;            /* scratch outputs of the knob's extra products */
    volatile float knob_sink; /* keeps the extra products observable */
#endif
};

int cx_session_new(const cx_model *m, int n_ctx, int n_threads, cx_session **out, cx_err *err) {
    const cx_model_info *h = &m->info;
    *out = NULL;
    if (n_ctx <= 0) n_ctx = h->n_ctx < CX_DEFAULT_CTX ? h->n_ctx : CX_DEFAULT_CTX;
    if (n_ctx > h->n_ctx) n_ctx = h->n_ctx;
    if (n_threads > 256) return cx_fail(err, CX_EINVAL, "thread count %d is out of range (1..256)", n_threads);
#ifdef CORTEX_TEST_KNOBS
    /* Test knob, read once per session: CORTEX_SLOWDOWN_PCT=P (0..1000). */
    double slowdown_pct = 0;
    const char *knob = getenv("CORTEX_SLOWDOWN_PCT");
    if (knob && *knob) {
        char *end;
        slowdown_pct = strtod(knob, &end);
        if (*end || !(slowdown_pct >= 0 && slowdown_pct <= 1000))
            return cx_fail(err, CX_EINVAL, "CORTEX_SLOWDOWN_PCT='%s' is not a number in 0..1000", knob);
    }
#endif
    cx_session *s = calloc(1, sizeof *s);
    if (!s) return cx_fail(err, CX_ENOMEM, "out of memory");
    size_t E = (size_t)h->n_embd, F = (size_t)h->n_ff, KV = (size_t)h->n_head_kv * (size_t)h->head_dim;
    size_t cache = (size_t)h->n_layer * (size_t)n_ctx * KV;
    size_t total = 3 * E + 2 * F + E + 2 * KV + (size_t)h->n_head * (size_t)n_ctx + (size_t)h->n_vocab + 2 * cache;
    s->mem = calloc(total, sizeof(float));
    s->inv_freq = calloc((size_t)h->head_dim / 2, sizeof(double));
    s->acc = calloc(E, sizeof(double));
    s->pool = tp_new(n_threads);
#ifdef CORTEX_TEST_KNOBS
    s->slowdown_pct = slowdown_pct;
    size_t knob_rows = E > F ? E : F; /* the most rows any matrix has */
    if ((size_t)h->n_vocab > knob_rows) knob_rows = (size_t)h->n_vocab;
    s->knob_y = calloc(knob_rows, sizeof(float));
    if (!s->knob_y) {
        cx_session_free(s);
        return cx_fail(err, CX_ENOMEM, "out of memory");
    }
#endif
    if (!s->mem || !s->pool || !s->inv_freq || !s->acc) {
        cx_session_free(s);
        return cx_fail(err, CX_ENOMEM, "out of memory for a %d-token session (%zu MiB)", n_ctx,
                       total * sizeof(float) >> 20);
    }
    float *p = s->mem;
    s->x = p; p += E;
    s->xb = p; p += E;
    s->xb2 = p; p += E;
    s->hb = p; p += F;
    s->hb2 = p; p += F;
    s->q = p; p += E;
    s->k = p; p += KV;
    s->v = p; p += KV;
    s->att = p; p += (size_t)h->n_head * (size_t)n_ctx;
    s->logits = p; p += (size_t)h->n_vocab;
    s->k_cache = p; p += cache;
    s->v_cache = p;
    for (int i = 0; i < h->head_dim / 2; i++)
        s->inv_freq[i] = 1.0 / pow((double)h->rope_base, (double)(2 * i) / (double)h->head_dim);
    s->m = m;
    s->n_ctx = n_ctx;
    *out = s;
    return 0;
}

void cx_session_free(cx_session *s) {
    if (!s) return;
    tp_free(s->pool);
    free(s->mem);
    free(s->inv_freq);
    free(s->acc);
#ifdef CORTEX_TEST_KNOBS
    free(s->knob_y);
#endif
    free(s);
}

void cx_session_reset(cx_session *s) { s->pos = 0; }
int cx_session_pos(const cx_session *s) { return s->pos; }
int cx_session_n_ctx(const cx_session *s) { return s->n_ctx; }

/* ---- matrix-vector product, rows split across the pool ---- */

typedef struct matvec_job { const cx_weight *w; const float *x; float *y; } matvec_job;

static void matvec_part(void *ctx, int i, int n) {
    matvec_job *j = ctx;
    int64_t r0 = j->w->rows * i / n, r1 = j->w->rows * (i + 1) / n;
    const uint8_t *row = (const uint8_t *)j->w->data + (size_t)r0 * j->w->row_bytes;
    for (int64_t r = r0; r < r1; r++, row += j->w->row_bytes)
        j->y[r] = kern_dot_scalar(j->w->type, row, j->x, j->w->cols);
}

/* y[rows] = W · x. Each row is computed by exactly one thread, so the result
 * does not depend on the thread count. */
static void matvec(tp_pool *pool, const cx_weight *w, const float *x, float *y) {
    matvec_job j = {w, x, y};
    tp_run(pool, matvec_part, &j);
}

/* ---- attention over the cached positions, heads split across the pool ---- */

typedef struct attn_job { cx_session *s; int layer, pos; } attn_job;

static void attention_part(void *ctx, int i, int n) {
    attn_job *j = ctx;
    cx_session *s = j->s;
    const cx_model_info *h = &s->m->info;
    int hd = h->head_dim, kv_dim = h->n_head_kv * hd, group = h->n_head / h->n_head_kv;
    float scale = 1.0f / sqrtf((float)hd);
    size_t layer_off = (size_t)j->layer * (size_t)s->n_ctx * (size_t)kv_dim;
    for (int head = h->n_head * i / n; head < h->n_head * (i + 1) / n; head++) {
        const float *q = s->q + head * hd;
        float *att = s->att + (size_t)head * (size_t)s->n_ctx;
        int kvh = head / group; /* grouped-query: `group` query heads share a kv head */
        for (int t = 0; t <= j->pos; t++) {
            const float *k = s->k_cache + layer_off + (size_t)t * kv_dim + kvh * hd;
            double dot = 0.0;
            for (int d = 0; d < hd; d++) dot += (double)q[d] * k[d];
            att[t] = (float)(dot * scale);
        }
        kern_softmax(att, j->pos + 1);
        double *acc = s->acc + head * hd; /* double: summing hundreds of positions in float drifts */
        for (int d = 0; d < hd; d++) acc[d] = 0;
        for (int t = 0; t <= j->pos; t++) {
            const float *v = s->v_cache + layer_off + (size_t)t * kv_dim + kvh * hd;
            for (int d = 0; d < hd; d++) acc[d] += (double)att[t] * v[d];
        }
        float *out = s->xb + head * hd;
        for (int d = 0; d < hd; d++) out[d] = (float)acc[d];
    }
}

#ifdef CORTEX_TEST_KNOBS
/*
 * Test knob, compiled only with -DCORTEX_TEST_KNOBS (make KNOBS=1): a slowdown
 * of known size, so the performance gates can be shown to catch one.
 * CORTEX_SLOWDOWN_PCT=P makes each token multiply P/100 of the rows of every
 * matrix it used once more (whole passes for P >= 100, then the first rows),
 * with the same kernel and the same thread split, into scratch. Same
 * instructions on the same kind of data, so instruction counts and time grow
 * alike: by P% of the matrix work, i.e. a little under P% of the total
 * (attention, norms and sampling are not repeated). The extra rows are read
 * after the whole token, so on a model larger than the cache they come from
 * memory like the real ones. Each product lands in the volatile sink, which
 * the compiler must keep.
 */
static void knob_extra(cx_session *s, const cx_weight *w, const float *x) {
    int64_t left = (int64_t)((double)w->rows * s->slowdown_pct / 100.0 + 0.5);
    while (left > 0) {
        cx_weight first = *w; /* a view of the first rows */
        first.rows = left < w->rows ? left : w->rows;
        matvec(s->pool, &first, x, s->knob_y);
        s->knob_sink += s->knob_y[first.rows - 1];
        left -= first.rows;
    }
}

static void knob_slowdown(cx_session *s, int want_logits) {
    if (s->slowdown_pct <= 0) return;
    const cx_model *m = s->m;
    for (int l = 0; l < m->info.n_layer; l++) {
        const cx_layer *w = &m->layers[l];
        /* inputs: any vector of the right length (xb: n_embd, hb: n_ff) */
        knob_extra(s, &w->wq, s->xb);
        knob_extra(s, &w->wk, s->xb);
        knob_extra(s, &w->wv, s->xb);
        knob_extra(s, &w->wo, s->xb);
        knob_extra(s, &w->w_gate, s->xb);
        knob_extra(s, &w->w_up, s->xb);
        knob_extra(s, &w->w_down, s->hb);
    }
    if (want_logits) knob_extra(s, &m->output, s->xb);
}
#endif

/* Run one token through every layer at position s->pos; logits only if asked. */
static void forward_token(cx_session *s, int token, int want_logits) {
    const cx_model *m = s->m;
    const cx_model_info *h = &m->info;
    int E = h->n_embd, kv_dim = h->n_head_kv * h->head_dim, pos = s->pos;
    const uint8_t *emb = (const uint8_t *)m->tok_embd.data + (size_t)token * m->tok_embd.row_bytes;
    quant_dequantize_row(m->tok_embd.type, emb, s->x, E);

    for (int l = 0; l < h->n_layer; l++) {
        const cx_layer *w = &m->layers[l];
        /* attention block */
        kern_rmsnorm(s->xb, s->x, w->attn_norm, E, h->rms_eps);
        matvec(s->pool, &w->wq, s->xb, s->q);
        matvec(s->pool, &w->wk, s->xb, s->k);
        matvec(s->pool, &w->wv, s->xb, s->v);
        kern_rope(s->q, h->n_head, h->head_dim, pos, s->inv_freq);
        kern_rope(s->k, h->n_head_kv, h->head_dim, pos, s->inv_freq);
        size_t slot = ((size_t)l * (size_t)s->n_ctx + (size_t)pos) * (size_t)kv_dim;
        memcpy(s->k_cache + slot, s->k, sizeof(float) * (size_t)kv_dim);
        memcpy(s->v_cache + slot, s->v, sizeof(float) * (size_t)kv_dim);
        attn_job aj = {s, l, pos};
        tp_run(s->pool, attention_part, &aj);
        matvec(s->pool, &w->wo, s->xb, s->xb2);
        for (int i = 0; i < E; i++) s->x[i] += s->xb2[i];
        /* feed-forward block (SwiGLU) */
        kern_rmsnorm(s->xb, s->x, w->ffn_norm, E, h->rms_eps);
        matvec(s->pool, &w->w_gate, s->xb, s->hb);
        matvec(s->pool, &w->w_up, s->xb, s->hb2);
        kern_swiglu(s->hb, s->hb2, h->n_ff);
        matvec(s->pool, &w->w_down, s->hb, s->xb2);
        for (int i = 0; i < E; i++) s->x[i] += s->xb2[i];
    }
    if (want_logits) {
        kern_rmsnorm(s->x, s->x, m->out_norm, E, h->rms_eps);
        matvec(s->pool, &m->output, s->x, s->logits);
    }
#ifdef CORTEX_TEST_KNOBS
    knob_slowdown(s, want_logits);
#endif
}

int cx_eval(cx_session *s, const int32_t *tokens, int n, const float **logits, cx_err *err) {
    if (n <= 0) return cx_fail(err, CX_EINVAL, "nothing to evaluate (0 tokens)");
    if (n > s->n_ctx - s->pos)
        return cx_fail(err, CX_ECTX, "%d tokens at position %d exceed the context length %d", n, s->pos, s->n_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= s->m->info.n_vocab)
            return cx_fail(err, CX_EINVAL, "token id %d is outside the vocabulary (0..%d)", tokens[i],
                           s->m->info.n_vocab - 1);
    for (int i = 0; i < n; i++) {
        forward_token(s, tokens[i], i == n - 1);
        s->pos++;
    }
    if (logits) *logits = s->logits;
    return 0;
}
