/*
 * kernels_avx512.c - the AVX-512 kernels: the "avx512" (F/BW/VL/DQ) and
 * "avx512vnni" (plus VNNI's vpdpbusd) tables' own entries.
 *
 * Built with the AVX-512 flags (this file only, see the Makefile); dispatch.c
 * hands its tables out only after CPUID and XGETBV say the CPU and OS support
 * them, and composes each from the AVX2 table with the entries below in place
 * (kern_avx512_part, kern_avx512vnni_part): q8_0, q4_0, Q4_K and Q6_K in
 * the sixteen-row layout (KERN_LAYOUT_X16, kernels.h) and, for prefill, on
 * row-major weights; f16 and bf16 in that layout too (one row per lane, one
 * FMA per column) and row-major through the same tile after an in-register
 * transpose; f32 with 16-lane FMA tiles; the Q8_256 activation quantizer. The one-row K-quant kernels (row-major decode) are in
 * kquant_avx512.c, the MXFP4 kernels (one-row and X16) in mxfp4_avx512.c,
 * attention, the elementwise operators and the Q8_32 quantizer in
 * ops_avx512.c. What is left is AVX2's: q8_0/q4_0 decode on row-major
 * weights, argmax.
 *
 * q8_0 and q4_0, sixteen rows at a time. One 64-byte load of an X16 block is
 * four codes of each of sixteen rows, one row per int32 lane; the matching
 * four activation codes are broadcast to every lane, and one vpdpbusd (u8 x
 * s8, four products summed into each int32 lane) advances all sixteen rows.
 * A block's integer product is complete in each lane after eight of them:
 * no horizontal sums. vpdpbusd's first operand is unsigned, so the weights
 * are made unsigned and the offset taken back with the activation block's
 * code sum (kern_act.bsum): q4_0's nibbles are 0..15 (offset 8, as in
 * AVX2's X8 kernel), q8_0's codes are flipped to w + 128 (offset 128). The
 * "avx512" table (no VNNI) does the same with maddubs + madd: exact for the
 * nibbles (2 * 15 * 127 fits int16) but not for w + 128, so its q8_0 uses
 * |w| against the activation carrying w's sign instead. The integer sums are
 * exact either way, and each lane then does what AVX2's eight-row kernels
 * do per block: acc = fma(dw * dx, (float)isum, acc). So both tables, and
 * the AVX2 X8 kernels, give the same bits for every (row, token), at any
 * token count: prefill and decode agree exactly.
 *
 * Q4_K and Q6_K (below) use the same lane-per-row scheme on 4-byte words of
 * their super-blocks and end each super-block with the scalar reference's
 * float operations, so they equal it bit for bit.
 *
 * On row-major weights (a mapped file) the same kernels gather each lane's
 * four bytes (vpgatherdd) instead of loading them, for prefill; decode (fewer
 * than four tokens) takes the one-row kernels, as the AVX2 table does.
 */
#include <assert.h>
#include <immintrin.h>
#include <string.h>

#include "../kquant.h"
#include "../mxfp4.h"
#include "cortex.h"
#include "kernels.h"
#include "ops_avx512.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))
/* Per-token and per-chunk loops must unroll fully so their arrays become
 * registers (see kernels_avx2.c: left as loops they live in memory). */
#define UNROLL8 _Pragma("GCC unroll 8")
#define UNROLL16 _Pragma("GCC unroll 16")
#ifndef PREFETCH_AHEAD
#define PREFETCH_AHEAD 2048
#endif

/* ---- q8_0 and q4_0: sixteen rows per pass ---- */

/* acc + the four-byte dot products of u (unsigned) and s (signed) per int32
 * lane: vpdpbusd, or its AVX-512BW equivalent when every pair sum of u*s fits
 * int16 (callers guarantee it). */
ALWAYS_INLINE __m512i dp4(int VNNI, __m512i acc, __m512i u, __m512i s) {
    if (VNNI) return _mm512_dpbusd_epi32(acc, u, s);
    return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1)));
}

/* Four bytes of each of sixteen rows: lane r from p + idx[r] (GATHER, row-major
 * weights) or lane r of the 64 bytes at p (X16). */
ALWAYS_INLINE __m512i load16(int GATHER, const uint8_t *p, __m512i idx) {
    return GATHER ? _mm512_i32gather_epi32(idx, p, 1) : _mm512_loadu_si512(p);
}

/* The sixteen rows' fp16 block scales as floats: contiguous in X16, or each
 * row's first two block bytes, gathered. */
ALWAYS_INLINE __m512 scales16(int GATHER, const uint8_t *base, __m512i idx) {
    if (!GATHER) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)base));
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_i32gather_epi32(idx, base, 1)));
}

/*
 * out[k], lane r = dot(row r, token t0 + k) for k < NT, rows r = 0..15 of a
 * group: X16 blocks from w0 (GATHER = 0), or row-major rows at w0 + idx[r]
 * (GATHER = 1). Q4 selects q4_0 (else q8_0), VNNI vpdpbusd (else maddubs).
 * Activation chunk j (codes 4j..4j+3) meets weight chunk j: q8_0's chunk j,
 * or q4_0's low nibbles of packed chunk j (codes 4j..) for j < 4 and the
 * high nibbles of packed chunk j - 4 (codes 16 + 4(j-4)..) for j >= 4.
 */
