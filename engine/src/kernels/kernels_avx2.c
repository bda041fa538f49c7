/*
 * kernels_avx2.c - the AVX2 + FMA + F16C kernel table.
 *
 * Built with -mavx2 -mfma -mf16c (this file only); dispatch.c hands it out
 * only after CPUID and XGETBV say the CPU and OS support it.
 *
 * Quantized rows use integer dot products: per 32-weight block, maddubs
 * multiplies unsigned by signed bytes into int16 pairs, madd sums them into
 * eight int32 lanes, which are converted once and FMA-accumulated with the
 * product of the two block scales. Each row dot keeps two accumulators
 * (even and odd blocks) to hide FMA latency. The q8_0/q4_0 kernels are in
 * q8_avx2.h, shared with the avxvnni table (kernels_avxvnni.c), which does
 * the same integer products with vpdpbusd.
 *
 * The gemm versions walk four tokens per weight row load, sharing the
 * weight's unpacking; every (row, token) value goes through exactly the
 * arithmetic of the single dot, so prefill and decode agree bit for bit.
 */
#include <assert.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "../kquant.h"
#include "../mxfp4.h"
#include "../quant.h"
#include "cortex.h"
#include "kernels.h"
#include "simd_avx2.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))
/* The per-token loops must unroll fully (NT is 1 or 4 after inlining) so the
 * accumulator arrays become registers; left as loops they live in memory and
 * every FMA waits on a store-to-load round trip (measured: 3x slower). */
#define UNROLL4 _Pragma("GCC unroll 4")
#define UNROLL8 _Pragma("GCC unroll 8")
#ifndef PREFETCH_AHEAD
#define PREFETCH_AHEAD 2048
#endif

/* i8dot4: acc + per int32 lane the sum of four u8 x s8 products, as maddubs
 * (int16 pair sums: exact for every operand the q8_0/q4_0 kernels give it,
 * |u| <= 128 and |s| <= 127 or u <= 15) and madd against ones; i8dot4x2 two
 * such products summed before the madd. The avxvnni table does both with
 * vpdpbusd (kernels_avxvnni.c): the same int32 sums. */
ALWAYS_INLINE __m256i i8dot4(__m256i acc, __m256i u, __m256i s) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}
ALWAYS_INLINE __m256i i8dot4x2(__m256i acc, __m256i u1, __m256i s1, __m256i u2, __m256i s2) {
    return _mm256_add_epi32(
        acc, _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(u1, s1), _mm256_maddubs_epi16(u2, s2)),
                               _mm256_set1_epi16(1)));
}

#include "q8_avx2.h"

/* ---- f32, f16 and bf16 weights against float activations ---- */

/* How a float row stores its weights (a constant after inlining). */
enum { W_F32 = 0, W_F16 = 1, W_BF16 = 2 };

/* Eight weights from column i as floats: f16 through F16C, bf16 widened by a
 * 16-bit shift (exact: bf16 is a float's top half). */
ALWAYS_INLINE __m256 load_w(const uint8_t *row, int kind, int64_t i) {
    if (kind == W_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(row + 2 * i)));
    if (kind == W_BF16)
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(row + 2 * i))), 16));
    return _mm256_loadu_ps((const float *)row + i);
}

