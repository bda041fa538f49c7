/*
 * kquant_avx512.c - Q4_K and Q6_K dot products and gemms with 512-bit
 * registers (AVX-512 F/BW/VL/DQ; built with the Makefile's *_avx512.c flags,
 * called only by the AVX-512 tables, which dispatch.c hands out only when
 * CPUID and XGETBV say so).
 *
 * kquant_avx2.c's scheme, twice as wide: the codes of a super-block are
 * unpacked once into unsigned bytes, 64 per register (two sub-blocks side by
 * side), multiplied with the int8 activations by maddubs, weighted by the
 * sub-block scales with madd (exact int32). Q4_K converts once per
 * super-block and FMA-accumulates over 16 float lanes, summed at the end: it
 * differs from the scalar reference by float rounding only (the bound of
 * kquant.h, checked by tests/unit/engine/test_kquant.c and test_kernels.c).
 * Q6_K sums the block in int32 first and gives the reference's bits. One
 * body per format computes up to KQ_NT tokens per pass over a row; the dot
 * is that body with one token, so the gemm equals the dot bit for bit
 * (kquant_entry.h).
 */
#include "../kquant.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__)

#include <assert.h>
#include <immintrin.h>
#include <string.h>

#define KQ_NT 4 /* tokens per weight-row pass in the gemms */
#define KQ_INLINE static inline __attribute__((always_inline))
#define KQ_UNROLL _Pragma("GCC unroll 4")

/* fp16 at p (unaligned) to float; exact. */
KQ_INLINE float half_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

/* Sum of 4 lanes in a fixed order. */
KQ_INLINE float hsum4(__m128 s) {
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* [lo | hi]: two 256-bit halves in one register. */
KQ_INLINE __m512i join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

/*
 * Q4_K row . activation rows t0..t0+nt-1 into out[0..nt). Chunk c of qs (32
 * bytes) holds sub-block 2c in its low nibbles and 2c+1 in its high ones, so
 * [low | high] lines up with the 64 contiguous activation codes 64c..64c+63;
 * the scales register is [sc[2c] x16 | sc[2c+1] x16] (int16).
 */
KQ_INLINE void k4_rows(const uint8_t *row, const kern_act *a, int t0, int nt, float *out) {
    const int64_t n = a->n, nb = n / QK_K;
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    __m512 acc[KQ_NT];
    __m128 accm[KQ_NT];
    KQ_UNROLL for (int k = 0; k < nt; k++) {
        acc[k] = _mm512_setzero_ps();
        accm[k] = _mm_setzero_ps();
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = row + b * (int64_t)sizeof(block_q4_k);
        const float dw = half_at(blk), dmw = half_at(blk + 2);
        /* the 12 packed bytes to 8 six-bit scales and 8 mins, as kquant_avx2.c */
        uint32_t u[4];
        memcpy(u, blk + 4, 12);
        const uint32_t m6 = 0x3f3f3f3f, m4 = 0x0f0f0f0f, m2 = 0x03030303;
        u[3] = ((u[2] >> 4) & m4) | (((u[1] >> 6) & m2) << 4); /* mins 4..7 */
        const uint32_t mins03 = u[1] & m6;
        u[1] = (u[2] & m4) | (((u[0] >> 6) & m2) << 4);        /* scales 4..7 */
        u[2] = mins03;
        u[0] &= m6;                                             /* scales 0..3 */
        uint8_t sc[8];
        memcpy(sc, u, 8);
        const __m128i mins = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, (int)u[3], (int)u[2]));
        __m512i q[4], s[4];
        KQ_UNROLL for (int c = 0; c < 4; c++) {
            __m256i raw = _mm256_loadu_si256((const __m256i *)(blk + 16 + 32 * c));
            q[c] = join(_mm256_and_si256(raw, low4), _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4));
            s[c] = join(_mm256_set1_epi16(sc[2 * c]), _mm256_set1_epi16(sc[2 * c + 1]));
        }
        KQ_UNROLL for (int k = 0; k < nt; k++) {
            const int64_t t = t0 + k;
            const int8_t *q8 = a->qs + t * n + b * QK_K;
            const int16_t *bs = a->bsum + t * (n / 16) + b * (QK_K / 16);
            __m512i sumi = _mm512_setzero_si512();
            KQ_UNROLL for (int c = 0; c < 4; c++) {
                __m512i p = _mm512_maddubs_epi16(q[c], _mm512_loadu_si512(q8 + 64 * c));
                sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(p, s[c]));
            }
            /* code sums per sub-block of 32 = adjacent bsum pairs (|.| <= 4064, fits int16) */
            __m128i pairs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)bs), _mm_loadu_si128((const __m128i *)(bs + 8)));
            __m128i pm = _mm_madd_epi16(mins, pairs);
            const float da = a->d[t * nb + b];
            acc[k] = _mm512_fmadd_ps(_mm512_set1_ps(dw * da), _mm512_cvtepi32_ps(sumi), acc[k]);
            accm[k] = _mm_fmadd_ps(_mm_set1_ps(dmw * da), _mm_cvtepi32_ps(pm), accm[k]);
        }
    }
    KQ_UNROLL for (int k = 0; k < nt; k++) out[k] = _mm512_reduce_add_ps(acc[k]) - hsum4(accm[k]);
}

