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
 * the dot is that body with one token, so the gemm of fewer than four tokens
 * (decode on row-major weights) equals the dot for every (row, token): a
 * token's float operations do not depend on its neighbours.
 *
 * Eight rows at a time (mx_rows8: KERN_LAYOUT_X8, and row-major prefill),
 * as kernels_avx2.c's q4_0 X8 kernel: one 32-byte register holds the 16
 * code bytes of rows r and r+1; their low nibbles (elements 0..15) and high
 * nibbles (16..31) go through one vpshufb each into MXFP4_KV + 12 (0..24,
 * unsigned: maddubs' first operand) against the activation's first and
 * second sixteen codes broadcast to both halves, and the +12 comes back as
 * 12 * (the activation block's code sum). A reduction tree leaves each row's
 * exact block sum isum in one lane, which ends the block with the scalar
 * reference's float operations, sum += (float)isum * (mxfp4_half_scale(e)
 * * d8): equal to mxfp4_dot_scalar bit for bit (and to the AVX-512
 * sixteen-row kernels), at any token count.
 */
#include "../mxfp4.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)

#include <assert.h>
#include <immintrin.h>
#include <string.h>

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

/* ---- eight rows per pass ---- */

/* mxfp4_half_scale of eight E8M0 bytes (one per int32 lane), exactly: the
 * float bits (e - 1) << 23 for e >= 2, the subnormals 0x00200000 << e below. */
MX_INLINE __m256 mx_half_scales8(__m256i e) {
    __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(subnormal, normal, _mm256_cmpgt_epi32(e, _mm256_set1_epi32(1))));
}

/*
 * acc[k] (lane r = row r) for tokens t0..t0+NT-1 (NT <= 4) against eight
 * rows: an X8 group at rows[0] (X8 = 1: per block the eight E8M0 bytes, then
 * the eight rows' 16 code bytes), or the row-major rows[0..7] (X8 = 0).
 * The reduction leaves rows in lane order 0 2 4 6 1 3 5 7; the scales are
 * read in that order and the result permuted back.
 */
MX_INLINE void mx_rows8(int X8, const uint8_t *const rows[8], const kern_act *a, int t0, int NT, __m256 out[4]) {
    const int64_t nb = a->n / MXFP4_QK;
    const size_t bs = sizeof(block_mxfp4);
    const __m256i table = _mm256_add_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)MXFP4_KV)),
                                          _mm256_set1_epi8(12)); /* twice the E2M1 values, + 12: 0..24 */
    const __m256i ones = _mm256_set1_epi16(1), low4 = _mm256_set1_epi8(0x0f);
    const __m256i to_lane_order = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    __m256 acc[MX_NT];
    const int8_t *x[MX_NT];
    const float *dx[MX_NT];
    const int16_t *bsum[MX_NT];
    MX_UNROLL for (int k = 0; k < NT; k++) {
        acc[k] = _mm256_setzero_ps();
        x[k] = a->qs + (size_t)(t0 + k) * (size_t)a->n;
        dx[k] = a->d + (size_t)(t0 + k) * (size_t)nb;
        bsum[k] = a->bsum + (size_t)(t0 + k) * (size_t)nb;
    }
    for (int64_t b = 0; b < nb; b++) {
        __m256i e, lo[4], hi[4];
        if (X8) {
            const uint8_t *base = rows[0] + (size_t)b * 8 * bs;
            if (NT == 1) /* decode streams the weights once: ask for them early */
                for (size_t o = 0; o < 8 * bs; o += 64) _mm_prefetch((const char *)base + PREFETCH_AHEAD + o, _MM_HINT_T0);
            e = _mm256_permutevar8x32_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)base)), to_lane_order);
            MX_UNROLL for (int p = 0; p < 4; p++) lo[p] = _mm256_loadu_si256((const __m256i *)(base + 8 + 32 * p));
        } else {
            const size_t off = (size_t)b * bs;
            e = _mm256_setr_epi32(rows[0][off], rows[2][off], rows[4][off], rows[6][off], rows[1][off], rows[3][off],
                                  rows[5][off], rows[7][off]);
            MX_UNROLL for (int p = 0; p < 4; p++)
                lo[p] = _mm256_loadu2_m128i((const __m128i *)(rows[2 * p + 1] + off + 1),
                                            (const __m128i *)(rows[2 * p] + off + 1));
        }
        const __m256 half = mx_half_scales8(e);
        MX_UNROLL for (int p = 0; p < 4; p++) { /* rows 2p and 2p+1, elements 0..15 (lo) and 16..31 (hi) */
            hi[p] = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(lo[p], 4), low4));
            lo[p] = _mm256_shuffle_epi8(table, _mm256_and_si256(lo[p], low4));
        }
        MX_UNROLL for (int k = 0; k < NT; k++) {
            __m256i y0 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(x[k] + b * MXFP4_QK)));
            __m256i y1 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(x[k] + b * MXFP4_QK + 16)));
            __m256i m[4];
            MX_UNROLL for (int p = 0; p < 4; p++) /* pairs at most 2 * 24 * 127, two of them 12192: int16 */
                m[p] = _mm256_madd_epi16(
                    _mm256_add_epi16(_mm256_maddubs_epi16(lo[p], y0), _mm256_maddubs_epi16(hi[p], y1)), ones);
            /* m[p] = [row 2p: 4 partial sums | row 2p+1: 4 partial sums] */
            __m256i p01 = _mm256_add_epi32(_mm256_unpacklo_epi32(m[0], m[1]), _mm256_unpackhi_epi32(m[0], m[1]));
            __m256i p23 = _mm256_add_epi32(_mm256_unpacklo_epi32(m[2], m[3]), _mm256_unpackhi_epi32(m[2], m[3]));
            __m256i isum = _mm256_add_epi32(_mm256_unpacklo_epi64(p01, p23), _mm256_unpackhi_epi64(p01, p23));
            isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(12 * bsum[k][b]));
            __m256 scale = _mm256_mul_ps(half, _mm256_set1_ps(dx[k][b]));
            acc[k] = _mm256_add_ps(acc[k], _mm256_mul_ps(_mm256_cvtepi32_ps(isum), scale));
        }
    }
    const __m256i to_row_order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    MX_UNROLL for (int k = 0; k < NT; k++) out[k] = _mm256_permutevar8x32_ps(acc[k], to_row_order);
}