ALWAYS_INLINE void rows16(int VNNI, int Q4, int GATHER, const uint8_t *w0, __m512i idx, const kern_act *a, int t0,
                          int NT, __m512 out[8]) {
    const int64_t nb = a->n / 32;
    const size_t bs = Q4 ? 18 : 34;
    const __m512i low4 = _mm512_set1_epi8(0x0f), zero = _mm512_setzero_si512();
    const int offset = Q4 ? 8 : VNNI ? 128 : 0; /* what the unsigned weights carry */
    __m512 acc[8];
    const int8_t *x[8];
    const float *dx[8];
    const int16_t *bsum[8];
    UNROLL8 for (int k = 0; k < NT; k++) {
        acc[k] = _mm512_setzero_ps();
        x[k] = a->qs + (size_t)(t0 + k) * (size_t)a->n;
        dx[k] = a->d + (size_t)(t0 + k) * (size_t)nb;
        bsum[k] = a->bsum + (size_t)(t0 + k) * (size_t)nb;
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *base = w0 + (size_t)b * (GATHER ? bs : 16 * bs);
        const uint8_t *codes = base + (GATHER ? 2 : 32);
        const size_t step = GATHER ? 4 : 64; /* from one chunk to the next */
        if (NT == 1 && !GATHER) /* decode streams the weights once: ask for them early */
            for (size_t o = 0; o < 16 * bs; o += 64) _mm_prefetch((const char *)base + PREFETCH_AHEAD + o, _MM_HINT_T0);
        __m512 dw = scales16(GATHER, base, idx);
        __m512i u[8];
        __mmask64 neg[8] = {0};
        if (Q4) {
            UNROLL8 for (int c = 0; c < 4; c++) {
                __m512i raw = load16(GATHER, codes + step * (size_t)c, idx);
                u[c] = _mm512_and_si512(raw, low4);
                u[4 + c] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4);
            }
        } else {
            UNROLL8 for (int c = 0; c < 8; c++) {
                __m512i raw = load16(GATHER, codes + step * (size_t)c, idx);
                if (VNNI) u[c] = _mm512_xor_si512(raw, _mm512_set1_epi8((char)0x80));
                else {
                    neg[c] = _mm512_movepi8_mask(raw);
                    u[c] = _mm512_abs_epi8(raw);
                }
            }
        }
        UNROLL8 for (int k = 0; k < NT; k++) {
            const int8_t *xb = x[k] + b * 32;
            __m512i s0 = zero, s1 = zero;
            UNROLL8 for (int j = 0; j < 8; j++) {
                int32_t four;
                memcpy(&four, xb + 4 * j, 4);
                __m512i xs = _mm512_set1_epi32(four);
                if (!Q4 && !VNNI) xs = _mm512_mask_sub_epi8(xs, neg[j], zero, xs);
                if (j & 1) s1 = dp4(VNNI, s1, u[j], xs);
                else s0 = dp4(VNNI, s0, u[j], xs);
            }
            __m512i s = _mm512_add_epi32(s0, s1);
            if (offset) s = _mm512_sub_epi32(s, _mm512_set1_epi32(offset * bsum[k][b]));
            acc[k] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(dx[k][b])), _mm512_cvtepi32_ps(s), acc[k]);
        }
    }
    UNROLL8 for (int k = 0; k < NT; k++) out[k] = acc[k];
}

/* ---- Q4_K: sixteen rows per pass ---- */

/*
 * Q4_K in X16 (kern_repack_x16): 4-byte word i of row r's 144-byte block
 * sits at 64 i + 4 r of the group's block, so one load is word i of all
 * sixteen rows: word 0 the fp16 d and dmin, words 1-3 the packed scales and
 * mins, words 4 + k the codes qs[4k..4k+3]. The scales unpack across the 16
 * lanes with kquant_avx2.c's word arithmetic; sub-block j's codes (chunks
 * 8(j/2)..8(j/2)+7, low nibbles for even j, high for odd) meet the
 * activation codes 32j.. broadcast four at a time. Per row and super-block:
 * isum = sum_j sc_j (q . a)_j and imin = sum_j m_j (sum of a over j), exact
 * int32, then sum += (d*da)*isum - (dmin*da)*imin: the scalar reference's
 * float operations, in its order, so each lane equals kq_dot_q4_k_scalar bit
 * for bit. GATHER = 1 reads row-major rows through the same kernel.
 */
