/*
 * mxfp4_avx2.c - MXFP4 dot product and gemm with AVX2 + FMA (built with the
 * AVX2 flags; called only after CPUID says so). Layout: mxfp4.h.
 *
 * Per block the 32 codes are unpacked once: the 16 bytes split into low
 * nibbles (elements 0..15) and high nibbles (16..31), and one vpshufb looks
 * each code up in MXFP4_KV (twice the E2M1 value, int8 -12..12). maddubs
 * needs an unsigned operand, so it multiplies |w| by the activation codes
 * carrying w's sign (as AVX2's q8_0 kernel does): pairs sum to at most
 * 2*12*127 in int16, madd widens to eight exact int32 lanes. Each lane is
 * then converted and FMA-accumulated with mxfp4_half_scale(e) * d8, two
 * accumulators (even and odd blocks) to hide the FMA latency.
 *
 * One body, mx_rows, computes up to four tokens per pass over a weight row;
 * the dot is that body with one token, so the gemm equals the dot for every
 * (row, token): a token's float operations do not depend on its neighbours.
 */
#include "../mxfp4.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)

#include <assert.h>
#include <immintrin.h>

#include "simd_avx2.h"

#define MX_NT 4 /* tokens per weight-row pass in the gemm */
#define MX_INLINE static inline __attribute__((always_inline))
/* Per-token loops must unroll (NT is a constant after inlining) so the
 * accumulator arrays live in registers. */
#define MX_UNROLL _Pragma("GCC unroll 4")
#ifndef PREFETCH_AHEAD
#define PREFETCH_AHEAD 2048
#endif

/* The 32 signed table values of one block's codes, in element order. */
MX_INLINE __m256i mx_unpack(const uint8_t *qs, __m256i table) {
    __m128i raw = _mm_loadu_si128((const __m128i *)qs);
    __m256i codes = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0F));
    return _mm256_shuffle_epi8(table, codes);
}

/* MXFP4 row . activation rows t0..t0+NT-1 (NT <= MX_NT) into out[0..NT). */
MX_INLINE void mx_rows(const uint8_t *row, const kern_act *a, int t0, int NT, float *out) {
    const int64_t nb = a->n / MXFP4_QK;
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)MXFP4_KV));
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[MX_NT][2];
    const int8_t *x[MX_NT];
    const float *dx[MX_NT];
    MX_UNROLL for (int k = 0; k < NT; k++) {
        acc[k][0] = acc[k][1] = _mm256_setzero_ps();
        x[k] = a->qs + (size_t)(t0 + k) * (size_t)a->n;
        dx[k] = a->d + (size_t)(t0 + k) * (size_t)nb;
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = row + (size_t)b * sizeof(block_mxfp4);
        if (NT == 1) _mm_prefetch((const char *)blk + PREFETCH_AHEAD, _MM_HINT_T0);
        const __m256i w = mx_unpack(blk + 1, table);
        const __m256i aw = _mm256_sign_epi8(w, w);
        const float dw = mxfp4_half_scale(blk[0]);
        const int j = (int)(b & 1);
        MX_UNROLL for (int k = 0; k < NT; k++) {
            __m256i y = _mm256_loadu_si256((const __m256i *)(x[k] + b * MXFP4_QK));
            __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(y, w)), ones);
            acc[k][j] = _mm256_fmadd_ps(_mm256_set1_ps(dw * dx[k][b]), _mm256_cvtepi32_ps(p), acc[k][j]);
        }
    }
    MX_UNROLL for (int k = 0; k < NT; k++) out[k] = simd_hsum8(_mm256_add_ps(acc[k][0], acc[k][1]));
}

/* kern_dot_fn: mx_rows with one token. */
float mxfp4_dot_avx2(const void *row, const kern_act *a, int t) {
    assert(a->fmt == KERN_ACT_Q8_32 && a->n % MXFP4_QK == 0 && t >= 0 && t < a->T);
    float r;
    mx_rows(row, a, t, 1, &r);
    return r;
}

/* Rows r0..r1, four tokens per pass, the remaining tokens one at a time. */
void mxfp4_gemm_avx2(const uint8_t *w, size_t row_bytes, int64_t r0, int64_t r1, const kern_act *a, float *y,
                     int64_t ldy) {
    assert(a->fmt == KERN_ACT_Q8_32 && a->n % MXFP4_QK == 0);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w + (size_t)r * row_bytes;
        float o[MX_NT];
        int t = 0;
        for (; t + MX_NT <= a->T; t += MX_NT) {
            mx_rows(row, a, t, MX_NT, o);
            for (int k = 0; k < MX_NT; k++) y[(size_t)(t + k) * (size_t)ldy + (size_t)r] = o[k];
        }
        for (; t < a->T; t++) {
            mx_rows(row, a, t, 1, o);
            y[(size_t)t * (size_t)ldy + (size_t)r] = o[0];
        }
    }
}

#endif
