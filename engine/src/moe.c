/*
 * moe.c - the mixture-of-experts feed-forward stage.
 *
 *   logits = h · Wrouter (+ bias)                one small matrix, all rows
 *   per token: its k experts and their weights  (moe_route)
 *   group the (token, expert) pairs by expert   counting sort: expert e's pairs
 *                                               are rows off[e] .. off[e+1]-1
 *   gather the pairs' inputs, prepare them once (8-bit activations for all pairs)
 *   per expert with pairs: gate, up = its row range of the stacked tensors
 *       · its pairs' rows (+ biases); act(gate, up); down likewise
 *   out[t] = sum over t's experts, best first, of weight x down output
 *
 * Every selected expert's rows are read once per pass however many of the
 * pass's tokens chose it, and an expert no token chose is not read at all
 * (decode reads k experts). One pool run computes gate and up of every
 * expert with pairs, one the down products: each thread takes its share of
 * each expert's rows (fwd_row_share, as for a dense matrix), so a (row, pair)
 * product has one owner and the gemm's per-product arithmetic (equal to the
 * dot product's, kernels.h): results depend neither on the thread count nor
 * on which other tokens share the pass, and the weighted sum runs in the
 * token's own expert order, so prefill and decode agree bit for bit.
 */
#include "moe.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "model.h"

/* Pairs of a pass of `batch` rows: one per (token, expert used). */
static size_t pairs(const cx_model_info *h, size_t batch) { return batch * (size_t)h->n_expert_used; }

/* See moe.h. */
size_t moe_ws_floats(const cx_model_info *h, size_t batch) {
    if (!h->n_expert) return 0;
    size_t P = pairs(h, batch), X = (size_t)h->n_expert;
    /* logits; weights, experts, slots (ints are float-sized); offsets; inputs/outputs; gate and up */
    return batch * X + 3 * P + X + 1 + P * (size_t)h->n_embd + 2 * P * (size_t)h->n_ff_expert;
}

/* Zeroed, line-aligned bytes from the workspace's arena (ws_region counted them). */
static void *moe_carve(fwd_ws *w, size_t bytes) {
    void *p = arena_alloc(&w->mem, bytes, ARENA_ALIGN);
    assert(p);
    memset(p, 0, bytes);
    return p;
}

/* See moe.h. */
void moe_ws_carve(fwd_ws *w, int batch) {
    const cx_model_info *h = &w->m->info;
    size_t B = (size_t)batch, P = pairs(h, B), X = (size_t)h->n_expert;
    w->moe_logits = moe_carve(w, B * X * sizeof(float));
    w->moe_wt = moe_carve(w, P * sizeof(float));
    w->moe_sel = moe_carve(w, P * sizeof(int));
    w->moe_slot = moe_carve(w, P * sizeof(int));
    w->moe_off = moe_carve(w, (X + 1) * sizeof(int));
    w->moe_x = moe_carve(w, P * (size_t)h->n_embd * sizeof(float));
    w->moe_h = moe_carve(w, P * (size_t)h->n_ff_expert * sizeof(float));
    w->moe_h2 = moe_carve(w, P * (size_t)h->n_ff_expert * sizeof(float));
}

/* The indices of the k largest of x[0..n) into sel, largest first; the lower
 * index wins ties (a stable descending sort's first k, as ggml_top_k picks). */
static void top_k(const float *x, int n, int k, int *sel) {
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < n; e++) {
            int taken = 0;
            for (int i = 0; i < j && !taken; i++) taken = sel[i] == e;
            if (!taken && (best < 0 || x[e] > x[best])) best = e;
        }
        sel[j] = best;
    }
}

/* See moe.h: llama.cpp's build_moe_ffn for the two gatings. */
void moe_route(const cx_model *m, const kern_ops *k, float *logits, int *sel, float *wt) {
    int X = m->info.n_expert, K = m->info.n_expert_used;
    if (m->moe_gating == MODEL_GATING_SOFTMAX) { /* probabilities over all, top k, renormalised */
        k->softmax(logits, X);
        top_k(logits, X, K, sel);
        float sum = 0;
        for (int j = 0; j < K; j++) sum += wt[j] = logits[sel[j]];
        for (int j = 0; j < K; j++) wt[j] /= sum;
    } else { /* MODEL_GATING_TOPK_SOFTMAX: top k logits, softmax over them */
        top_k(logits, X, K, sel);
        for (int j = 0; j < K; j++) wt[j] = logits[sel[j]];
        k->softmax(wt, K);
    }
}

/* See moe.h. */
void moe_swiglu_oai(float *gate, const float *up, int64_t n) {
    const float alpha = 1.702f, limit = 7.0f;
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i] < limit ? gate[i] : limit;
        float u = up[i] > limit ? limit : up[i] < -limit ? -limit : up[i];
        gate[i] = g / (1.0f + expf(-alpha * g)) * (u + 1.0f);
    }
}

/* One pool run over the experts with pairs: for each of `n` stacked weights,
 * this thread's rows of each such expert times that expert's pairs. */
typedef struct moe_job {
    fwd_ws *w;
    int n;
    const cx_weight *wt[2];
    const kern_act *a[2];
    float *y[2];
} moe_job;

