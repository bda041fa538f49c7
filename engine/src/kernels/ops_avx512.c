/*
 * ops_avx512.c - the AVX-512 tables' attention and elementwise operators and
 * their Q8_32 activation quantizer (kernels_avx512.c puts them in both the
 * "avx512" and "avx512vnni" tables; only AVX-512 F/BW/VL/DQ is used).
 *
 * Built with the AVX-512 flags (this file only, see the Makefile); one
 * function, kern_attn_scores_i8_avx512vnni, also uses AVX-512 VNNI and is in
 * the avx512vnni table only. Every one
 * gives the AVX2 table's bits (a test checks), at twice the width: the two
 * tables then agree on everything but the matrix products, and a model's
 * attention does not change with the table. How each keeps AVX2's order:
 *   attn_scores  kernels.h's chain per key, keys across the lanes: 16 keys
 *                a register (AVX2: 8), each lane its own key's chain, so
 *                the width changes nothing.
 *   attn_values  per block, four 16-lane float chains (64 dimensions) take
 *                its keys by one FMA each, in order; a group's four blocks'
 *                chains are added in float, pairs first, then to the double
 *                accumulators: kernels.h's order, as the scalar and AVX2
 *                code keep it: the same bits as both.
 *   exp_shift, softmax: exp16 (AVX2's exp8 lane for lane) where AVX2 takes
 *                exp8, expf where it takes expf, the sum in AVX2's 8-lane order.
 *   swiglu       exp16, tails through masked lanes, as AVX2 pads its tail:
 *                an element's result does not depend on its place.
 *   rmsnorm      squares in one 8-lane double chain (AVX2's two 4-lane ones
 *                side by side), AVX2's final sums, then 16-lane scaling.
 *   scale_f64, add, rope: one rounding per element: the same everywhere.
 *   quantize_act (Q8_32) the scalar reference's codes, scales and sums exactly
 *                (the same IEEE multiply, round-half-even conversion).
 *   kv_unpack    sixteen codes per step: exact widening, one multiply by
 *                the scale, the Walsh-Hadamard butterflies stage by stage on
 *                two registers (each an elementwise add or subtract of the
 *                scalar pair): the scalar bits.
 */
#include <assert.h>
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"
#include "ops_avx512.h"
#include "simd_avx2.h" /* simd_hsum8: the AVX-512 flags include AVX2 */

#define ALWAYS_INLINE static inline __attribute__((always_inline))
#define UNROLL16 _Pragma("GCC unroll 16")

/* Mask of the first n (0..16) lanes. */
ALWAYS_INLINE __mmask16 first16(int n) { return (__mmask16)(n >= 16 ? 0xffff : (1u << n) - 1); }
/* Mask of the first n (0.., at most 64 count) byte lanes. */
ALWAYS_INLINE __mmask64 first64(int n) { return n >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << n) - 1; }

/* e^x for sixteen floats: kernels_avx2.c's exp8 (Cephes' range reduction and
 * degree-5 polynomial, within 2 ulp of expf over [-87, 88], inputs clamped to
 * it) with the same operations in the same order, so the same bits per lane. */
ALWAYS_INLINE __m512 exp16(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.3365f)), _mm512_set1_ps(88.3762626647949f));
    __m512 fx = _mm512_roundscale_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), _mm512_set1_ps(0.5f)),
                                     _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    x = _mm512_fnmadd_ps(fx, _mm512_set1_ps(0.693359375f), x);
    x = _mm512_fnmadd_ps(fx, _mm512_set1_ps(-2.12194440e-4f), x);
    __m512 y = _mm512_set1_ps(1.9875691500E-4f);
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(1.3981999507E-3f));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(8.3334519073E-3f));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(4.1665795894E-2f));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(1.6666665459E-1f));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(5.0000001201E-1f));
    y = _mm512_fmadd_ps(y, _mm512_mul_ps(x, x), _mm512_add_ps(x, _mm512_set1_ps(1.0f)));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(fx), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(y, _mm512_castsi512_ps(e));
}

/* ---- attention ---- */

/* Which key accumulator slot s holds, so that sum16x16_epi32 leaves key L
 * in lane L (P is its own inverse). */
static const int KEY_SLOT[16] = {0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15};

/* The key (0..m-1) slot s reads when m keys are left: KEY_SLOT's, or the
 * last key again in the unused slots, so a key's score does not depend on
 * where it sits in the call. */