ALWAYS_INLINE float load_w1(const uint8_t *row, int kind, int64_t i) {
    if (kind != W_F32) {
        uint16_t h;
        memcpy(&h, row + 2 * i, 2);
        if (kind == W_F16) return _cvtsh_ss(h);
        uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    return ((const float *)row)[i];
}

/*
 * NR (1 or 2) rows against NT (1..3) tokens of float activations. Each
 * (row, token) pair keeps two accumulators (columns 16i..16i+7 and
 * 16i+8..16i+15), summed at the end, then the tail: the same arithmetic
 * whatever NR and NT, so the gemm equals the dot bit for bit. Two rows by three
 * tokens reuse each weight load three times and each activation load twice
 * (one row by four, the first version, loaded 1.25 values per FMA and ran at a
 * fifth of the FMA peak); 12 accumulators + 2 weights + 1 activation fit the
 * 16 registers.
 */
ALWAYS_INLINE void float_rows(const uint8_t *const row[2], int NR, int kind, const kern_act *a, int t0, int NT,
                              float out[2][3]) {
    int64_t n = a->n, i = 0;
    __m256 acc[2][3][2];
    const float *x[3];
    UNROLL4 for (int k = 0; k < NT; k++) x[k] = a->f + (size_t)(t0 + k) * (size_t)n;
    UNROLL4 for (int r = 0; r < NR; r++) UNROLL4 for (int k = 0; k < NT; k++) acc[r][k][0] = acc[r][k][1] = _mm256_setzero_ps();
    for (; i + 16 <= n; i += 16) {
        UNROLL4 for (int h = 0; h < 2; h++) {
            __m256 w[2];
            UNROLL4 for (int r = 0; r < NR; r++) w[r] = load_w(row[r], kind, i + 8 * h);
            UNROLL4 for (int k = 0; k < NT; k++) {
                __m256 xv = _mm256_loadu_ps(x[k] + i + 8 * h);
                UNROLL4 for (int r = 0; r < NR; r++) acc[r][k][h] = _mm256_fmadd_ps(w[r], xv, acc[r][k][h]);
            }
        }
    }
    UNROLL4 for (int r = 0; r < NR; r++) UNROLL4 for (int k = 0; k < NT; k++) {
        float sum = simd_hsum8(_mm256_add_ps(acc[r][k][0], acc[r][k][1]));
        for (int64_t j = i; j < n; j++) sum += load_w1(row[r], kind, j) * x[k][j];
        out[r][k] = sum;
    }
}

/* One row, one token: the pair kernel at its smallest. */
ALWAYS_INLINE float float_dot(const uint8_t *row, int kind, const kern_act *a, int t) {
    const uint8_t *rows[2] = {row, row};
    float o[2][3];
    float_rows(rows, 1, kind, a, t, 1, o);
    return o[0][0];
}

/* Rows in pairs, tokens in threes, remainders with smaller tiles of the same kernel. */
ALWAYS_INLINE void float_gemm(int kind, const uint8_t *w, size_t rb, int64_t r0, int64_t r1, const kern_act *a, float *y,
                              int64_t ldy) {
    float o[2][3];
    for (int64_t r = r0; r < r1; r += 2) {
        const uint8_t *rows[2] = {w + (size_t)r * rb, w + (size_t)(r + 1 < r1 ? r + 1 : r) * rb};
        int nr = r + 1 < r1 ? 2 : 1, t = 0;
#define FLOAT_TILE(NR_, NT_)                                                                    \
    do {                                                                                        \
        float_rows(rows, NR_, kind, a, t, NT_, o);                                               \
        for (int rr = 0; rr < NR_; rr++)                                                        \
            for (int k = 0; k < NT_; k++) y[(size_t)(t + k) * (size_t)ldy + (size_t)(r + rr)] = o[rr][k]; \
    } while (0)
        if (nr == 2) {
            for (; t + 3 <= a->T; t += 3) FLOAT_TILE(2, 3);
            for (; t < a->T; t++) FLOAT_TILE(2, 1);
        } else {
            for (; t + 3 <= a->T; t += 3) FLOAT_TILE(1, 3);
            for (; t < a->T; t++) FLOAT_TILE(1, 1);
        }
#undef FLOAT_TILE
    }
}

/* ---- the table's float dot and gemm entry points ---- */

static float dot_f32row(const void *row, const kern_act *a, int t) { return float_dot(row, W_F32, a, t); }
static float dot_f16row(const void *row, const kern_act *a, int t) { return float_dot(row, W_F16, a, t); }
static float dot_bf16row(const void *row, const kern_act *a, int t) { return float_dot(row, W_BF16, a, t); }

static void gemm_f32(const uint8_t *w, size_t rb, int64_t r0, int64_t r1, const kern_act *a, float *y, int64_t ldy) {
    float_gemm(W_F32, w, rb, r0, r1, a, y, ldy);
}
static void gemm_f16(const uint8_t *w, size_t rb, int64_t r0, int64_t r1, const kern_act *a, float *y, int64_t ldy) {
    float_gemm(W_F16, w, rb, r0, r1, a, y, ldy);
}
static void gemm_bf16(const uint8_t *w, size_t rb, int64_t r0, int64_t r1, const kern_act *a, float *y, int64_t ldy) {
    float_gemm(W_BF16, w, rb, r0, r1, a, y, ldy);
}

/* ---- activation quantization (Q8_32): the scalar reference's exact codes ---- */

/*
 * Q8_256 (the K-quant activations) with the scalar reference's exact codes,
 * scales and sums: the value of largest magnitude (the first one, on ties)
 * gives iscale = -127 / max; codes are round-half-even(iscale * x)
 * (cvtps under the default rounding mode, as nearbyintf) clamped to 127.
 */
static void quantize_q8_256(const float *x, kern_act *a, int t) {
    const int64_t n = a->n, nb = n / 256;
    int8_t *q = a->qs + (size_t)t * (size_t)n;
    float *d = a->d + (size_t)t * (size_t)nb;
    int16_t *bs = a->bsum + (size_t)t * (size_t)(n / 16);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const float *xb = x + b * 256;
        int8_t *qb = q + b * 256;
        __m256 m = _mm256_setzero_ps();
        for (int j = 0; j < 32; j++) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(xb + 8 * j)));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        float amax = _mm_cvtss_f32(m4);
        if (amax == 0.0f) {
            d[b] = 0.0f;
            memset(qb, 0, 256);
            memset(bs + b * 16, 0, 16 * sizeof(int16_t));
            continue;
        }
        float max = 0.0f;
        for (int j = 0; j < 32; j++) {
            int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(xb + 8 * j)),
                                                       _mm256_set1_ps(amax), _CMP_EQ_OQ));
            if (hit) {
                max = xb[8 * j + __builtin_ctz((unsigned)hit)];
                break;
            }
        }
        float iscale = -127.0f / max;
        __m256 is = _mm256_set1_ps(iscale);
        for (int g = 0; g < 16; g++) {
            __m256i v0 = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(is, _mm256_loadu_ps(xb + 16 * g))),
                                          _mm256_set1_epi32(127));
            __m256i v1 = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(is, _mm256_loadu_ps(xb + 16 * g + 8))),
                                          _mm256_set1_epi32(127));
            __m256i s8 = _mm256_add_epi32(v0, v1);
            __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
            s4 = _mm_hadd_epi32(s4, s4);
            s4 = _mm_hadd_epi32(s4, s4);
            bs[b * 16 + g] = (int16_t)_mm_cvtsi128_si32(s4);
            /* 32 -> 16 bits (packs interleaves the 128-bit lanes; the permute restores order) -> 8 */
            __m256i p16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(v0, v1), 0xD8);
            _mm_storeu_si128((__m128i *)(qb + 16 * g),
                             _mm_packs_epi16(_mm256_castsi256_si128(p16), _mm256_extracti128_si256(p16, 1)));
        }
        d[b] = 1.0f / iscale;
    }
}