static void moe_part(void *ctx, int i, int n) {
    moe_job *j = ctx;
    fwd_ws *w = j->w;
    const int *off = w->moe_off;
    for (int m = 0; m < j->n; m++) {
        const cx_weight *wt = j->wt[m];
        int64_t R = wt->expert_rows, r0, r1;
        fwd_row_share(R, i, n, &r0, &r1);
        if (r0 >= r1) continue;
        for (int e = 0; e < w->m->info.n_expert; e++) {
            int cnt = off[e + 1] - off[e];
            if (!cnt) continue;
            kern_act slice;
            kern_act_slice(j->a[m], off[e], cnt, &slice);
            const uint8_t *base = (const uint8_t *)wt->data + (size_t)e * (size_t)R * wt->row_bytes;
            fwd_gemm_rows(w->k, wt, base, r0, r1, &slice, j->y[m] + (size_t)off[e] * (size_t)R, R);
        }
    }
}

/* Add expert e's bias (rows of n in b, NULL: none) to each pair's row of y. */
static void add_bias(fwd_ws *w, float *y, const float *b, int64_t n) {
    if (!b) return;
    const int *off = w->moe_off;
    for (int e = 0; e < w->m->info.n_expert; e++)
        for (int r = off[e]; r < off[e + 1]; r++) w->k->add(y + (size_t)r * (size_t)n, b + (size_t)e * (size_t)n, (int)n);
}

/* See moe.h. */
void moe_ffn(fwd_ws *w, const cx_layer *L, int T) {
    const cx_model *m = w->m;
    const cx_model_info *h = &m->info;
    const kern_ops *k = w->k;
    int E = h->n_embd, F = h->n_ff_expert, X = h->n_expert, K = h->n_expert_used, P = T * K;
    assert(T >= 1 && L->gate_exps.expert_rows == F && L->down_exps.expert_rows == E);
    /* route: every token's experts and weights */
    fwd_set_input(w, w->xb, T, E);
    fwd_matmul(w, &L->router, w->moe_logits);
    for (int t = 0; t < T; t++) {
        float *lg = w->moe_logits + (size_t)t * (size_t)X;
        if (L->router_b) k->add(lg, L->router_b, X);
        moe_route(m, k, lg, w->moe_sel + (size_t)t * K, w->moe_wt + (size_t)t * K);
    }
    /* group the pairs by expert (counting sort, tokens in order within an expert) */
    int *off = w->moe_off, *sel = w->moe_sel, *slot = w->moe_slot;
    memset(off, 0, sizeof(int) * (size_t)(X + 1));
    for (int p = 0; p < P; p++) off[sel[p] + 1]++;
    for (int e = 0; e < X; e++) off[e + 1] += off[e];
    for (int p = 0; p < P; p++) slot[p] = off[sel[p]]++; /* off[e] ends at the old off[e+1] ... */
    for (int e = X; e > 0; e--) off[e] = off[e - 1];      /* ... so shift it back */
    off[0] = 0;
    /* the bytes this layer reads: each expert that some token chose, once */
    size_t per_expert = (size_t)F * (L->gate_exps.row_bytes + L->up_exps.row_bytes) + (size_t)E * L->down_exps.row_bytes;
    for (int e = 0; e < X; e++) w->moe_bytes += off[e + 1] > off[e] ? per_expert : 0;
    for (int p = 0; p < P; p++)
        memcpy(w->moe_x + (size_t)slot[p] * E, w->xb + (size_t)(p / K) * E, sizeof(float) * (size_t)E);
    /* gate and up of every chosen expert over its pairs, inputs prepared once */
    fwd_set_input(w, w->moe_x, P, E);
    moe_job gu = {w, 2, {&L->gate_exps, &L->up_exps}, {NULL, NULL}, {w->moe_h, w->moe_h2}};
    gu.a[0] = fwd_input_for(w, L->gate_exps.type);
    gu.a[1] = fwd_input_for(w, L->up_exps.type);
    tp_run(w->pool, moe_part, &gu);
    add_bias(w, w->moe_h, L->gate_exps_b, F);
    add_bias(w, w->moe_h2, L->up_exps_b, F);
    if (m->moe_act == MODEL_ACT_SWIGLU_OAI) moe_swiglu_oai(w->moe_h, w->moe_h2, (int64_t)P * F);
    else k->swiglu(w->moe_h, w->moe_h2, P * F);
    /* down, into the grouped inputs' place */
    fwd_set_input(w, w->moe_h, P, F);
    moe_job dn = {w, 1, {&L->down_exps, NULL}, {fwd_input_for(w, L->down_exps.type), NULL}, {w->moe_x, NULL}};
    tp_run(w->pool, moe_part, &dn);
    add_bias(w, w->moe_x, L->down_exps_b, E);
    /* each token's weighted sum, its experts best first */
    for (int t = 0; t < T; t++) {
        float *o = w->xb2 + (size_t)t * E;
        for (int j = 0; j < K; j++) {
            const float *y = w->moe_x + (size_t)slot[t * K + j] * E;
            float c = w->moe_wt[t * K + j];
            if (j == 0)
                for (int i = 0; i < E; i++) o[i] = c * y[i];
            else
                for (int i = 0; i < E; i++) o[i] += c * y[i];
        }
    }
}
