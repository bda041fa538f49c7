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

#include "forward.h"
#include "model.h"

/* Pairs of a pass of `batch` rows: one per (token, expert used). */
static size_t pairs(const cx_model_info *h, int batch) { return (size_t)batch * (size_t)h->n_expert_used; }

/* See moe.h. */
size_t moe_ws_size(const cx_model_info *h, int batch) {
    if (!h->n_expert) return 0;
    size_t P = pairs(h, batch), X = (size_t)h->n_expert;
    return fwd_lines((size_t)batch * X, sizeof(float)) + fwd_lines(P, sizeof(float)) + 2 * fwd_lines(P, sizeof(int)) +
           fwd_lines(X + 1, sizeof(int)) + fwd_lines(P * (size_t)h->n_embd, sizeof(float)) +
           2 * fwd_lines(P * (size_t)h->n_ff_expert, sizeof(float));
}

/* See moe.h. */
void moe_ws_carve(moe_ws *mw, arena *mem, const cx_model_info *h, int batch) {
    memset(mw, 0, sizeof *mw);
    if (!h->n_expert) return;
    size_t P = pairs(h, batch), X = (size_t)h->n_expert;
    mw->n_expert = h->n_expert;
    mw->logits = fwd_carve(mem, (size_t)batch * X, sizeof(float));
    mw->wt = fwd_carve(mem, P, sizeof(float));
    mw->sel = fwd_carve(mem, P, sizeof(int));
    mw->slot = fwd_carve(mem, P, sizeof(int));
    mw->off = fwd_carve(mem, X + 1, sizeof(int));
    mw->x = fwd_carve(mem, P * (size_t)h->n_embd, sizeof(float));
    mw->h = fwd_carve(mem, P * (size_t)h->n_ff_expert, sizeof(float));
    mw->h2 = fwd_carve(mem, P * (size_t)h->n_ff_expert, sizeof(float));
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
 * one chunk's rows of each such expert times that expert's pairs. */
typedef struct moe_job {
    const kern_ops *k;
    const moe_ws *mw;
    int n;
    const cx_weight *wt[2];
    const kern_act *a[2];
    float *y[2];
    int chunks; /* fwd_row_chunks of the weights' expert rows (the same for each) */
} moe_job;

static void moe_part(void *ctx, int c, int thread) {
    moe_job *j = ctx;
    const int *off = j->mw->off;
    for (int m = 0; m < j->n; m++) {
        const cx_weight *wt = j->wt[m];
        int64_t R = wt->expert_rows, r0, r1;
        fwd_row_share(R, c, j->chunks, &r0, &r1);
        if (r0 >= r1) continue;
        for (int e = 0; e < j->mw->n_expert; e++) {
            int cnt = off[e + 1] - off[e];
            if (!cnt) continue;
            kern_act slice;
            kern_act_slice(j->a[m], off[e], cnt, &slice);
            const uint8_t *base = (const uint8_t *)wt->data + (size_t)e * (size_t)R * wt->row_bytes;
            fwd_gemm_rows(j->k, wt, base, r0, r1, &slice, j->y[m] + (size_t)off[e] * (size_t)R, R);
        }
    }
}

/* Add expert e's bias (rows of n in b, NULL: none) to each pair's row of y. */
static void add_bias(const kern_ops *k, const moe_ws *mw, float *y, const float *b, int64_t n) {
    if (!b) return;
    const int *off = mw->off;
    for (int e = 0; e < mw->n_expert; e++)
        for (int r = off[e]; r < off[e + 1]; r++) k->add(y + (size_t)r * (size_t)n, b + (size_t)e * (size_t)n, (int)n);
}

/* See moe.h. */
void moe_ffn(fwd_ws *w, moe_ws *mw, const cx_layer *L, const float *in, float *out, int T) {
    const cx_model *m = w->m;
    const cx_model_info *h = &m->info;
    const kern_ops *k = w->k;
    int E = h->n_embd, F = h->n_ff_expert, X = h->n_expert, K = h->n_expert_used, P = T * K;
    assert(T >= 1 && T <= w->pass_rows && L->gate_exps.expert_rows == F && L->down_exps.expert_rows == E);
    /* route: every token's experts and weights */
    fwd_input_set(w, in, T, E);
    fwd_matmul(w, &L->router, mw->logits);
    for (int t = 0; t < T; t++) {
        float *lg = mw->logits + (size_t)t * (size_t)X;
        if (L->router_b) k->add(lg, L->router_b, X);
        moe_route(m, k, lg, mw->sel + (size_t)t * K, mw->wt + (size_t)t * K);
    }
    /* group the pairs by expert (counting sort, tokens in order within an expert) */
    int *off = mw->off, *sel = mw->sel, *slot = mw->slot;
    memset(off, 0, sizeof(int) * (size_t)(X + 1));
    for (int p = 0; p < P; p++) off[sel[p] + 1]++;
    for (int e = 0; e < X; e++) off[e + 1] += off[e];
    for (int p = 0; p < P; p++) slot[p] = off[sel[p]]++; /* off[e] ends at the old off[e+1] ... */
    for (int e = X; e > 0; e--) off[e] = off[e - 1];      /* ... so shift it back */
    off[0] = 0;
    /* the bytes this layer reads: each expert that some token chose, once */
    size_t per_expert = (size_t)F * (L->gate_exps.row_bytes + L->up_exps.row_bytes) + (size_t)E * L->down_exps.row_bytes;
    for (int e = 0; e < X; e++) mw->bytes += off[e + 1] > off[e] ? per_expert : 0;
    for (int p = 0; p < P; p++)
        memcpy(mw->x + (size_t)slot[p] * E, in + (size_t)(p / K) * E, sizeof(float) * (size_t)E);
    /* gate and up of every chosen expert over its pairs, inputs prepared once */
    fwd_input_set(w, mw->x, P, E);
    moe_job gu = {k, mw, 2, {&L->gate_exps, &L->up_exps}, {NULL, NULL}, {mw->h, mw->h2}, fwd_row_chunks(w, F)};
    gu.a[0] = fwd_input_for(w, L->gate_exps.type);
    gu.a[1] = fwd_input_for(w, L->up_exps.type);
    assert(L->gate_exps.expert_rows == L->up_exps.expert_rows);
    tp_run(w->pool, moe_part, &gu, gu.chunks, 0);
    add_bias(k, mw, mw->h, L->gate_exps_b, F);
    add_bias(k, mw, mw->h2, L->up_exps_b, F);
    if (m->moe_act == MODEL_ACT_SWIGLU_OAI) moe_swiglu_oai(mw->h, mw->h2, (int64_t)P * F);
    else k->swiglu(mw->h, mw->h2, P * F);
    /* down, into the grouped inputs' place */
    fwd_input_set(w, mw->h, P, F);
    moe_job dn = {k, mw, 1, {&L->down_exps, NULL}, {fwd_input_for(w, L->down_exps.type), NULL}, {mw->x, NULL}, fwd_row_chunks(w, E)};
    tp_run(w->pool, moe_part, &dn, dn.chunks, 0);
    add_bias(k, mw, mw->x, L->down_exps_b, E);
    /* each token's weighted sum, its experts best first (in is no longer read: out may be in) */
    for (int t = 0; t < T; t++) {
        float *o = out + (size_t)t * E;
        for (int j = 0; j < K; j++) {
            const float *y = mw->x + (size_t)slot[t * K + j] * E;
            float c = mw->wt[t * K + j];
            if (j == 0)
                for (int i = 0; i < E; i++) o[i] = c * y[i];
            else
                for (int i = 0; i < E; i++) o[i] += c * y[i];
        }
    }
}