ALWAYS_INLINE int slot_key(int s, int m) { return KEY_SLOT[s] < m ? KEY_SLOT[s] : m - 1; }

/*
 * Sixteen 16-lane int32 sums at once: lane L of the result is the sum of
 * the lanes of a[P[L]], P = KEY_SLOT, by halving: 128-bit halves
 * (shuffle_i32x4), then 64-bit, then 32-bit pairs (shuffle_ps). Exact: the
 * order of the additions does not matter.
 */
ALWAYS_INLINE __m512i sum16x16_epi32(const __m512i a[16]) {
#define SHUF_PS(x, y, imm) _mm512_castps_si512(_mm512_shuffle_ps(_mm512_castsi512_ps(x), _mm512_castsi512_ps(y), imm))
    __m512i b[8], c[4], d[2];
    UNROLL16 for (int i = 0; i < 8; i++)
        b[i] = _mm512_add_epi32(_mm512_shuffle_i32x4(a[i], a[i + 8], 0x44), _mm512_shuffle_i32x4(a[i], a[i + 8], 0xee));
    UNROLL16 for (int i = 0; i < 4; i++)
        c[i] = _mm512_add_epi32(_mm512_shuffle_i32x4(b[i], b[i + 4], 0x88), _mm512_shuffle_i32x4(b[i], b[i + 4], 0xdd));
    UNROLL16 for (int i = 0; i < 2; i++) d[i] = _mm512_add_epi32(SHUF_PS(c[i], c[i + 2], 0x44), SHUF_PS(c[i], c[i + 2], 0xee));
    return _mm512_add_epi32(SHUF_PS(d[0], d[1], 0x88), SHUF_PS(d[0], d[1], 0xdd));
#undef SHUF_PS
}

/* One query (AVX-512 F/BW): sixteen keys per pass, 64 codes a step (lanes
 * past hd loaded as zero): |q| times k with q's sign (k negated under q's
 * sign mask), vpmaddubsw (at most 2 * 127 * 127, never saturating),
 * vpmaddwd into int32 lanes, the sixteen keys' lanes summed together by
 * sum16x16_epi32; then the float products in kernels.h's order. */
static void scores_i8_one(float *sc, const int8_t *q, float qd, const int8_t *K, size_t stride, const float *kd, int kn,
                          int hd, float scale) {
    const __m512i ones = _mm512_set1_epi16(1), zero = _mm512_setzero_si512();
    for (int j0 = 0; j0 < kn; j0 += 16) {
        int m = kn - j0 < 16 ? kn - j0 : 16;
        const int8_t *k[16];
        UNROLL16 for (int s = 0; s < 16; s++) k[s] = K + (size_t)(j0 + slot_key(s, m)) * stride;
        __m512i acc[16];
        UNROLL16 for (int s = 0; s < 16; s++) acc[s] = zero;
        for (int d = 0; d < hd; d += 64) {
            __mmask64 lanes = first64(hd - d);
            __m512i qv = _mm512_maskz_loadu_epi8(lanes, q + d);
            __m512i qa = _mm512_abs_epi8(qv);
            __mmask64 neg = _mm512_movepi8_mask(qv);
            UNROLL16 for (int s = 0; s < 16; s++) {
                __m512i kv = _mm512_maskz_loadu_epi8(lanes, k[s] + d);
                kv = _mm512_mask_sub_epi8(kv, neg, zero, kv);
                acc[s] = _mm512_add_epi32(acc[s], _mm512_madd_epi16(_mm512_maddubs_epi16(qa, kv), ones));
            }
        }
        __m512 sum = _mm512_cvtepi32_ps(sum16x16_epi32(acc));
        __m512 t = _mm512_mul_ps(_mm512_set1_ps(qd), _mm512_maskz_loadu_ps(first16(m), kd + j0));
        _mm512_mask_storeu_ps(sc + j0, first16(m), _mm512_mul_ps(_mm512_mul_ps(sum, t), _mm512_set1_ps(scale)));
    }
}

/* See ops_avx512.h: one query at a time. */
void kern_attn_scores_i8_avx512(float *sc, size_t ldsc, const int8_t *q, size_t ldq, const float *qd, const int32_t *qsum, int nq,
                                const int8_t *K, size_t stride, const float *kd, int kn, int hd, float scale) {
    for (int i = 0; i < nq; i++) scores_i8_one(sc + (size_t)i * ldsc, q + (size_t)i * ldq, qd[i], K, stride, kd, kn, hd, scale);
}

