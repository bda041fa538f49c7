/*
 * forward.c - the Llama transformer, read top to bottom.
 *
 *   x = embed(tokens)                                   T tokens at once
 *   for each layer:
 *       h = rmsnorm(x) ; q,k,v = h·Wq, h·Wk, h·Wv ; rope(q, k) ; cache k,v
 *       x += Wo · attention(q, cached k, cached v) (+bo) (grouped-query heads;
 *                                         gpt-oss: sinks, sliding windows)
 *       h = rmsnorm(x) ; x += Wdown · (silu(h·Wgate) * (h·Wup))
 *                    or x += the token's experts' weighted outputs (moe.c)
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
 * A pass runs over segments (forward.h): one for cx_eval (session.c), one
 * per sequence for cx_batch_eval (batch.c). Matrices see all rows of all
 * segments at once; attention, RoPE positions and KV writes are per
 * segment. Every buffer lives in the workspace, allocated once, so a pass
 * does not allocate; all block moves happen in kv_prepare before it.
 */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "lora/lora.h"
#include "moe.h"
#include "placement.h"
#include "quant.h"
#include "util.h"

#ifndef ATT_TILE      /* (-D for a search of the sizes: docs/performance.md) */
#define ATT_TILE 64   /* key/value positions per attention tile */
#endif
#ifndef ATT_QBLOCK
#define ATT_QBLOCK 16 /* queries sharing each tile */
#endif
#ifndef ATT_AHEAD
#define ATT_AHEAD 1   /* tiles ahead whose KV rows attention prefetches (0: none) */
#endif
#define ROW_CHUNK 16  /* matrix rows are split across threads in multiples of this */
#define TILE_ROWS 64    /* gemm tile: weight rows ... */
#define TILE_TOKENS FWD_TILE_TOKENS /* ... by tokens (see matmul_part) */

_Static_assert(ATT_TILE % KV_BLOCK == 0, "attention tiles are whole KV blocks");
_Static_assert(KV_BLOCK == KERN_VBLOCK, "attn_values takes the cache's blocks");

/* Width of the attention's query side: n_head x head_dim (n_embd unless the
 * file gives another head_dim). */
static size_t q_dim(const cx_model_info *h) { return (size_t)h->n_head * (size_t)h->head_dim; }

/* The widest input any matrix of the model reads (n_embd, n_ff, or the
 * attention output's n_head x head_dim). */
static int64_t widest_input(const cx_model_info *h) {
    int64_t w = h->n_ff > h->n_embd ? h->n_ff : h->n_embd;
    if (h->n_ff_expert > w) w = h->n_ff_expert;
    return (int64_t)q_dim(h) > w ? (int64_t)q_dim(h) : w;
}

/* Rows a matrix input may have in a pass of `rows` rows: the experts' inputs
 * hold one row per (token, expert used) pair. */
static int input_rows(const cx_model_info *h, int rows) { return rows * (h->n_expert_used > 1 ? h->n_expert_used : 1); }

/*
 * The workspace is one 4 KiB-aligned region carved by an arena (arena.h):
 * at creation, the buffers every pass uses: the shared activations for
 * `batch` rows, logits and RoPE frequencies (act_size), attention's scratch
 * (att_ws_size), the experts' (moe_ws_size, moe.c); then, per pass, the
 * matrix input's prepared forms, sized for that pass's rows (input_size):
 * the arena is rolled back to the end of the fixed part at the start of
 * every pass (fwd_pass_begin), so a pass's scratch costs a pointer bump and
 * nothing is freed one by one. Every buffer is whole cache lines
 * (fwd_lines), so the sizes add up exactly (fwd_ws_init checks it).
 */

/* See forward.h. */
void *fwd_carve(arena *mem, size_t n, size_t size) {
    size_t bytes = fwd_lines(n, size);
    void *p = arena_alloc(mem, bytes, ARENA_ALIGN);
    assert(p);
    memset(p, 0, bytes);
    return p;
}

/* The shared activations' widths: x, xb2: E; xb: W (the attention output
 * too); q: Q; hb, hb2: F; kk, vv: KV; rope_cs: hd. */
typedef struct act_dims { size_t E, W, Q, F, KV, hd; } act_dims;

static act_dims dims_of(const cx_model_info *h) {
    act_dims d = {(size_t)h->n_embd, 0, q_dim(h), (size_t)h->n_ff, (size_t)h->n_head_kv * (size_t)h->head_dim,
                  (size_t)h->head_dim};
    d.W = d.E > d.Q ? d.E : d.Q;
    return d;
}

/* Bytes of the shared activations (as act_carve takes them). */
static size_t act_size(const cx_model_info *h, int batch, int n_out) {
    act_dims d = dims_of(h);
    size_t B = (size_t)batch;
    return 2 * fwd_lines(B * d.E, sizeof(float)) + fwd_lines(B * d.W, sizeof(float)) + fwd_lines(B * d.Q, sizeof(float)) +
           2 * fwd_lines(B * d.F, sizeof(float)) + 2 * fwd_lines(B * d.KV, sizeof(float)) +
           fwd_lines(B * d.hd, sizeof(float)) + fwd_lines((size_t)n_out * (size_t)h->n_vocab, sizeof(float)) +
           fwd_lines(d.hd / 2, sizeof(double));
}

static void act_carve(fwd_ws *w, const cx_model_info *h, int batch, int n_out) {
    act_dims d = dims_of(h);
    size_t B = (size_t)batch;
    w->x = fwd_carve(&w->mem, B * d.E, sizeof(float));
    w->xb = fwd_carve(&w->mem, B * d.W, sizeof(float));
    w->xb2 = fwd_carve(&w->mem, B * d.E, sizeof(float));
    w->q = fwd_carve(&w->mem, B * d.Q, sizeof(float));
    w->hb = fwd_carve(&w->mem, B * d.F, sizeof(float));
    w->hb2 = fwd_carve(&w->mem, B * d.F, sizeof(float));
    w->kk = fwd_carve(&w->mem, B * d.KV, sizeof(float));
    w->vv = fwd_carve(&w->mem, B * d.KV, sizeof(float));
    w->rope_cs = fwd_carve(&w->mem, B * d.hd, sizeof(float));
    w->logits = fwd_carve(&w->mem, (size_t)n_out * (size_t)h->n_vocab, sizeof(float));
    w->inv_freq = fwd_carve(&w->mem, d.hd / 2, sizeof(double));
}