static void quantize_act(const float *x, kern_act *a, int t) {
    if (a->fmt != KERN_ACT_Q8_32) {
        quantize_q8_256(x, a, t);
        return;
    }
    int64_t n = a->n, nb = n / 32;
    int8_t *q = a->qs + (size_t)t * (size_t)n;
    float *d = a->d + (size_t)t * (size_t)nb;
    int16_t *bs = a->bsum + (size_t)t * (size_t)nb;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < nb; b++) {
        __m256 v[4];
        for (int k = 0; k < 4; k++) v[k] = _mm256_loadu_ps(x + b * 32 + 8 * k);
        __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                                 _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        float amax = _mm_cvtss_f32(m4);
        d[b] = amax / 127.0f;
        __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
        __m256i i32[4];
        for (int k = 0; k < 4; k++)
            i32[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[k], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        __m256i s = _mm256_add_epi32(_mm256_add_epi32(i32[0], i32[1]), _mm256_add_epi32(i32[2], i32[3]));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        s4 = _mm_hadd_epi32(s4, s4);
        s4 = _mm_hadd_epi32(s4, s4);
        bs[b] = (int16_t)_mm_cvtsi128_si32(s4);
        /* pack 32-bit -> 16 -> 8; packs interleave 128-bit lanes, the permute restores order */
        __m256i p16a = _mm256_packs_epi32(i32[0], i32[1]), p16b = _mm256_packs_epi32(i32[2], i32[3]);
        __m256i p8 = _mm256_packs_epi16(p16a, p16b);
        p8 = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(q + b * 32), p8);
    }
}

/* ---- exp and the elementwise operators ---- */

/* e^x for eight floats: Cephes' range reduction and degree-5 polynomial,
 * within 2 ulp of expf over [-87, 88]; inputs are clamped to that range. */
ALWAYS_INLINE __m256 exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3365f)), _mm256_set1_ps(88.3762626647949f));
    __m256 fx = _mm256_floor_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
    __m256 y = _mm256_set1_ps(1.9875691500E-4f);
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507E-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073E-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894E-2f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459E-1f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201E-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

/* A mask of the first n (0..8) lanes (maskload, maskstore). */
ALWAYS_INLINE __m256i first8(int n) { return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)); }

/* The first m (1..8) lanes of v to p. */
ALWAYS_INLINE void store_first(float *p, __m256 v, int m) {
    if (m == 8) _mm256_storeu_ps(p, v);
    else _mm256_maskstore_ps(p, first8(m), v);
}

/* Eight rows of eight floats transposed in place: afterwards r[d] lane j
 * is what r[j] lane d was (unpack pairs, shuffle quads, swap 128-bit halves). */
ALWAYS_INLINE void transpose8_ps(__m256 r[8]) {
    __m256 t[8], u[8];
    UNROLL4 for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    UNROLL4 for (int i = 0; i < 2; i++) {
        u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xee);
        u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xee);
    }
    UNROLL4 for (int k = 0; k < 4; k++) {
        r[k] = _mm256_permute2f128_ps(u[k], u[4 + k], 0x20);
        r[4 + k] = _mm256_permute2f128_ps(u[k], u[4 + k], 0x31);
    }
}

/* nd (1..8) steps of query q's chain: acc = fmadd(q[d], r[d], acc). */
ALWAYS_INLINE __m256 chain8(__m256 acc, const __m256 r[8], const float *q, int nd) {
    UNROLL8 for (int d = 0; d < 8; d++) {
        if (d >= nd) break;
        acc = _mm256_fmadd_ps(_mm256_set1_ps(q[d]), r[d], acc);
    }
    return acc;
}

/* See kernels.h. Keys across the lanes: eight keys' eight-dimension chunks
 * loaded as rows (lanes past hd zero) and transposed, so r[d] holds
 * dimension 8c + d of every key; each query takes one FMA per dimension
 * (its value broadcast), lane j being key j's chain. Queries go four at a
 * time (independent chains hide the FMA latency); chains wait between
 * chunks in part[], QB queries per batch. */
static void attn_scores(float *sc, size_t ldsc, const float *q, size_t ldq, int nq, const float *K, size_t stride, int kn,
                        int hd, float scale) {
    enum { QB = 64, G = 4 };
    const __m256 sv = _mm256_set1_ps(scale);
    int nc = (hd + 7) / 8;
    for (int i0 = 0; i0 < nq; i0 += QB) {
        int nb = nq - i0 < QB ? nq - i0 : QB;
        const float *qb = q + (size_t)i0 * ldq;
        float *sb = sc + (size_t)i0 * ldsc;
        for (int j0 = 0; j0 < kn; j0 += 8) {
            int m = kn - j0 < 8 ? kn - j0 : 8;
            __m256 part[QB];
            for (int c = 0; c < nc; c++) {
                int d0 = 8 * c, nd = hd - d0 < 8 ? hd - d0 : 8, last = c + 1 == nc;
                __m256i lanes = first8(nd);
                __m256 r[8];
                UNROLL8 for (int t = 0; t < 8; t++)
                    r[t] = t < m ? _mm256_maskload_ps(K + (size_t)(j0 + t) * stride + d0, lanes) : _mm256_setzero_ps();
                transpose8_ps(r);
                int i = 0;
                if (nd == 8)
                    for (; i + G <= nb; i += G) {
                        __m256 a[G];
                        UNROLL4 for (int g = 0; g < G; g++) a[g] = c ? part[i + g] : _mm256_setzero_ps();
                        UNROLL8 for (int d = 0; d < 8; d++)
                            UNROLL4 for (int g = 0; g < G; g++)
                                a[g] = _mm256_fmadd_ps(_mm256_set1_ps(qb[(size_t)(i + g) * ldq + d0 + d]), r[d], a[g]);
                        UNROLL4 for (int g = 0; g < G; g++) {
                            if (!last) part[i + g] = a[g];
                            else store_first(sb + (size_t)(i + g) * ldsc + j0, _mm256_mul_ps(a[g], sv), m);
                        }
                    }
                for (; i < nb; i++) {
                    __m256 a = chain8(c ? part[i] : _mm256_setzero_ps(), r, qb + (size_t)i * ldq + d0, nd);
                    if (!last) part[i] = a;
                    else store_first(sb + (size_t)i * ldsc + j0, _mm256_mul_ps(a, sv), m);
                }
            }
        }
    }
}