/* Sixteen rows of sixteen int32 lanes transposed in place: afterwards r[d]
 * lane j is what r[j] lane d was (unpack 32- then 64-bit pairs within
 * 128-bit lanes, then a 4 x 4 transpose of the 128-bit lanes). */
ALWAYS_INLINE void transpose16_epi32(__m512i r[16]) {
    __m512i t[16], u[16];
    UNROLL16 for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    UNROLL16 for (int i = 0; i < 4; i++) { /* u[4i + k]: rows 4i..4i+3 of dword 4L + k in 128-bit lane L */
        u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    UNROLL16 for (int k = 0; k < 4; k++) {
        __m512i v0 = _mm512_shuffle_i32x4(u[k], u[4 + k], 0x44), v1 = _mm512_shuffle_i32x4(u[k], u[4 + k], 0xee);
        __m512i v2 = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], 0x44), v3 = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], 0xee);
        r[k] = _mm512_shuffle_i32x4(v0, v2, 0x88);
        r[4 + k] = _mm512_shuffle_i32x4(v0, v2, 0xdd);
        r[8 + k] = _mm512_shuffle_i32x4(v1, v3, 0x88);
        r[12 + k] = _mm512_shuffle_i32x4(v1, v3, 0xdd);
    }
}

/* nd (1..16) steps of query q's chain: acc = fmadd(q[d], r[d], acc). */
ALWAYS_INLINE __m512 chain16(__m512 acc, const __m512i r[16], const float *q, int nd) {
    UNROLL16 for (int d = 0; d < 16; d++) {
        if (d >= nd) break;
        acc = _mm512_fmadd_ps(_mm512_set1_ps(q[d]), _mm512_castsi512_ps(r[d]), acc);
    }
    return acc;
}

/* See ops_avx512.h. Keys across the lanes: sixteen keys' 16-dimension
 * chunks are loaded as rows (lanes past hd zero) and transposed, so r[d]
 * holds dimension 16c + d of every key; each query then takes one FMA per
 * dimension, its value broadcast, into a chain whose lane j is key j's:
 * kernels.h's chain, nothing reduced across lanes (AVX2's bits, eight keys
 * a register there). The transpose (64 shuffles per 16 keys and 16
 * dimensions) serves every query of the call, 16 FMAs each. Queries go
 * eight at a time, eight independent chains to hide the FMA latency;
 * chains wait between chunks in part[], QB queries per batch. */
void kern_attn_scores_avx512(float *sc, size_t ldsc, const float *q, size_t ldq, int nq, const float *K, size_t stride, int kn,
                             int hd, float scale) {
    enum { QB = 64, G = 8 };
    const __m512 sv = _mm512_set1_ps(scale);
    int nc = (hd + 15) / 16;
    for (int i0 = 0; i0 < nq; i0 += QB) {
        int nb = nq - i0 < QB ? nq - i0 : QB;
        const float *qb = q + (size_t)i0 * ldq;
        float *sb = sc + (size_t)i0 * ldsc;
        for (int j0 = 0; j0 < kn; j0 += 16) {
            int m = kn - j0 < 16 ? kn - j0 : 16;
            __mmask16 keys = first16(m);
            __m512 part[QB];
            for (int c = 0; c < nc; c++) {
                int d0 = 16 * c, nd = hd - d0 < 16 ? hd - d0 : 16, last = c + 1 == nc;
                __m512i r[16];
                UNROLL16 for (int t = 0; t < 16; t++)
                    r[t] = t < m ? _mm512_castps_si512(_mm512_maskz_loadu_ps(first16(nd), K + (size_t)(j0 + t) * stride + d0))
                                 : _mm512_setzero_si512();
                transpose16_epi32(r);
                int i = 0;
                if (nd == 16)
                    for (; i + G <= nb; i += G) {
                        __m512 a[G];
                        UNROLL16 for (int g = 0; g < G; g++) a[g] = c ? part[i + g] : _mm512_setzero_ps();
                        UNROLL16 for (int d = 0; d < 16; d++) UNROLL16 for (int g = 0; g < G; g++)
                            a[g] = _mm512_fmadd_ps(_mm512_set1_ps(qb[(size_t)(i + g) * ldq + d0 + d]), _mm512_castsi512_ps(r[d]), a[g]);
                        UNROLL16 for (int g = 0; g < G; g++) {
                            if (!last) part[i + g] = a[g];
                            else _mm512_mask_storeu_ps(sb + (size_t)(i + g) * ldsc + j0, keys, _mm512_mul_ps(a[g], sv));
                        }
                    }
                for (; i < nb; i++) {
                    __m512 a = chain16(c ? part[i] : _mm512_setzero_ps(), r, qb + (size_t)i * ldq + d0, nd);
                    if (!last) part[i] = a;
                    else _mm512_mask_storeu_ps(sb + (size_t)i * ldsc + j0, keys, _mm512_mul_ps(a, sv));
                }
            }
        }
    }
}