/* Items of one thread's slice of each attention scratch buffer: scores
 * [heads of a kv group][ATT_QBLOCK][ATT_TILE] floats (a tile's, every
 * (head, query) of an item: q8 keys are scored for all of them at once);
 * accumulators [heads of a kv group][ATT_QBLOCK][head_dim]
 * doubles; running max and sum [heads][ATT_QBLOCK][2] doubles; the packed
 * tile, keys then values, [2][ATT_TILE][head_dim] floats; the rotated
 * queries [heads][ATT_QBLOCK][head_dim] floats and the rotated values'
 * accumulators, as acc (both used only over q4h blocks); the queries in
 * int8, [heads][ATT_QBLOCK][head_dim], their scales and their codes' sums
 * [heads][ATT_QBLOCK] (used only over q8 blocks); the queries gathered,
 * [heads][ATT_QBLOCK][head_dim] floats (scored at once against float keys). */
static void att_slice(const cx_model_info *h, size_t n[FWD_ATT_BUFS]) {
    size_t hd = (size_t)h->head_dim, rep = (size_t)(h->n_head / h->n_head_kv); /* heads per item, at most */
    n[0] = rep * ATT_QBLOCK * ATT_TILE;
    n[1] = rep * ATT_QBLOCK * hd;
    n[2] = rep * ATT_QBLOCK * 2;
    n[3] = 2 * ATT_TILE * hd;
    n[4] = rep * ATT_QBLOCK * hd;
    n[5] = rep * ATT_QBLOCK * hd;
    n[6] = rep * ATT_QBLOCK * hd;
    n[7] = rep * ATT_QBLOCK;
    n[8] = rep * ATT_QBLOCK;
    n[9] = rep * ATT_QBLOCK * hd;
}
static const size_t att_item_size[FWD_ATT_BUFS] = {sizeof(float), sizeof(double), sizeof(double), sizeof(float),
                                                   sizeof(float), sizeof(double), sizeof(int8_t), sizeof(float),
                                                   sizeof(int32_t), sizeof(float)};

/* Bytes of attention's scratch (as att_ws_carve takes them): n_threads
 * slices of whole lines, and the work items' ends. */
static size_t att_ws_size(const cx_model_info *h, int batch, int n_threads) {
    size_t n[FWD_ATT_BUFS], bytes = fwd_lines((size_t)batch, sizeof(int));
    att_slice(h, n);
    for (int b = 0; b < FWD_ATT_BUFS; b++) bytes += (size_t)n_threads * fwd_lines(n[b], att_item_size[b]);
    return bytes;
}

static void att_ws_carve(fwd_att_ws *a, arena *mem, const cx_model_info *h, int batch, int n_threads) {
    size_t n[FWD_ATT_BUFS], T = (size_t)n_threads;
    att_slice(h, n);
    for (int b = 0; b < FWD_ATT_BUFS; b++) a->stride[b] = fwd_lines(n[b], att_item_size[b]) / att_item_size[b];
    a->scores = fwd_carve(mem, T * a->stride[0], sizeof(float));
    a->acc = fwd_carve(mem, T * a->stride[1], sizeof(double));
    a->ml = fwd_carve(mem, T * a->stride[2], sizeof(double));
    a->kv = fwd_carve(mem, T * a->stride[3], sizeof(float));
    a->qr = fwd_carve(mem, T * a->stride[4], sizeof(float));
    a->accr = fwd_carve(mem, T * a->stride[5], sizeof(double));
    a->q8 = fwd_carve(mem, T * a->stride[6], sizeof(int8_t));
    a->q8d = fwd_carve(mem, T * a->stride[7], sizeof(float));
    a->q8s = fwd_carve(mem, T * a->stride[8], sizeof(int32_t));
    a->qf = fwd_carve(mem, T * a->stride[9], sizeof(float));
    a->item_end = fwd_carve(mem, (size_t)batch, sizeof(int));
}

/* Bytes of the pass's scratch at most: each format's form of an input of
 * the pass's rows at the widest input (fwd_input_for takes them). */
static size_t input_size(const cx_model_info *h, int batch) {
    size_t bytes = 0;
    for (int f = 0; f < FWD_ACT_FORMATS; f++) bytes += fwd_lines(kern_act_bytes(f, input_rows(h, batch), widest_input(h)), 1);
    return bytes;
}

/* See forward.h. */
void fwd_ws_free(fwd_ws *w) {
    tp_free(w->pool);
    lora_ws_free(&w->lora);
    free(w->region);
#ifdef CORTEX_TEST_KNOBS
    free(w->knob_y);
#endif
    memset(w, 0, sizeof *w);
}

/* See forward.h. */
int fwd_check_setup(int *n_threads, cx_err *err) {
    if (*n_threads > 256) return cx_fail(err, CX_EINVAL, "thread count %d is out of range (1..256)", *n_threads);
    if (*n_threads < 1) *n_threads = 1;
    return 0;
}

/*
 * RoPE frequencies: base^(-2i/d), times the linear scaling's position scale,
 * divided by the per-frequency factors where the file has them (Llama 3).
 * YaRN (ggml's rope_yarn, ext_factor 1): pair i's angle blends the
 * interpolated (scaled) and the extrapolated (unscaled) angle by a ramp that
 * is 1 below pair `lo` and 0 above `hi`, the correction dimensions where the
 * wavelength spans beta_fast and beta_slow rotations of the original context
 * (computed in float, as ggml does); both are linear in the position, so the
 * blend is one frequency. ggml also multiplies cos and sin by
 * mscale = attn_factor * (1 + 0.1 ln factor), i.e. q and k each by mscale:
 * here the scores' scale gets mscale^2 instead.
 */
static void rope_frequencies(fwd_ws *w) {
    const cx_model *m = w->m;
    const cx_model_info *h = &m->info;
    int hd = h->head_dim, yarn = m->yarn_factor > 0;
    float lo = 0, hi = 0, mscale = 1.0f;
    if (yarn) {
        float base = h->rope_base, orig = (float)m->yarn_orig_ctx, pi = 3.14159265358979323846f;
        float c_fast = (float)hd * logf(orig / (m->yarn_beta_fast * 2 * pi)) / (2 * logf(base));
        float c_slow = (float)hd * logf(orig / (m->yarn_beta_slow * 2 * pi)) / (2 * logf(base));
        lo = floorf(c_fast) > 0 ? floorf(c_fast) : 0;
        hi = ceilf(c_slow) < (float)(hd - 1) ? ceilf(c_slow) : (float)(hd - 1);
        mscale = m->yarn_attn_factor * (1.0f + 0.1f * logf(1.0f / h->rope_freq_scale));
    }
    for (int i = 0; i < hd / 2; i++) {
        double theta = 1.0 / pow((double)h->rope_base, (double)(2 * i) / (double)hd) /
                       (m->rope_factors ? (double)m->rope_factors[i] : 1.0);
        double scale = h->rope_freq_scale;
        if (yarn) {
            float y = ((float)i - lo) / (hi - lo > 0.001f ? hi - lo : 0.001f);
            float ramp = 1 - (y < 0 ? 0 : y > 1 ? 1 : y);
            scale = (double)h->rope_freq_scale * (1.0 - ramp) + ramp;
        }
        w->inv_freq[i] = scale * theta;
    }
    w->att.scale = 1.0f / sqrtf((float)hd) * mscale * mscale;
}