/* Byte shuffles that turn the 16 scale bytes into [s[2p] x8, s[2p+1] x8], p = 0..7. */
static const uint8_t SCALE_PAIR[8][16] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},
    {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
    {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5},
    {6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7},
    {8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9},
    {10, 10, 10, 10, 10, 10, 10, 10, 11, 11, 11, 11, 11, 11, 11, 11},
    {12, 12, 12, 12, 12, 12, 12, 12, 13, 13, 13, 13, 13, 13, 13, 13},
    {14, 14, 14, 14, 14, 14, 14, 14, 15, 15, 15, 15, 15, 15, 15, 15},
};

/*
 * Q6_K row . activation rows t0..t0+nt-1 into out[0..nt). Register j (0..3)
 * holds the codes 0..63 of weights 64j..64j+63 (chunks 2j and 2j+1 of
 * kquant_avx2.c), half h = j / 2 built from ql[64h..64h+63] and qh[32h..]:
 * even j takes the low nibbles and qh bits 0-1 | 2-3, odd j the high
 * nibbles and bits 4-5 | 6-7. sum (q-32).a = q.a - 32*bsum, exact in int32;
 * each block then adds (d*da)*sum as the scalar reference does (its bits).
 */
KQ_INLINE void k6_rows(const uint8_t *row, const kern_act *a, int t0, int nt, float *out) {
    const int64_t n = a->n, nb = n / QK_K;
    const __m512i low4 = _mm512_set1_epi8(0x0F), bits45 = _mm512_set1_epi8(0x30);
    float acc[KQ_NT];
    KQ_UNROLL for (int k = 0; k < nt; k++) acc[k] = 0;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = row + b * (int64_t)sizeof(block_q6_k);
        const float dw = half_at(blk + Q6K_D_AT);
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)(blk + 192));
        const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
        __m512i q6[4], sp[4];
        for (int h = 0; h < 2; h++) {
            const __m512i L = _mm512_loadu_si512(blk + 64 * h);
            const __m256i hb = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h));
            const __m512i hlo = join(_mm256_slli_epi16(hb, 4), _mm256_slli_epi16(hb, 2));
            const __m512i hhi = join(hb, _mm256_srli_epi16(hb, 2));
            q6[2 * h] = _mm512_or_si512(_mm512_and_si512(L, low4), _mm512_and_si512(hlo, bits45));
            q6[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(L, 4), low4), _mm512_and_si512(hhi, bits45));
        }
        for (int j = 0; j < 4; j++) {
            __m128i p0 = _mm_shuffle_epi8(sc8, _mm_loadu_si128((const __m128i *)SCALE_PAIR[2 * j]));
            __m128i p1 = _mm_shuffle_epi8(sc8, _mm_loadu_si128((const __m128i *)SCALE_PAIR[2 * j + 1]));
            sp[j] = _mm512_cvtepi8_epi16(_mm256_set_m128i(p1, p0));
        }
        KQ_UNROLL for (int k = 0; k < nt; k++) {
            const int64_t t = t0 + k;
            const int8_t *q8 = a->qs + t * n + b * QK_K;
            const int16_t *bs = a->bsum + t * (n / 16) + b * (QK_K / 16);
            __m512i sumi = _mm512_setzero_si512();
            for (int j = 0; j < 4; j++) {
                __m512i d = _mm512_maddubs_epi16(q6[j], _mm512_loadu_si512(q8 + 64 * j));
                sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(d, sp[j]));
            }
            __m256i corr = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)bs));
            sumi = _mm512_sub_epi32(sumi, _mm512_zextsi256_si512(_mm256_slli_epi32(corr, 5)));
            /* The block's sum in int32 before any rounding: q.a and 32*bsum
             * sit in different lanes, and lanes rounded one by one would
             * leave the rounding of terms that cancel (an all-zero row
             * gave 2^-23). */
            const float da = a->d[t * nb + b];
            acc[k] += dw * da * (float)_mm512_reduce_add_epi32(sumi);
        }
    }
    KQ_UNROLL for (int k = 0; k < nt; k++) out[k] = acc[k];
}

#define KQ_ISA avx512
#include "kquant_entry.h" /* the dots and gemms around k4_rows / k6_rows */

#endif
