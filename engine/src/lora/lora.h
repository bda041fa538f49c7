/*
 * lora.h - a loaded LoRA adapter as the forward pass reads it (cortex.h has
 * the API, docs/lora.md the design).
 *
 * Each adapted matrix keeps A [rank][n_in] as ordinary weight rows (f32, or
 * q8_0 where n_in allows, so the base's 8-bit activations serve it too) and
 * B as panels (kernels/lora_kern.h). Everything lives in one allocation
 * made at load; the base model is never touched.
 */
#ifndef CX_LORA_H
#define CX_LORA_H

#include <stddef.h>
#include <stdint.h>

#include "cortex.h"

/* The seven matrices of a layer an adapter may change, in the pass's order. */
enum { LORA_Q, LORA_K, LORA_V, LORA_O, LORA_GATE, LORA_UP, LORA_DOWN, LORA_NPROJ };

/* One adapted matrix (rank 0: this adapter leaves it alone). */
typedef struct lora_mat {
    int rank;
    float scale;              /* alpha / rank (1 when the file gives no alpha) */
    int64_t n_in, n_out;
    int a_type;               /* CX_TYPE_F32 or CX_TYPE_Q8_0 */
    size_t a_row_bytes;
    const uint8_t *a;         /* [rank] rows of n_in */
    int b_type;
    const uint8_t *b;         /* B [n_out][rank] as panels */
} lora_mat;

struct cx_lora {
    const cx_model *m;
    cx_lora_info info;
    lora_mat *mats;           /* [n_layer][LORA_NPROJ] */
    int group_rank;           /* the largest sum of ranks over the matrices reading one input
                                 (q+k+v, o, gate+up, down) in any layer: u's floats per row */
    void *mem;                /* A and B of every matrix */
};

/* Matrix `proj` of layer l (rank 0 when not adapted). */
static inline const lora_mat *lora_mat_of(const cx_lora *a, int l, int proj) {
    return &a->mats[(size_t)l * LORA_NPROJ + (size_t)proj];
}

struct lora_src;
/* Read the adapter at path (a GGUF file, or a PEFT directory or
 * .safetensors) and check every pair against m: it names one of m's
 * adaptable matrices, once, with that matrix's shape. 0 or CX_E* (src
 * freed). */
int lora_read_checked(const cx_model *m, const char *path, struct lora_src *src, cx_err *err);
/* Layer and matrix (LORA_*) of a GGUF name "blk.L.attn_q.weight" etc.; 0, or -1 if none of m's. */
int lora_parse_name(const char *name, int n_layer, int *l, int *proj);

/* The largest sum of ranks of a's matrices over one input (lora.c keeps it). */
static inline int lora_group_rank(const cx_lora *a) { return a->group_rank; }

/* A hash of an adapter set (ids and scales), never 0 unless the set is
 * empty: the root of its sequences' prefix-cache keys. */
uint64_t lora_set_salt(const cx_lora_use *uses, int n);

#endif