/* See forward.h. */
int fwd_ws_init(fwd_ws *w, const cx_model *m, int batch, int n_out, int n_threads, cx_err *err) {
    const cx_model_info *h = &m->info;
    memset(w, 0, sizeof *w);
    if (model_require_weights(m, err)) return CX_EUNSUP;
    assert(batch >= 1 && n_out >= 1 && n_out <= batch && n_threads >= 1);
#ifdef CORTEX_TEST_KNOBS
    /* Test knob, read once per workspace: CORTEX_SLOWDOWN_PCT=P (0..1000). */
    const char *knob = getenv("CORTEX_SLOWDOWN_PCT");
    if (knob && *knob) {
        char *end;
        w->slowdown_pct = strtod(knob, &end);
        if (*end || !(w->slowdown_pct >= 0 && w->slowdown_pct <= 1000))
            return cx_fail(err, CX_EINVAL, "CORTEX_SLOWDOWN_PCT='%s' is not a number in 0..1000", knob);
    }
#endif
    w->m = m;
    w->k = m->kern;
    w->batch = batch;
    w->n_out = n_out;
    w->n_threads = n_threads;
    size_t fixed = act_size(h, batch, n_out) + att_ws_size(h, batch, n_threads) + moe_ws_size(h, batch);
    size_t region = fixed + input_size(h, batch);
    if (posix_memalign(&w->region, ARENA_PAGE_ALIGN, region)) w->region = NULL;
    /* the workers on the CPUs of the process's placement (cx_set_placement), if it pins */
    int cpus[256];
    assert(n_threads <= (int)(sizeof cpus / sizeof cpus[0]) && "fwd_check_setup caps the thread count");
    int rc = w->region ? tp_new(n_threads, placement_cpus(n_threads, cpus) ? cpus : NULL, &w->pool, err) : 0;
    if (rc) {
        fwd_ws_free(w);
        return rc;
    }
    int ok = w->region && w->pool;
#ifdef CORTEX_TEST_KNOBS
    size_t knob_rows = (size_t)widest_input(h); /* the most rows any matrix has, but the classifier */
    if ((size_t)h->n_vocab > knob_rows) knob_rows = (size_t)h->n_vocab;
    w->knob_y = calloc(knob_rows, sizeof(float));
    ok = ok && w->knob_y;
#endif
    if (!ok) {
        fwd_ws_free(w);
        return cx_fail(err, CX_ENOMEM, "out of memory for a %d-token pass (%zu MiB)", batch, region >> 20);
    }
    arena_init(&w->mem, w->region, region);
    act_carve(w, h, batch, n_out);
    att_ws_carve(&w->att, &w->mem, h, batch, n_threads);
    moe_ws_carve(&w->moe, &w->mem, h, batch);
    w->pass_mark = arena_mark(&w->mem);
    assert(w->pass_mark == fixed);
    rope_frequencies(w);
    return 0;
}

/* ---- matrix products: activations prepared once per input, rows split across the pool ---- */

typedef struct prep_job { fwd_ws *w; fwd_act *slot; int chunks; } prep_job;

/* Quantize one chunk of the input rows. */
static void prep_part(void *ctx, int c, int thread) {
    prep_job *j = ctx;
    fwd_ws *w = j->w;
    const fwd_input *in = &w->in;
    for (int t = in->T * c / j->chunks; t < in->T * (c + 1) / j->chunks; t++)
        kern_act_set(w->k, &j->slot->a, t, in->x + (size_t)t * (size_t)in->n);
}

/* See forward.h. */
void fwd_pass_begin(fwd_ws *w, int rows) {
    assert(rows >= 1 && rows <= w->batch);
    arena_release(&w->mem, w->pass_mark); /* last pass's scratch */
    memset(&w->in, 0, sizeof w->in);
    w->pass_rows = rows;
}

/* See forward.h. */
void fwd_input_set(fwd_ws *w, const float *x, int T, int64_t n) {
    w->in.x = x;
    w->in.T = T;
    w->in.n = n;
    for (int f = 0; f < FWD_ACT_FORMATS; f++) w->in.act[f].ready = 0;
}

/* See forward.h. */
const kern_act *fwd_input_for(fwd_ws *w, int type) {
    int fmt = kern_act_format(type);
    assert(fmt >= 0);
    fwd_input *in = &w->in;
    fwd_act *slot = &in->act[fmt];
    if (!slot->ready) {
        if (!slot->mem) /* first use in this pass: room for the pass's rows at the widest input */
            slot->mem = arena_alloc(&w->mem, kern_act_bytes(fmt, input_rows(&w->m->info, w->pass_rows),
                                                            widest_input(&w->m->info)), ARENA_ALIGN);
        assert(slot->mem && in->T <= input_rows(&w->m->info, w->pass_rows));
        kern_act_init(&slot->a, fmt, in->T, in->n, slot->mem);
        slot->a.f = in->x;
        slot->a.decode_order = w->decode_order;
        if (fmt != KERN_ACT_F32) {
            prep_job j = {w, slot, in->T >= 4 ? tp_chunks(w->pool, in->T) : 1};
            tp_run(w->pool, prep_part, &j, j.chunks, 0);
        }
        slot->ready = 1;
    }
    return &slot->a;
}
/* One matrix of a matmul job: y = W . a (rows of W), plus its adapters' products. */
typedef struct matmul_mat {
    const cx_weight *w;
    const kern_act *a;
    float *y;
    int64_t ldy, rows;
    int64_t at;               /* its first row in the job's row space (a multiple of ROW_CHUNK) */
    const lora_job *lora;     /* the adapters' low-rank products to add (n_lora of them) */
    int n_lora;
} matmul_mat;

/* One pool job over up to three matrices that read the same input (q, k and
 * v; gate and up): their rows, each matrix's first at a multiple of
 * ROW_CHUNK, make one row space that the job's chunks split as one matrix's
 * rows are split. A section fewer is a barrier fewer: on a decode pass each
 * ends in a wait for the slowest thread (and, on a shared machine, often a
 * sleep and a wake-up). Each (row, token) is still computed by exactly one
 * chunk with the same kernel, so the bits are those of a job a matrix. */
