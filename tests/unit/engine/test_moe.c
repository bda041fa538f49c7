/*
 * test_moe.c - mixture of experts and gpt-oss, on the tiny synthetic shapes
 * moe-tiny (Mixtral-style llama) and gpt-oss-tiny (sinks, a sliding window
 * of 16 on even layers, biases, clamped SwiGLU experts, YaRN, NeoX RoPE,
 * head_dim x n_head != n_embd):
 *   - the routing and the clamped SwiGLU on hand-made values;
 *   - the expert stage (moe_ffn, grouped by expert) against a dense loop
 *     over every expert written here in double;
 *   - the whole forward pass of f32 files against a naive one written here
 *     (attention with sinks and windows position by position, YaRN from
 *     ggml's formulas), 80 tokens so windows and 64-position tiles are crossed;
 *   - prefill equals token-by-token decode and 1 equals 2 threads, bit for bit
 *     for f32; for mxfp4 experts (q8_0 attention) and q8_0 within 1e-4 mapped
 *     and bit for bit once repacked (huge pages); 1 and 2 threads always;
 *   - malformed expert tensors and unknown gpt-oss keys get one clear error.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eval_logits.h"
#include "fixture.h"
#include "forward.h"
#include "model.h"
#include "moe.h"
#include "quant.h"
#include "synth.h"
#include "tokenizer.h"


/* A synthetic file of `shape` as `type` (context 640) in the scratch directory; its path (NULL: failed). */
static const char *make_model(const char *shape, const char *type) {
    cx_shape sh = fx_shape(shape, 640);
    return fx_synth(&sh, cx_type_from_name(type), 11, fx_path("%s-%s.gguf", shape, type));
}

/* The file mapped (not repacked: the naive code reads rows as the file has them). */
static cx_model *load_mapped(const char *path) {
    cx_model_params p = cx_model_defaults();
    p.weights = CX_WEIGHTS_MMAP;
    return fx_load(path, &p);
}

/* ---- routing and activation on hand-made values ---- */

static void test_route(void) {
    const char *path = make_model("moe-tiny", "f32");
    if (!path) return;
    cx_model *m = load_mapped(path);
    if (!m) return;
    uint64_t exps = 0; /* the stacked experts' bytes, as info counts them */
    for (int i = 0; i < m->info.n_tensors; i++) {
        cx_tensor_info ti;
        cx_model_tensor(m, i, &ti);
        if (strstr(ti.name, "_exps.weight")) exps += ti.nbytes;
    }
    CHECK(m->info.expert_bytes == exps && exps == 2 * 3 * 64 * 96 * 4 * 4, "expert_bytes %llu (tensors: %llu)",
          (unsigned long long)m->info.expert_bytes, (unsigned long long)exps);
    const kern_ops *k = kern_table("scalar");
    int sel[2];
    float wt[2], lg[4] = {1, 3, 2, 0};
    moe_route(m, k, lg, sel, wt);
    double e3 = exp(3.0), e2 = exp(2.0);
    CHECK(sel[0] == 1 && sel[1] == 2, "softmax gating picks experts 1, 2 (got %d, %d)", sel[0], sel[1]);
    CHECK_NEAR(wt[0], e3 / (e3 + e2), 1e-6, "softmax gating: first weight renormalised");
    CHECK_NEAR(wt[0] + wt[1], 1.0, 1e-6, "softmax gating: weights sum to 1");
    float tie[4] = {2, 2, 1, 2};
    moe_route(m, k, tie, sel, wt);
    CHECK(sel[0] == 0 && sel[1] == 1, "ties go to the lower index (got %d, %d)", sel[0], sel[1]);
    m->moe_gating = MODEL_GATING_TOPK_SOFTMAX;
    float lg2[4] = {-1, 0.5f, 4, 0.25f};
    moe_route(m, k, lg2, sel, wt);
    CHECK(sel[0] == 2 && sel[1] == 1, "top-k gating picks experts 2, 1 (got %d, %d)", sel[0], sel[1]);
    CHECK_NEAR(wt[1], 1.0 / (1.0 + exp(3.5)), 1e-6, "top-k gating: softmax over the two logits");
    cx_model_free(m);
    unlink(path);
    /* gpt-oss's clamped SwiGLU: gate clamped above at 7, up to [-7, 7], plus one on up */
    float g[4] = {10, -3, 0.5f, 7}, u[4] = {-9, 2, 8, 0};
    moe_swiglu_oai(g, u, 4);
    CHECK_NEAR(g[0], 7.0 / (1 + exp(-1.702 * 7)) * (-7 + 1), 1e-5, "swiglu_oai clamps gate and up");
    CHECK_NEAR(g[1], -3.0 / (1 + exp(1.702 * 3)) * 3, 1e-6, "swiglu_oai: negative gate unclamped");
    CHECK_NEAR(g[2], 0.5 / (1 + exp(-1.702 * 0.5)) * 8, 1e-5, "swiglu_oai: up clamped to 7, plus 1");
    CHECK_NEAR(g[3], 7.0 / (1 + exp(-1.702 * 7)) * 1, 1e-5, "swiglu_oai: up 0 gives the gate alone");
}

