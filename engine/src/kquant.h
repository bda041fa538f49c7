/*
 * kquant.h - ggml's K-quant block formats Q4_K and Q6_K (super-blocks of 256
 * weights): layouts, scalar conversions, and the dot kernels against
 * KERN_ACT_Q8_256 activations (the scalar references and their AVX2 twins).
 *
 * Byte layouts are ggml's exactly (ggml-common.h, QK_K = 256), so the blocks
 * of a llama.cpp "Q4_K_M" GGUF file are used as they lie in the mapping:
 *
 *   Q4_K, 144 bytes: fp16 d, fp16 dmin, scales[12], qs[128]
 *     8 sub-blocks of 32 weights, each with a 6-bit scale sc and 6-bit min m
 *     packed in scales[12] (kq_scale_min_k4). qs holds 4 chunks of 32 bytes;
 *     chunk c carries sub-block 2c in its low nibbles and 2c+1 in its high
 *     nibbles: weight 64c + l  = low nibble of qs[32c + l],
 *              weight 64c+32+l = high nibble of qs[32c + l]   (l < 32).
 *     w = d*sc*q - dmin*m, q in 0..15.
 *
 *   Q6_K, 210 bytes: ql[128], qh[64], int8 scales[16], fp16 d
 *     16 sub-blocks of 16 weights with a signed 8-bit scale each. Two halves
 *     of 128 weights; half h uses ql[64h..64h+63], qh[32h..32h+31] and, for
 *     l < 32, with L = ql + 64h, H = qh + 32h:
 *       weight 128h +      l: low 4 bits  L[l]    | bits 0-1 of H[l] << 4
 *       weight 128h + 32 + l: low 4 bits  L[l+32] | bits 2-3 of H[l] << 4
 *       weight 128h + 64 + l: high 4 bits L[l]    | bits 4-5 of H[l] << 4
 *       weight 128h + 96 + l: high 4 bits L[l+32] | bits 6-7 of H[l] << 4
 *     w = d*scales[i/16]*(q - 32), q in 0..63, i the weight's index.
 */
#ifndef CX_KQUANT_H
#define CX_KQUANT_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

#define QK_K 256 /* weights per K-quant super-block */

typedef struct {
    uint16_t d;          /* fp16 scale of the sub-block scales */
    uint16_t dmin;       /* fp16 scale of the sub-block mins */
    uint8_t scales[12];  /* 8 six-bit scales and 8 six-bit mins */
    uint8_t qs[QK_K / 2];
} block_q4_k;

typedef struct {
    uint8_t ql[QK_K / 2];     /* low 4 bits of each code */
    uint8_t qh[QK_K / 4];     /* high 2 bits of each code */
    int8_t scales[QK_K / 16]; /* signed scale per 16 weights */
    uint16_t d;               /* fp16 scale of the scales */
} block_q6_k;

_Static_assert(sizeof(block_q4_k) == 144, "Q4_K block must be 144 bytes");
_Static_assert(sizeof(block_q6_k) == 210, "Q6_K block must be 210 bytes");

/* The layouts' sizes and the offset the kernels read by hand (they walk raw
 * bytes, often several rows' blocks interleaved, so they name these rather
 * than the structs' fields). */
#define Q4K_BYTES sizeof(block_q4_k)         /* 144 */
#define Q6K_BYTES sizeof(block_q6_k)         /* 210 */
#define Q6K_D_AT offsetof(block_q6_k, d)     /* 208: the fp16 d after ql, qh and scales */
_Static_assert(offsetof(block_q6_k, d) == 208, "Q6_K's d follows ql, qh and scales");

/*
 * Scale and min (6 bits each) of Q4_K sub-block j (0..7) from the 12 packed
 * bytes, as ggml's get_scale_min_k4: sub-blocks 0-3 keep their 6 bits in the
 * low bits of bytes 0-3 (scales) and 4-7 (mins); sub-blocks 4-7 keep 4 bits in
 * bytes 8-11 (scale in the low nibble, min in the high one) and their top 2
 * bits in the spare top bits of bytes 0-3 (scale) and 4-7 (min). Inline: the
 * kernels unpack 8 per super-block.
 */
static inline void kq_scale_min_k4(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    assert(j >= 0 && j < 8);
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* Code q (0..63) of weight i (0..255) of a Q6_K block, in ggml's interleaving
 * (inline: dequantization and the scalar dot both unpack every weight). */
static inline int kq_q6_code(const uint8_t *blk, int i) {
    const uint8_t *ql = blk + 64 * (i / 128), *qh = blk + 128 + 32 * (i / 128);
    int k = (i % 128) / 32, l = i % 32; /* k: which quarter of the half */
    int lo = k & 1 ? ql[l + 32] : ql[l];
    lo = k & 2 ? lo >> 4 : lo & 0x0F;
    return lo | (((qh[l] >> (2 * k)) & 3) << 4);
}

/* Expand n weights (n % 256 == 0) into floats. */
void kq_dequantize_row_q4_k(const void *src, float *dst, int64_t n);
void kq_dequantize_row_q6_k(const void *src, float *dst, int64_t n);

/* Store n floats (n % 256 == 0) as blocks; see kquant.c for the method and its error. */
void kq_quantize_row_q4_k(const float *src, void *dst, int64_t n);
void kq_quantize_row_q6_k(const float *src, void *dst, int64_t n);

/*
 * Dot product of a weight row of a->n weights with activation row t of a
 * (fmt KERN_ACT_Q8_256), kern_dot_fn. Per super-block the integer sums are
 * exact in int32, then scaled in float; super-blocks are summed in float.
 */
float kq_dot_q4_k_scalar(const void *row, const kern_act *a, int t);
float kq_dot_q6_k_scalar(const void *row, const kern_act *a, int t);

#if defined(__x86_64__) || defined(_M_X64)
/*
 * AVX2 + FMA versions (kquant_avx2.c; call only when the CPU has AVX2, FMA
 * and F16C). Integer parts are exact; the float scaling accumulates per lane,
 * so they differ from the scalar versions by float rounding only:
 * |avx2 - scalar| <= 1e-5 * sum_i |w_i * x_i| with w split into its scale and
 * min parts (tests/unit/engine/test_kquant.c states and checks this).
 */
float kq_dot_q4_k_avx2(const void *row, const kern_act *a, int t);
float kq_dot_q6_k_avx2(const void *row, const kern_act *a, int t);
/* kern_gemm_fn: 4 tokens per weight-row pass, bit-identical to the dot above for every (row, token). */
void kq_gemm_q4_k_avx2(const uint8_t *w, size_t row_bytes, int64_t r0, int64_t r1, const kern_act *a, float *y,
                       int64_t ldy);
void kq_gemm_q6_k_avx2(const uint8_t *w, size_t row_bytes, int64_t r0, int64_t r1, const kern_act *a, float *y,
                       int64_t ldy);
/* The same with 512-bit registers (kquant_avx512.c; call only when the CPU has
 * AVX-512 F/BW/VL/DQ): 64 codes per integer step, 16 float lanes; same bound. */
float kq_dot_q4_k_avx512(const void *row, const kern_act *a, int t);
float kq_dot_q6_k_avx512(const void *row, const kern_act *a, int t);
void kq_gemm_q4_k_avx512(const uint8_t *w, size_t row_bytes, int64_t r0, int64_t r1, const kern_act *a, float *y,
                         int64_t ldy);
void kq_gemm_q6_k_avx512(const uint8_t *w, size_t row_bytes, int64_t r0, int64_t r1, const kern_act *a, float *y,
                         int64_t ldy);
#endif

#endif