/* acc += one query's codes 4d..4d+3 (its four bytes broadcast, signed)
 * times r[d] (sixteen keys' four codes each, unsigned), d < nd: lane j
 * gathers key j's products. */
ALWAYS_INLINE __m512i dpbusd_keys(__m512i acc, const __m512i r[16], const int8_t *q, int nd) {
    UNROLL16 for (int d = 0; d < 16; d++) {
        if (d >= nd) break;
        int32_t q4;
        memcpy(&q4, q + 4 * d, 4);
        acc = _mm512_dpbusd_epi32(acc, r[d], _mm512_set1_epi32(q4));
    }
    return acc;
}

/* See ops_avx512.h. Keys across the lanes: sixteen keys' 64-code chunks
 * are loaded as rows, made unsigned (k + 128) and transposed, so register d
 * holds codes 4d..4d+3 of every key; then each query takes one vpdpbusd per
 * four codes, the query's four bytes broadcast (signed) against the sixteen
 * keys' (unsigned). Every lane is one (query, key) sum, so nothing is
 * reduced across lanes; the + 128 adds 128 * qsum to each, which the
 * chains start from minus. The transpose serves
 * every query of the call: 48 shuffles per 16 keys and 64 codes, against
 * 16 vpdpbusd per query. Exact integers, then kernels.h's float products:
 * the scalar bits. Heads wider than 64 codes keep each query's partial
 * chains between chunks; head sizes not a multiple of 4 (never seen) take
 * the AVX-512 F/BW kernel. */
void kern_attn_scores_i8_avx512vnni(float *sc, size_t ldsc, const int8_t *q, size_t ldq, const float *qd, const int32_t *qsum, int nq,
                                    const int8_t *K, size_t stride, const float *kd, int kn, int hd, float scale) {
    enum { QB = 64 }; /* queries per batch: their chains between chunks on the stack */
    if (hd % 4) {
        kern_attn_scores_i8_avx512(sc, ldsc, q, ldq, qd, qsum, nq, K, stride, kd, kn, hd, scale);
        return;
    }
    const __m512i u128 = _mm512_set1_epi8((char)0x80);
    const __m512 sv = _mm512_set1_ps(scale);
    int nc = (hd + 63) / 64;
    for (int i0 = 0; i0 < nq; i0 += QB) {
        int nb = nq - i0 < QB ? nq - i0 : QB;
        const int8_t *qb = q + (size_t)i0 * ldq;
        for (int j0 = 0; j0 < kn; j0 += 16) {
            int m = kn - j0 < 16 ? kn - j0 : 16;
            __mmask16 keys = first16(m);
            __m512 kdv = _mm512_maskz_loadu_ps(keys, kd + j0);
            __m512i part[QB]; /* chains between 64-code chunks (heads wider than 64) */
            for (int c = 0; c < nc; c++) {
                __mmask64 lanes = first64(hd - 64 * c);
                int nd = hd - 64 * c >= 64 ? 16 : (hd - 64 * c) / 4; /* dwords of codes in this chunk */
                __m512i r[16];
                UNROLL16 for (int t = 0; t < 16; t++)
                    r[t] = t < m ? _mm512_xor_si512(_mm512_maskz_loadu_epi8(lanes, K + (size_t)(j0 + t) * stride + 64 * c), u128) : u128;
                transpose16_epi32(r);
                for (int i = 0; i < nb; i++) {
                    const int8_t *qi = qb + (size_t)i * ldq + 64 * c;
                    __m512i acc = c ? part[i] : _mm512_set1_epi32(-128 * qsum[i0 + i]);
                    acc = nd == 16 ? dpbusd_keys(acc, r, qi, 16) : dpbusd_keys(acc, r, qi, nd); /* 16: unrolled */
                    if (c + 1 < nc) {
                        part[i] = acc;
                        continue;
                    }
                    __m512 t = _mm512_mul_ps(_mm512_set1_ps(qd[i0 + i]), kdv);
                    _mm512_mask_storeu_ps(sc + (size_t)(i0 + i) * ldsc + j0, keys,
                                          _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(acc), t), sv));
                }
            }
        }
    }
}