ALWAYS_INLINE void k4_rows16(int VNNI, int GATHER, const uint8_t *w0, __m512i idx, const kern_act *a, int t0, int NT,
                             __m512 out[8]) {
    const int64_t n = a->n, nb = n / 256;
    const __m512i low4 = _mm512_set1_epi8(0x0f), zero = _mm512_setzero_si512();
    const __m512i m6 = _mm512_set1_epi32(0x3f3f3f3f), m4 = _mm512_set1_epi32(0x0f0f0f0f),
                  m2 = _mm512_set1_epi32(0x03030303), byte = _mm512_set1_epi32(0xff);
    __m512 acc[8];
    const int8_t *x[8];
    const float *dx[8];
    const int16_t *bsum[8];
    UNROLL8 for (int k = 0; k < NT; k++) {
        acc[k] = _mm512_setzero_ps();
        x[k] = a->qs + (size_t)(t0 + k) * (size_t)n;
        dx[k] = a->d + (size_t)(t0 + k) * (size_t)nb;
        bsum[k] = a->bsum + (size_t)(t0 + k) * (size_t)(n / 16);
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *base = w0 + (size_t)b * (GATHER ? Q4K_BYTES : 16 * Q4K_BYTES);
        const size_t word = GATHER ? 4 : 64; /* from one word of a row to the next */
        if (NT == 1 && !GATHER)
            for (size_t o = 0; o < 16 * Q4K_BYTES; o += 64) _mm_prefetch((const char *)base + PREFETCH_AHEAD + o, _MM_HINT_T0);
        __m512i dd = load16(GATHER, base, idx);
        __m512 dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd));
        __m512 dmw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
        __m512i u0 = load16(GATHER, base + word, idx), u1 = load16(GATHER, base + 2 * word, idx),
                u2 = load16(GATHER, base + 3 * word, idx);
        /* bytes of: scales 0..3, scales 4..7, mins 0..3, mins 4..7 (kq_scale_min_k4's bits) */
        __m512i sc03 = _mm512_and_si512(u0, m6);
        __m512i sc47 = _mm512_or_si512(_mm512_and_si512(u2, m4),
                                       _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u0, 6), m2), 4));
        __m512i mn03 = _mm512_and_si512(u1, m6);
        __m512i mn47 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u2, 4), m4),
                                       _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u1, 6), m2), 4));
        /* mins as int16 pairs per lane, dword i = (m_2i, m_2i+1), for vpmaddwd against
         * the activation's sub-block sums paired the same way */
        __m512i mp[4];
        UNROLL8 for (int i = 0; i < 4; i++) {
            __m512i src = i < 2 ? mn03 : mn47;
            int sh = 16 * (i % 2);
            mp[i] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(src, sh), byte),
                                    _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(src, sh + 8), byte), 16));
        }
        __m512i isum[8], imin[8];
        UNROLL8 for (int k = 0; k < NT; k++) {
            isum[k] = zero;
            /* sums of the activation codes per sub-block of 32: adjacent bsum pairs (|.| <= 4064: int16) */
            const int16_t *bs = bsum[k] + b * 16;
            __m128i pairs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)bs), _mm_loadu_si128((const __m128i *)(bs + 8)));
            __m512i pv = _mm512_broadcast_i32x4(pairs);
            imin[k] = _mm512_madd_epi16(mp[0], _mm512_shuffle_epi32(pv, 0x00));
            imin[k] = _mm512_add_epi32(imin[k], _mm512_madd_epi16(mp[1], _mm512_shuffle_epi32(pv, 0x55)));
            imin[k] = _mm512_add_epi32(imin[k], _mm512_madd_epi16(mp[2], _mm512_shuffle_epi32(pv, 0xaa)));
            imin[k] = _mm512_add_epi32(imin[k], _mm512_madd_epi16(mp[3], _mm512_shuffle_epi32(pv, 0xff)));
        }
        for (int j = 0; j < 8; j++) {
            const uint8_t *codes = base + (size_t)(4 + 8 * (j / 2)) * word;
            __m512i v[8];
            UNROLL8 for (int i = 0; i < 8; i++) {
                __m512i raw = load16(GATHER, codes + (size_t)i * word, idx);
                v[i] = _mm512_and_si512(j & 1 ? _mm512_srli_epi16(raw, 4) : raw, low4);
            }
            __m512i sc = _mm512_and_si512(_mm512_srli_epi32(j < 4 ? sc03 : sc47, 8 * (j % 4)), byte);
            __m512i scp = _mm512_or_si512(sc, _mm512_slli_epi32(sc, 16)); /* (sc, sc) as int16 */
            UNROLL8 for (int k = 0; k < NT; k++) {
                const int8_t *xb = x[k] + b * 256 + 32 * j;
                __m512i p0 = zero, p1 = zero;
                UNROLL8 for (int i = 0; i < 8; i++) {
                    int32_t four;
                    memcpy(&four, xb + 4 * i, 4);
                    if (i & 1) p1 = dp4(VNNI, p1, v[i], _mm512_set1_epi32(four));
                    else p0 = dp4(VNNI, p0, v[i], _mm512_set1_epi32(four));
                }
                /* p0, p1: the even and odd chunks, 16 products each: |p| <= 16 * 15 * 127 fits
                 * int16, so (p0, p1) pack into one dword and sc * p0 + sc * p1 is one
                 * vpmaddwd (vpdpwssd) instead of a vpmulld: exact either way */
                __m512i pp = _mm512_mask_blend_epi16((__mmask32)0xAAAAAAAAu, p0, _mm512_slli_epi32(p1, 16));
                isum[k] = VNNI ? _mm512_dpwssd_epi32(isum[k], pp, scp) : _mm512_add_epi32(isum[k], _mm512_madd_epi16(pp, scp));
            }
        }
        UNROLL8 for (int k = 0; k < NT; k++) {
            __m512 da = _mm512_set1_ps(dx[k][b]);
            __m512 t = _mm512_sub_ps(_mm512_mul_ps(_mm512_mul_ps(dw, da), _mm512_cvtepi32_ps(isum[k])),
                                     _mm512_mul_ps(_mm512_mul_ps(dmw, da), _mm512_cvtepi32_ps(imin[k])));
            acc[k] = _mm512_add_ps(acc[k], t);
        }
    }
    UNROLL8 for (int k = 0; k < NT; k++) out[k] = acc[k];
}

/* ---- Q6_K: sixteen rows per pass ---- */

/*
 * Q6_K in X16 (kern_repack_x16): the first 208 bytes of each row's 210-byte
 * super-block as 52 words, word i of row r at 64 i + 4 r (ql: words 0-31,
 * qh: 32-47, the int8 scales: 48-51), then the sixteen fp16 d at 3328. Four
 * codes of weights 128h + 32q + 4c.. (half h, quarter q, c < 8) are the
 * nibble q / 2 of ql word 16h + 8(q % 2) + c with bits 2q, 2q+1 of qh word
 * 32 + 8h + c above them: 0..63, unsigned, so (code - 32) . a = code . a -
 * 32 * (sum of a). Per row and super-block isum = sum_j sc_j ((q - 32) . a)_j
 * over the 16 sub-blocks of 16, exact int32, then sum += (d*da)*isum: the
 * scalar reference's float operations, so each lane equals kq_dot_q6_k_scalar
 * bit for bit. GATHER = 1 reads row-major rows (d gathered with the last
 * two scales: bytes 206-209 of the block, never past its end).
 */