/* See kernels.h. Per key, 32 codes a step: |q| times k with q's sign
 * (vpmaddubsw: pairs of products, at most 2 * 127 * 127, never saturating),
 * pairs of those added into int32 lanes (vpmaddwd); exact, so any order. */
static void scores_i8_one(float *sc, const int8_t *q, float qd, const int8_t *K, size_t stride, const float *kd, int kn,
                          int hd, float scale) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (int j = 0; j < kn; j++) {
        const int8_t *k = K + (size_t)j * stride;
        __m256i acc = _mm256_setzero_si256();
        int d = 0;
        for (; d + 32 <= hd; d += 32) {
            __m256i qv = _mm256_loadu_si256((const __m256i *)(const void *)(q + d));
            __m256i kv = _mm256_loadu_si256((const __m256i *)(const void *)(k + d));
            __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(qv), _mm256_sign_epi8(kv, qv));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, ones));
        }
        int32_t s = simd_hsum8_epi32(acc);
        for (; d < hd; d++) s += (int32_t)q[d] * k[d];
        sc[j] = (float)s * (qd * kd[j]) * scale;
    }
}

/* Eight rows of eight int32 (four codes each) transposed in place: lane t
 * of r[u] becomes what lane u of r[t] was (transpose8_ps on the bits). */
ALWAYS_INLINE void transpose8_epi32(__m256i r[8]) {
    __m256 f[8];
    UNROLL8 for (int i = 0; i < 8; i++) f[i] = _mm256_castsi256_ps(r[i]);
    transpose8_ps(f);
    UNROLL8 for (int i = 0; i < 8; i++) r[i] = _mm256_castps_si256(f[i]);
}

/* One step of a query's eight key chains: four codes of every key (R, a
 * transposed register: lane t is key t's) against the query's four codes q4
 * (broadcast): |q| times k with q's sign (vpmaddubsw, pairs of at most
 * 2 * 127 * 127: no saturation), the pairs' sums into the int32 lanes. */
ALWAYS_INLINE __m256i dot4_keys(__m256i acc, __m256i R, const int8_t *q4) {
    int32_t w;
    memcpy(&w, q4, 4);
    __m256i qb = _mm256_set1_epi32(w);
    __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(qb), _mm256_sign_epi8(R, qb));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}

/* See kernels.h. Keys across the lanes, as the float scores: eight keys'
 * 32-code chunks loaded as rows (rows past kn zero) and transposed as int32
 * (four codes each), so lane t of R[u] holds codes 4u..4u+3 of key t; each
 * query then takes one dot4_keys per four codes, lane t being key t's exact
 * integer sum (nothing summed across lanes), and the transpose is shared by
 * every query of the call. Queries four at a time; chains wait between
 * chunks in part[], QB queries per batch. head_dim not a multiple of 32:
 * one query and one key at a time (scores_i8_one; integer sums: the same
 * bits either way). */
static void attn_scores_i8(float *sc, size_t ldsc, const int8_t *q, size_t ldq, const float *qd, const int32_t *qsum, int nq,
                           const int8_t *K, size_t stride, const float *kd, int kn, int hd, float scale) {
    (void)qsum; /* the AVX-512 table's unsigned shift; the sign trick here needs none */
    if (hd % 32) {
        for (int i = 0; i < nq; i++) scores_i8_one(sc + (size_t)i * ldsc, q + (size_t)i * ldq, qd[i], K, stride, kd, kn, hd, scale);
        return;
    }
    enum { QB = 64, G = 4 };
    const __m256 sv = _mm256_set1_ps(scale);
    int nc = hd / 32;
    for (int i0 = 0; i0 < nq; i0 += QB) {
        int nb = nq - i0 < QB ? nq - i0 : QB;
        const int8_t *qb = q + (size_t)i0 * ldq;
        float *sb = sc + (size_t)i0 * ldsc;
        for (int j0 = 0; j0 < kn; j0 += 8) {
            int m = kn - j0 < 8 ? kn - j0 : 8;
            __m256 kdv = _mm256_maskload_ps(kd + j0, first8(m));
            __m256i part[QB];
            for (int c = 0; c < nc; c++) {
                int d0 = 32 * c, last = c + 1 == nc;
                __m256i R[8];
                UNROLL8 for (int t = 0; t < 8; t++)
                    R[t] = t < m ? _mm256_loadu_si256((const __m256i *)(const void *)(K + (size_t)(j0 + t) * stride + d0))
                                 : _mm256_setzero_si256();
                transpose8_epi32(R);
                int i = 0;
                for (; i < nb; i += G) {
                    int g_n = nb - i < G ? nb - i : G;
                    __m256i a[G];
                    UNROLL4 for (int g = 0; g < G; g++) a[g] = c && g < g_n ? part[i + g] : _mm256_setzero_si256();
                    UNROLL8 for (int u = 0; u < 8; u++)
                        UNROLL4 for (int g = 0; g < G; g++)
                            if (g < g_n) a[g] = dot4_keys(a[g], R[u], qb + (size_t)(i + g) * ldq + d0 + 4 * u);
                    UNROLL4 for (int g = 0; g < G; g++) {
                        if (g >= g_n) break;
                        if (!last) {
                            part[i + g] = a[g];
                            continue;
                        }
                        /* (float)isum * (qd * kd[j]) * scale, as kernels.h orders it */
                        __m256 qk = _mm256_mul_ps(_mm256_set1_ps(qd[i0 + i + g]), kdv);
                        __m256 v = _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(a[g]), qk), sv);
                        store_first(sb + (size_t)(i + g) * ldsc + j0, v, m);
                    }
                }
            }
        }
    }
}

