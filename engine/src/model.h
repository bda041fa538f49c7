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

/* A weight matrix of `rows` rows by `cols` columns, stored row-major as `type`. */
typedef struct cx_weight {
    const void *data;
    int type;
    int64_t rows, cols;
    size_t row_bytes;
    int layout;          /* KERN_LAYOUT_ROWS (as in the file) or KERN_LAYOUT_X8 or X16 (repacked at load) */
} cx_weight;

typedef struct cx_layer {
    const float *attn_norm, *ffn_norm; /* f32 copies owned by the model */
    cx_weight wq, wk, wv, wo;          /* wq: [n_embd x n_embd], wk/wv: [kv_dim x n_embd] */
    cx_weight w_gate, w_up, w_down;    /* gate/up: [n_ff x n_embd], down: [n_embd x n_ff] */
    const float *bq, *bk, *bv;         /* QKV biases (Qwen 2), f32 copies owned by the model; NULL if none */
} cx_layer;

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
    int map_copied;      /* 1: a huge-page copy (model_load_file), 0: an mmap */
    int n_repacked;      /* matrices repacked to KERN_LAYOUT_X8 or X16 at load */
    int repacked_layout; /* the layout of the last one repacked (for info.weights_memory) */
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
};

/* Map a whole file read-only; *size gets its length. */
int model_map_file(const char *path, const uint8_t **map, size_t *size, cx_err *err);
void model_unmap_file(const uint8_t *map, size_t size);
/* Like model_map_file, but the weights-memory policy `weights` (CX_WEIGHTS_*,
 * see model.c) may copy the file into huge pages; *copied says which
 * happened. Release with model_release_file. */
int model_load_file(const char *path, const uint8_t **map, size_t *size, int *copied, int weights, cx_err *err);
void model_release_file(const uint8_t *map, size_t size, int copied);

/* Fill m from a GGUF image / a llama2.c checkpoint (+ tokenizer image). */
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
