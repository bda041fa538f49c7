/*
 * simd_avx2.h - small AVX2 helpers shared by the *_avx2.c kernel files and
 * ops_avx512.c, which keeps AVX2's order of additions (include only from
 * files built with the AVX2 flags or the AVX-512 ones, which include them).
 */
#ifndef CX_SIMD_AVX2_H
#define CX_SIMD_AVX2_H

#include <immintrin.h>

/* Sum of the eight lanes in one fixed order (halves, then pairs, then the
 * last two), so every kernel that uses it rounds alike. */
static inline __attribute__((always_inline)) float simd_hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Sum of the eight int32 lanes (exact, wrapping as int32 would). */
static inline __attribute__((always_inline)) int32_t simd_hsum8_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

#endif