ALWAYS_INLINE void k6_rows16(int VNNI, int GATHER, const uint8_t *w0, __m512i idx, const kern_act *a, int t0, int NT,
                             __m512 out[8]) {
    const int64_t n = a->n, nb = n / 256;
    const __m512i low4 = _mm512_set1_epi8(0x0f), two = _mm512_set1_epi8(0x03), zero = _mm512_setzero_si512();
    __m512 acc[8];
    const int8_t *x[8];
    const float *dx[8];
    const int16_t *bsum[8];
    UNROLL8 for (int k = 0; k < NT; k++) {
        acc[k] = _mm512_setzero_ps();
        x[k] = a->qs + (size_t)(t0 + k) * (size_t)n;
        dx[k] = a->d + (size_t)(t0 + k) * (size_t)nb;
        bsum[k] = a->bsum + (size_t)(t0 + k) * (size_t)(n / 16);
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *base = w0 + (size_t)b * (GATHER ? Q6K_BYTES : 16 * Q6K_BYTES);
        const size_t word = GATHER ? 4 : 64;
        if (NT == 1 && !GATHER)
            for (size_t o = 0; o < 16 * Q6K_BYTES; o += 64) _mm_prefetch((const char *)base + PREFETCH_AHEAD + o, _MM_HINT_T0);
        __m512 dw = GATHER ? _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(load16(1, base + 206, idx), 16)))
                           : _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(base + 3328)));
        __m512i isum[8];
        UNROLL8 for (int k = 0; k < NT; k++) isum[k] = zero;
        for (int hq = 0; hq < 8; hq++) { /* half h = hq / 4, quarter q = hq % 4: weights 32 hq .. 32 hq + 31 */
            const int h = hq / 4, q = hq % 4;
            __m512i v[8];
            UNROLL8 for (int c = 0; c < 8; c++) {
                __m512i ql = load16(GATHER, base + (size_t)(16 * h + 8 * (q % 2) + c) * word, idx);
                __m512i qh = load16(GATHER, base + (size_t)(32 + 8 * h + c) * word, idx);
                __m512i lo = _mm512_and_si512(q / 2 ? _mm512_srli_epi16(ql, 4) : ql, low4);
                __m512i hi = _mm512_and_si512(_mm512_srli_epi32(qh, 2 * q), two);
                v[c] = _mm512_or_si512(lo, _mm512_slli_epi32(hi, 4));
            }
            __m512i scw = load16(GATHER, base + (size_t)(48 + hq / 2) * word, idx); /* scales 4(hq/2) .. +3 */
            /* sub-blocks 2 hq and 2 hq + 1: bytes 2(hq % 2) and 2(hq % 2) + 1 of that word, sign-extended */
            __m512i sc0 = _mm512_srai_epi32(_mm512_slli_epi32(scw, 24 - 16 * (hq % 2)), 24);
            __m512i sc1 = _mm512_srai_epi32(_mm512_slli_epi32(scw, 16 - 16 * (hq % 2)), 24);
            __m512i scp = _mm512_mask_blend_epi16((__mmask32)0xAAAAAAAAu, _mm512_slli_epi32(sc0, 5), _mm512_slli_epi32(sc1, 21));
            scp = _mm512_sub_epi16(zero, scp); /* (-32 sc0, -32 sc1) as int16 */
            UNROLL8 for (int k = 0; k < NT; k++) {
                const int8_t *xb = x[k] + b * 256 + 32 * hq;
                __m512i p0 = zero, p1 = zero;
                UNROLL8 for (int c = 0; c < 8; c++) {
                    int32_t four;
                    memcpy(&four, xb + 4 * c, 4);
                    if (c < 4) p0 = dp4(VNNI, p0, v[c], _mm512_set1_epi32(four));
                    else p1 = dp4(VNNI, p1, v[c], _mm512_set1_epi32(four));
                }
                /* the offset, -32 (sc0 bs0 + sc1 bs1): the two code sums are one int16
                 * pair (a dword of bsum) against (-32 sc0, -32 sc1), |.| <= 4096 */
                int32_t bpair;
                memcpy(&bpair, bsum[k] + b * 16 + 2 * hq, 4);
                __m512i bp = _mm512_set1_epi32(bpair);
                isum[k] = VNNI ? _mm512_dpwssd_epi32(isum[k], scp, bp) : _mm512_add_epi32(isum[k], _mm512_madd_epi16(scp, bp));
                isum[k] = _mm512_add_epi32(isum[k], _mm512_add_epi32(_mm512_mullo_epi32(p0, sc0), _mm512_mullo_epi32(p1, sc1)));
            }
        }
        UNROLL8 for (int k = 0; k < NT; k++)
            acc[k] = _mm512_add_ps(acc[k], _mm512_mul_ps(_mm512_mul_ps(dw, _mm512_set1_ps(dx[k][b])), _mm512_cvtepi32_ps(isum[k])));
    }
    UNROLL8 for (int k = 0; k < NT; k++) out[k] = acc[k];
}

/* ---- the sixteen-row gemms ---- */

enum { X16_Q8_0, X16_Q4_0, X16_Q4_K, X16_Q6_K };

/* Rows r0..r1 of a KIND matrix in groups of sixteen, tokens eight, then four,
 * then one at a time. X16 (GATHER = 0): r0 and r1 are multiples of 16 and
 * group g starts at w + 16 g rb. Row-major (GATHER = 1): a short last group
 * repeats its final row in the unused lanes, which are not stored. */
ALWAYS_INLINE void gemm16(int KIND, int VNNI, int GATHER, const uint8_t *w, size_t rb, int64_t r0, int64_t r1,
                          const kern_act *a, float *y, int64_t ldy) {
    assert(GATHER || (r0 % 16 == 0 && r1 % 16 == 0));
    assert(!GATHER || rb * 15 <= 0x7fffffff);
    for (int64_t r = r0; r < r1; r += 16) {
        int nr = r1 - r < 16 ? (int)(r1 - r) : 16;
        __mmask16 keep = (__mmask16)((1u << nr) - 1);
        int32_t off[16];
        for (int i = 0; i < 16; i++) off[i] = (int32_t)((size_t)(i < nr ? i : nr - 1) * rb);
        __m512i idx = _mm512_loadu_si512(off);
        const uint8_t *w0 = w + (size_t)r * rb;
        __m512 acc[8];
        int t = 0;
#define TOKENS(NT_)                                                                                  \
    do {                                                                                             \
        if (KIND == X16_Q4_K) k4_rows16(VNNI, GATHER, w0, idx, a, t, NT_, acc);                      \
        else if (KIND == X16_Q6_K) k6_rows16(VNNI, GATHER, w0, idx, a, t, NT_, acc);                 \
        else rows16(VNNI, KIND == X16_Q4_0, GATHER, w0, idx, a, t, NT_, acc);                        \
        for (int k = 0; k < NT_; k++)                                                                \
            _mm512_mask_storeu_ps(y + (size_t)(t + k) * (size_t)ldy + (size_t)r, keep, acc[k]);      \
        t += NT_;                                                                                    \
    } while (0)
        while (t + 8 <= a->T) TOKENS(8);
        while (t + 4 <= a->T) TOKENS(4);
        while (t < a->T) TOKENS(1);
#undef TOKENS
    }
}

/*
 * Each type's X16 gemm (every token count: decode and prefill agree bit for
 * bit) and row-major gemm: prefill (four tokens or more) gathers into the
 * same sixteen-row kernel, so it gives the X16 bits; decode takes the
 * one-row kernels (AVX2's for q8_0/q4_0, kquant_avx512.c's for the K-quants:
 * the tables' dot), which need no gather.
 */
#define DEFINE_GEMMS(KIND, VNNI, x16, rows, one_row)                                                               \
    static void x16(const uint8_t *w, size_t rb, int64_t r0, int64_t r1, const kern_act *a, float *y, int64_t ldy) { \
        gemm16(KIND, VNNI, 0, w, rb, r0, r1, a, y, ldy);                                                           \
    }                                                                                                              \
    static void rows(const uint8_t *w, size_t rb, int64_t r0, int64_t r1, const kern_act *a, float *y, int64_t ldy) { \
        if (a->T >= 4 && !a->decode_order) gemm16(KIND, VNNI, 1, w, rb, r0, r1, a, y, ldy);                                            \
        else one_row(w, rb, r0, r1, a, y, ldy);                                                                    \
    }