typedef struct matmul_job {
    const kern_ops *k;
    matmul_mat m[3];
    int n_mat;
    int64_t rows;             /* the row space: the last matrix's at + rows */
    int chunks;               /* fwd_row_chunks(rows) */
} matmul_job;

/* See forward.h. */
int fwd_row_chunks(const fwd_ws *w, int64_t rows) { return tp_chunks(w->pool, (rows + TILE_ROWS - 1) / TILE_ROWS); }

/* See forward.h: contiguous, split at multiples of ROW_CHUNK. */
void fwd_row_share(int64_t rows, int i, int n, int64_t *r0, int64_t *r1) {
    int64_t chunks = (rows + ROW_CHUNK - 1) / ROW_CHUNK;
    *r0 = chunks * i / n * ROW_CHUNK;
    *r1 = chunks * (i + 1) / n * ROW_CHUNK;
    if (*r1 > rows) *r1 = rows;
}

/* See forward.h. */
void fwd_gemm_rows(const kern_ops *k, const cx_weight *wt, const uint8_t *w, int64_t r0, int64_t r1, const kern_act *a,
                   float *y, int64_t ldy) {
    kern_layout layout = wt->layout;
    kern_gemm_fn gemm = kern_gemm_of(k, wt->type, layout);
    assert(gemm || layout == KERN_LAYOUT_ROWS);
    assert(ROW_CHUNK % kern_layout_group(layout) == 0 && TILE_ROWS % kern_layout_group(layout) == 0);
    /* Tiles of TILE_ROWS weight rows x TILE_TOKENS tokens: the rows (~128 KiB
     * of q8_0 at n_embd 2048) and the token tile's activations (~64 KiB) stay
     * in L2 while every pair is computed; untiled, each weight row streamed
     * all T tokens' activations (0.5-1.4 MiB) from L3. */
    for (int64_t rb = r0; rb < r1; rb += TILE_ROWS) {
        int64_t re = rb + TILE_ROWS < r1 ? rb + TILE_ROWS : r1;
        for (int t0 = 0; t0 < a->T; t0 += TILE_TOKENS) {
            kern_act tile;
            kern_act_slice(a, t0, a->T - t0 < TILE_TOKENS ? a->T - t0 : TILE_TOKENS, &tile);
            float *yt = y + (size_t)t0 * (size_t)ldy;
            if (gemm) gemm(w, wt->row_bytes, rb, re, &tile, yt, ldy);
            else kern_gemm_generic(k, wt->type, w, wt->row_bytes, rb, re, &tile, yt, ldy);
        }
    }
}

/* One chunk's rows of the job's row space (fwd_row_share): each matrix's
 * rows among them, then the adapters' products on those rows. */
static void matmul_part(void *ctx, int c, int thread) {
    matmul_job *j = ctx;
    int64_t s0, s1;
    fwd_row_share(j->rows, c, j->chunks, &s0, &s1);
    for (int i = 0; i < j->n_mat; i++) {
        const matmul_mat *m = &j->m[i];
        int64_t r0 = s0 - m->at, r1 = s1 - m->at;
        if (r0 < 0) r0 = 0;
        if (r1 > m->rows) r1 = m->rows;
        if (r0 >= r1) continue;
        fwd_gemm_rows(j->k, m->w, m->w->data, r0, r1, m->a, m->y, m->ldy);
        /* LoRA: B·u into the same outputs, for each run's rows (lora/lora_pass.c) */
        for (int a = 0; a < m->n_lora; a++) {
            const lora_job *lj = &m->lora[a];
            j->k->lora_up(m->y + (size_t)lj->row * (size_t)m->ldy, m->ldy, lj->u, lj->mat->rank, lj->T, lj->mat->b,
                          lj->mat->b_type, lj->mat->rank, r0, r1);
        }
    }
}

/* Add matrix w (its first `rows` rows, outputs y ldy apart) to job j, with
 * the adapters of layer matrix `proj` (LORA_*; -1: none), whose down
 * products lora_ws_down made for the current input. Its input is prepared
 * here (fwd_input_for: a job of its own where it needs one), before j runs. */
static void matmul_add(fwd_ws *ws, matmul_job *j, const cx_weight *w, int64_t rows, float *y, int64_t ldy, int proj) {
    assert(w->cols == ws->in.n && j->n_mat < 3);
    matmul_mat *m = &j->m[j->n_mat++];
    int64_t at = (j->rows + ROW_CHUNK - 1) / ROW_CHUNK * ROW_CHUNK;
    *m = (matmul_mat){w, fwd_input_for(ws, w->type), y, ldy, rows, at, NULL, 0};
    if (proj >= 0) m->lora = lora_ws_jobs(&ws->lora, proj, &m->n_lora);
    j->rows = at + rows;
}

static void matmul_go(fwd_ws *ws, matmul_job *j) {
    j->k = ws->k;
    j->chunks = fwd_row_chunks(ws, j->rows);
    tp_run(ws->pool, matmul_part, j, j->chunks, 0);
}

/* y[t][0..rows) = W · input[t] for every token of the current input (first `rows` rows of W).
 * Each (row, token) is computed by exactly one chunk with the same kernel, so
 * the result does not depend on the thread count or on which thread ran it. */
static void matmul_rows(fwd_ws *ws, const cx_weight *w, int64_t rows, float *y, int64_t ldy) {
    matmul_job j = {0};
    matmul_add(ws, &j, w, rows, y, ldy, -1);
    matmul_go(ws, &j);
}

void fwd_matmul(fwd_ws *ws, const cx_weight *w, float *y) { matmul_rows(ws, w, w->rows, y, w->rows); }

/* matmul of layer matrix `proj` (LORA_*): plus each adapter's B·u, u made by
 * lora_ws_down for the current input. */
static void matmul_adapted(fwd_ws *ws, const cx_weight *w, float *y, int proj) {
    matmul_job j = {0};
    matmul_add(ws, &j, w, w->rows, y, w->rows, proj);
    matmul_go(ws, &j);
}

/* q, k and v (or gate and up: c NULL) of the current input in one job. */
static void matmul_adapted_fused(fwd_ws *ws, const cx_weight *a, float *ya, int pa, const cx_weight *b, float *yb, int pb,
                                 const cx_weight *c, float *yc, int pc) {
    matmul_job j = {0};
    matmul_add(ws, &j, a, a->rows, ya, a->rows, pa);
    matmul_add(ws, &j, b, b->rows, yb, b->rows, pb);
    if (c) matmul_add(ws, &j, c, c->rows, yc, c->rows, pc);
    matmul_go(ws, &j);
}

/* ---- attention: tiled, online softmax; (segment, heads, query block) items across the pool ---- */

