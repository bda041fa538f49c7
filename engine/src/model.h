/*
 * model.h - the in-memory model: hyper-parameters, weight views into the
 * mapped file, the vocabulary. Both file formats load into this one shape.
 */
#ifndef CX_MODEL_H
#define CX_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "cortex.h"
#include "gguf.h"
#include "kernels/kernels.h"
#include "tokenizer.h"

/* The widest attention head a NeoX-RoPE model may have (the forward pass reorders heads on the stack). */
#define MODEL_MAX_HEAD_DIM 1024
/* The most experts a layer may have (llama.cpp: LLAMA_MAX_EXPERTS) and use per token. */
#define MODEL_MAX_EXPERTS 512

/* A weight matrix of `rows` rows by `cols` columns, stored row-major as `type`. */
typedef struct cx_weight {
    const void *data;
    int type;
    int64_t rows, cols;
    size_t row_bytes;
    kern_layout layout;  /* KERN_LAYOUT_ROWS (as in the file) or KERN_LAYOUT_X8 or X16 (repacked at load) */
    int64_t expert_rows; /* stacked experts (cx_layer): the rows of one expert; 0 for a plain matrix */
} cx_weight;

typedef struct cx_layer {
    const float *attn_norm, *ffn_norm; /* f32 copies owned by the model */
    cx_weight wq, wk, wv, wo;          /* wq: [n_embd x n_embd], wk/wv: [kv_dim x n_embd] */
    cx_weight w_gate, w_up, w_down;    /* gate/up: [n_ff x n_embd], down: [n_embd x n_ff] */
    const float *bq, *bk, *bv;         /* QKV biases (Qwen 2, gpt-oss), f32 copies owned by the model; NULL if none */
    const float *bo;                   /* attention output bias [n_embd] (gpt-oss), or NULL */
    const float *sinks;                /* attention sink logit per query head (gpt-oss), or NULL */
    int window;                        /* sliding window: a query sees the last `window` positions (0: all) */
    /* Mixture of experts (cx_model_info.n_expert > 0; w_gate, w_up, w_down are then unused).
     * Each expert tensor is one matrix of n_expert stacked experts: expert e is
     * rows e*F .. e*F+F-1 of gate_exps/up_exps (F = n_ff_expert) and rows
     * e*E .. e*E+E-1 of down_exps (E = n_embd), as the 3-D ggml tensors lay them out. */
    cx_weight router;                  /* ffn_gate_inp: [n_expert x n_embd] */
    const float *router_b;             /* [n_expert], or NULL */
    cx_weight gate_exps, up_exps, down_exps;
    const float *gate_exps_b, *up_exps_b, *down_exps_b; /* [n_expert][F], [n_expert][F], [n_expert][E], or NULL */
} cx_layer;

/* How a token's experts are chosen and weighted (cx_model.moe_gating). */
enum {
    MODEL_GATING_SOFTMAX = 0,   /* softmax over all experts, the top k, weights renormalised to sum 1 (Mixtral) */
    MODEL_GATING_TOPK_SOFTMAX   /* the top k router logits, then a softmax over those k (gpt-oss) */
};
/* The experts' activation (cx_model.moe_act). */
enum {
    MODEL_ACT_SILU = 0,         /* silu(gate) * up */
    MODEL_ACT_SWIGLU_OAI        /* gpt-oss: g = min(gate, 7), u = clamp(up, -7, 7), g * sigmoid(1.702 g) * (u + 1) */
};

/* A named tensor as found in the file, kept for `cortex info`. */
typedef struct cx_tensor_rec {
    char name[96];
    int type, n_dims;
    int64_t ne[4];
    uint64_t offset, nbytes;
} cx_tensor_rec;

struct cx_model {
    cx_model_info info;
    char name[128];
    char arch[32];       /* general.architecture ("llama", "qwen2", or any name for a vocabulary-only file) */
    const uint8_t *map;  /* the model file, mapped or copied (read-only either way) */
    size_t map_size;
    int map_copied;      /* 1: a huge-page copy (model_load_file, model_map.h), 0: an mmap */
    int n_repacked;      /* matrices repacked to KERN_LAYOUT_X8 or X16 at load */
    kern_layout repacked_layout; /* the layout of the last one repacked (for info.weights_memory) */
    const kern_ops *kern;/* the kernel table every pass over this model runs (cx_model_params.isa) */
    tok_vocab vocab;
    cx_weight tok_embd, output;
    const float *out_norm;
    cx_layer *layers;
    float *norms;        /* storage behind every norm, bias and RoPE factor pointer */
    const float *rope_factors; /* head_dim/2 divisors of the RoPE frequencies (rope_freqs.weight), or NULL */
    cx_tensor_rec *tensors;
    int n_tensors;
    char *chat_template; /* tokenizer.chat_template (malloc'd), or NULL */
    int moe_gating;      /* MODEL_GATING_* (experts only) */
    int moe_act;         /* MODEL_ACT_* (experts only) */
    /* YaRN RoPE scaling (info.rope_scaling "yarn"): ggml's rope_yarn parameters */
    float yarn_factor, yarn_beta_fast, yarn_beta_slow, yarn_attn_factor;
    int yarn_orig_ctx;
    /* how it was loaded, so a derived copy can be made the same way (a self-draft, spec/spec_draft.c) */
    char *path, *tok_path;      /* malloc'd; tok_path NULL for GGUF */
    cx_model_params params;
};

/* The matrices of layer y into out (at most MODEL_LAYER_MATS): Q, K, V,
 * output, then the dense feed-forward's gate, up, down, or the router and
 * the stacked experts' gate, up, down. Returns their number. */
#define MODEL_LAYER_MATS 8
int model_layer_matrices(cx_layer *y, cx_weight **out);

/* Fill m from a GGUF image (model_gguf.c) / a llama2.c checkpoint (+ tokenizer image; llama2c.c). */
int model_from_gguf(cx_model *m, const char *label, cx_err *err);
int model_from_llama2c(cx_model *m, const char *label, const uint8_t *tok, size_t tok_size, const char *tok_label,
                       cx_err *err);

/* CX_EUNSUP naming the file if m is vocabulary-only (cx_model_info.vocab_only):
 * every path that evaluates calls this first. */
int model_require_weights(const cx_model *m, cx_err *err);
/* Validate hyper-parameters: every shape the forward pass relies on. */
int model_check_hparams(const cx_model_info *h, const char *label, cx_err *err);
/* Record a tensor for `info` and add it to the parameter and byte totals. */
void model_add_tensor(cx_model *m, const char *name, int type, int n_dims, const int64_t *ne, uint64_t offset,
                      uint64_t nbytes);

#endif