DEFINE_GEMMS(X16_Q8_0, 0, gemm_q8_0_x16, gemm_q8_0_rows, kern_avx2_ops.gemm[CX_TYPE_Q8_0])
DEFINE_GEMMS(X16_Q4_0, 0, gemm_q4_0_x16, gemm_q4_0_rows, kern_avx2_ops.gemm[CX_TYPE_Q4_0])
DEFINE_GEMMS(X16_Q4_K, 0, gemm_q4_k_x16, gemm_q4_k_rows, kq_gemm_q4_k_avx512)
DEFINE_GEMMS(X16_Q6_K, 0, gemm_q6_k_x16, gemm_q6_k_rows, kq_gemm_q6_k_avx512)
DEFINE_GEMMS(X16_Q8_0, 1, gemm_q8_0_x16_vnni, gemm_q8_0_rows_vnni, kern_avx2_ops.gemm[CX_TYPE_Q8_0])
DEFINE_GEMMS(X16_Q4_0, 1, gemm_q4_0_x16_vnni, gemm_q4_0_rows_vnni, kern_avx2_ops.gemm[CX_TYPE_Q4_0])
DEFINE_GEMMS(X16_Q4_K, 1, gemm_q4_k_x16_vnni, gemm_q4_k_rows_vnni, kq_gemm_q4_k_avx512)
DEFINE_GEMMS(X16_Q6_K, 1, gemm_q6_k_x16_vnni, gemm_q6_k_rows_vnni, kq_gemm_q6_k_avx512)
#undef DEFINE_GEMMS

/* ---- f32 weights against float activations (f16 and bf16: the X16 section below) ---- */

/* How a float row stores its weights (a constant after inlining). */
enum { W_F32 = 0, W_F16 = 1, W_BF16 = 2 };

/* Sixteen f32 weights from column i (m: which lanes; the rest read as zero
 * and are not touched in memory). */
ALWAYS_INLINE __m512 load_w16(const uint8_t *row, int kind, int64_t i, __mmask16 m) {
    assert(kind == W_F32);
    return _mm512_maskz_loadu_ps(m, (const float *)row + i);
}

/*
 * NR (1..4) rows against NT (1..3) tokens of float activations, two
 * accumulators per pair (columns 32i..32i+15 and 32i+16..32i+31), the tail
 * through masked loads (no scalar loop), the pair's sum reduced last. The
 * arithmetic of a pair does not depend on NR or NT, so the gemm equals the
 * dot bit for bit. Four rows by three tokens: 24 accumulators, four weights
 * and one activation of the 32 registers; seven loads per twelve FMAs.
 */
ALWAYS_INLINE void float_rows(const uint8_t *const row[4], int NR, int kind, const kern_act *a, int t0, int NT,
                              float out[4][3]) {
    const int64_t n = a->n;
    __m512 acc[4][3][2];
    const float *x[3];
    UNROLL8 for (int k = 0; k < NT; k++) x[k] = a->f + (size_t)(t0 + k) * (size_t)n;
    UNROLL8 for (int r = 0; r < NR; r++) UNROLL8 for (int k = 0; k < NT; k++) acc[r][k][0] = acc[r][k][1] = _mm512_setzero_ps();
#define FLOAT_STEP(i_, h, m)                                                                          \
    do {                                                                                              \
        __m512 wv[4];                                                                                 \
        UNROLL8 for (int r = 0; r < NR; r++) wv[r] = load_w16(row[r], kind, (i_), (m));                \
        UNROLL8 for (int k = 0; k < NT; k++) {                                                        \
            __m512 xv = _mm512_maskz_loadu_ps((m), x[k] + (i_));                                      \
            UNROLL8 for (int r = 0; r < NR; r++) acc[r][k][h] = _mm512_fmadd_ps(wv[r], xv, acc[r][k][h]); \
        }                                                                                             \
    } while (0)
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        FLOAT_STEP(i, 0, (__mmask16)0xffff);
        FLOAT_STEP(i + 16, 1, (__mmask16)0xffff);
    }
    if (i + 16 <= n) {
        FLOAT_STEP(i, 0, (__mmask16)0xffff);
        i += 16;
    }
    if (i < n) FLOAT_STEP(i, 1, (__mmask16)((1u << (n - i)) - 1));
#undef FLOAT_STEP
    UNROLL8 for (int r = 0; r < NR; r++) UNROLL8 for (int k = 0; k < NT; k++)
        out[r][k] = _mm512_reduce_add_ps(_mm512_add_ps(acc[r][k][0], acc[r][k][1]));
}

#include "float_tiles_avx512.h"

static float dot_f32row(const void *row, const kern_act *a, int t) { return float_dot(row, W_F32, a, t); }
static void gemm_f32(const uint8_t *w, size_t rb, int64_t r0, int64_t r1, const kern_act *a, float *y, int64_t ldy) {
    float_gemm(W_F32, w, rb, r0, r1, a, y, ldy);
}

/* ---- f16 and bf16 in the sixteen-row layout ---- */

/* Sixteen f16 (conversion) or bf16 (a 16-bit shift) weights as floats: exact. */
ALWAYS_INLINE __m512 h16_widen(int KIND, __m256i v) {
    return KIND == W_F16 ? _mm512_cvtph_ps(v) : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
}

/*
 * f16 in X16 (kern_repack_x16): column k of rows 16g..16g+15 is sixteen
 * halves at 32 k of the group. One load and one conversion give column k of
 * sixteen rows, one row per lane; the token's value at k is broadcast and one
 * FMA advances all sixteen rows: no horizontal sums, and a conversion per
 * sixteen weights shared by every token of the tile. Each lane sums its row's
 * products in column order, one FMA each (acc = fma(w_k, x_k, acc)), whatever
 * the tile: NG groups (1..4) by NT tokens (1..6), 24 accumulators at most.
 *
 * h16_tile runs columns k0..k0+kn-1: col points at column k0 of the first
 * group, the next group gstride bytes on. The sums start at 0 (k0 = 0) or
 * continue from y (row-major prefill packs its rows chunk by chunk into this
 * form, see h16_rows): the float stored and reloaded is the same float, so
 * both give the same bits. keep masks the rows of the last group that exist.
 */
