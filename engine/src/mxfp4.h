/*
 * mxfp4.h - ggml's MXFP4 weight type (ggml type 39, GPT-OSS's experts): the
 * OCP Microscaling FP4 format, blocks of 32 E2M1 values sharing one E8M0
 * power-of-two scale. Layout, scalar conversions, and the dot kernels against
 * KERN_ACT_Q8_32 activations (scalar reference, AVX2, AVX-512).
 *
 * Byte layout, ggml's exactly (ggml-common.h block_mxfp4, 17 bytes):
 *   u8 e        E8M0 scale: 2^(e - 127) (no sign, no mantissa)
 *   u8 qs[16]   byte j: element j in its low nibble, element j + 16 in its
 *               high nibble (the split halves of q4_0, not interleaved pairs)
 * A nibble is an E2M1 number: bit 3 the sign, bits 2-1 the exponent, bit 0
 * the mantissa, so magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6. Twice those are
 * integers, which is how ggml stores the table (int8 -12..12) and why it
 * halves the scale instead:
 *   w = MXFP4_KV[nibble] * 2^(e - 128)   (= E2M1(nibble) * 2^(e - 127))
 * mxfp4_half_scale gives 2^(e - 128) as ggml's GGML_E8M0_TO_FP32_HALF does,
 * subnormal floats for e = 0 and 1 included. e = 255 (NaN in the OCP spec;
 * ggml's row validation rejects it) decodes as 2^127 here, as ggml's
 * dequantizer does: the loader does not scan blocks.
 */
#ifndef CX_MXFP4_H
#define CX_MXFP4_H

#include <stdint.h>
#include <string.h>

#include "kernels/kernels.h"

#define MXFP4_QK 32 /* elements per block */

typedef struct {
    uint8_t e;                 /* E8M0 shared scale */
    uint8_t qs[MXFP4_QK / 2];  /* E2M1 codes, element j low nibble of qs[j % 16] for j < 16, else high */
} block_mxfp4;

_Static_assert(sizeof(block_mxfp4) == 17, "MXFP4 block must be 17 bytes");

/* Twice the E2M1 value of each 4-bit code (index = code): every SIMD kernel
 * loads it as its 16-entry byte lookup. */
extern const int8_t MXFP4_KV[16];

/* 2^(e - 128) as a float: the block scale with the E2M1 table's factor 2
 * taken out. Normal floats for e >= 2 (biased exponent e - 1), the
 * subnormals 2^-127 and 2^-128 for e = 1 and 0. Inline: kernels call it per block. */
static inline float mxfp4_half_scale(uint8_t e) {
    uint32_t bits = e >= 2 ? (uint32_t)(e - 1) << 23 : (uint32_t)0x00200000 << e;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Expand n weights (n % 32 == 0) into floats: MXFP4_KV[code] * mxfp4_half_scale(e). */
void mxfp4_dequantize_row(const void *src, float *dst, int64_t n);
/*
 * Store n floats (n % 32 == 0) as MXFP4 blocks, as ggml's reference
 * quantizer (quantize_row_mxfp4_ref) does: e = floor(log2(max|x|)) - 2 + 127
 * (the largest magnitude lands in [4, 8) times 2^(e-127), so 6 is the top
 * code and values above 6 clip to it; e = 0 for an all-zero block), then each
 * value becomes the code whose value is nearest, the lower code winning ties
 * (so ties go to the smaller magnitude, and zero is always +0). Exponents
 * below 0 (blocks under 2^-125) are clamped to 0, above 254 to 254.
 */
void mxfp4_quantize_row(const float *src, void *dst, int64_t n);

/*
 * Dot product of an MXFP4 weight row of a->n weights with activation row t
 * of a (fmt KERN_ACT_Q8_32), kern_dot_fn. Per block the integer sum
 * isum = sum MXFP4_KV[code] * q8 is exact (|isum| <= 32*12*127 < 2^16);
 * sum += (float)isum * (mxfp4_half_scale(e) * d8) in float, block by block.
 * The scale product is exact (a power of two times a float) but for
 * subnormal or overflowing results.
 */
float mxfp4_dot_scalar(const void *row, const kern_act *a, int t);

#if defined(__x86_64__) || defined(_M_X64)
/*
 * SIMD versions (call only where the table's instruction set runs). The
 * one-row dots: the integer part of each block is exact; the float scaling
 * accumulates per lane (8 or 16), so they differ from the scalar reference by
 * float rounding only (tests/unit/engine/test_kernels.c states and checks the
 * bound). Each row-major gemm of fewer than four tokens (decode) computes up
 * to four tokens per pass over a weight row with the dot's body, so it
 * equals that table's dot bit for bit.
 *
 * The multi-row kernels (eight rows under AVX2, sixteen under AVX-512, one
 * row per lane) end each block with the scalar reference's own float
 * operations, so they equal mxfp4_dot_scalar bit for bit at every token
 * count: the gemms over the interleaved layouts (mxfp4_gemm_x8_avx2 on
 * KERN_LAYOUT_X8, mxfp4_gemm_x16_* on KERN_LAYOUT_X16, kern_repack_x8/x16),
 * and the row-major gemms of four tokens or more (prefill), which run the
 * same kernels on rows as stored. All tables' prefill then agree exactly.
 */
float mxfp4_dot_avx2(const void *row, const kern_act *a, int t);
void mxfp4_gemm_avx2(const uint8_t *w, size_t row_bytes, int64_t r0, int64_t r1, const kern_act *a, float *y,
                     int64_t ldy);
void mxfp4_gemm_x8_avx2(const uint8_t *w, size_t row_bytes, int64_t r0, int64_t r1, const kern_act *a, float *y,
                        int64_t ldy);
float mxfp4_dot_avx512(const void *row, const kern_act *a, int t);
void mxfp4_gemm_avx512(const uint8_t *w, size_t row_bytes, int64_t r0, int64_t r1, const kern_act *a, float *y,
                       int64_t ldy);
float mxfp4_dot_avx512vnni(const void *row, const kern_act *a, int t);
void mxfp4_gemm_avx512vnni(const uint8_t *w, size_t row_bytes, int64_t r0, int64_t r1, const kern_act *a, float *y,
                           int64_t ldy);
void mxfp4_gemm_x16_avx512(const uint8_t *w, size_t row_bytes, int64_t r0, int64_t r1, const kern_act *a, float *y,
                           int64_t ldy);
void mxfp4_gemm_x16_avx512vnni(const uint8_t *w, size_t row_bytes, int64_t r0, int64_t r1, const kern_act *a,
                               float *y, int64_t ldy);
#endif

#endif
