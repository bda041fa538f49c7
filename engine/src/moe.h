/*
 * moe.h - the mixture-of-experts feed-forward stage of the forward pass
 * (Mixtral-style llama, gpt-oss), in the pass's workspace (forward.h).
 */
#ifndef CX_MOE_H
#define CX_MOE_H

#include <stddef.h>

#include "forward.h"

/* Floats of workspace the stage needs for `batch` rows (0 for a dense model),
 * for ws_region's sizing; moe_ws_carve takes them (each buffer padded to a
 * line) from the workspace's arena at creation. */
size_t moe_ws_floats(const cx_model_info *h, size_t batch);
void moe_ws_carve(fwd_ws *w, int batch);

/* Choose a token's n_expert_used experts from its router logits (after the
 * router bias) as model `m` does (MODEL_GATING_*): sel[] best first (the
 * lower index wins ties), wt[] their weights. logits is overwritten. */
void moe_route(const cx_model *m, const kern_ops *k, float *logits, int *sel, float *wt);

/* gpt-oss's clamped SwiGLU (ggml's swiglu_oai, alpha 1.702, limit 7):
 * gate[i] = g * sigmoid(1.702 g) * (u + 1), g = min(gate[i], 7), u = clamp(up[i], -7, 7). */
void moe_swiglu_oai(float *gate, const float *up, int64_t n);

/* The stage for rows 0..T-1: w->xb holds their normed inputs; writes
 * w->xb2[t] = sum over token t's experts (best first) of weight x expert(xb[t]). */
void moe_ffn(fwd_ws *w, const cx_layer *L, int T);

#endif