ALWAYS_INLINE void h16_tile(int KIND, const uint8_t *col, size_t gstride, int NG, const kern_act *a, int t0, int NT,
                            int64_t k0, int64_t kn, float *y, int64_t ldy, int64_t r, __mmask16 keep) {
    __m512 acc[4][6];
    const float *x[6];
    UNROLL8 for (int t = 0; t < NT; t++) {
        x[t] = a->f + (size_t)(t0 + t) * (size_t)a->n + k0;
        UNROLL8 for (int g = 0; g < NG; g++) {
            float *yp = y + (size_t)(t0 + t) * (size_t)ldy + (size_t)(r + 16 * g);
            __mmask16 m = g == NG - 1 ? keep : (__mmask16)0xffff;
            acc[g][t] = k0 ? _mm512_maskz_loadu_ps(m, yp) : _mm512_setzero_ps();
        }
    }
    for (int64_t k = 0; k < kn; k++) {
        __m512 wv[4];
        UNROLL8 for (int g = 0; g < NG; g++)
            wv[g] = h16_widen(KIND, _mm256_loadu_si256((const __m256i *)(col + (size_t)g * gstride + 32 * (size_t)k)));
        UNROLL8 for (int t = 0; t < NT; t++) {
            __m512 xv = _mm512_set1_ps(x[t][k]);
            UNROLL8 for (int g = 0; g < NG; g++) acc[g][t] = _mm512_fmadd_ps(wv[g], xv, acc[g][t]);
        }
    }
    UNROLL8 for (int t = 0; t < NT; t++) UNROLL8 for (int g = 0; g < NG; g++) {
        float *yp = y + (size_t)(t0 + t) * (size_t)ldy + (size_t)(r + 16 * g);
        _mm512_mask_storeu_ps(yp, g == NG - 1 ? keep : (__mmask16)0xffff, acc[g][t]);
    }
}

/* Every token of a, six at a time, then the rest, over NG groups (a constant
 * after inlining: h16_groups picks it). */
ALWAYS_INLINE void h16_tokens(int KIND, const uint8_t *col, size_t gstride, int NG, const kern_act *a, int64_t k0,
                              int64_t kn, float *y, int64_t ldy, int64_t r, __mmask16 keep) {
    int t = 0;
    for (; t + 6 <= a->T; t += 6) h16_tile(KIND, col, gstride, NG, a, t, 6, k0, kn, y, ldy, r, keep);
    switch (a->T - t) {
    case 5: h16_tile(KIND, col, gstride, NG, a, t, 5, k0, kn, y, ldy, r, keep); break;
    case 4: h16_tile(KIND, col, gstride, NG, a, t, 4, k0, kn, y, ldy, r, keep); break;
    case 3: h16_tile(KIND, col, gstride, NG, a, t, 3, k0, kn, y, ldy, r, keep); break;
    case 2: h16_tile(KIND, col, gstride, NG, a, t, 2, k0, kn, y, ldy, r, keep); break;
    case 1: h16_tile(KIND, col, gstride, NG, a, t, 1, k0, kn, y, ldy, r, keep); break;
    default: break;
    }
}

/* h16_tokens over ng (1..4) groups. */
ALWAYS_INLINE void h16_groups(int KIND, const uint8_t *col, size_t gstride, int ng, const kern_act *a, int64_t k0,
                              int64_t kn, float *y, int64_t ldy, int64_t r, __mmask16 keep) {
    assert(ng >= 1 && ng <= 4);
    if (ng == 4) h16_tokens(KIND, col, gstride, 4, a, k0, kn, y, ldy, r, keep);
    else if (ng == 3) h16_tokens(KIND, col, gstride, 3, a, k0, kn, y, ldy, r, keep);
    else if (ng == 2) h16_tokens(KIND, col, gstride, 2, a, k0, kn, y, ldy, r, keep);
    else h16_tokens(KIND, col, gstride, 1, a, k0, kn, y, ldy, r, keep);
}

/* The X16 gemm of KIND (f16 or bf16): r0 and r1 are multiples of 16; four
 * groups (64 rows, 256 KiB at n = 2048, in L2) meet every token before the
 * next four. */
ALWAYS_INLINE void h16_gemm_x16(int KIND, const uint8_t *w, size_t rb, int64_t r0, int64_t r1, const kern_act *a,
                                float *y, int64_t ldy) {
    assert(a->fmt == KERN_ACT_F32 && r0 % 16 == 0 && r1 % 16 == 0);
    for (int64_t r = r0; r < r1; r += 64) {
        int ng = (int)((r1 - r) / 16 < 4 ? (r1 - r) / 16 : 4);
        h16_groups(KIND, w + (size_t)r * rb, 16 * rb, ng, a, 0, a->n, y, ldy, r, (__mmask16)0xffff);
    }
}

/* Lanes of a gathered pair of columns, even halves (column k) first. */
static const uint16_t H16_SPLIT[32] __attribute__((aligned(64))) = {0,  2,  4,  6,  8,  10, 12, 14, 16, 18, 20,
                                                                   22, 24, 26, 28, 30, 1,  3,  5,  7,  9,  11,
                                                                   13, 15, 17, 19, 21, 23, 25, 27, 29, 31};

/*
 * Columns k..k+31 of sixteen rows (src[i]: row i's first column) into the
 * X16 form at dst (column k + j at dst + 16 j): a 16 x 16 transpose of
 * 32-bit pairs of columns (unpack by 32 and 64 bits, then two rounds of
 * 128-bit lane shuffles), after which register c holds columns 2c and 2c+1
 * of every row, one row per lane; one permute then puts column 2c's sixteen
 * halves before column 2c+1's.
 */
