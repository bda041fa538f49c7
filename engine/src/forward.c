/*
 * forward.c - the Llama transformer, read top to bottom.
 *
 *   x = embed(tokens)                                   T tokens at once
 *   for each layer:
 *       h = rmsnorm(x) ; q,k,v = h·Wq, h·Wk, h·Wv ; rope(q, k) ; cache k,v
 *       x += Wo · attention(q, cached k, cached v)      (grouped-query heads)
 *       h = rmsnorm(x) ; x += Wdown · (silu(h·Wgate) * (h·Wup))
 *   logits = rmsnorm(x[last]) · Wout
 *
 * Prefill evaluates up to `batch` tokens per pass: every weight row is read
 * once for all of them (kern gemm), which turns prefill from memory-bound
 * matrix-vector products into compute-bound matrix products. Decode is the
 * same code with T = 1. Activations are prepared once per matrix input
 * (quantized to 8 bits for quantized weights) and shared by every matrix that
 * reads that input (q/k/v; gate/up).
 *
 * Attention is tiled FlashAttention-style: for each head and block of
 * queries, keys and values are visited in tiles of ATT_TILE positions (a
 * K tile and a V tile of 64 positions x 64 dims are 16 KiB each, L1/L2
 * resident while a block of queries uses them) with an online softmax
 * (running max and sum, values accumulated in double). Tile edges are fixed
 * multiples of ATT_TILE from position 0, so each query's arithmetic is the
 * same whether it arrives in a prefill batch or alone in decode, on any
 * number of threads.
 *
 * The KV cache is paged (kv_cache.h): a tile is ATT_TILE / KV_BLOCK blocks,
 * read through the sequence's block table (kv_view.h: hot f32 blocks in
 * place, other formats and tiers decoded per layer first). The kernels see
 * the same rows in the same order as from one contiguous array, so the
 * default cache (f32, no budgets) gives the contiguous cache's bits.
 *
 * A session owns one sequence: its block table, views and every scratch
 * buffer, all allocated once in cx_session_new so evaluating tokens does not
 * allocate. Its cache is its own or shared with other sessions
 * (cx_session_new_ex); all block moves happen in kv_prepare before a pass.
 */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kv_cache.h"
#include "kv_view.h"
#include "model.h"
#include "quant.h"
#include "threadpool.h"
#include "util.h"

#define MAX_BATCH 256 /* tokens per prefill pass */
#define ATT_TILE 64   /* key/value positions per attention tile */
#define ATT_QBLOCK 16 /* queries sharing each tile */
#define ROW_CHUNK 16  /* matrix rows are split across threads in multiples of this */
#define TILE_ROWS 64    /* gemm tile: weight rows ... */
#define TILE_TOKENS 32  /* ... by tokens (see matmul_part) */

_Static_assert(ATT_TILE % KV_BLOCK == 0, "attention tiles are whole KV blocks");

/* One prepared activation input: the floats, and their 8-bit forms once asked for. */
typedef struct act_slot {
    kern_act a;
    void *mem;
    int ready;
} act_slot;

struct cx_session {
    const cx_model *m;
    const kern_ops *k;
    int n_ctx, pos, batch;
    tp_pool *pool;
    /* per-batch activations, [T][width] */
    float *x, *xb, *xb2, *hb, *hb2, *q, *kk, *vv, *logits, *rope_cs;
    kv_cache *cache;          /* the KV cache: the session's own or shared */
    kv_seq seq;               /* this sequence's block table */
    kv_view view;             /* attention's f32 view of one layer of it */
    int last_reused;          /* tokens the last cx_eval took from the prefix cache */
    double *inv_freq;         /* RoPE frequency of each pair in a head */
    /* the current matrix input and its prepared forms, one per activation format */
    const float *in;
    int in_T;
    int64_t in_n;
    act_slot act[3];
    /* attention scratch, per thread */
    float *att_scores;   /* [thread][ATT_TILE] */
    double *att_acc;     /* [thread][ATT_QBLOCK][head_dim] */
    double *att_ml;      /* [thread][ATT_QBLOCK][2]: running max, running sum */
    int n_threads;
    float *mem;          /* the allocation behind the float buffers */
#ifdef CORTEX_TEST_KNOBS
    double slowdown_pct;      /* test knob CORTEX_SLOWDOWN_PCT (see knob_slowdown) */
    float *knob_y;            /* scratch outputs of the knob's extra products */
    volatile float knob_sink; /* keeps the extra products observable */
#endif
};

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
    tp_free(s->pool);
    free(s->mem);
    free(s->inv_freq);
    free(s->att_acc);
    free(s->att_ml);
    free(s->att_scores);
    for (int f = 0; f < 3; f++) free(s->act[f].mem);