/* The synthetic o200k-shaped vocabulary at gpt-oss-20b's size: specials at o200k's ids, merges that build grams. */
static void test_bpe_vocab(void) {
    synth_bpe v;
    int rc = synth_bpe_make(&v, 201088);
    CHECK(rc == 0 && v.n == 201088, "201,088 tokens (rc %d, %d)", rc, v.n);
    if (rc == 0) {
        CHECK(v.special == 199998 && !strcmp(v.tokens[199998], "<|startoftext|>") &&
                  !strcmp(v.tokens[200002], "<|return|>") && !strcmp(v.tokens[200006], "<|start|>") &&
                  !strcmp(v.tokens[200007], "<|end|>") && !strcmp(v.tokens[200008], "<|message|>") &&
                  !strcmp(v.tokens[200012], "<|call|>") && v.types[200012] == TOK_CONTROL,
              "harmony's specials at o200k's ids");
        CHECK(!strcmp(v.tokens[32], "\xc4\xa0") && !strcmp(v.tokens[256], "\xc4\xa0" "a") && !strcmp(v.merges[0], "\xc4\xa0" " a"),
              "GPT-2's characters: byte 32 is U+0120, then 'Ga' from its merge");
        CHECK(v.n_merges == v.special - 256, "one merge per normal token above the bytes (%d)", v.n_merges);
    }
    synth_bpe_free(&v);
    CHECK(synth_bpe_make(&v, 100) == -1, "too small a vocabulary is refused");
    synth_bpe_free(&v);
}

/* A synthetic gpt-oss file speaks harmony: its chat template is recognized
 * (cx_harmony_detect), and its turn ends at <|return|> or <|call|>, never at
 * <|end|> (which only closes the analysis message), although the file names
 * <|end|> as tokenizer.ggml.eot_token_id. */
static void test_harmony_vocab(void) {
    const char *path = make_model("gpt-oss-tiny", "f32");
    if (!path) return;
    cx_model *m = load_mapped(path);
    if (!m) return;
    int32_t id[3];
    int n = 0;
    cx_err err = {0};
    CHECK(cx_tokenize(m, "<|return|><|call|><|end|>", 25, CX_TOKENIZE_SPECIAL, id, 3, &n, &err) == 0 && n == 3, "ids");
    CHECK(cx_token_is_eog(m, id[0]) && cx_token_is_eog(m, id[1]) && !cx_token_is_eog(m, id[2]),
          "<|return|> %d and <|call|> %d end generation, <|end|> %d does not", id[0], id[1], id[2]);
    CHECK(cx_token_eos(m) == id[0] && cx_token_eot(m) == id[1], "EOS <|return|>, EOT <|call|>");
    CHECK(cx_harmony_detect(cx_model_get_info(m)->chat_template), "the synthetic file's chat template is harmony");
    cx_model_free(m);
    unlink(path);
}