typedef struct attn_job { fwd_ws *w; const fwd_seg *seg; int n_seg; const cx_layer *layer; int chunks; } attn_job;

/* The largest of n scores, in eight independent chains (one chain waits a
 * compare per score; max does not depend on the order). */
static float tile_max(const float *sc, int n) {
    float m[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    int j = 0;
    for (; j + 8 <= n; j += 8)
        for (int i = 0; i < 8; i++) m[i] = sc[j + i] > m[i] ? sc[j + i] : m[i];
    for (; j < n; j++) m[0] = sc[j] > m[0] ? sc[j] : m[0];
    for (int i = 1; i < 8; i++) m[0] = m[i] > m[0] ? m[i] : m[0];
    return m[0];
}

/* Query qi of segment g (row g->row + qi of the pass), head `head`: head_dim floats. */
static const float *seg_query(const fwd_ws *w, const fwd_seg *g, int qi, int head) {
    return w->q + (size_t)(g->row + qi) * q_dim(&w->m->info) + (size_t)head * (size_t)w->m->info.head_dim;
}

/*
 * Heads head0..head0+nh-1 (of one kv group: item_heads),
 * queries qi0..qi1-1 of segment g (positions g->pos+qi, rows g->row+qi), all
 * keys up to each query (within the layer's sliding window, if it has one),
 * read through the segment's view (pointing at the current layer).
 *
 * A window of W positions (gpt-oss) leaves a query at p the keys
 * p-W+1 .. p (llama.cpp masks p - key >= W): tiles wholly before that are
 * skipped, a tile's earlier keys get a zero weight (score -inf). Tile edges
 * stay multiples of ATT_TILE from 0, so a query's arithmetic is still the
 * same in prefill and decode. A learned sink (gpt-oss: one logit s per
 * head) adds exp(s - max) to the softmax's denominator and nothing to its
 * numerator; it is folded in once the keys are done: out = acc / (sum +
 * exp(s - m)), the same as ggml's softmax over the scores with s appended.
 */
static void attention_block(fwd_ws *w, const fwd_seg *g, const cx_layer *L, int tid, int head0, int nh, int qi0,
                            int qi1) {
    const cx_model_info *h = &w->m->info;
    const kern_ops *k = w->k;
    int hd = h->head_dim, QD = (int)q_dim(h);
    int kvh = head0 / (h->n_head / h->n_head_kv); /* grouped-query: query heads share a kv head */
    assert((h->n_head / h->n_head_kv) % nh == 0 && head0 % nh == 0 && "an item's heads share one kv head");
    float scale = w->att.scale;
    int W = L->window;
    const kv_view *view = g->view;
    size_t col = (size_t)kvh * (size_t)hd; /* this kv head's columns in a row */
    float *sc_all = w->att.scores + (size_t)tid * w->att.stride[0]; /* [head][query][ATT_TILE] */
    double *acc = w->att.acc + (size_t)tid * w->att.stride[1]; /* [head][query][hd] */
    double *ml = w->att.ml + (size_t)tid * w->att.stride[2];   /* [head][query][2] */
    float *qr = w->att.qr + (size_t)tid * w->att.stride[4];     /* [head][query][hd] */
    double *accr = w->att.accr + (size_t)tid * w->att.stride[5];
    int8_t *q8 = w->att.q8 + (size_t)tid * w->att.stride[6]; /* [head][query][hd] */
    float *q8d = w->att.q8d + (size_t)tid * w->att.stride[7]; /* [head][query] */
    int32_t *q8s = w->att.q8s + (size_t)tid * w->att.stride[8]; /* [head][query] */
    float *qf = w->att.qf + (size_t)tid * w->att.stride[9];     /* [head][query][hd] */
    int nq = qi1 - qi0, rotated = 0; /* rotated: a q4h block was read (qr and accr are in use) */
    int quantized = 0;               /* the queries are in q8 and q8d (a q8 block was read) */
    for (int i = 0; i < nh * nq; i++) {
        ml[2 * i] = -INFINITY;
        ml[2 * i + 1] = 0.0;
        memset(acc + (size_t)i * hd, 0, sizeof(double) * (size_t)hd);
        memcpy(qf + (size_t)i * hd, seg_query(w, g, qi0 + i % nq, head0 + i / nq), sizeof(float) * (size_t)hd);
    }
    int last = g->pos + qi1 - 1; /* the furthest position any query here sees */
    int first = W && g->pos + qi0 - W + 1 > 0 ? g->pos + qi0 - W + 1 : 0; /* the earliest */
    float *kt = w->att.kv + (size_t)tid * w->att.stride[3], *vt = kt + (size_t)ATT_TILE * (size_t)hd;
    for (int k0 = first / ATT_TILE * ATT_TILE; k0 <= last; k0 += ATT_TILE) {
        /* The tile's keys and values of this kv head, as the queries read them,
         * rows hd floats apart: a slab keeps each kv head's rows together
         * (kv_codec.h), so f32 blocks are read where they are (a block's
         * keys of one head are one run of 16 rows) by an item of a
         * prompt's queries, whose many passes over the tile hit the cache.
         * A decode item's few queries (nq 1) read it once: where the table's
         * kernels would stall on memory inside (AVX2 on Zen 3) its tile is
         * copied first, one sequential read; where they do not (AVX-512 on
         * Zen 5) it is read in place (kern_ops.decode_tile, measured per
         * table: docs/performance.md). Otherwise the tile is
         * unpacked into the thread's scratch (kv_view_rows: any format, read
         * at its own size; the same floats as the cache holds, so the same
         * arithmetic and bits; q4h rows as stored, in the rotated domain,
         * where the item's queries are rotated to meet them and their
         * values' sum is rotated back at the end), where the item's queries
         * (of one head, or of the heads sharing the kv head) read it from L1. */
        if (ATT_AHEAD) { /* the tile ATT_AHEAD ahead, from memory meanwhile (kv_view_prefetch) */
            int a0 = k0 + ATT_AHEAD * ATT_TILE, a1 = a0 + ATT_TILE <= last + 1 ? a0 + ATT_TILE : last + 1;
            for (int p = a0; p < a1; p += KV_BLOCK) kv_view_prefetch(view, p / KV_BLOCK, (int)col, hd);
        }
        const float *kp[ATT_TILE / KV_BLOCK], *vp[ATT_TILE / KV_BLOCK];
        int rot[ATT_TILE / KV_BLOCK] = {0}, tile_rot = 0; /* the block's rows are rotated (q4h, read as stored) */
        kern_kv_src k8[ATT_TILE / KV_BLOCK];               /* a q8 block's keys, read as stored (k8[].codes) */
        int tile_q8 = 0;
        int tn = last + 1 - k0 < ATT_TILE ? last + 1 - k0 : ATT_TILE; /* keys any query reads */
        int in_place = nq > 1 || k->decode_tile != KERN_TILE_COPY; /* and every block of the tile f32 */
        for (int j = 0; j < tn && in_place; j += KV_BLOCK) in_place = view->fmt[(k0 + j) / KV_BLOCK] == KV_F32;
        for (int j = 0; j < tn; j += KV_BLOCK) {
            int bi = (k0 + j) / KV_BLOCK, n = tn - j < KV_BLOCK ? tn - j : KV_BLOCK;
            k8[j / KV_BLOCK].codes = NULL;
            if (in_place) {
                kp[j / KV_BLOCK] = kv_view_f32(view, bi, 0, kvh);
                vp[j / KV_BLOCK] = kv_view_f32(view, bi, 1, kvh);
                continue;
            }
            kp[j / KV_BLOCK] = kt + (size_t)j * hd;
            vp[j / KV_BLOCK] = vt + (size_t)j * hd;
            int keep = !w->att.rows_rotated_back;
            if (view->fmt[bi] == KV_Q8 && !w->att.keys_unpacked) { /* q8 keys: scored in int8 where they are */
                kv_src(KV_Q8, view->slab[bi], view->dim, view->hd, 0, (int)col, &k8[j / KV_BLOCK]);
                tile_q8 = 1;
            } else
                rot[j / KV_BLOCK] = kv_view_rows(view, k, bi, 0, n, (int)col, hd, kt + (size_t)j * hd, (size_t)hd, keep);
            kv_view_rows(view, k, bi, KV_BLOCK, n, (int)col, hd, vt + (size_t)j * hd, (size_t)hd, keep);
            tile_rot |= rot[j / KV_BLOCK];
        }
        if (tile_rot && !rotated) { /* the first q4h block: rotate the queries once, start the rotated sums */
            memcpy(qr, qf, sizeof(float) * (size_t)(nh * nq) * (size_t)hd);
            for (int s = 0; s < nh * nq; s++)
                for (int c = 0; c < hd; c += KV_GROUP) kern_hadamard32(qr + (size_t)s * hd + c);
            memset(accr, 0, sizeof(double) * (size_t)(nh * nq) * (size_t)hd);
            rotated = 1;
        }
        if (tile_q8 && !quantized) { /* the first q8 block: the queries in int8, once, as q8 rows are */
            for (int s = 0; s < nh * nq; s++) {
                int8_t *c = q8 + (size_t)s * hd;
                q8d[s] = kv_q8_row(qf + (size_t)s * hd, hd, c);
                q8s[s] = 0;
                for (int d = 0; d < hd; d++) q8s[s] += c[d];
            }
            quantized = 1;
        }
        for (int j = 0; j < tn; j += KV_BLOCK) { /* the tile's scores, block by block, every (head, query) at once */
            int n = tn - j < KV_BLOCK ? tn - j : KV_BLOCK, b = j / KV_BLOCK;
            if (k8[b].codes) /* q8 keys, in int8 */
                k->attn_scores_i8(sc_all + j, ATT_TILE, q8, (size_t)hd, q8d, q8s, nh * nq,
                                  (const int8_t *)(const void *)k8[b].codes, k8[b].row_bytes, k8[b].row_scale, n, hd, scale);
            else /* float keys (q4h ones meet the rotated queries) */
                k->attn_scores(sc_all + j, ATT_TILE, rot[b] ? qr : qf, (size_t)hd, nh * nq, kp[b], (size_t)hd, n, hd, scale);
        }
        for (int hh = 0; hh < nh; hh++)
            for (int i = 0; i < nq; i++) {
                int p = g->pos + qi0 + i, s = hh * nq + i; /* s: this (head, query)'s state */
                int lo = W && p - W + 1 > 0 ? p - W + 1 : 0; /* this query's first key */
                if (k0 > p || k0 + ATT_TILE <= lo) continue;
                int kn = (p + 1 - k0) < ATT_TILE ? p + 1 - k0 : ATT_TILE;
                float *sc = sc_all + (size_t)s * ATT_TILE; /* its scores (keys past p unused) */
                for (int j = 0; j < lo - k0; j++) sc[j] = -INFINITY; /* before the window */
                float tmax = tile_max(sc, kn);
                double *a = acc + (size_t)s * hd, *ar = accr + (size_t)s * hd;
                double m_old = ml[2 * s], m_new = tmax > m_old ? tmax : m_old;
                if (m_old != m_new && m_old != -INFINITY) {
                    double corr = exp(m_old - m_new);
                    ml[2 * s + 1] *= corr;
                    k->scale_f64(a, corr, hd);
                    if (rotated) k->scale_f64(ar, corr, hd);
                }
                ml[2 * s] = m_new;
                ml[2 * s + 1] += k->exp_shift(sc, kn, (float)m_new);
                if (!tile_rot) {
                    k->attn_values(a, sc, vp, (size_t)hd, kn, hd);
                    continue;
                }
                /* runs of blocks alike, a call each (q4h values go to their
                 * rotated sums): a run's blocks are its own groups
                 * (attn_values), the same for every query of the tile */
                for (int j0 = 0, j1; j0 < kn; j0 = j1) {
                    for (j1 = j0 + KV_BLOCK; j1 < kn && rot[j1 / KV_BLOCK] == rot[j0 / KV_BLOCK]; j1 += KV_BLOCK) {}
                    if (j1 > kn) j1 = kn;
                    k->attn_values(rot[j0 / KV_BLOCK] ? ar : a, sc + j0, vp + j0 / KV_BLOCK, (size_t)hd, j1 - j0, hd);
                }
            }
    }
    for (int hh = 0; hh < nh; hh++)
        for (int i = 0; i < nq; i++) {
            int head = head0 + hh, s = hh * nq + i;
            float *o = w->xb + (size_t)(g->row + qi0 + i) * (size_t)QD + (size_t)head * (size_t)hd;
            double den = ml[2 * s + 1] + (L->sinks ? exp((double)L->sinks[head] - ml[2 * s]) : 0.0);
            double inv = 1.0 / den, *a = acc + (size_t)s * hd;
            if (rotated) /* the q4h values' sum, rotated back once: H (sum p Hv) = sum p v */
                for (int c = 0; c < hd; c += KV_GROUP) kern_hadamard32_add_f64(a + c, accr + (size_t)s * hd + c);
            for (int d = 0; d < hd; d++) o[d] = (float)(a[d] * inv);
        }
}

/* Query heads per attention item of a segment: a prefill item takes all the
 * heads that share a kv head (one unpacked copy of each tile, and one
 * transpose of each block's keys in attn_scores, serve them all); a decode
 * item takes as many of them as leave at least one item per thread
 * (decode_heads: all of the group when the pass's kv groups are enough
 * items for the pool, else a divisor of the group, down to one head). */
static int item_heads(const fwd_ws *w, const fwd_seg *s) {
    const cx_model_info *h = &w->m->info;
    return s->T > 1 ? h->n_head / h->n_head_kv : w->att.decode_heads;
}

/* Heads per decode item in a pass of n_seg segments: the largest divisor d
 * of the kv group whose items (n_head_kv * n_seg * group / d) are at least
 * the pool's threads; one if none is. */
static int decode_heads(const cx_model_info *h, int n_seg, int n_threads) {
    int group = h->n_head / h->n_head_kv;
    for (int d = group; d > 1; d--)
        if (group % d == 0 && (int64_t)h->n_head_kv * n_seg * (group / d) >= n_threads) return d;
    return 1;
}

/* The work items (segment, heads, query block) of one chunk, one item per
 * chunk up to TP_MAX_CHUNKS. Later query blocks see more keys: claiming at
 * run time evens the load. item_end[g] is the number of items of segments
 * 0..g; an item's segment is found by binary search. */
static void attention_part(void *ctx, int c, int thread) {
    attn_job *j = ctx;
    fwd_ws *w = j->w;
    int n_head = w->m->info.n_head, items = w->att.item_end[j->n_seg - 1];
    int64_t it0 = (int64_t)items * c / j->chunks, it1 = (int64_t)items * (c + 1) / j->chunks;
    for (int it = (int)it0; it < (int)it1; it++) {
        int lo = 0, hi = j->n_seg - 1;
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (w->att.item_end[mid] > it) hi = mid;
            else lo = mid + 1;
        }
        const fwd_seg *g = &j->seg[lo];
        int local = it - (lo ? w->att.item_end[lo - 1] : 0);
        int nh = item_heads(w, g), groups = n_head / nh;
        int head0 = local % groups * nh, qb = local / groups;
        int qi0 = qb * ATT_QBLOCK, qi1 = qi0 + ATT_QBLOCK < g->T ? qi0 + ATT_QBLOCK : g->T;
        attention_block(w, g, j->layer, thread, head0, nh, qi0, qi1);
    }
}