/* Dimensions d0.. (up to 64, lanes beyond hd masked off) of a group of NB
 * (1..4) blocks, n[b] keys each (n[0] the most): kernels.h's order (the
 * scalar and AVX2 bits), one 16-lane float chain per block and sixteen
 * dimensions, one FMA per key in order; the group's chains added in float,
 * pairs first, then widened and added to acc in double. Up to sixteen
 * independent chains. FULL: all 64 dimensions present (no masks). */
ALWAYS_INLINE void values64(int FULL, int NB, double *acc, const float *p, const float *const *V, const int *n,
                            size_t stride, int d0, int hd) {
    __mmask16 m[4];
    __m512 f[4][4];
    UNROLL16 for (int i = 0; i < 4; i++) {
        m[i] = FULL ? 0xffff : first16(hd - d0 - 16 * i > 0 ? hd - d0 - 16 * i : 0);
        UNROLL16 for (int b = 0; b < NB; b++) f[b][i] = _mm512_setzero_ps();
    }
    for (int j = 0; j < n[0]; j++)
        UNROLL16 for (int b = 0; b < NB; b++) {
            if (j >= n[b]) continue;
            const float *v = V[b] + (size_t)j * stride + d0;
            __m512 w = _mm512_set1_ps(p[b * KERN_VBLOCK + j]);
            UNROLL16 for (int i = 0; i < 4; i++)
                f[b][i] = _mm512_fmadd_ps(w, FULL ? _mm512_loadu_ps(v + 16 * i) : _mm512_maskz_loadu_ps(m[i], v + 16 * i), f[b][i]);
        }
    UNROLL16 for (int i = 0; i < 4; i++) {
        __m512 g = NB > 1 ? _mm512_add_ps(f[0][i], f[1][i]) : f[0][i];
        if (NB > 2) g = _mm512_add_ps(g, NB > 3 ? _mm512_add_ps(f[2][i], f[3][i]) : f[2][i]);
        f[0][i] = g;
    }
    UNROLL16 for (int i = 0; i < 4; i++) UNROLL16 for (int h = 0; h < 2; h++) {
        double *a = acc + d0 + 16 * i + 8 * h;
        __m512d wide = _mm512_cvtps_pd(h ? _mm512_extractf32x8_ps(f[0][i], 1) : _mm512_castps512_ps256(f[0][i]));
        __mmask8 mh = (__mmask8)(h ? m[i] >> 8 : m[i] & 0xff);
        if (FULL) _mm512_storeu_pd(a, _mm512_add_pd(_mm512_loadu_pd(a), wide));
        else _mm512_mask_storeu_pd(a, mh, _mm512_add_pd(_mm512_maskz_loadu_pd(mh, a), wide));
    }
}

/* values64 over nb blocks (a constant per call after the switch). */
ALWAYS_INLINE void values64_nb(int FULL, int nb, double *acc, const float *p, const float *const *V, const int *n,
                               size_t stride, int d0, int hd) {
    switch (nb) {
    case 4: values64(FULL, 4, acc, p, V, n, stride, d0, hd); break;
    case 3: values64(FULL, 3, acc, p, V, n, stride, d0, hd); break;
    case 2: values64(FULL, 2, acc, p, V, n, stride, d0, hd); break;
    default: values64(FULL, 1, acc, p, V, n, stride, d0, hd); break;
    }
}

/* See ops_avx512.h: a group of four blocks at a time. */
_Static_assert(KERN_VGROUP == 4, "values64 takes a group of up to four blocks");
void kern_attn_values_avx512(double *acc, const float *p, const float *const *V, size_t stride, int kn, int hd) {
    for (int b = 0; b * KERN_VBLOCK < kn; b += KERN_VGROUP) {
        int n[4], nb = 0;
        for (int i = 0; i < 4; i++) {
            int left = kn - (b + i) * KERN_VBLOCK;
            n[i] = left <= 0 ? 0 : left < KERN_VBLOCK ? left : KERN_VBLOCK;
            nb += n[i] > 0;
        }
        const float *pb = p + b * KERN_VBLOCK;
        int d = 0;
        for (; d + 64 <= hd; d += 64) values64_nb(1, nb, acc, pb, V + b, n, stride, d, hd);
        if (d < hd) values64_nb(0, nb, acc, pb, V + b, n, stride, d, hd);
    }
}