/* ---- naive reference pieces, in double ---- */

/* Row r of weight w dequantized into out (w in the file's row layout). */
static void row_of(const cx_weight *w, int64_t r, float *out) {
    quant_dequantize_row(w->type, (const uint8_t *)w->data + (size_t)r * w->row_bytes, out, w->cols);
}

/* y = W x (+ b) over rows r0..r0+n-1 of w. */
static void naive_mv(const cx_weight *w, int64_t r0, int64_t n, const double *x, const float *b, double *y) {
    float *row = malloc(sizeof(float) * (size_t)w->cols);
    for (int64_t r = 0; r < n; r++) {
        row_of(w, r0 + r, row);
        double s = 0;
        for (int64_t c = 0; c < w->cols; c++) s += (double)row[c] * x[c];
        y[r] = s + (b ? b[r] : 0.0);
    }
    free(row);
}

static void naive_rmsnorm(const double *x, const float *g, int n, float eps, double *out) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    double r = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++) out[i] = x[i] * r * g[i];
}

/* The expert stage for one token, as a dense loop: every expert's output,
 * then the router's choice among them (llama.cpp's build_moe_ffn). */
static void naive_moe(const cx_model *m, const cx_layer *L, const double *h, double *out) {
    const cx_model_info *hp = &m->info;
    int E = hp->n_embd, F = hp->n_ff_expert, X = hp->n_expert, K = hp->n_expert_used;
    double *lg = malloc(sizeof(double) * (size_t)X), *y = malloc(sizeof(double) * (size_t)X * E);
    double *g = malloc(sizeof(double) * (size_t)F), *u = malloc(sizeof(double) * (size_t)F);
    naive_mv(&L->router, 0, X, h, L->router_b, lg);
    for (int e = 0; e < X; e++) {
        naive_mv(&L->gate_exps, (int64_t)e * F, F, h, L->gate_exps_b ? L->gate_exps_b + (size_t)e * F : NULL, g);
        naive_mv(&L->up_exps, (int64_t)e * F, F, h, L->up_exps_b ? L->up_exps_b + (size_t)e * F : NULL, u);
        for (int i = 0; i < F; i++) {
            if (m->moe_act == MODEL_ACT_SWIGLU_OAI) {
                double a = g[i] < 7 ? g[i] : 7, b = u[i] > 7 ? 7 : u[i] < -7 ? -7 : u[i];
                g[i] = a / (1 + exp(-1.702 * a)) * (b + 1);
            } else {
                g[i] = g[i] / (1 + exp(-g[i])) * u[i];
            }
        }
        naive_mv(&L->down_exps, (int64_t)e * E, E, g, L->down_exps_b ? L->down_exps_b + (size_t)e * E : NULL,
                 y + (size_t)e * E);
    }
    /* the k best logits (a softmax keeps the order), then their weights */
    int sel[64];
    double w[64], sum = 0, mx = -INFINITY;
    for (int j = 0; j < K; j++) {
        int best = -1;
        for (int e = 0; e < X; e++) {
            int taken = 0;
            for (int i = 0; i < j; i++) taken |= sel[i] == e;
            if (!taken && (best < 0 || lg[e] > lg[best])) best = e;
        }
        sel[j] = best;
        if (lg[best] > mx) mx = lg[best];
    }
    for (int j = 0; j < K; j++) sum += w[j] = exp(lg[sel[j]] - mx); /* either gating: softmax over the k */
    for (int i = 0; i < E; i++) out[i] = 0;
    for (int j = 0; j < K; j++)
        for (int i = 0; i < E; i++) out[i] += w[j] / sum * y[(size_t)sel[j] * E + i];
    free(lg);
    free(y);
    free(g);
    free(u);
}