typedef struct stage_job { const fwd_seg *g; int layer, todo, chunks; } stage_job;

/* The blocks of one chunk (one block a chunk, up to TP_MAX_CHUNKS) that the
 * segment's view must restore, with the claiming thread's scratch. */
static void stage_part(void *ctx, int c, int thread) {
    stage_job *j = ctx;
    int64_t b0 = (int64_t)j->todo * c / j->chunks, b1 = (int64_t)j->todo * (c + 1) / j->chunks;
    for (int64_t b = b0; b < b1; b++) kv_view_stage(j->g->view, j->g->cache, j->g->seq, j->layer, (int)b, thread);
}

/* Make layer l of the segment's blocks readable as f32 (decoding on the
 * pool when several blocks need it). */
static void view_layer(fwd_ws *w, const fwd_seg *g, int l) {
    int todo = kv_view_layer(g->view, g->cache, g->seq, l, (g->pos + g->T + KV_BLOCK - 1) / KV_BLOCK);
    if (!todo) return;
    stage_job j = {g, l, todo, todo < TP_MAX_CHUNKS ? todo : TP_MAX_CHUNKS};
    /* a view has scratch for its own session's thread count, which may be fewer than the pool's */
    tp_run(w->pool, stage_part, &j, j.chunks, g->view->n_threads);
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
static void knob_extra(fwd_ws *s, const cx_weight *w) {
    int64_t left = (int64_t)((double)w->rows * s->slowdown_pct / 100.0 + 0.5);
    int64_t group = kern_layout_group(w->layout);
    left = (left + group - 1) / group * group; /* whole interleaved groups */
    while (left > 0) {
        int64_t rows = left < w->rows ? left : w->rows;
        matmul_rows(s, w, rows, s->knob_y, 0);
        s->knob_sink += s->knob_y[rows - 1];
        left -= rows;
    }
}

static void knob_slowdown(fwd_ws *s, int T, int n_out) {
    if (s->slowdown_pct <= 0) return;
    const cx_model *m = s->m;
    const cx_model_info *h = &m->info;
    for (int l = 0; l < h->n_layer; l++) {
        cx_weight *ws[MODEL_LAYER_MATS];
        int n = model_layer_matrices((cx_layer *)&m->layers[l], ws);
        for (int i = 0; i < n; i++) {
            /* inputs: any activations of the right width (a buffer that holds T rows of it) */
            int64_t c = ws[i]->cols;
            const float *x = c <= h->n_embd || c <= (int64_t)q_dim(h) ? s->xb : c <= h->n_ff ? s->hb : s->moe.h;
            /* prepared once per input, as the pass does: Q/K/V, output, gate/up (or router and experts), down */
            if (i == 0 || i == 3 || i == 4 || i == n - 1) fwd_input_set(s, x, T, c);
            knob_extra(s, ws[i]);
        }
    }
    if (n_out) {
        fwd_input_set(s, s->xb, n_out, h->n_embd);
        knob_extra(s, &m->output);
    }
}
#endif

/*
 * NeoX-style RoPE (qwen2) rotates dimension i with i + d/2 of each head; the
 * kernels rotate 2i with 2i+1. Reordering each head of q and k to
 * (x0, x_{d/2}, x1, x_{d/2+1}, ...) turns one into the other, and since q and
 * k get the same order (and the cache keeps k in it), every q.k score is
 * unchanged; v is never reordered.
 */
static void interleave_halves(float *v, int n_heads, int hd) {
    float tmp[MODEL_MAX_HEAD_DIM];
    assert(hd <= MODEL_MAX_HEAD_DIM && hd % 2 == 0);
    for (int hh = 0; hh < n_heads; hh++) {
        float *x = v + (size_t)hh * (size_t)hd;
        for (int i = 0; i < hd / 2; i++) {
            tmp[2 * i] = x[i];
            tmp[2 * i + 1] = x[i + hd / 2];
        }
        memcpy(x, tmp, sizeof(float) * (size_t)hd);
    }
}

/* The whole pass, top to bottom; fwd_pass runs it on the pool (tp_pass), so
 * the serial code between its jobs runs on whichever thread finished the
 * last one. */
static void forward(fwd_ws *w, const fwd_seg *seg, int n_seg, const int32_t *tokens, int rows, float *logits) {
    const cx_model *m = w->m;
    const cx_model_info *h = &m->info;
    const kern_ops *k = w->k;
    int E = h->n_embd, F = h->n_ff, hd = h->head_dim, kv_dim = h->n_head_kv * hd, QD = (int)q_dim(h), T = rows;
    assert(n_seg >= 1);
    fwd_pass_begin(w, rows);
    int items = 0, n_out = 0, out_rows = 0;
    w->att.decode_heads = decode_heads(h, n_seg, w->n_threads);
    for (int g = 0; g < n_seg; g++) {
        const fwd_seg *s = &seg[g];
        assert(s->T >= 1 && s->row + s->T <= rows && (g == 0 ? s->row == 0 : s->row == seg[g - 1].row + seg[g - 1].T));
        for (int t = 0; t < s->T; t++)
            kern_rope_table(w->rope_cs + (size_t)(s->row + t) * hd, hd, s->pos + t, w->inv_freq);
        items += h->n_head / item_heads(w, s) * ((s->T + ATT_QBLOCK - 1) / ATT_QBLOCK);
        w->att.item_end[g] = items;
        assert(s->n_out >= 0 && s->n_out <= s->T && (s->n_out == 0 || s->out >= 0));
        if (s->n_out && s->out + s->n_out > n_out) n_out = s->out + s->n_out;
        out_rows += s->n_out;
    }
    assert(out_rows == n_out && "segments' logits rows are distinct and leave no gap");
    assert((logits || n_out <= w->n_out) && "the workspace's logits hold n_out rows");
    for (int t = 0; t < T; t++) {
        const uint8_t *emb = (const uint8_t *)m->tok_embd.data + (size_t)tokens[t] * m->tok_embd.row_bytes;
        quant_dequantize_row(m->tok_embd.type, emb, w->x + (size_t)t * E, E);
    }
    attn_job aj = {w, seg, n_seg, NULL, items < TP_MAX_CHUNKS ? items : TP_MAX_CHUNKS};

    for (int l = 0; l < h->n_layer; l++) {
        const cx_layer *wl = &m->layers[l];
        aj.layer = wl;
        /* attention block */
        for (int t = 0; t < T; t++) k->rmsnorm(w->xb + (size_t)t * E, w->x + (size_t)t * E, wl->attn_norm, E, h->rms_eps);
        fwd_input_set(w, w->xb, T, E);
        lora_ws_down(w, &w->lora, l, LORA_Q, 3);
        matmul_adapted_fused(w, &wl->wq, w->q, LORA_Q, &wl->wk, w->kk, LORA_K, &wl->wv, w->vv, LORA_V);
        for (int t = 0; t < T; t++) {
            if (wl->bq) { /* QKV biases (qwen2) */
                k->add(w->q + (size_t)t * QD, wl->bq, QD);
                k->add(w->kk + (size_t)t * kv_dim, wl->bk, kv_dim);
                k->add(w->vv + (size_t)t * kv_dim, wl->bv, kv_dim);
            }
            if (h->rope_neox) {
                interleave_halves(w->q + (size_t)t * QD, h->n_head, hd);
                interleave_halves(w->kk + (size_t)t * kv_dim, h->n_head_kv, hd);
            }
            k->rope(w->q + (size_t)t * QD, h->n_head, hd, w->rope_cs + (size_t)t * hd);
            k->rope(w->kk + (size_t)t * kv_dim, h->n_head_kv, hd, w->rope_cs + (size_t)t * hd);
        }
        for (int g = 0; g < n_seg; g++) {
            const fwd_seg *s = &seg[g];
            size_t at = (size_t)s->row * (size_t)kv_dim;
            kv_write(s->cache, s->seq, l, s->pos, s->T, w->kk + at, w->vv + at);
            view_layer(w, s, l);
        }
        tp_run(w->pool, attention_part, &aj, aj.chunks, 0);
        fwd_input_set(w, w->xb, T, QD);
        lora_ws_down(w, &w->lora, l, LORA_O, 1);
        matmul_adapted(w, &wl->wo, w->xb2, LORA_O);
        if (wl->bo)
            for (int t = 0; t < T; t++) k->add(w->xb2 + (size_t)t * E, wl->bo, E);
        k->add(w->x, w->xb2, T * E);
        /* feed-forward block: SwiGLU, or a mixture of SwiGLU experts (moe.c) */
        for (int t = 0; t < T; t++) k->rmsnorm(w->xb + (size_t)t * E, w->x + (size_t)t * E, wl->ffn_norm, E, h->rms_eps);
        if (h->n_expert) {
            moe_ffn(w, &w->moe, wl, w->xb, w->xb2, T);
            k->add(w->x, w->xb2, T * E);
            continue;
        }
        fwd_input_set(w, w->xb, T, E);
        lora_ws_down(w, &w->lora, l, LORA_GATE, 2);
        matmul_adapted_fused(w, &wl->w_gate, w->hb, LORA_GATE, &wl->w_up, w->hb2, LORA_UP, NULL, NULL, -1);
        k->swiglu(w->hb, w->hb2, T * F);
        fwd_input_set(w, w->hb, T, F);
        lora_ws_down(w, &w->lora, l, LORA_DOWN, 1);
        matmul_adapted(w, &wl->w_down, w->xb2, LORA_DOWN);
        k->add(w->x, w->xb2, T * E);
    }
    if (n_out) {
        /* each segment's last n_out rows that want logits, in logits-row order */
        for (int g = 0; g < n_seg; g++)
            for (int j = 0; j < seg[g].n_out; j++)
                k->rmsnorm(w->xb + (size_t)(seg[g].out + j) * E,
                           w->x + (size_t)(seg[g].row + seg[g].T - seg[g].n_out + j) * E, m->out_norm, E, h->rms_eps);
        fwd_input_set(w, w->xb, n_out, E);
        fwd_matmul(w, &m->output, logits ? logits : w->logits);
    }
#ifdef CORTEX_TEST_KNOBS
    knob_slowdown(w, T, n_out);
#endif
    lora_ws_end_pass(&w->lora);
}

typedef struct pass_args {
    fwd_ws *w;
    const fwd_seg *seg;
    int n_seg, rows;
    const int32_t *tokens;
    float *logits;
} pass_args;

static void forward_body(void *arg) {
    pass_args *a = arg;
    forward(a->w, a->seg, a->n_seg, a->tokens, a->rows, a->logits);
}

/* See forward.h. */
void fwd_pass(fwd_ws *w, const fwd_seg *seg, int n_seg, const int32_t *tokens, int rows, float *logits) {
    pass_args a = {w, seg, n_seg, rows, tokens, logits};
    tp_pass(w->pool, forward_body, &a);
}