/* Dimensions d.. (nc * 8 of them, nc <= 4) of blocks V[0..NB) (NB = 1, 2;
 * n[b] keys each, p[b] their weights): one 8-lane float chain per block and
 * eight dimensions, one FMA per key in order; out[c] = the pair's sum (f0 +
 * f1, or f0 alone). */
static inline __attribute__((always_inline)) void values_pair(int NB, __m256 out[4], const float *const p[2],
                                                             const float *const V[2], const int n[2], size_t stride,
                                                             int d, int nc) {
    __m256 f[2][4];
    for (int b = 0; b < NB; b++)
        for (int c = 0; c < 4; c++) f[b][c] = _mm256_setzero_ps();
    for (int j = 0; j < n[0]; j++)
        for (int b = 0; b < NB; b++) {
            if (j >= n[b]) continue;
            const float *v = V[b] + (size_t)j * stride + d;
            __m256 w = _mm256_set1_ps(p[b][j]);
            if (nc == 4) {
                f[b][0] = _mm256_fmadd_ps(w, _mm256_loadu_ps(v), f[b][0]);
                f[b][1] = _mm256_fmadd_ps(w, _mm256_loadu_ps(v + 8), f[b][1]);
                f[b][2] = _mm256_fmadd_ps(w, _mm256_loadu_ps(v + 16), f[b][2]);
                f[b][3] = _mm256_fmadd_ps(w, _mm256_loadu_ps(v + 24), f[b][3]);
            } else
                for (int c = 0; c < nc; c++) f[b][c] = _mm256_fmadd_ps(w, _mm256_loadu_ps(v + 8 * c), f[b][c]);
        }
    for (int c = 0; c < nc; c++) out[c] = NB == 2 ? _mm256_add_ps(f[0][c], f[1][c]) : f[0][c];
}

/* values_pair's case of two full blocks and 32 dimensions, the bulk of a
 * long context: every bound a constant, so the eight chains live in
 * registers (the general form keeps them on the stack: a store and a load
 * around every FMA); the same FMAs in the same order, so the same bits. */
static inline __attribute__((always_inline)) void values_pair_full(__m256 out[4], const float *const p[2],
                                                                  const float *const V[2], size_t stride, int d) {
    __m256 f0 = _mm256_setzero_ps(), f1 = f0, f2 = f0, f3 = f0, g0 = f0, g1 = f0, g2 = f0, g3 = f0;
    const float *v0 = V[0] + d, *v1 = V[1] + d;
    UNROLL4 for (int j = 0; j < KERN_VBLOCK; j++) {
        __m256 w = _mm256_set1_ps(p[0][j]), x = _mm256_set1_ps(p[1][j]);
        const float *a = v0 + (size_t)j * stride, *b = v1 + (size_t)j * stride;
        f0 = _mm256_fmadd_ps(w, _mm256_loadu_ps(a), f0);
        f1 = _mm256_fmadd_ps(w, _mm256_loadu_ps(a + 8), f1);
        f2 = _mm256_fmadd_ps(w, _mm256_loadu_ps(a + 16), f2);
        f3 = _mm256_fmadd_ps(w, _mm256_loadu_ps(a + 24), f3);
        g0 = _mm256_fmadd_ps(x, _mm256_loadu_ps(b), g0);
        g1 = _mm256_fmadd_ps(x, _mm256_loadu_ps(b + 8), g1);
        g2 = _mm256_fmadd_ps(x, _mm256_loadu_ps(b + 16), g2);
        g3 = _mm256_fmadd_ps(x, _mm256_loadu_ps(b + 24), g3);
    }
    out[0] = _mm256_add_ps(f0, g0);
    out[1] = _mm256_add_ps(f1, g1);
    out[2] = _mm256_add_ps(f2, g2);
    out[3] = _mm256_add_ps(f3, g3);
}

/* kernels.h's order (the scalar reference's bits): groups of four blocks,
 * each as two pairs (values_pair), the pairs' sums added, 32 dimensions at
 * a time, then widened and added to acc; the dimensions past the last eight
 * by kern_values_group_dim. */