/* ---- the expert stage against the dense loop ---- */

static void test_stage(const char *shape, const char *type, double tol) {
    const char *path = make_model(shape, type);
    if (!path) return;
    cx_model *m = load_mapped(path);
    if (!m) return;
    const cx_model_info *h = &m->info;
    int E = h->n_embd, T = 37;
    fwd_ws w;
    cx_err err = {0};
    if (fwd_ws_init(&w, m, 64, 1, 2, &err)) {
        CHECK(0, "workspace: %s", err.msg);
        cx_model_free(m);
        return;
    }
    uint64_t st = 5;
    synth_fill_normal(&st, w.xb, (int64_t)T * E, 1.0f);
    fwd_pass_begin(&w, T);
    moe_ffn(&w, &w.moe, &m->layers[1], w.xb, w.xb2, T);
    float *want = malloc(sizeof(float) * (size_t)T * E);
    double *x = malloc(sizeof(double) * (size_t)E), *o = malloc(sizeof(double) * (size_t)E);
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < E; i++) x[i] = w.xb[(size_t)t * E + i];
        naive_moe(m, &m->layers[1], x, o);
        for (int i = 0; i < E; i++) want[(size_t)t * E + i] = (float)o[i];
    }
    double r = rel_rms(want, w.xb2, T * E);
    CHECK(r <= tol, "%s %s: expert stage vs dense loop relative RMS %.3g > %g", shape, type, r, tol);
    printf("%-12s %-5s expert stage vs dense loop over every expert: relative RMS %.2g\n", shape, type, r);
    free(want);
    free(x);
    free(o);
    fwd_ws_free(&w);
    cx_model_free(m);
    unlink(path);
}

/* ---- the whole pass against a naive one ---- */

/* RoPE of one head at position p: pairs (i, i+d/2) (NeoX) or (2i, 2i+1);
 * angle p * theta_i, YaRN-blended as ggml's rope_yarn, times mscale. */
static void naive_rope(const cx_model *m, double *v, int p) {
    const cx_model_info *h = &m->info;
    int d = h->head_dim;
    double fs = h->rope_freq_scale, mscale = 1, lo = 0, hi = 0;
    if (m->yarn_factor > 0) {
        double orig = m->yarn_orig_ctx, base = h->rope_base;
        lo = floor(d * log(orig / (m->yarn_beta_fast * 2 * M_PI)) / (2 * log(base)));
        hi = ceil(d * log(orig / (m->yarn_beta_slow * 2 * M_PI)) / (2 * log(base)));
        lo = lo < 0 ? 0 : lo;
        hi = hi > d - 1 ? d - 1 : hi;
        mscale = m->yarn_attn_factor * (1 + 0.1 * log(1 / fs));
    }
    for (int i = 0; i < d / 2; i++) {
        double theta = p * pow(h->rope_base, -2.0 * i / d), ang = fs * theta;
        if (m->yarn_factor > 0) {
            double y = (i - lo) / (hi - lo > 0.001 ? hi - lo : 0.001), ramp = 1 - (y < 0 ? 0 : y > 1 ? 1 : y);
            ang = ang * (1 - ramp) + theta * ramp;
        }
        int a = h->rope_neox ? i : 2 * i, b = h->rope_neox ? i + d / 2 : 2 * i + 1;
        double x0 = v[a], x1 = v[b], c = cos(ang) * mscale, s = sin(ang) * mscale;
        v[a] = x0 * c - x1 * s;
        v[b] = x0 * s + x1 * c;
    }
}

