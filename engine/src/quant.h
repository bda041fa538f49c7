/*
 * quant.h - ggml block formats and their scalar reference conversions (the
 * K-quant formats Q4_K/Q6_K live in kquant.h, MXFP4 in mxfp4.h; this
 * interface covers all).
 *
 * Byte layouts match ggml exactly so GGUF files from other tools load unchanged:
 *   Q8_0: 32 weights per 34-byte block: fp16 scale d, then int8 q[32];   w = d*q
 *   Q4_0: 32 weights per 18-byte block: fp16 scale d, then 16 bytes; byte j holds
 *         weight j in its low nibble and weight j+16 in its high nibble; w = d*(q-8)
 * These functions are the reference every SIMD kernel is tested against.
 */
#ifndef CX_QUANT_H
#define CX_QUANT_H

#include <stddef.h>
#include <stdint.h>

#define QK 32 /* weights per Q8_0/Q4_0 block */

typedef struct { uint16_t d; int8_t qs[QK]; } block_q8_0;
typedef struct { uint16_t d; uint8_t qs[QK / 2]; } block_q4_0;

_Static_assert(sizeof(block_q8_0) == 34, "Q8_0 block must be 34 bytes");
_Static_assert(sizeof(block_q4_0) == 18, "Q4_0 block must be 18 bytes");

/* Bytes of one row of n weights of a type (n a multiple of the block size). */
size_t quant_row_bytes(int type, int64_t n);
/* 1 if the engine can compute with this type (f32, f16, bf16, q8_0, q4_0, q4_k, q6_k, mxfp4). */
int quant_supported(int type);
/* Weights per block of a supported type (1 for f32/f16/bf16, 32 for q8_0, q4_0 and
 * mxfp4, 256 for the K types); 0 if unsupported. */
int quant_block_size(int type);

/* Expand n weights of a row stored as `type` into floats. */
void quant_dequantize_row(int type, const void *src, float *dst, int64_t n);
/* Store n floats as `type` (f32, f16, bf16, q8_0, q4_0, mxfp4 rounding as ggml's
 * reference quantizers do; q4_k, q6_k with kquant.c's quantizers). */
void quant_quantize_row(int type, const float *src, void *dst, int64_t n);

/*
 * Storage type of tensor `name` (GGUF name, e.g. "blk.3.ffn_down.weight") of
 * layer `layer` (-1 outside the blocks) in a model of n_layer layers whose
 * rows have `cols` weights, when writing file type `ftype`: a CX_TYPE_* or
 * CX_FTYPE_Q4_K_M. Returns a CX_TYPE_*, or -1 for any other ftype.
 *   - norm vectors (names ending in "norm.weight") stay f32;
 *   - CX_FTYPE_Q4_K_M is llama.cpp's rule: q6_k for output.weight, and for
 *     attn_v and ffn_down in layers i with i < n/8 || i >= 7n/8 ||
 *     (i - n/8) % 3 == 2; q4_k for everything else, token_embd included.
 *     llama.cpp gives a tied token_embd (no output.weight) the output's q6_k:
 *     callers writing a tied model ask for "output.weight" for it (synth.c does);
 *   - a type whose block does not divide cols falls back: q4_k/q6_k to q8_0
 *     when cols % 32 == 0, any quantized type (mxfp4 too) to f16 otherwise (llama.cpp
 *     falls back to other 5-bit types first; we have none).
 */
int quant_mix_type(int ftype, const char *name, int layer, int n_layer, int64_t cols);
/* The stored type of tensor `name` (2-D or 3-D) in a file of type ftype:
 * biases and routers (ffn_gate_inp.weight) stay f32, as llama.cpp keeps
 * them; in a model with experts (moe != 0) an mxfp4 file stores the expert
 * tensors (*_exps.weight) as mxfp4 and its other matrices as q8_0, as
 * llama.cpp's gpt-oss files have them; everything else as quant_mix_type. */
int quant_tensor_type(int ftype, const char *name, int layer, int n_layer, int64_t cols, int moe);

#endif