static void attn_values(double *acc, const float *p, const float *const *V, size_t stride, int kn, int hd) {
    for (int b0 = 0; b0 * KERN_VBLOCK < kn; b0 += KERN_VGROUP) {
        int n[4], nb = 0;
        for (int i = 0; i < 4; i++) {
            int left = kn - (b0 + i) * KERN_VBLOCK;
            n[i] = left < 0 ? 0 : left < KERN_VBLOCK ? left : KERN_VBLOCK;
            nb += n[i] > 0;
        }
        const float *pb[4], *vb[4];
        for (int i = 0; i < 4; i++) {
            pb[i] = p + (b0 + (i < nb ? i : 0)) * KERN_VBLOCK; /* blocks past the call's: never read */
            vb[i] = V[b0 + (i < nb ? i : 0)];
        }
        int d = 0;
        for (; d + 8 <= hd;) {
            int nc = hd - d >= 32 ? 4 : (hd - d) / 8;
            __m256 s01[4], s23[4];
            if (nc == 4 && n[0] == KERN_VBLOCK && n[1] == KERN_VBLOCK) values_pair_full(s01, pb, vb, stride, d);
            else if (nb >= 2) values_pair(2, s01, pb, vb, n, stride, d, nc);
            else values_pair(1, s01, pb, vb, n, stride, d, nc);
            if (nb == 4 && nc == 4 && n[3] == KERN_VBLOCK) values_pair_full(s23, pb + 2, vb + 2, stride, d);
            else if (nb == 4) values_pair(2, s23, pb + 2, vb + 2, n + 2, stride, d, nc);
            else if (nb == 3) values_pair(1, s23, pb + 2, vb + 2, n + 2, stride, d, nc);
            for (int c = 0; c < nc; c++) {
                __m256 g = nb > 2 ? _mm256_add_ps(s01[c], s23[c]) : s01[c];
                double *a = acc + d + 8 * c;
                _mm256_storeu_pd(a, _mm256_add_pd(_mm256_loadu_pd(a), _mm256_cvtps_pd(_mm256_castps256_ps128(g))));
                _mm256_storeu_pd(a + 4, _mm256_add_pd(_mm256_loadu_pd(a + 4), _mm256_cvtps_pd(_mm256_extractf128_ps(g, 1))));
            }
            d += 8 * nc;
        }
        for (; d < hd; d++) acc[d] += (double)kern_values_group_dim(p, V, stride, kn, b0, (size_t)d);
    }
}

/* Eight codes of a KV row from column c as floats (kernels.h's exact
 * values; scales applied by the caller). */
ALWAYS_INLINE __m256 kv_codes8(int elem, const uint8_t *row, int c) {
    switch (elem) {
    case KERN_KV_F32: return _mm256_loadu_ps((const float *)(const void *)(row + 4 * (size_t)c));
    case KERN_KV_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(row + 2 * (size_t)c)));
    case KERN_KV_BF16:
        return _mm256_castsi256_ps(
            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(row + 2 * (size_t)c))), 16));
    case KERN_KV_I8: return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(row + c))));
    case KERN_KV_I4: { /* 4 bytes, low nibble first: interleave the nibbles, then code - 8 */
        int32_t four;
        memcpy(&four, row + c / 2, 4);
        __m128i x = _mm_cvtsi32_si128(four), m = _mm_set1_epi8(15);
        __m128i nib = _mm_unpacklo_epi8(_mm_and_si128(x, m), _mm_and_si128(_mm_srli_epi16(x, 4), m));
        return _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_cvtepu8_epi32(nib), _mm256_set1_epi32(8)));
    }
    case KERN_KV_E4M3: { /* as a half: exponent and mantissa shifted under the half's, times 2^8 (exact) */
        __m128i x = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)(const void *)(row + c)));
        __m128i em = _mm_and_si128(x, _mm_set1_epi16(0x7f));
        __m128i h = _mm_or_si128(_mm_slli_epi16(em, 7), _mm_slli_epi16(_mm_and_si128(x, _mm_set1_epi16(0x80)), 8));
        h = _mm_or_si128(h, _mm_and_si128(_mm_cmpeq_epi16(em, _mm_set1_epi16(0x7f)), _mm_set1_epi16(0x7c00))); /* NaN */
        return _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(256.0f));
    }
    default: /* KERN_KV_E5M2: the half's high byte */
        return _mm256_cvtph_ps(_mm_slli_epi16(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)(const void *)(row + c))), 8));
    }
}

/* One butterfly stage inside each 8-lane register: lanes whose bit is set in
 * the (constant) MASK get a - b, the others a + b (a the lower lane of the
 * pair), as the scalar transform computes them. A macro: the blend's mask
 * must be an immediate for every compiler. */
#define BUTTERFLY_IN(x, swapped, MASK) _mm256_blend_ps(_mm256_add_ps(x, swapped), _mm256_sub_ps(swapped, x), MASK)

/* kern_hadamard32 on 32 floats in four registers: stages 1, 2, 4 inside each
 * register, 8 and 16 across them, in the scalar order. */
ALWAYS_INLINE void hadamard32_avx2(__m256 v[4]) {
    for (int i = 0; i < 4; i++) {
        __m256 y = _mm256_permute_ps(v[i], 0xb1);
        v[i] = BUTTERFLY_IN(v[i], y, 0xaa);
        y = _mm256_permute_ps(v[i], 0x4e);
        v[i] = BUTTERFLY_IN(v[i], y, 0xcc);
        y = _mm256_permute2f128_ps(v[i], v[i], 1);
        v[i] = BUTTERFLY_IN(v[i], y, 0xf0);
    }
    for (int h = 1; h <= 2; h *= 2)
        for (int i = 0; i < 4; i++) {
            if (i & h) continue;
            __m256 a = v[i], b = v[i + h];
            v[i] = _mm256_add_ps(a, b);
            v[i + h] = _mm256_sub_ps(a, b);
        }
    for (int i = 0; i < 4; i++) v[i] = _mm256_mul_ps(v[i], _mm256_set1_ps(KERN_RSQRT32));
}