/* The logits after toks[0..n) by the naive pass (f32 files only). */
static void naive_logits(const cx_model *m, const int32_t *toks, int n, float *out) {
    const cx_model_info *h = &m->info;
    int E = h->n_embd, hd = h->head_dim, QD = h->n_head * hd, KV = h->n_head_kv * hd, NL = h->n_layer;
    double *x = malloc(sizeof(double) * E), *hb = malloc(sizeof(double) * E), *q = malloc(sizeof(double) * QD);
    double *att = malloc(sizeof(double) * QD), *o = malloc(sizeof(double) * E), *sc = malloc(sizeof(double) * (n + 1));
    double *kc = malloc(sizeof(double) * (size_t)NL * n * KV), *vc = malloc(sizeof(double) * (size_t)NL * n * KV);
    float *row = malloc(sizeof(float) * (E > h->n_vocab ? E : h->n_vocab));
    for (int p = 0; p < n; p++) {
        row_of(&m->tok_embd, toks[p], row);
        for (int i = 0; i < E; i++) x[i] = row[i];
        for (int l = 0; l < NL; l++) {
            const cx_layer *L = &m->layers[l];
            double *k = kc + ((size_t)l * n + p) * KV, *v = vc + ((size_t)l * n + p) * KV;
            naive_rmsnorm(x, L->attn_norm, E, h->rms_eps, hb);
            naive_mv(&L->wq, 0, QD, hb, L->bq, q);
            naive_mv(&L->wk, 0, KV, hb, L->bk, k);
            naive_mv(&L->wv, 0, KV, hb, L->bv, v);
            for (int hh = 0; hh < h->n_head; hh++) naive_rope(m, q + (size_t)hh * hd, p);
            for (int hh = 0; hh < h->n_head_kv; hh++) naive_rope(m, k + (size_t)hh * hd, p);
            int first = L->window && p - L->window + 1 > 0 ? p - L->window + 1 : 0;
            for (int hh = 0; hh < h->n_head; hh++) {
                int kvh = hh / (h->n_head / h->n_head_kv);
                double mx = L->sinks ? L->sinks[hh] : -INFINITY, den = 0;
                for (int j = first; j <= p; j++) {
                    const double *kj = kc + ((size_t)l * n + j) * KV + (size_t)kvh * hd;
                    double s = 0;
                    for (int d = 0; d < hd; d++) s += q[(size_t)hh * hd + d] * kj[d];
                    sc[j] = s / sqrt((double)hd);
                    if (sc[j] > mx) mx = sc[j];
                }
                for (int j = first; j <= p; j++) den += sc[j] = exp(sc[j] - mx);
                if (L->sinks) den += exp(L->sinks[hh] - mx); /* the sink: in the denominator only */
                for (int d = 0; d < hd; d++) {
                    double a = 0;
                    for (int j = first; j <= p; j++) a += sc[j] * vc[((size_t)l * n + j) * KV + (size_t)kvh * hd + d];
                    att[(size_t)hh * hd + d] = a / den;
                }
            }
            naive_mv(&L->wo, 0, E, att, L->bo, o);
            for (int i = 0; i < E; i++) x[i] += o[i];
            naive_rmsnorm(x, L->ffn_norm, E, h->rms_eps, hb);
            naive_moe(m, L, hb, o);
            for (int i = 0; i < E; i++) x[i] += o[i];
        }
    }
    naive_rmsnorm(x, m->out_norm, E, h->rms_eps, hb);
    double *lg = malloc(sizeof(double) * h->n_vocab);
    naive_mv(&m->output, 0, h->n_vocab, hb, NULL, lg);
    for (int i = 0; i < h->n_vocab; i++) out[i] = (float)lg[i];
    free(lg);
    free(x);
    free(hb);
    free(q);
    free(att);
    free(o);
    free(sc);
    free(kc);
    free(vc);
    free(row);
}