/* See ops_avx512.h. AVX2's sum: one 8-lane float accumulator taking eight
 * values at a time in order, simd_hsum8, then the expf tail in double. */
double kern_exp_shift_avx512(float *x, int n, float shift) {
    __m512 sv = _mm512_set1_ps(shift);
    __m256 sum = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), sv));
        _mm512_storeu_ps(x + i, e);
        sum = _mm256_add_ps(_mm256_add_ps(sum, _mm512_castps512_ps256(e)), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1)));
    }
    if (i + 8 <= n) {
        __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(0xff, x + i), sv));
        _mm512_mask_storeu_ps(x + i, 0xff, e);
        sum = _mm256_add_ps(sum, _mm512_castps512_ps256(e));
        i += 8;
    }
    double s = simd_hsum8(sum);
    for (; i < n; i++) {
        x[i] = expf(x[i] - shift);
        s += x[i];
    }
    return s;
}

/* See ops_avx512.h. */
void kern_scale_f64_avx512(double *acc, double s, int n) {
    __m512d sv = _mm512_set1_pd(s);
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm512_storeu_pd(acc + i, _mm512_mul_pd(sv, _mm512_loadu_pd(acc + i)));
    if (i < n) {
        __mmask8 m = (__mmask8)((1u << (n - i)) - 1);
        _mm512_mask_storeu_pd(acc + i, m, _mm512_mul_pd(sv, _mm512_maskz_loadu_pd(m, acc + i)));
    }
}

/* ---- elementwise ---- */

/* Eight floats at x widened to doubles and their squares added to acc. */
ALWAYS_INLINE __m512d add_squares8(__m512d acc, const float *x) {
    __m512d v = _mm512_cvtps_pd(_mm256_loadu_ps(x));
    return _mm512_fmadd_pd(v, v, acc);
}

/* See ops_avx512.h. */
void kern_rmsnorm_avx512(float *out, const float *x, const float *w, int n, float eps) {
    __m512d s = _mm512_setzero_pd();
    int i = 0;
    for (; i + 16 <= n; i += 16) s = add_squares8(add_squares8(s, x + i), x + i + 8);
    if (i + 8 <= n) {
        s = add_squares8(s, x + i);
        i += 8;
    }
    double buf[4];
    _mm256_storeu_pd(buf, _mm256_add_pd(_mm512_castpd512_pd256(s), _mm512_extractf64x4_pd(s, 1)));
    double ss = (buf[0] + buf[1]) + (buf[2] + buf[3]);
    for (; i < n; i++) ss += (double)x[i] * x[i];
    float scale = (float)(1.0 / sqrt(ss / n + eps));
    __m512 sv = _mm512_set1_ps(scale);
    for (i = 0; i < n; i += 16) {
        __mmask16 m = first16(n - i);
        __m512 r = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, w + i), _mm512_mul_ps(sv, _mm512_maskz_loadu_ps(m, x + i)));
        _mm512_mask_storeu_ps(out + i, m, r);
    }
}

/* See ops_avx512.h. */
void kern_softmax_avx512(float *x, int n) {
    __m512 mv = _mm512_set1_ps(-INFINITY);
    for (int i = 0; i < n; i += 16) mv = _mm512_mask_max_ps(mv, first16(n - i), mv, _mm512_maskz_loadu_ps(first16(n - i), x + i));
    float max = _mm512_reduce_max_ps(mv);
    double s = kern_exp_shift_avx512(x, n, max);
    __m512 inv = _mm512_set1_ps((float)(1.0 / s));
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = first16(n - i);
        _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv));
    }
}

/* See ops_avx512.h. x0 c - x1 s and x1 c + x0 s from the same two products
 * as the scalar code, one subtraction or addition each: the same bits. */
void kern_rope_avx512(float *v, int n_heads, int head_dim, const float *cs) {
    for (int h = 0; h < n_heads; h++) {
        float *p = v + (size_t)h * (size_t)head_dim;
        for (int i = 0; i < head_dim; i += 16) {
            __mmask16 m = first16(head_dim - i);
            __m512 x = _mm512_maskz_loadu_ps(m, p + i), t = _mm512_maskz_loadu_ps(m, cs + i);
            __m512 c = _mm512_moveldup_ps(t), s = _mm512_movehdup_ps(t);
            __m512 xc = _mm512_mul_ps(x, c), xs = _mm512_mul_ps(_mm512_permute_ps(x, 0xb1), s);
            _mm512_mask_storeu_ps(p + i, m, _mm512_mask_sub_ps(_mm512_add_ps(xc, xs), 0x5555, xc, xs));
        }
    }
}