/* kv_unpack for one element kind ELEM (a constant: the code's switch is
 * resolved at compile time, one loop per kind): eight columns at a time
 * (columns past the last eight by the scalar rule), the scale multiplied once
 * per element; grouped scales and the rotation a group of 32 at a time. */
ALWAYS_INLINE void kv_unpack_kind(int ELEM, const kern_kv_src *src, int n, int nc, float *out, size_t ld) {
    for (int r = 0; r < n; r++) {
        const uint8_t *row = src->codes + (size_t)r * src->row_bytes;
        float *o = out + (size_t)r * ld;
        int c = 0;
        if (src->group_scale) {
            assert(nc % 32 == 0 || !src->hadamard);
            const float *gs = src->group_scale + (size_t)r * src->group_stride;
            for (; c + 32 <= nc; c += 32) {
                __m256 s = _mm256_set1_ps(gs[c / 32]), v[4];
                for (int i = 0; i < 4; i++) v[i] = _mm256_mul_ps(kv_codes8(ELEM, row, c + 8 * i), s);
                if (src->hadamard) hadamard32_avx2(v);
                for (int i = 0; i < 4; i++) _mm256_storeu_ps(o + c + 8 * i, v[i]);
            }
        } else if (src->row_scale) {
            __m256 s = _mm256_set1_ps(src->row_scale[r]);
            for (; c + 8 <= nc; c += 8) _mm256_storeu_ps(o + c, _mm256_mul_ps(kv_codes8(ELEM, row, c), s));
        } else if (src->col_scale) {
            for (; c + 8 <= nc; c += 8)
                _mm256_storeu_ps(o + c, _mm256_mul_ps(kv_codes8(ELEM, row, c), _mm256_loadu_ps(src->col_scale + c)));
        } else {
            for (; c + 8 <= nc; c += 8) _mm256_storeu_ps(o + c, kv_codes8(ELEM, row, c));
        }
        for (; c < nc; c++) o[c] = kern_kv_scaled(src, ELEM, row, r, c);
    }
}

/* See kernels.h. */
static void kv_unpack(const kern_kv_src *src, int n, int nc, float *out, size_t ld) {
    switch (src->elem) {
    case KERN_KV_F32: kv_unpack_kind(KERN_KV_F32, src, n, nc, out, ld); break;
    case KERN_KV_F16: kv_unpack_kind(KERN_KV_F16, src, n, nc, out, ld); break;
    case KERN_KV_BF16: kv_unpack_kind(KERN_KV_BF16, src, n, nc, out, ld); break;
    case KERN_KV_I8: kv_unpack_kind(KERN_KV_I8, src, n, nc, out, ld); break;
    case KERN_KV_I4: kv_unpack_kind(KERN_KV_I4, src, n, nc, out, ld); break;
    case KERN_KV_E4M3: kv_unpack_kind(KERN_KV_E4M3, src, n, nc, out, ld); break;
    default: kv_unpack_kind(KERN_KV_E5M2, src, n, nc, out, ld); break;
    }
}

static double exp_shift(float *x, int n, float shift) {
    __m256 sv = _mm256_set1_ps(shift), sum = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), sv));
        _mm256_storeu_ps(x + i, e);
        sum = _mm256_add_ps(sum, e);
    }
    double s = simd_hsum8(sum);
    for (; i < n; i++) {
        x[i] = expf(x[i] - shift);
        s += x[i];
    }
    return s;
}

static void scale_f64(double *acc, double s, int n) {
    __m256d sv = _mm256_set1_pd(s);
    int i = 0;
    for (; i + 4 <= n; i += 4) _mm256_storeu_pd(acc + i, _mm256_mul_pd(sv, _mm256_loadu_pd(acc + i)));
    for (; i < n; i++) acc[i] *= s;
}

static void rmsnorm(float *out, const float *x, const float *w, int n, float eps) {
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
        s0 = _mm256_fmadd_pd(lo, lo, s0);
        s1 = _mm256_fmadd_pd(hi, hi, s1);
    }
    double buf[4];
    _mm256_storeu_pd(buf, _mm256_add_pd(s0, s1));
    double ss = (buf[0] + buf[1]) + (buf[2] + buf[3]);
    for (; i < n; i++) ss += (double)x[i] * x[i];
    float scale = (float)(1.0 / sqrt(ss / n + eps));
    __m256 sv = _mm256_set1_ps(scale);
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_loadu_ps(w + i), _mm256_mul_ps(sv, _mm256_loadu_ps(x + i))));
    for (; i < n; i++) out[i] = w[i] * (scale * x[i]);
}

static void softmax(float *x, int n) {
    __m256 mv = _mm256_set1_ps(-INFINITY);
    int i = 0;
    for (; i + 8 <= n; i += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(x + i));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mv), _mm256_extractf128_ps(mv, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    float max = _mm_cvtss_f32(m4);
    for (; i < n; i++) max = x[i] > max ? x[i] : max;
    __m256 sum = _mm256_setzero_ps(), maxv = _mm256_set1_ps(max);
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), maxv));
        _mm256_storeu_ps(x + i, e);
        sum = _mm256_add_ps(sum, e);
    }
    double s = simd_hsum8(sum);
    for (; i < n; i++) {
        x[i] = expf(x[i] - max);
        s += x[i];
    }
    __m256 inv = _mm256_set1_ps((float)(1.0 / s));
    for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
    for (; i < n; i++) x[i] *= (float)(1.0 / s);
}

