/*
 * kquant_avx2.c - Q4_K and Q6_K dot products and gemms with AVX2 + FMA + F16C
 * (built with -mavx2 -mfma -mf16c; called only after CPUID says so).
 *
 * Per super-block the codes are unpacked once into unsigned bytes, multiplied
 * with the int8 activations by maddubs (u8*s8 pairs summed to int16: at most
 * 2*63*128, no saturation), weighted by the sub-block scales with madd (to
 * int32), so every lane of the integer sum is exact. Q4_K converts each
 * lane to float and accumulates it with FMA, scaled by d*da, and sums the
 * lanes at the end: it differs from the scalar reference (which converts the
 * whole block's int32 sum) by float rounding only. Q6_K sums the block's
 * lanes in int32 first, as the reference does, so it gives the reference's
 * bits (see k6_rows for why).
 *
 * One body per format, k4_rows / k6_rows, computes up to 4 tokens per pass
 * over a weight row; the dot is that body with one token, so the gemm gives
 * exactly the dot's value for every (row, token): the float operations of a
 * token do not depend on how many tokens share the pass (kquant_entry.h).
 */
#include "../kquant.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <assert.h>
#include <immintrin.h>
#include <string.h>

#include "simd_avx2.h"

#define KQ_NT 4 /* tokens per weight-row pass in the gemms */
#define KQ_INLINE static inline __attribute__((always_inline))
/* Per-token and per-chunk loops must unroll (nt is a constant after inlining)
 * so their accumulator arrays live in registers, not on the stack. */
#define KQ_UNROLL _Pragma("GCC unroll 4")

/* fp16 at p (unaligned) to float with F16C; exact, like cx_fp16_to_fp32. */
KQ_INLINE float half_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

/* Sum of the 4 lanes, in the same fixed order as simd_hsum8's tail. */
KQ_INLINE float hsum4(__m128 s) {
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/*
 * Q4_K row . activation rows t0..t0+nt-1 (nt <= KQ_NT) into out[0..nt).
 * Per block and token: sumi (8 x int32) = sum_c sc[2c]*(lo nibbles . q8) + sc[2c+1]*(hi . q8);
 * mins (4 x int32) = m . (pairwise bsums); acc += (d*da)*sumi, accm += (dmin*da)*mins.
 */
KQ_INLINE void k4_rows(const uint8_t *row, const kern_act *a, int t0, int nt, float *out) {
    const int64_t n = a->n, nb = n / QK_K;
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    __m256 acc[KQ_NT];
    __m128 accm[KQ_NT];
    KQ_UNROLL for (int k = 0; k < nt; k++) {
        acc[k] = _mm256_setzero_ps();
        accm[k] = _mm_setzero_ps();
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = row + b * (int64_t)sizeof(block_q4_k);
        const float dw = half_at(blk), dmw = half_at(blk + 2);
        /* The 12 packed bytes to 8 six-bit scales and 8 mins, four at a time
         * in 32-bit words (the same bits kq_scale_min_k4 picks one by one). */
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
        __m256i qlo[4], qhi[4], slo[4], shi[4];
        KQ_UNROLL for (int c = 0; c < 4; c++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(blk + 16 + 32 * c));
            qlo[c] = _mm256_and_si256(q, low4);
            qhi[c] = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
            slo[c] = _mm256_set1_epi16(sc[2 * c]);
            shi[c] = _mm256_set1_epi16(sc[2 * c + 1]);
        }
        KQ_UNROLL for (int k = 0; k < nt; k++) {
            const int64_t t = t0 + k;
            const int8_t *q8 = a->qs + t * n + b * QK_K;
            const int16_t *bs = a->bsum + t * (n / 16) + b * (QK_K / 16);
            __m256i sumi = _mm256_setzero_si256();
            KQ_UNROLL for (int c = 0; c < 4; c++) {
                __m256i p0 = _mm256_maddubs_epi16(qlo[c], _mm256_loadu_si256((const __m256i *)(q8 + 64 * c)));
                __m256i p1 = _mm256_maddubs_epi16(qhi[c], _mm256_loadu_si256((const __m256i *)(q8 + 64 * c + 32)));
                p0 = _mm256_madd_epi16(p0, slo[c]);
                p1 = _mm256_madd_epi16(p1, shi[c]);
                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p0, p1));
            }
            /* Code sums per sub-block of 32 = adjacent bsum pairs (|.| <= 4064, fits int16). */
            __m128i pairs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)bs),
                                           _mm_loadu_si128((const __m128i *)(bs + 8)));
            __m128i pm = _mm_madd_epi16(mins, pairs);
            const float da = a->d[t * nb + b];
            acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(dw * da), _mm256_cvtepi32_ps(sumi), acc[k]);
            accm[k] = _mm_fmadd_ps(_mm_set1_ps(dmw * da), _mm_cvtepi32_ps(pm), accm[k]);
        }
    }
    KQ_UNROLL for (int k = 0; k < nt; k++) out[k] = simd_hsum8(acc[k]) - hsum4(accm[k]);
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
 * Q6_K row . activation rows t0..t0+nt-1 (nt <= KQ_NT) into out[0..nt).
 * Codes q (0..63) are unpacked per 32 weights (chunk p = 4h+k covers weights
 * 32p..32p+31, i.e. sub-blocks 2p and 2p+1); sum (q-32).a = q.a - 32*bsum, so
 * sumi = sum_p scale.(q.a) - 32 * scale.bsum, exact in int32; each block then
 * adds (d*da)*sumi as the scalar reference does, so the result is its bits.
 */