ALWAYS_INLINE void h16_pack32(const uint8_t *const src[16], int64_t k, uint16_t *dst) {
    __m512i rv[16], t[16], u[16];
    UNROLL16 for (int i = 0; i < 16; i++) rv[i] = _mm512_loadu_si512(src[i] + 2 * k);
    UNROLL16 for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(rv[i], rv[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(rv[i], rv[i + 1]);
    }
    /* u[4q + c]: in 128-bit lane L, pair column 4L + c of rows 4q..4q+3 */
    UNROLL16 for (int q = 0; q < 4; q++) {
        u[4 * q] = _mm512_unpacklo_epi64(t[4 * q], t[4 * q + 2]);
        u[4 * q + 1] = _mm512_unpackhi_epi64(t[4 * q], t[4 * q + 2]);
        u[4 * q + 2] = _mm512_unpacklo_epi64(t[4 * q + 1], t[4 * q + 3]);
        u[4 * q + 3] = _mm512_unpackhi_epi64(t[4 * q + 1], t[4 * q + 3]);
    }
    const __m512i split = _mm512_load_si512(H16_SPLIT);
    UNROLL16 for (int c = 0; c < 4; c++) {
        __m512i va = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88), vb = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xdd);
        __m512i wa = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x88), wb = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xdd);
        __m512i o[4] = {_mm512_shuffle_i32x4(va, wa, 0x88), _mm512_shuffle_i32x4(vb, wb, 0x88),
                        _mm512_shuffle_i32x4(va, wa, 0xdd), _mm512_shuffle_i32x4(vb, wb, 0xdd)};
        UNROLL16 for (int L = 0; L < 4; L++) /* pair column 4L + c: columns 8L + 2c, 8L + 2c + 1 */
            _mm512_store_si512(dst + 16 * (8 * L + 2 * c), _mm512_permutexvar_epi16(split, o[L]));
    }
}

enum { H16_KC = 256 }; /* columns per packed chunk of the row-major prefill: 4 x 16 x 256 halves = 32 KiB */

/*
 * kern_gemm_fn for row-major f16 (a mapped file, or repacking off): packs up
 * to 64 rows, H16_KC columns at a time, into the X16 form on the stack and
 * runs the X16 tile over them, so prefill and decode give the X16 gemm's
 * bits; a short last group repeats its final row in the unused lanes, which
 * are not stored. For decode the transpose costs less than reading the
 * weights from memory (80 register operations per kilobyte).
 */
ALWAYS_INLINE void h16_gemm_rows(int KIND, const uint8_t *w, size_t rb, int64_t r0, int64_t r1, const kern_act *a,
                                 float *y, int64_t ldy) {
    uint16_t pack[4][H16_KC][16] __attribute__((aligned(64)));
    for (int64_t r = r0; r < r1; r += 64) {
        int64_t nr = r1 - r < 64 ? r1 - r : 64;
        int ng = (int)((nr + 15) / 16);
        __mmask16 keep = (__mmask16)(nr % 16 ? (1u << (nr % 16)) - 1 : 0xffff);
        for (int64_t k0 = 0; k0 < a->n; k0 += H16_KC) {
            int64_t kn = a->n - k0 < H16_KC ? a->n - k0 : H16_KC;
            for (int g = 0; g < ng; g++) {
                const uint8_t *src[16];
                for (int i = 0; i < 16; i++) {
                    int64_t row = r + 16 * g + i < r1 ? r + 16 * g + i : r1 - 1;
                    src[i] = w + (size_t)row * rb + 2 * (size_t)k0;
                }
                int64_t k = 0;
                for (; k + 32 <= kn; k += 32) h16_pack32(src, k, &pack[g][k][0]);
                for (; k < kn; k++) /* columns past the last whole 32 */
                    for (int i = 0; i < 16; i++) memcpy(&pack[g][k][i], src[i] + 2 * k, 2);
            }
            h16_groups(KIND, (const uint8_t *)pack, sizeof pack[0], ng, a, k0, kn, y, ldy, r, keep);
        }
    }
}

/* The tables' f16 and bf16 entries: X16, row-major, and the one-row dot in
 * the same order (one FMA per column, in order: what the gemms give each
 * lane), for the generic gemm and the tests. */
static void gemm_f16_x16(const uint8_t *w, size_t rb, int64_t r0, int64_t r1, const kern_act *a, float *y, int64_t ldy) {
    h16_gemm_x16(W_F16, w, rb, r0, r1, a, y, ldy);
}
static void gemm_bf16_x16(const uint8_t *w, size_t rb, int64_t r0, int64_t r1, const kern_act *a, float *y, int64_t ldy) {
    h16_gemm_x16(W_BF16, w, rb, r0, r1, a, y, ldy);
}
static void gemm_f16_rows(const uint8_t *w, size_t rb, int64_t r0, int64_t r1, const kern_act *a, float *y, int64_t ldy) {
    h16_gemm_rows(W_F16, w, rb, r0, r1, a, y, ldy);
}
static void gemm_bf16_rows(const uint8_t *w, size_t rb, int64_t r0, int64_t r1, const kern_act *a, float *y, int64_t ldy) {
    h16_gemm_rows(W_BF16, w, rb, r0, r1, a, y, ldy);
}
ALWAYS_INLINE float h16_dot(int KIND, const void *row, const kern_act *a, int t) {
    const uint16_t *h = row;
    const float *x = a->f + (size_t)t * (size_t)a->n;
    __m128 acc = _mm_setzero_ps();
    for (int64_t k = 0; k < a->n; k++) {
        __m128 wk = KIND == W_F16 ? _mm_cvtph_ps(_mm_cvtsi32_si128(h[k])) : _mm_castsi128_ps(_mm_cvtsi32_si128((int)((uint32_t)h[k] << 16)));
        acc = _mm_fmadd_ss(wk, _mm_set_ss(x[k]), acc);
    }
    return _mm_cvtss_f32(acc);
}
static float dot_f16row(const void *row, const kern_act *a, int t) { return h16_dot(W_F16, row, a, t); }
static float dot_bf16row(const void *row, const kern_act *a, int t) { return h16_dot(W_BF16, row, a, t); }

/* ---- activation quantization ---- */

/*
 * Q8_256 (the K-quant activations) with the scalar reference's exact codes,
 * scales and sums (kern_quantize_act_scalar): the value of largest magnitude
 * (the first one, on ties) gives iscale = -127 / max; codes are
 * round-half-even(iscale * x) (cvtps under the default rounding mode, as
 * nearbyintf) clamped to 127. Q8_32 is ops_avx512.c's (exact too).
 */