static void test_naive(const char *shape) {
    const char *path = make_model(shape, "f32");
    if (!path) return;
    cx_model *m = load_mapped(path);
    if (!m) return;
    int V = m->info.n_vocab, n = 80;
    int32_t toks[80];
    for (int i = 0; i < n; i++) toks[i] = (int32_t)((i * 7919 + 13) % V);
    float *a = malloc(sizeof(float) * V), *b = malloc(sizeof(float) * V);
    logits_after(m, toks, n, n, 2, a);
    naive_logits(m, toks, n, b);
    double r = rel_rms(b, a, V);
    CHECK(r <= 1e-4, "%s: forward pass vs the naive pass: relative RMS %.3g > 1e-4", shape, r);
    printf("%-12s f32   80 tokens: forward pass vs naive pass relative RMS %.2g\n", shape, r);
    free(a);
    free(b);
    cx_model_free(m);
    unlink(path);
}

/* ---- prefill vs decode, threads, repacking ---- */

static void test_exact(const char *shape, const char *type, int n) {
    const char *path = make_model(shape, type);
    if (!path) return;
    cx_model *m = load_mapped(path);
    cx_model_params hp = cx_model_defaults();
    hp.weights = CX_WEIGHTS_HUGEPAGES;
    cx_model *mr = fx_load(path, &hp);
    if (!m || !mr) goto out;
    int V = m->info.n_vocab;
    int32_t *toks = malloc(sizeof(int32_t) * n);
    for (int i = 0; i < n; i++) toks[i] = (int32_t)((i * 7919 + 13) % V);
    float *a = malloc(sizeof(float) * V), *b = malloc(sizeof(float) * V), *c = malloc(sizeof(float) * V);
    float *d = malloc(sizeof(float) * V), *e = malloc(sizeof(float) * V), *f = malloc(sizeof(float) * V);
    logits_after(m, toks, n, n, 1, a);  /* batched prefill */
    logits_after(m, toks, n, 1, 1, b);  /* token by token */
    logits_after(m, toks, n, 37, 2, c); /* ragged chunks, 2 threads */
    logits_after(m, toks, n, n, 2, d);
    logits_after(mr, toks, n, n, 2, e);
    logits_after(mr, toks, n, 1, 1, f);
    /* f32: one kernel for every T (test_forward.c); an mxfp4 file's other matrices are q8_0, whose
     * mapped prefill kernel sums in another order than decode's, so it is exact once repacked */
    int exact = !strcmp(type, "f32");
    size_t bytes = sizeof(float) * (size_t)V;
    if (exact) {
        CHECK(!memcmp(a, b, bytes), "%s %s %d tokens: prefill differs from decode", shape, type, n);
        CHECK(!memcmp(a, c, bytes), "%s %s: chunks of 37 on 2 threads differ", shape, type);
    } else {
        CHECK(rel_rms(a, b, V) <= 1e-4, "%s %s: prefill vs decode relative RMS %.3g", shape, type, rel_rms(a, b, V));
        CHECK(rel_rms(a, c, V) <= 1e-4, "%s %s: chunks: relative RMS %.3g", shape, type, rel_rms(a, c, V));
    }
    CHECK(!memcmp(a, d, bytes), "%s %s: 2 threads differ from 1", shape, type);
    const char *wm = cx_model_get_info(mr)->weights_memory;
    if (strstr(wm, "repacked") || exact)
        CHECK(!memcmp(e, f, bytes), "%s %s (%s): prefill differs from decode", shape, type, wm);
    CHECK(rel_rms(a, e, V) <= (exact ? 0 : 1e-4), "%s %s (%s) vs mapped: relative RMS %.3g", shape, type, wm,
          rel_rms(a, e, V));
    printf("%-12s %-5s %3d tokens: prefill vs decode relative RMS %.2g; weights %s vs mapped %.2g\n", shape, type, n,
           rel_rms(a, b, V), wm, rel_rms(a, e, V));
    free(toks);
    free(a);
    free(b);
    free(c);
    free(d);
    free(e);
    free(f);
out:
    cx_model_free(m);
    cx_model_free(mr);
    unlink(path);
}

/* ---- malformed files ---- */