/* See ops_avx512.h: silu(g) * u as AVX2's swiglu8 computes it, lane for lane. */
void kern_swiglu_avx512(float *gate, const float *up, int n) {
    const __m512 one = _mm512_set1_ps(1.0f), neg = _mm512_set1_ps(-0.0f);
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = first16(n - i);
        __m512 g = _mm512_maskz_loadu_ps(m, gate + i), u = _mm512_maskz_loadu_ps(m, up + i);
        __m512 r = _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, exp16(_mm512_xor_ps(g, neg)))), u);
        _mm512_mask_storeu_ps(gate + i, m, r);
    }
}

/* See ops_avx512.h. */
void kern_add_avx512(float *y, const float *x, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_add_ps(_mm512_loadu_ps(y + i), _mm512_loadu_ps(x + i)));
    if (i < n) {
        __mmask16 m = first16(n - i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + i), _mm512_maskz_loadu_ps(m, x + i)));
    }
}

/* ---- activation quantization (Q8_32) ---- */

/* See ops_avx512.h. Per block of 32: d = amax / 127, codes =
 * round-half-even(x * (127 / amax)) by cvtps (default rounding mode, as
 * nearbyintf), narrowed with saturation (never reached: |code| <= 127). */
void kern_quantize_q8_32_avx512(const float *x, kern_act *a, int t) {
    const int64_t n = a->n, nb = n / 32;
    int8_t *q = a->qs + (size_t)t * (size_t)n;
    float *d = a->d + (size_t)t * (size_t)nb;
    int16_t *bs = a->bsum + (size_t)t * (size_t)nb;
    for (int64_t b = 0; b < nb; b++) {
        __m512 v0 = _mm512_loadu_ps(x + 32 * b), v1 = _mm512_loadu_ps(x + 32 * b + 16);
        float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
        d[b] = amax / 127.0f;
        __m512 id = _mm512_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
        __m512i i0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, id)), i1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, id));
        bs[b] = (int16_t)_mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1));
        _mm_storeu_si128((__m128i *)(q + 32 * b), _mm512_cvtsepi32_epi8(i0));
        _mm_storeu_si128((__m128i *)(q + 32 * b + 16), _mm512_cvtsepi32_epi8(i1));
    }
}

/* ---- KV tiles ---- */

/* Sixteen codes of a KV row from column c as floats (kernels.h's exact values). */
ALWAYS_INLINE __m512 kv_codes16(int elem, const uint8_t *row, int c) {
    switch (elem) {
    case KERN_KV_F32: return _mm512_loadu_ps(row + 4 * (size_t)c);
    case KERN_KV_F16: return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(row + 2 * (size_t)c)));
    case KERN_KV_BF16:
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(row + 2 * (size_t)c))), 16));
    case KERN_KV_I8: return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(row + c))));
    case KERN_KV_I4: { /* 8 bytes, low nibble first */
        __m128i x = _mm_loadl_epi64((const __m128i *)(const void *)(row + c / 2)), m = _mm_set1_epi8(15);
        __m128i nib = _mm_unpacklo_epi8(_mm_and_si128(x, m), _mm_and_si128(_mm_srli_epi16(x, 4), m));
        return _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepu8_epi32(nib), _mm512_set1_epi32(8)));
    }
    case KERN_KV_E4M3: { /* as AVX2's: a half with the exponent and mantissa under the half's, times 2^8 */
        __m256i x = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(row + c)));
        __m256i em = _mm256_and_si256(x, _mm256_set1_epi16(0x7f));
        __m256i h = _mm256_or_si256(_mm256_slli_epi16(em, 7), _mm256_slli_epi16(_mm256_and_si256(x, _mm256_set1_epi16(0x80)), 8));
        h = _mm256_or_si256(h, _mm256_and_si256(_mm256_cmpeq_epi16(em, _mm256_set1_epi16(0x7f)), _mm256_set1_epi16(0x7c00)));
        return _mm512_mul_ps(_mm512_cvtph_ps(h), _mm512_set1_ps(256.0f));
    }
    default: /* KERN_KV_E5M2 */
        return _mm512_cvtph_ps(_mm256_slli_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(row + c))), 8));
    }
}