static void quantize_act(const float *x, kern_act *a, int t) {
    if (a->fmt != KERN_ACT_Q8_256) {
        kern_quantize_q8_32_avx512(x, a, t);
        return;
    }
    const int64_t n = a->n, nb = n / 256;
    int8_t *q = a->qs + (size_t)t * (size_t)n;
    float *d = a->d + (size_t)t * (size_t)nb;
    int16_t *bs = a->bsum + (size_t)t * (size_t)(n / 16);
    for (int64_t b = 0; b < nb; b++) {
        const float *xb = x + b * 256;
        int8_t *qb = q + b * 256;
        __m512 m = _mm512_setzero_ps();
        for (int j = 0; j < 16; j++) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(xb + 16 * j)));
        float amax = _mm512_reduce_max_ps(m);
        if (amax == 0.0f) {
            d[b] = 0.0f;
            memset(qb, 0, 256);
            memset(bs + b * 16, 0, 16 * sizeof(int16_t));
            continue;
        }
        float max = 0.0f;
        for (int j = 0; j < 16; j++) {
            __mmask16 hit = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(xb + 16 * j)), _mm512_set1_ps(amax), _CMP_EQ_OQ);
            if (hit) {
                max = xb[16 * j + __builtin_ctz(hit)];
                break;
            }
        }
        float iscale = -127.0f / max;
        __m512 is = _mm512_set1_ps(iscale);
        for (int j = 0; j < 16; j++) {
            __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(is, _mm512_loadu_ps(xb + 16 * j)));
            v = _mm512_min_epi32(v, _mm512_set1_epi32(127));
            bs[b * 16 + j] = (int16_t)_mm512_reduce_add_epi32(v);
            _mm_storeu_si128((__m128i *)(qb + 16 * j), _mm512_cvtsepi32_epi8(v));
        }
        d[b] = 1.0f / iscale;
    }
}

/* ---- the tables' own entries (dispatch.c fills the rest from AVX2's) ---- */

const kern_ops kern_avx512_part = {
    .name = "avx512",
    .decode_tile = KERN_TILE_IN_PLACE, /* Zen 5: decode 1.07x the copy's (medians of 5 alternated rounds) */
    .dot = {[CX_TYPE_F32] = dot_f32row, [CX_TYPE_F16] = dot_f16row, [CX_TYPE_BF16] = dot_bf16row,
            [CX_TYPE_Q4_K] = kq_dot_q4_k_avx512, [CX_TYPE_Q6_K] = kq_dot_q6_k_avx512, [CX_TYPE_MXFP4] = mxfp4_dot_avx512},
    .gemm = {[CX_TYPE_F32] = gemm_f32, [CX_TYPE_F16] = gemm_f16_rows, [CX_TYPE_BF16] = gemm_bf16_rows,
             [CX_TYPE_Q8_0] = gemm_q8_0_rows,
             [CX_TYPE_Q4_0] = gemm_q4_0_rows, [CX_TYPE_Q4_K] = gemm_q4_k_rows, [CX_TYPE_Q6_K] = gemm_q6_k_rows,
             [CX_TYPE_MXFP4] = mxfp4_gemm_avx512},
    .gemm_x16 = {[CX_TYPE_F16] = gemm_f16_x16, [CX_TYPE_BF16] = gemm_bf16_x16, [CX_TYPE_Q8_0] = gemm_q8_0_x16, [CX_TYPE_Q4_0] = gemm_q4_0_x16, [CX_TYPE_Q4_K] = gemm_q4_k_x16,
                 [CX_TYPE_Q6_K] = gemm_q6_k_x16, [CX_TYPE_MXFP4] = mxfp4_gemm_x16_avx512},
    .quantize_act = quantize_act,
    .attn_scores = kern_attn_scores_avx512,
    .attn_scores_i8 = kern_attn_scores_i8_avx512,
    .attn_values = kern_attn_values_avx512,
    .exp_shift = kern_exp_shift_avx512,
    .scale_f64 = kern_scale_f64_avx512,
    .rmsnorm = kern_rmsnorm_avx512,
    .softmax = kern_softmax_avx512,
    .rope = kern_rope_avx512,
    .swiglu = kern_swiglu_avx512,
    .add = kern_add_avx512,
    .lora_up = kern_lora_up_avx512,
    .kv_unpack = kern_kv_unpack_avx512,
};

const kern_ops kern_avx512vnni_part = {
    .name = "avx512vnni",
    .decode_tile = KERN_TILE_IN_PLACE, /* Zen 5: decode 1.07x the copy's (medians of 5 alternated rounds) */
    .dot = {[CX_TYPE_F32] = dot_f32row, [CX_TYPE_F16] = dot_f16row, [CX_TYPE_BF16] = dot_bf16row,
            [CX_TYPE_Q4_K] = kq_dot_q4_k_avx512, [CX_TYPE_Q6_K] = kq_dot_q6_k_avx512, [CX_TYPE_MXFP4] = mxfp4_dot_avx512vnni},
    .gemm = {[CX_TYPE_F32] = gemm_f32, [CX_TYPE_F16] = gemm_f16_rows, [CX_TYPE_BF16] = gemm_bf16_rows,
             [CX_TYPE_Q8_0] = gemm_q8_0_rows_vnni,
             [CX_TYPE_Q4_0] = gemm_q4_0_rows_vnni, [CX_TYPE_Q4_K] = gemm_q4_k_rows_vnni,
             [CX_TYPE_Q6_K] = gemm_q6_k_rows_vnni, [CX_TYPE_MXFP4] = mxfp4_gemm_avx512vnni},
    .gemm_x16 = {[CX_TYPE_F16] = gemm_f16_x16, [CX_TYPE_BF16] = gemm_bf16_x16, [CX_TYPE_Q8_0] = gemm_q8_0_x16_vnni, [CX_TYPE_Q4_0] = gemm_q4_0_x16_vnni,
                 [CX_TYPE_Q4_K] = gemm_q4_k_x16_vnni, [CX_TYPE_Q6_K] = gemm_q6_k_x16_vnni,
                 [CX_TYPE_MXFP4] = mxfp4_gemm_x16_avx512vnni},
    .quantize_act = quantize_act,
    .attn_scores = kern_attn_scores_avx512,
    .attn_scores_i8 = kern_attn_scores_i8_avx512vnni,
    .attn_values = kern_attn_values_avx512,
    .exp_shift = kern_exp_shift_avx512,
    .scale_f64 = kern_scale_f64_avx512,
    .rmsnorm = kern_rmsnorm_avx512,
    .softmax = kern_softmax_avx512,
    .rope = kern_rope_avx512,
    .swiglu = kern_swiglu_avx512,
    .add = kern_add_avx512,
    .lora_up = kern_lora_up_avx512vnni,
    .kv_unpack = kern_kv_unpack_avx512,
};
