/*
 * lora_src.h - a LoRA adapter file's matrices in one neutral form, before
 * they are checked against a base model and laid out for the forward pass
 * (lora.c).
 *
 * Two readers fill it: lora_src_gguf in lora_src.c (llama.cpp's GGUF LoRA: general.type
 * "adapter", adapter.type "lora", adapter.lora.alpha, and per adapted matrix
 * "<name>.lora_a" [rank x in] and "<name>.lora_b" [out x rank]) and
 * lora_peft.c (a PEFT directory: adapter_config.json + adapter_model.safetensors,
 * Hugging Face module names mapped to GGUF names, q/k rows permuted as the
 * GGUF converters permute Llama's). Both hand over f32 copies, so the layout
 * code sees one format whatever the file held (F32, F16, BF16, Q8_0);
 * F32 tensors are read in place from the mapped file, the others converted.
 */
#ifndef CX_LORA_SRC_H
#define CX_LORA_SRC_H

#include <stdint.h>

#include "cortex.h"

/* One adapted matrix W [n_out x n_in] of the base: delta W = scale * B * A. */
typedef struct lora_pair {
    char name[96];       /* the base tensor's GGUF name, e.g. "blk.3.attn_q.weight" */
    int rank;            /* r >= 1 */
    int64_t n_in, n_out; /* A is [rank][n_in], B is [n_out][rank], both row-major */
    const float *a, *b;  /* f32: into the file's mapping (an F32 tensor), or own_a / own_b */
    float *own_a, *own_b; /* converted copies (malloc'd, freed by lora_src_free), or NULL */
    float alpha;         /* scale = alpha / rank (times the user's scale); alpha <= 0: scale 1 */
} lora_pair;

typedef struct lora_src {
    char label[256];     /* the file or directory, for messages */
    int n_pairs;
    lora_pair *pairs;    /* malloc'd */
    const uint8_t *map;  /* the mapped file F32 pairs point into (unmapped by lora_src_free), or NULL */
    size_t map_size;
} lora_src;

/* Read a GGUF LoRA file. 0, or a CX_E* code with one message naming the
 * file and, where one is at fault, the tensor. */
int lora_src_gguf(const char *path, lora_src *out, cx_err *err);
/* Read a PEFT adapter directory (or its adapter_model.safetensors, with
 * adapter_config.json beside it) for base model m: names mapped to GGUF,
 * rows of q/k deltas permuted for Llama-architecture bases as the converters
 * permute the base. Same error rule. */
int lora_src_peft(const char *path, const cx_model *m, lora_src *out, cx_err *err);
/* Free every pair and the array; *s is zeroed. Safe on a zeroed lora_src. */
void lora_src_free(lora_src *s);

#endif