/* Pairs rotate with the same three roundings as the scalar code (two products,
 * then addsub), so RoPE is bit-identical across tables. */
static void rope(float *v, int n_heads, int head_dim, const float *cs) {
    for (int h = 0; h < n_heads; h++) {
        float *p = v + h * head_dim;
        int i = 0;
        for (; i + 8 <= head_dim; i += 8) {
            __m256 x = _mm256_loadu_ps(p + i), t = _mm256_loadu_ps(cs + i);
            __m256 c = _mm256_moveldup_ps(t), s = _mm256_movehdup_ps(t);
            __m256 xs = _mm256_permute_ps(x, 0xb1); /* swap each pair */
            _mm256_storeu_ps(p + i, _mm256_addsub_ps(_mm256_mul_ps(x, c), _mm256_mul_ps(xs, s)));
        }
        for (; i < head_dim; i += 2) {
            float c = cs[i], s = cs[i + 1], x0 = p[i], x1 = p[i + 1];
            p[i] = x0 * c - x1 * s;
            p[i + 1] = x0 * s + x1 * c;
        }
    }
}

/* silu(g) * u for 8 lanes. */
ALWAYS_INLINE __m256 swiglu8(__m256 g, __m256 u) {
    const __m256 one = _mm256_set1_ps(1.0f), neg = _mm256_set1_ps(-0.0f);
    return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, exp8(_mm256_xor_ps(g, neg)))), u);
}

/* The tail goes through the same vector arithmetic (padded to 8 lanes), so
 * an element's result does not depend on where it sits: a prefill pass
 * (one call over T rows) and decode (one call per row) agree bit for bit,
 * which is what lets a preempted sequence be recomputed exactly. */
static void swiglu(float *gate, const float *up, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(gate + i, swiglu8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
    if (i < n) {
        float g[8] = {0}, u[8] = {0};
        memcpy(g, gate + i, sizeof(float) * (size_t)(n - i));
        memcpy(u, up + i, sizeof(float) * (size_t)(n - i));
        _mm256_storeu_ps(g, swiglu8(_mm256_loadu_ps(g), _mm256_loadu_ps(u)));
        memcpy(gate + i, g, sizeof(float) * (size_t)(n - i));
    }
}

static int argmax(const float *x, int n) {
    if (n < 8) {
        int best = 0;
        for (int i = 1; i < n; i++)
            if (x[i] > x[best]) best = i;
        return best;
    }
    __m256 mv = _mm256_loadu_ps(x);
    int i = 8;
    for (; i + 8 <= n; i += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(x + i));
    float m[8], max;
    _mm256_storeu_ps(m, mv);
    max = m[0];
    for (int k = 1; k < 8; k++) max = m[k] > max ? m[k] : max;
    for (; i < n; i++) max = x[i] > max ? x[i] : max;
    for (i = 0; i < n; i++)
        if (x[i] == max) return i;
    return 0; /* only when x holds NaNs */
}

static void add(float *y, const float *x, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
    for (; i < n; i++) y[i] += x[i];
}

const kern_ops kern_avx2_ops = {
    .name = "avx2",
    .decode_tile = KERN_TILE_COPY, /* Zen 3: 19.1, 19.4 tok/s in place, 23.0, 23.4 copied */
    .dot = {[CX_TYPE_F32] = dot_f32row, [CX_TYPE_F16] = dot_f16row, [CX_TYPE_BF16] = dot_bf16row,
            [CX_TYPE_Q8_0] = dot_q8_0, [CX_TYPE_Q4_0] = dot_q4_0, [CX_TYPE_Q4_K] = kq_dot_q4_k_avx2,
            [CX_TYPE_Q6_K] = kq_dot_q6_k_avx2, [CX_TYPE_MXFP4] = mxfp4_dot_avx2},
    .gemm = {[CX_TYPE_F32] = gemm_f32, [CX_TYPE_F16] = gemm_f16, [CX_TYPE_BF16] = gemm_bf16,
             [CX_TYPE_Q8_0] = gemm_q8_0, [CX_TYPE_Q4_0] = gemm_q4_0, [CX_TYPE_Q4_K] = kq_gemm_q4_k_avx2,
             [CX_TYPE_Q6_K] = kq_gemm_q6_k_avx2, [CX_TYPE_MXFP4] = mxfp4_gemm_avx2},
    .gemm_x8 = {[CX_TYPE_Q8_0] = gemm_q8_0_x8, [CX_TYPE_Q4_0] = gemm_q4_0_x8, [CX_TYPE_MXFP4] = mxfp4_gemm_x8_avx2},
    .quantize_act = quantize_act,
    .attn_scores = attn_scores,
    .attn_scores_i8 = attn_scores_i8,
    .attn_values = attn_values,
    .exp_shift = exp_shift,
    .scale_f64 = scale_f64,
    .rmsnorm = rmsnorm,
    .softmax = softmax,
    .rope = rope,
    .swiglu = swiglu,
    .argmax = argmax,
    .add = add,
    .lora_up = kern_lora_up_avx2,
    .kv_unpack = kv_unpack,
};
