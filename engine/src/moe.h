/*
 * moe.h - the mixture-of-experts feed-forward stage of the forward pass
 * (Mixtral-style llama, gpt-oss), and its workspace (moe_ws, a member of the
 * pass's fwd_ws, carved from the workspace's region).
 */
#ifndef CX_MOE_H
#define CX_MOE_H

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "kernels/kernels.h"
#include "model.h"

struct fwd_ws;

/* The stage's buffers, for `batch` rows and so batch x n_expert_used
 * (token, expert) pairs. All NULL for a dense model. */
typedef struct moe_ws {
    int n_expert;
    float *logits;            /* [batch][n_expert]: router logits, then gating probabilities */
    float *wt;                /* [batch][n_expert_used]: each token's experts' weights */
    int *sel;                 /* [batch][n_expert_used]: each token's experts, best first */
    int *slot;                /* [batch][n_expert_used]: the pair's row in the grouped buffers */
    int *off;                 /* [n_expert + 1]: expert e's grouped rows are off[e] .. off[e+1]-1 */
    float *x;                 /* [pairs][n_embd]: grouped inputs, then the experts' outputs */
    float *h, *h2;            /* [pairs][n_ff_expert]: gate and up products */
    uint64_t bytes;           /* expert weight bytes the passes read so far: each chosen expert's gate, up
                                 and down rows, once per pass and layer (cx_session_expert_bytes) */
} moe_ws;

/* Bytes of region the stage needs for `batch` rows (0 for a dense model):
 * each buffer whole cache lines, as moe_ws_carve takes them from the
 * workspace's arena at creation. */
size_t moe_ws_size(const cx_model_info *h, int batch);
void moe_ws_carve(moe_ws *mw, arena *mem, const cx_model_info *h, int batch);

/* Choose a token's n_expert_used experts from its router logits (after the
 * router bias) as model `m` does (MODEL_GATING_*): sel[] best first (the
 * lower index wins ties), wt[] their weights. logits is overwritten. */
void moe_route(const cx_model *m, const kern_ops *k, float *logits, int *sel, float *wt);

/* gpt-oss's clamped SwiGLU (ggml's swiglu_oai, alpha 1.702, limit 7):
 * gate[i] = g * sigmoid(1.702 g) * (u + 1), g = min(gate[i], 7), u = clamp(up[i], -7, 7). */
void moe_swiglu_oai(float *gate, const float *up, int64_t n);

/* The stage of layer L for rows 0..T-1 of a pass (fwd_pass_begin'd for at
 * least T rows): in holds their normed inputs ([T][n_embd]); writes
 * out[t] = sum over token t's experts (best first) of weight x expert(in[t])
 * ([T][n_embd]; out may be in). Uses w's pool and matrix input, mw's buffers. */
void moe_ffn(struct fwd_ws *w, moe_ws *mw, const cx_layer *L, const float *in, float *out, int T);

#endif