KQ_INLINE void k6_rows(const uint8_t *row, const kern_act *a, int t0, int nt, float *out) {
    const int64_t n = a->n, nb = n / QK_K;
    const __m256i low4 = _mm256_set1_epi8(0x0F), bits45 = _mm256_set1_epi8(0x30);
    float acc[KQ_NT];
    KQ_UNROLL for (int k = 0; k < nt; k++) acc[k] = 0;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = row + b * (int64_t)sizeof(block_q6_k);
        const float dw = half_at(blk + Q6K_D_AT);
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)(blk + 192));
        const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
        __m256i q6[8], sp[8];
        for (int h = 0; h < 2; h++) {
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)(blk + 64 * h));
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(blk + 64 * h + 32));
            const __m256i hb = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h));
            /* High 2 bits of quarter k sit in bits 2k..2k+1 of hb; move them to bits 4-5. */
            q6[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(l0, low4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), bits45));
            q6[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(l1, low4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), bits45));
            q6[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), _mm256_and_si256(hb, bits45));
            q6[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4),
                                            _mm256_and_si256(_mm256_srli_epi16(hb, 2), bits45));
        }
        for (int p = 0; p < 8; p++)
            sp[p] = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, _mm_loadu_si128((const __m128i *)SCALE_PAIR[p])));
        KQ_UNROLL for (int k = 0; k < nt; k++) {
            const int64_t t = t0 + k;
            const int8_t *q8 = a->qs + t * n + b * QK_K;
            const int16_t *bs = a->bsum + t * (n / 16) + b * (QK_K / 16);
            __m256i sumi = _mm256_setzero_si256();
            for (int p = 0; p < 8; p++) {
                __m256i d = _mm256_maddubs_epi16(q6[p], _mm256_loadu_si256((const __m256i *)(q8 + 32 * p)));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(d, sp[p]));
            }
            __m256i corr = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)bs));
            sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(corr, 5));
            /* The block's sum in int32 before any rounding, as the scalar
             * reference: q.a and 32*bsum sit in different lanes, and lanes
             * rounded one by one would leave the rounding of terms that
             * cancel (an all-zero row gave 2^-23). */
            const float da = a->d[t * nb + b];
            acc[k] += dw * da * (float)simd_hsum8_epi32(sumi);
        }
    }
    KQ_UNROLL for (int k = 0; k < nt; k++) out[k] = acc[k];
}

#define KQ_ISA avx2
#include "kquant_entry.h" /* the dots and gemms around k4_rows / k6_rows */

#endif