/* Copy `src` to a new file with the bytes after header string `key`
 * (+ skip) replaced by `len` bytes of `with`; load it and check the error
 * code and that the message contains `want`. */
static void check_patched(const char *src, const char *key, size_t skip, const void *with, size_t len, int code,
                          const char *want) {
    size_t n;
    unsigned char *b = (unsigned char *)fx_slurp(src, &n);
    if (!b) {
        CHECK(0, "read %s", src);
        return;
    }
    unsigned char *at = memmem(b, n, key, strlen(key));
    CHECK(at != NULL, "%s is in the header", key);
    if (at) {
        memcpy(at + strlen(key) + skip, with, len);
        const char *path = fx_write("bad.gguf", b, n);
        cx_model *m = NULL;
        cx_err err = {0};
        int rc = cx_model_load(path, NULL, &m, &err);
        CHECK(rc == code && strstr(err.msg, want), "patched %s: rc %d (want %d), message '%s' (want '%s')", key, rc,
              code, err.msg, want);
        cx_model_free(m);
        unlink(path);
    }
    free(b);
}

static void test_malformed(void) {
    const char *moe = make_model("moe-tiny", "f32"), *oss = moe ? make_model("gpt-oss-tiny", "mxfp4") : NULL;
    if (!oss) return;
    uint32_t five = 5, three = 3, q5_0 = 6;
    uint64_t ne3 = 3;
    /* metadata: key, then its u32 type, then the value */
    check_patched(moe, "llama.expert_used_count", 4, &five, 4, CX_EFORMAT, "expert_used_count 5 with expert_count 4");
    check_patched(moe, "llama.expert_count", 4, &three, 4, CX_EFORMAT, "'blk.0.ffn_gate_inp.weight' has shape [64, 4]");
    /* tensor info: name, n_dims (u32), ne[0..2] (u64), type (u32) */
    check_patched(moe, "blk.0.ffn_up_exps.weight", 4 + 16, &ne3, 8, CX_EFORMAT,
                  "'blk.0.ffn_up_exps.weight' has shape [64, 96, 3] (3 dims), expected [64, 96, 4]");
    check_patched(moe, "blk.1.ffn_down_exps.weight", 4 + 24, &q5_0, 4, CX_EUNSUP,
                  "'blk.1.ffn_down_exps.weight' has type q5_0");
    check_patched(moe, "blk.1.ffn_down_exps", 0, "X", 1, CX_EFORMAT, "'blk.1.ffn_down_exps.weight' is missing");
    check_patched(oss, "gpt-oss.vocab_siz", 0, "X", 1, CX_EUNSUP, "metadata 'gpt-oss.vocab_sizX' is not supported");
    check_patched(oss, "blk.0.attn_sinks", 0, "X", 1, CX_EFORMAT, "'blk.0.attn_sinks.weight' is missing");
    check_patched(oss, "blk.1.ffn_gate_exps.bia", 0, "X", 1, CX_EFORMAT, "'blk.1.ffn_gate_exps.bias' is missing");
    unlink(moe);
    unlink(oss);
}

static void run_all(void) {
    test_route();
    test_bpe_vocab();
    test_harmony_vocab();
    test_stage("moe-tiny", "f32", 1e-5);
    test_stage("gpt-oss-tiny", "f32", 1e-5);
    test_stage("gpt-oss-tiny", "mxfp4", 2e-2); /* q8 activations against exact floats */
    test_naive("moe-tiny");
    test_naive("gpt-oss-tiny");
    static const char *types[] = {"f32", "mxfp4", "q8_0"};
    for (int i = 0; i < 3; i++) {
        test_exact("moe-tiny", types[i], 300);
        test_exact("gpt-oss-tiny", types[i], 300);
        test_exact("gpt-oss-tiny", types[i], 5);
    }
    test_malformed();
    fx_cleanup();
}

TEST_MAIN(run_all())