#ifdef CORTEX_TEST_KNOBS
    free(s->knob_y);
#endif
    free(s);
}

/* The widest input any matrix of the model reads (n_embd or n_ff). */
static int64_t widest_input(const cx_model_info *h) { return h->n_ff > h->n_embd ? h->n_ff : h->n_embd; }

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
 * positions) and allocate its block table and views. */
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
    if (kv_seq_init(&s->seq, n_ctx) || kv_view_init(&s->view, s->cache, n_ctx, s->n_threads))
        return cx_fail(err, CX_ENOMEM, "out of memory for the block table of a %d-token session", n_ctx);
    return 0;
}

/* See cortex.h. */
int cx_session_new_ex(const cx_model *m, const cx_session_params *sp, cx_session **out, cx_err *err) {
    const cx_model_info *h = &m->info;
    *out = NULL;
    int n_ctx = sp->n_ctx, n_threads = sp->n_threads;
    char msg[512];
    if (kern_init(msg, sizeof msg)) return cx_fail(err, CX_EINVAL, "%s", msg);
    if (sp->cache && sp->cache->m != m) return cx_fail(err, CX_EINVAL, "the shared KV cache belongs to another model");
    if (!sp->cache) {
        int rc = kv_check_params(m, &sp->kv, err);
        if (rc) return rc;
    }
    if (n_ctx <= 0) n_ctx = h->n_ctx < CX_DEFAULT_CTX ? h->n_ctx : CX_DEFAULT_CTX;
    if (n_ctx > h->n_ctx) n_ctx = h->n_ctx;
    if (n_threads > 256) return cx_fail(err, CX_EINVAL, "thread count %d is out of range (1..256)", n_threads);
    if (n_threads < 1) n_threads = 1;
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
    s->k = kern;
    s->batch = n_ctx < MAX_BATCH ? n_ctx : MAX_BATCH;
    s->n_threads = n_threads;
    size_t B = (size_t)s->batch, E = (size_t)h->n_embd, F = (size_t)h->n_ff, hd = (size_t)h->head_dim;
    size_t KV = (size_t)h->n_head_kv * hd;
    size_t total = B * (4 * E + 2 * F + 2 * KV + hd) + (size_t)h->n_vocab;
    s->mem = calloc(total, sizeof(float));
    s->inv_freq = calloc(hd / 2, sizeof(double));
    s->att_scores = calloc((size_t)n_threads * ATT_TILE, sizeof(float));
    s->att_acc = calloc((size_t)n_threads * ATT_QBLOCK * hd, sizeof(double));
    s->att_ml = calloc((size_t)n_threads * ATT_QBLOCK * 2, sizeof(double));
    s->pool = tp_new(n_threads);
    int ok = s->mem && s->inv_freq && s->att_scores && s->att_acc && s->att_ml && s->pool;
    for (int f = KERN_ACT_Q8_32; f <= KERN_ACT_Q8_256 && ok; f++) {
        size_t bytes = kern_act_bytes(f, s->batch, widest_input(h));
        ok = posix_memalign(&s->act[f].mem, 64, bytes ? bytes : 64) == 0;
    }
#ifdef CORTEX_TEST_KNOBS
    s->slowdown_pct = slowdown_pct;
    size_t knob_rows = E > F ? E : F; /* the most rows any matrix has */
    if ((size_t)h->n_vocab > knob_rows) knob_rows = (size_t)h->n_vocab;
    s->knob_y = calloc(knob_rows, sizeof(float));
    ok = ok && s->knob_y;
#endif
    if (!ok) {
        cx_session_free(s);
        return cx_fail(err, CX_ENOMEM, "out of memory for a %d-token session (%zu MiB)", n_ctx,
                       total * sizeof(float) >> 20);
    }
    float *p = s->mem;
    s->x = p; p += B * E;
    s->xb = p; p += B * E;
    s->xb2 = p; p += B * E;
    s->q = p; p += B * E;
    s->hb = p; p += B * F;
    s->hb2 = p; p += B * F;
    s->kk = p; p += B * KV;
    s->vv = p; p += B * KV;
    s->rope_cs = p; p += B * hd;
    s->logits = p;
    for (size_t i = 0; i < hd / 2; i++)
        s->inv_freq[i] = 1.0 / pow((double)h->rope_base, (double)(2 * i) / (double)h->head_dim);
    s->m = m;
    s->n_ctx = n_ctx;
    int rc = attach_cache(s, m, sp, n_ctx, err);
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
int cx_session_n_ctx(const cx_session *s) { return s->n_ctx; }

/* ---- matrix products: activations prepared once per input, rows split across the pool ---- */

typedef struct prep_job { cx_session *s; act_slot *slot; } prep_job;

/* Quantize this thread's share of the input rows. */
static void prep_part(void *ctx, int i, int n) {
    prep_job *j = ctx;
    cx_session *s = j->s;
    for (int t = s->in_T * i / n; t < s->in_T * (i + 1) / n; t++)
        kern_act_set(s->k, &j->slot->a, t, s->in + (size_t)t * (size_t)s->in_n);
}

/* Make x ([T][n]) the input of the next matrix products; its 8-bit forms are
 * made on first use. */
static void set_input(cx_session *s, const float *x, int T, int64_t n) {
    s->in = x;
    s->in_T = T;
    s->in_n = n;
    for (int f = 0; f < 3; f++) s->act[f].ready = 0;
}

/* The current input in the format `type`'s kernels read. */
static const kern_act *input_for(cx_session *s, int type) {
    int fmt = kern_act_format(type);
    assert(fmt >= 0);
    act_slot *slot = &s->act[fmt];
    if (!slot->ready) {
        kern_act_init(&slot->a, fmt, s->in_T, s->in_n, slot->mem);
        slot->a.f = s->in;
        if (fmt != KERN_ACT_F32) {
            prep_job j = {s, slot};
            if (s->in_T >= 4) tp_run(s->pool, prep_part, &j);
            else prep_part(&j, 0, 1);
        }
        slot->ready = 1;
    }
    return &slot->a;
}

typedef struct matmul_job { const kern_ops *k; const cx_weight *w; const kern_act *a; float *y; int64_t ldy, rows; } matmul_job;

/* This thread's rows: contiguous, split at multiples of ROW_CHUNK. */
static void matmul_part(void *ctx, int i, int n) {
    matmul_job *j = ctx;
    int64_t chunks = (j->rows + ROW_CHUNK - 1) / ROW_CHUNK;
    int64_t r0 = chunks * i / n * ROW_CHUNK, r1 = chunks * (i + 1) / n * ROW_CHUNK;
    if (r1 > j->rows) r1 = j->rows;
    if (r0 >= r1) return;
    const uint8_t *w = j->w->data;
    kern_gemm_fn gemm = j->w->layout == KERN_LAYOUT_X8 ? j->k->gemm_x8[j->w->type] : j->k->gemm[j->w->type];
    assert(gemm || j->w->layout == KERN_LAYOUT_ROWS);
    /* Tiles of TILE_ROWS weight rows x TILE_TOKENS tokens: the rows (~128 KiB
     * of q8_0 at n_embd 2048) and the token tile's activations (~64 KiB) stay
     * in L2 while every pair is computed; untiled, each weight row streamed
     * all T tokens' activations (0.5-1.4 MiB) from L3. */
    for (int64_t rb = r0; rb < r1; rb += TILE_ROWS) {
        int64_t re = rb + TILE_ROWS < r1 ? rb + TILE_ROWS : r1;
        for (int t0 = 0; t0 < j->a->T; t0 += TILE_TOKENS) {
            kern_act tile;
            kern_act_slice(j->a, t0, j->a->T - t0 < TILE_TOKENS ? j->a->T - t0 : TILE_TOKENS, &tile);
            float *y = j->y + (size_t)t0 * (size_t)j->ldy;
            if (gemm) gemm(w, j->w->row_bytes, rb, re, &tile, y, j->ldy);
            else kern_gemm_generic(j->k, j->w->type, w, j->w->row_bytes, rb, re, &tile, y, j->ldy);
        }
    }
}

/* y[t][0..rows) = W · input[t] for every token of the current input (first `rows` rows of W).
 * Each (row, token) is computed by exactly one thread with the same kernel, so
 * the result does not depend on the thread count. */
static void matmul_rows(cx_session *s, const cx_weight *w, int64_t rows, float *y, int64_t ldy) {
    assert(w->cols == s->in_n);
    matmul_job j = {s->k, w, input_for(s, w->type), y, ldy, rows};
    tp_run(s->pool, matmul_part, &j);
}

static void matmul(cx_session *s, const cx_weight *w, float *y) { matmul_rows(s, w, w->rows, y, w->rows); }

/* ---- attention: tiled, online softmax, heads x query blocks across the pool ---- */

typedef struct attn_job { cx_session *s; int T, n_qblocks; } attn_job;

/* One head, queries qi0..qi1-1 of the batch (positions pos+qi), all keys up to
 * each query, read from the layer the session's view points at. */
static void attention_block(cx_session *s, int tid, int head, int qi0, int qi1) {
    const cx_model_info *h = &s->m->info;
    const kern_ops *k = s->k;
    int hd = h->head_dim, kv_dim = h->n_head_kv * hd, E = h->n_embd;
    int kvh = head / (h->n_head / h->n_head_kv); /* grouped-query: query heads share a kv head */
    float scale = 1.0f / sqrtf((float)hd);
    const float *const *Kb = s->view.k, *const *Vb = s->view.v;
    size_t col = (size_t)kvh * (size_t)hd; /* this kv head's columns in a row */
    float *sc = s->att_scores + (size_t)tid * ATT_TILE;
    double *acc = s->att_acc + (size_t)tid * ATT_QBLOCK * (size_t)hd;
    double *ml = s->att_ml + (size_t)tid * ATT_QBLOCK * 2;
    int nq = qi1 - qi0;
    for (int i = 0; i < nq; i++) {
        ml[2 * i] = -INFINITY;
        ml[2 * i + 1] = 0.0;
        memset(acc + (size_t)i * hd, 0, sizeof(double) * (size_t)hd);
    }
    int last = s->pos + qi1 - 1; /* the furthest position any query here sees */
    for (int k0 = 0; k0 <= last; k0 += ATT_TILE) {
        for (int i = 0; i < nq; i++) {
            int p = s->pos + qi0 + i;
            if (k0 > p) continue;
            int kn = (p + 1 - k0) < ATT_TILE ? p + 1 - k0 : ATT_TILE;
            const float *q = s->q + (size_t)(qi0 + i) * (size_t)E + (size_t)head * (size_t)hd;
            for (int j = 0; j < kn; j += KV_BLOCK) /* the tile's blocks, in order */
                k->attn_scores(sc + j, q, Kb[(k0 + j) / KV_BLOCK] + col, (size_t)kv_dim,
                               kn - j < KV_BLOCK ? kn - j : KV_BLOCK, hd, scale);
            float tmax = -INFINITY;
            for (int j = 0; j < kn; j++) tmax = sc[j] > tmax ? sc[j] : tmax;
            double *a = acc + (size_t)i * hd;
            double m_old = ml[2 * i], m_new = tmax > m_old ? tmax : m_old;
            if (m_old != m_new && m_old != -INFINITY) {
                double corr = exp(m_old - m_new);
                ml[2 * i + 1] *= corr;
                k->scale_f64(a, corr, hd);
            }
            ml[2 * i] = m_new;
            ml[2 * i + 1] += k->exp_shift(sc, kn, (float)m_new);
            for (int j = 0; j < kn; j += KV_BLOCK)
                k->attn_values(a, sc + j, Vb[(k0 + j) / KV_BLOCK] + col, (size_t)kv_dim,
                               kn - j < KV_BLOCK ? kn - j : KV_BLOCK, hd);
        }
    }
    for (int i = 0; i < nq; i++) {
        float *o = s->xb + (size_t)(qi0 + i) * (size_t)E + (size_t)head * (size_t)hd;
        double inv = 1.0 / ml[2 * i + 1];
        for (int d = 0; d < hd; d++) o[d] = (float)(acc[(size_t)i * hd + d] * inv);
    }
}

typedef struct stage_job { cx_session *s; int layer; } stage_job;

/* This thread's share of the blocks the layer's view must decode. */
static void stage_part(void *ctx, int i, int n) {
    stage_job *j = ctx;
    kv_view_stage(&j->s->view, j->s->cache, &j->s->seq, j->layer, i, n);
}

/* Make layer l of blocks 0..nb-1 readable as f32 (decoding on the pool when
 * several blocks need it). */
static void view_layer(cx_session *s, int l, int nb) {
    int todo = kv_view_layer(&s->view, s->cache, &s->seq, l, nb);
    if (!todo) return;
    stage_job j = {s, l};
    if (todo > 1) tp_run(s->pool, stage_part, &j);
    else stage_part(&j, 0, 1);
}

/* Work items (head, query block) dealt round-robin: later blocks see more keys,
 * interleaving evens the load. */
static void attention_part(void *ctx, int i, int n) {
    attn_job *j = ctx;
    int n_head = j->s->m->info.n_head, items = n_head * j->n_qblocks;
    for (int it = i; it < items; it += n) {
        int head = it % n_head, qb = it / n_head;
        int qi0 = qb * ATT_QBLOCK, qi1 = qi0 + ATT_QBLOCK < j->T ? qi0 + ATT_QBLOCK : j->T;
        attention_block(j->s, i, head, qi0, qi1);
    }
}

#ifdef CORTEX_TEST_KNOBS
/*
 * Test knob, compiled only with -DCORTEX_TEST_KNOBS (make KNOBS=1): a slowdown
 * of known size, so the performance gates can be shown to catch one.
 * CORTEX_SLOWDOWN_PCT=P makes each pass multiply P/100 of the rows of every
 * matrix it used once more (whole passes for P >= 100, then the first rows),
 * for every token of the pass, with the same kernels and thread split, into
 * scratch. Same instructions on the same kind of data, so instruction counts
 * and time grow alike: by P% of the matrix work, i.e. a little under P% of
 * the total (attention, norms and sampling are not repeated). The extra rows
 * are read after the whole pass, so on a model larger than the cache they
 * come from memory like the real ones. Every token's product lands in one
 * scratch row (ldy 0); the volatile sink keeps it observable.
 */
static void knob_extra(cx_session *s, const cx_weight *w) {
    int64_t left = (int64_t)((double)w->rows * s->slowdown_pct / 100.0 + 0.5);
    if (w->layout == KERN_LAYOUT_X8) left = (left + 7) / 8 * 8; /* whole interleaved groups */
    while (left > 0) {
        int64_t rows = left < w->rows ? left : w->rows;
        matmul_rows(s, w, rows, s->knob_y, 0);
        s->knob_sink += s->knob_y[rows - 1];
        left -= rows;
    }
}

static void knob_slowdown(cx_session *s, int T, int want_logits) {
    if (s->slowdown_pct <= 0) return;
    const cx_model *m = s->m;
    const cx_model_info *h = &m->info;
    for (int l = 0; l < h->n_layer; l++) {
        const cx_layer *w = &m->layers[l];
        /* inputs: any activations of the right width (xb: n_embd, hb: n_ff) */
        set_input(s, s->xb, T, h->n_embd);
        knob_extra(s, &w->wq);
        knob_extra(s, &w->wk);
        knob_extra(s, &w->wv);
        knob_extra(s, &w->wo);
        knob_extra(s, &w->w_gate);
        knob_extra(s, &w->w_up);
        set_input(s, s->hb, T, h->n_ff);
        knob_extra(s, &w->w_down);
    }
    if (want_logits) {
        set_input(s, s->xb, 1, h->n_embd);
        knob_extra(s, &m->output);
    }
}
#endif

/* Run T tokens (positions pos..pos+T-1) through every layer; logits of the last if asked. */
static void forward_batch(cx_session *s, const int32_t *tokens, int T, int want_logits) {
    const cx_model *m = s->m;
    const cx_model_info *h = &m->info;
    const kern_ops *k = s->k;
    int E = h->n_embd, F = h->n_ff, hd = h->head_dim, kv_dim = h->n_head_kv * hd, pos = s->pos;
    for (int t = 0; t < T; t++) {
        const uint8_t *emb = (const uint8_t *)m->tok_embd.data + (size_t)tokens[t] * m->tok_embd.row_bytes;
        quant_dequantize_row(m->tok_embd.type, emb, s->x + (size_t)t * E, E);
        kern_rope_table(s->rope_cs + (size_t)t * hd, hd, pos + t, s->inv_freq);
    }
    attn_job aj = {s, T, (T + ATT_QBLOCK - 1) / ATT_QBLOCK};

    for (int l = 0; l < h->n_layer; l++) {
        const cx_layer *w = &m->layers[l];
        /* attention block */
        for (int t = 0; t < T; t++) k->rmsnorm(s->xb + (size_t)t * E, s->x + (size_t)t * E, w->attn_norm, E, h->rms_eps);
        set_input(s, s->xb, T, E);
        matmul(s, &w->wq, s->q);
        matmul(s, &w->wk, s->kk);
        matmul(s, &w->wv, s->vv);
        for (int t = 0; t < T; t++) {
            k->rope(s->q + (size_t)t * E, h->n_head, hd, s->rope_cs + (size_t)t * hd);
            k->rope(s->kk + (size_t)t * kv_dim, h->n_head_kv, hd, s->rope_cs + (size_t)t * hd);
        }
        kv_write(s->cache, &s->seq, l, pos, T, s->kk, s->vv);
        view_layer(s, l, (pos + T + KV_BLOCK - 1) / KV_BLOCK);
        tp_run(s->pool, attention_part, &aj);
        set_input(s, s->xb, T, E);
        matmul(s, &w->wo, s->xb2);
        k->add(s->x, s->xb2, T * E);
        /* feed-forward block (SwiGLU) */
        for (int t = 0; t < T; t++) k->rmsnorm(s->xb + (size_t)t * E, s->x + (size_t)t * E, w->ffn_norm, E, h->rms_eps);
        set_input(s, s->xb, T, E);
        matmul(s, &w->w_gate, s->hb);
        matmul(s, &w->w_up, s->hb2);
        k->swiglu(s->hb, s->hb2, T * F);
        set_input(s, s->hb, T, F);
        matmul(s, &w->w_down, s->xb2);
        k->add(s->x, s->xb2, T * E);
    }
    if (want_logits) {
        k->rmsnorm(s->xb, s->x + (size_t)(T - 1) * E, m->out_norm, E, h->rms_eps);
        set_input(s, s->xb, 1, E);
        matmul(s, &m->output, s->logits);
    }
#ifdef CORTEX_TEST_KNOBS
    knob_slowdown(s, T, want_logits);
#endif
}

/* cx_eval with the cache locked: take cached prefix blocks, then passes of
 * at most `batch` tokens (fewer when the hot tier cannot hold the blocks of
 * a full batch), each prepared (block moves), run, and committed. */
static int eval_locked(cx_session *s, const int32_t *tokens, int n, cx_err *err) {
    kv_cache *c = s->cache;
    int reused = kv_match(c, &s->seq, tokens, n);
    s->last_reused = reused;
    s->pos += reused;
    for (int i = reused; i < n;) {
        int T = n - i < s->batch ? n - i : s->batch, limit = kv_pass_limit(c, s->pos);
        if (T > limit) T = limit;
        int rc = kv_prepare(c, &s->seq, s->pos, T, err);
        if (rc) return rc;
        forward_batch(s, tokens + i, T, i + T == n);
        kv_commit(c, &s->seq, s->pos, T, tokens + i);
        s->pos += T;
        i += T;
        if (kv_view_collect(&s->view, c))
            return cx_fail(err, CX_EIO, "a cold KV page could not be read back%s%s",
                           c->p.spill_path ? " from " : "", c->p.spill_path ? c->p.spill_path : "");
    }
    return 0;
}

int cx_eval(cx_session *s, const int32_t *tokens, int n, const float **logits, cx_err *err) {
    if (n <= 0) return cx_fail(err, CX_EINVAL, "nothing to evaluate (0 tokens)");
    if (n > s->n_ctx - s->pos)
        return cx_fail(err, CX_ECTX, "%d tokens at position %d exceed the context length %d", n, s->pos, s->n_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= s->m->info.n_vocab)
            return cx_fail(err, CX_EINVAL, "token id %d is outside the vocabulary (0..%d)", tokens[i],
                           s->m->info.n_vocab - 1);
    pthread_mutex_lock(&s->cache->lock);
    int rc = eval_locked(s, tokens, n, err);
    pthread_mutex_unlock(&s->cache->lock);
    if (rc) return rc;
    if (logits) *logits = s->logits;
    return 0;
}