/* Rows r0..r1 in groups of eight, four tokens at a time, then one at a time.
 * X8 = 1 (kern_repack_x8): r0 and r1 are multiples of 8 and group g starts at
 * w + 8 g rb. Row-major (X8 = 0): a short last group repeats its final row
 * in the unused lanes, which are not stored. */
MX_INLINE void mx_gemm8(int X8, const uint8_t *w, size_t rb, int64_t r0, int64_t r1, const kern_act *a, float *y,
                        int64_t ldy) {
    assert(a->fmt == KERN_ACT_Q8_32 && a->n % MXFP4_QK == 0);
    assert(!X8 || (r0 % 8 == 0 && r1 % 8 == 0));
    for (int64_t r = r0; r < r1; r += 8) {
        const uint8_t *rows[8];
        int nr = r1 - r < 8 ? (int)(r1 - r) : 8;
        for (int i = 0; i < 8; i++) rows[i] = w + (size_t)(r + (i < nr ? i : nr - 1)) * rb;
        __m256 acc[MX_NT];
        float o[8];
        int t = 0;
        for (; t + MX_NT <= a->T; t += MX_NT) {
            mx_rows8(X8, rows, a, t, MX_NT, acc);
            for (int k = 0; k < MX_NT; k++) {
                _mm256_storeu_ps(o, acc[k]);
                memcpy(y + (size_t)(t + k) * (size_t)ldy + (size_t)r, o, sizeof(float) * (size_t)nr);
            }
        }
        for (; t < a->T; t++) {
            mx_rows8(X8, rows, a, t, 1, acc);
            _mm256_storeu_ps(o, acc[0]);
            memcpy(y + (size_t)t * (size_t)ldy + (size_t)r, o, sizeof(float) * (size_t)nr);
        }
    }
}

/* Row-major weights: prefill (four tokens or more) through the eight-row
 * kernel, decode (fewer) row by row and token by token through the dot's body. */
void mxfp4_gemm_avx2(const uint8_t *w, size_t row_bytes, int64_t r0, int64_t r1, const kern_act *a, float *y,
                     int64_t ldy) {
    assert(a->fmt == KERN_ACT_Q8_32 && a->n % MXFP4_QK == 0);
    if (a->T >= 4 && !a->decode_order) {
        mx_gemm8(0, w, row_bytes, r0, r1, a, y, ldy);
        return;
    }
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w + (size_t)r * row_bytes;
        float o[1];
        for (int t = 0; t < a->T; t++) {
            mx_rows(row, a, t, 1, o);
            y[(size_t)t * (size_t)ldy + (size_t)r] = o[0];
        }
    }
}

/* KERN_LAYOUT_X8 weights: the eight-row kernel at every token count. */
void mxfp4_gemm_x8_avx2(const uint8_t *w, size_t row_bytes, int64_t r0, int64_t r1, const kern_act *a, float *y,
                        int64_t ldy) {
    mx_gemm8(1, w, row_bytes, r0, r1, a, y, ldy);
}

#endif