/* kern_hadamard32 on two registers: stages 1, 2, 4, 8 inside each (lanes
 * whose bit is set take a - b, the others a + b), 16 across them. */
ALWAYS_INLINE void hadamard32_avx512(__m512 v[2]) {
    for (int i = 0; i < 2; i++) {
        __m512 x = v[i], y = _mm512_permute_ps(x, 0xb1);
        x = _mm512_mask_blend_ps(0xaaaa, _mm512_add_ps(x, y), _mm512_sub_ps(y, x));
        y = _mm512_permute_ps(x, 0x4e);
        x = _mm512_mask_blend_ps(0xcccc, _mm512_add_ps(x, y), _mm512_sub_ps(y, x));
        y = _mm512_shuffle_f32x4(x, x, 0xb1);
        x = _mm512_mask_blend_ps(0xf0f0, _mm512_add_ps(x, y), _mm512_sub_ps(y, x));
        y = _mm512_shuffle_f32x4(x, x, 0x4e);
        v[i] = _mm512_mask_blend_ps(0xff00, _mm512_add_ps(x, y), _mm512_sub_ps(y, x));
    }
    __m512 a = v[0], b = v[1];
    v[0] = _mm512_mul_ps(_mm512_add_ps(a, b), _mm512_set1_ps(KERN_RSQRT32));
    v[1] = _mm512_mul_ps(_mm512_sub_ps(a, b), _mm512_set1_ps(KERN_RSQRT32));
}

/* kv_unpack for one element kind (a constant): sixteen columns at a time,
 * grouped scales and the rotation a group of 32 at a time, the rest by the
 * scalar rule. */
ALWAYS_INLINE void kv_unpack16(int ELEM, const kern_kv_src *src, int n, int nc, float *out, size_t ld) {
    for (int r = 0; r < n; r++) {
        const uint8_t *row = src->codes + (size_t)r * src->row_bytes;
        float *o = out + (size_t)r * ld;
        int c = 0;
        if (src->group_scale) {
            const float *gs = src->group_scale + (size_t)r * src->group_stride;
            for (; c + 32 <= nc; c += 32) {
                __m512 s = _mm512_set1_ps(gs[c / 32]);
                __m512 v[2] = {_mm512_mul_ps(kv_codes16(ELEM, row, c), s), _mm512_mul_ps(kv_codes16(ELEM, row, c + 16), s)};
                if (src->hadamard) hadamard32_avx512(v);
                _mm512_storeu_ps(o + c, v[0]);
                _mm512_storeu_ps(o + c + 16, v[1]);
            }
        } else if (src->row_scale) {
            __m512 s = _mm512_set1_ps(src->row_scale[r]);
            for (; c + 16 <= nc; c += 16) _mm512_storeu_ps(o + c, _mm512_mul_ps(kv_codes16(ELEM, row, c), s));
        } else if (src->col_scale) {
            for (; c + 16 <= nc; c += 16)
                _mm512_storeu_ps(o + c, _mm512_mul_ps(kv_codes16(ELEM, row, c), _mm512_loadu_ps(src->col_scale + c)));
        } else {
            for (; c + 16 <= nc; c += 16) _mm512_storeu_ps(o + c, kv_codes16(ELEM, row, c));
        }
        for (; c < nc; c++) o[c] = kern_kv_scaled(src, ELEM, row, r, c);
    }
}

/* See ops_avx512.h. */
void kern_kv_unpack_avx512(const kern_kv_src *src, int n, int nc, float *out, size_t ld) {
    assert(!src->hadamard || nc % 32 == 0);
    switch (src->elem) {
    case KERN_KV_F32: kv_unpack16(KERN_KV_F32, src, n, nc, out, ld); break;
    case KERN_KV_F16: kv_unpack16(KERN_KV_F16, src, n, nc, out, ld); break;
    case KERN_KV_BF16: kv_unpack16(KERN_KV_BF16, src, n, nc, out, ld); break;
    case KERN_KV_I8: kv_unpack16(KERN_KV_I8, src, n, nc, out, ld); break;
    case KERN_KV_I4: kv_unpack16(KERN_KV_I4, src, n, nc, out, ld); break;
    case KERN_KV_E4M3: kv_unpack16(KERN_KV_E4M3, src, n, nc, out, ld); break;
    default: kv_unpack16(KERN_KV_E5M2, src, n, nc, out, ld); break;
    }
}
