/*
 * mxfp4_avx512.c - MXFP4 dot product and gemm with AVX-512 F/BW/VL/DQ, and
 * with VNNI's vpdpbusd for the "avx512vnni" table (built with the AVX-512
 * flags; dispatch.c hands these out only where they run). Layout: mxfp4.h.
 *
 * Two blocks per step: their codes (low nibbles, high nibbles, each block's
 * 32 in element order) fill one 64-byte register and one vpshufb looks them
 * up in MXFP4_KV. The integer products use |w| against the activation codes
 * carrying w's sign (a masked negation: AVX-512 has no vpsignb); vpdpbusd
 * sums four u8*s8 products into each int32 lane, maddubs + madd does the same
 * without VNNI (pairs at most 2*12*127: no int16 saturation). Both are exact,
 * so the two tables give the same bits. Lanes 0-7 then hold block b, lanes
 * 8-15 block b+1; each lane is converted and FMA-accumulated with its
 * block's mxfp4_half_scale(e) * d8. An odd last block runs the same step with
 * the second block's codes, activations and scales zero (masked loads and
 * gathers: no byte past the row or the activations is read).
 *
 * One body, mx_rows512, computes up to four tokens per pass over a weight
 * row; the dot is that body with one token, so each table's gemm of fewer
 * than four tokens (decode on row-major weights) equals its dot bit for bit.
 *
 * Sixteen rows at a time (KERN_LAYOUT_X16, kern_repack_x16): one 64-byte
 * load is four packed code bytes of each of sixteen rows, one row per int32
 * lane, as in kernels_avx512.c's q4_0 kernel. Its low nibbles are elements
 * 4c..4c+3, its high nibbles 16+4c..; one vpshufb each looks them up in
 * MXFP4_KV + 12 (0..24, unsigned: vpdpbusd's first operand), against the
 * activation's four codes broadcast to every lane; the +12 comes back as
 * 12 * (the activation block's code sum). So each lane holds its row's
 * exact block sum isum and ends the block with the scalar reference's float
 * operations, sum += (float)isum * (mxfp4_half_scale(e) * d8): equal to
 * mxfp4_dot_scalar bit for bit, at any token count (prefill and decode on
 * X16 agree). The "avx512" table does the same with maddubs + madd (pairs
 * at most 2 * 24 * 127: exact). Row-major weights take the same kernel for
 * prefill (four tokens or more) by gathering each lane's four bytes.
 */
#include "../mxfp4.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && \
    defined(__AVX512VL__) && defined(__AVX512VNNI__)

#include <assert.h>
#include <immintrin.h>
#include <string.h>

#define MX_NT 4 /* tokens per weight-row pass in the gemm */
#define MX_INLINE static inline __attribute__((always_inline))
#define MX_UNROLL _Pragma("GCC unroll 4")
#define MX_UNROLL8 _Pragma("GCC unroll 8")
#ifndef PREFETCH_AHEAD
#define PREFETCH_AHEAD 2048
#endif

/* The 64 signed table values of blocks b (bytes 0-31) and b+1 (32-63, zero
 * when `two` is 0), each block's elements in order: both blocks' 16 code
 * bytes in one 256-bit register, their high nibbles shifted down beside
 * them, and one two-source permute to [lo b | hi b | lo b+1 | hi b+1]. */
MX_INLINE __m512i mx_unpack2(const uint8_t *blk, int two, __m512i table) {
    __m128i r0 = _mm_loadu_si128((const __m128i *)(blk + 1));
    __m128i r1 = two ? _mm_loadu_si128((const __m128i *)(blk + sizeof(block_mxfp4) + 1)) : _mm_setzero_si128();
    __m256i r = _mm256_set_m128i(r1, r0);
    __m512i lo = _mm512_castsi256_si512(r), hi = _mm512_castsi256_si512(_mm256_srli_epi16(r, 4));
    __m512i codes = _mm512_permutex2var_epi64(lo, _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11), hi);
    return _mm512_shuffle_epi8(table, _mm512_and_si512(codes, _mm512_set1_epi8(0x0F)));
}

/* acc + per int32 lane the sum of four products u*s (u unsigned, s signed). */
MX_INLINE __m512i mx_dp4acc(int VNNI, __m512i acc, __m512i u, __m512i s) {
    if (VNNI) return _mm512_dpbusd_epi32(acc, u, s);
    return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1)));
}

/*
 * MXFP4 row . activation rows t0..t0+NT-1 (NT <= MX_NT) into out[0..NT).
 * Every sixteen blocks, one gather reads their scale bytes (lanes past the
 * row masked off) and, per token, one scalef makes each block's
 * d8 * 2^(e - 128): the scalar reference's mxfp4_half_scale(e) * d8, the
 * same single rounding. Each pair of blocks then picks its two scales out
 * of those sixteen with one permute.
 */
MX_INLINE void mx_rows512(int VNNI, const uint8_t *row, const kern_act *a, int t0, int NT, float *out) {
    const int64_t nb = a->n / MXFP4_QK;
    const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)MXFP4_KV));
    const __m512i halves = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const __m512i e_at = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32((int)sizeof(block_mxfp4)));
    __m512 acc[MX_NT][2], scale[MX_NT];
    const int8_t *x[MX_NT];
    const float *dx[MX_NT];
    MX_UNROLL for (int k = 0; k < NT; k++) {
        acc[k][0] = acc[k][1] = scale[k] = _mm512_setzero_ps(); /* scale: set at b = 0 */
        x[k] = a->qs + (size_t)(t0 + k) * (size_t)a->n;
        dx[k] = a->d + (size_t)(t0 + k) * (size_t)nb;
    }
    for (int64_t b = 0; b < nb; b += 2) {
        const uint8_t *blk = row + (size_t)b * sizeof(block_mxfp4);
        if (NT == 1) _mm_prefetch((const char *)blk + PREFETCH_AHEAD, _MM_HINT_T0);
        if ((b & 15) == 0) { /* the next sixteen blocks' scales, times each token's d8 */
            const __mmask16 in = nb - b >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (nb - b)) - 1);
            __m512i e = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), in, e_at, blk, 1);
            __m512 pow2 = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_and_si512(e, _mm512_set1_epi32(0xFF)),
                                                              _mm512_set1_epi32(128)));
            MX_UNROLL for (int k = 0; k < NT; k++) scale[k] = _mm512_scalef_ps(_mm512_maskz_loadu_ps(in, dx[k] + b), pow2);
        }
        const int two = b + 1 < nb;
        const __m512i w = mx_unpack2(blk, two, table);
        const __m512i aw = _mm512_abs_epi8(w);
        const __mmask64 neg = _mm512_movepi8_mask(w);
        const __mmask64 bytes = two ? ~(__mmask64)0 : (__mmask64)0xFFFFFFFF;
        const __m512i pick = _mm512_add_epi32(halves, _mm512_set1_epi32((int)(b & 15))); /* [b x8 | b+1 x8] */
        const int j = (int)((b >> 1) & 1);
        MX_UNROLL for (int k = 0; k < NT; k++) {
            __m512i y = _mm512_maskz_loadu_epi8(bytes, x[k] + b * MXFP4_QK);
            y = _mm512_mask_sub_epi8(y, neg, _mm512_setzero_si512(), y);
            __m512i p = mx_dp4acc(VNNI, _mm512_setzero_si512(), aw, y);
            acc[k][j] = _mm512_fmadd_ps(_mm512_permutexvar_ps(pick, scale[k]), _mm512_cvtepi32_ps(p), acc[k][j]);
        }
    }
    MX_UNROLL for (int k = 0; k < NT; k++) out[k] = _mm512_reduce_add_ps(_mm512_add_ps(acc[k][0], acc[k][1]));
}

/* Rows r0..r1, four tokens per pass, the remaining tokens one at a time. */
MX_INLINE void mx_gemm512(int VNNI, const uint8_t *w, size_t row_bytes, int64_t r0, int64_t r1, const kern_act *a,
                          float *y, int64_t ldy) {
    assert(a->fmt == KERN_ACT_Q8_32 && a->n % MXFP4_QK == 0);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w + (size_t)r * row_bytes;
        float o[MX_NT];
        int t = 0;
        for (; t + MX_NT <= a->T; t += MX_NT) {
            mx_rows512(VNNI, row, a, t, MX_NT, o);
            for (int k = 0; k < MX_NT; k++) y[(size_t)(t + k) * (size_t)ldy + (size_t)r] = o[k];
        }
        for (; t < a->T; t++) {
            mx_rows512(VNNI, row, a, t, 1, o);
            y[(size_t)t * (size_t)ldy + (size_t)r] = o[0];
        }
    }
}

/* kern_dot_fn of the "avx512" table (maddubs + madd). */
float mxfp4_dot_avx512(const void *row, const kern_act *a, int t) {
    assert(a->fmt == KERN_ACT_Q8_32 && a->n % MXFP4_QK == 0 && t >= 0 && t < a->T);
    float r;
    mx_rows512(0, row, a, t, 1, &r);
    return r;
}

/* kern_dot_fn of the "avx512vnni" table (vpdpbusd). */
float mxfp4_dot_avx512vnni(const void *row, const kern_act *a, int t) {
    assert(a->fmt == KERN_ACT_Q8_32 && a->n % MXFP4_QK == 0 && t >= 0 && t < a->T);
    float r;
    mx_rows512(1, row, a, t, 1, &r);
    return r;
}

/* ---- sixteen rows per pass ---- */

/* Four bytes of each of sixteen rows: lane r from p + idx[r] (GATHER,
 * row-major weights) or lane r of the 64 bytes at p (X16). */
MX_INLINE __m512i mx_load16(int GATHER, const uint8_t *p, __m512i idx) {
    return GATHER ? _mm512_i32gather_epi32(idx, p, 1) : _mm512_loadu_si512(p);
}

/*
 * out[k], lane r = dot(row r, token t0 + k) for k < NT (NT <= 8), rows
 * r = 0..15 of a group: X16 blocks from w0 (GATHER = 0: per block the
 * sixteen E8M0 bytes, then chunk c of row r at 16 + (16c + r) * 4), or
 * row-major rows at w0 + idx[r] (GATHER = 1: each lane's E8M0 byte is the
 * low byte of the dword gathered at its block's start). Every float
 * operation is the scalar reference's (see the head of this file).
 */
MX_INLINE void mx_rows16(int VNNI, int GATHER, const uint8_t *w0, __m512i idx, const kern_act *a, int t0, int NT,
                         __m512 out[8]) {
    const int64_t nb = a->n / MXFP4_QK;
    const size_t bs = sizeof(block_mxfp4);
    const __m512i table = _mm512_add_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)MXFP4_KV)),
                                          _mm512_set1_epi8(12)); /* twice the E2M1 values, + 12: 0..24 */
    const __m512i low4 = _mm512_set1_epi8(0x0f), zero = _mm512_setzero_si512();
    __m512 acc[8];
    const int8_t *x[8];
    const float *dx[8];
    const int16_t *bsum[8];
    MX_UNROLL8 for (int k = 0; k < NT; k++) {
        acc[k] = _mm512_setzero_ps();
        x[k] = a->qs + (size_t)(t0 + k) * (size_t)a->n;
        dx[k] = a->d + (size_t)(t0 + k) * (size_t)nb;
        bsum[k] = a->bsum + (size_t)(t0 + k) * (size_t)nb;
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *base = w0 + (size_t)b * (GATHER ? bs : 16 * bs);
        const uint8_t *codes = base + (GATHER ? 1 : 16);
        const size_t step = GATHER ? 4 : 64; /* from one chunk to the next */
        if (NT == 1 && !GATHER) /* decode streams the weights once: ask for them early */
            for (size_t o = 0; o < 16 * bs; o += 64) _mm_prefetch((const char *)base + PREFETCH_AHEAD + o, _MM_HINT_T0);
        __m512i e = GATHER ? _mm512_and_si512(mx_load16(1, base, idx), _mm512_set1_epi32(0xFF))
                           : _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)base));
        /* mxfp4_half_scale(e) = 2^(e - 128), exact (subnormal for e = 0, 1) */
        __m512 half = _mm512_scalef_ps(_mm512_set1_ps(1.0f), _mm512_cvtepi32_ps(_mm512_sub_epi32(e, _mm512_set1_epi32(128))));
        __m512i u[8];
        MX_UNROLL8 for (int c = 0; c < 4; c++) {
            __m512i raw = mx_load16(GATHER, codes + step * (size_t)c, idx);
            u[c] = _mm512_shuffle_epi8(table, _mm512_and_si512(raw, low4));
            u[4 + c] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4));
        }
        MX_UNROLL8 for (int k = 0; k < NT; k++) {
            const int8_t *xb = x[k] + b * MXFP4_QK;
            __m512i s0 = zero, s1 = zero;
            MX_UNROLL8 for (int j = 0; j < 8; j++) {
                int32_t four;
                memcpy(&four, xb + 4 * j, 4);
                if (j & 1) s1 = mx_dp4acc(VNNI, s1, u[j], _mm512_set1_epi32(four));
                else s0 = mx_dp4acc(VNNI, s0, u[j], _mm512_set1_epi32(four));
            }
            __m512i isum = _mm512_sub_epi32(_mm512_add_epi32(s0, s1), _mm512_set1_epi32(12 * bsum[k][b]));
            __m512 scale = _mm512_mul_ps(half, _mm512_set1_ps(dx[k][b]));
            acc[k] = _mm512_add_ps(acc[k], _mm512_mul_ps(_mm512_cvtepi32_ps(isum), scale));
        }
    }
    MX_UNROLL8 for (int k = 0; k < NT; k++) out[k] = acc[k];
}

/* Rows r0..r1 in groups of sixteen, tokens eight, then four, then one at a
 * time. X16 (GATHER = 0): r0 and r1 are multiples of 16 and group g starts
 * at w + 16 g rb. Row-major (GATHER = 1): a short last group repeats its
 * final row in the unused lanes, which are not stored. */
MX_INLINE void mx_gemm16(int VNNI, int GATHER, const uint8_t *w, size_t rb, int64_t r0, int64_t r1, const kern_act *a,
                         float *y, int64_t ldy) {
    assert(a->fmt == KERN_ACT_Q8_32 && a->n % MXFP4_QK == 0);
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
#define MX_TOKENS(NT_)                                                                          \
    do {                                                                                        \
        mx_rows16(VNNI, GATHER, w0, idx, a, t, NT_, acc);                                       \
        for (int k = 0; k < NT_; k++)                                                           \
            _mm512_mask_storeu_ps(y + (size_t)(t + k) * (size_t)ldy + (size_t)r, keep, acc[k]); \
        t += NT_;                                                                               \
    } while (0)
        while (t + 8 <= a->T) MX_TOKENS(8);
        while (t + 4 <= a->T) MX_TOKENS(4);
        while (t < a->T) MX_TOKENS(1);
#undef MX_TOKENS
    }
}

/* kern_gemm_fn of the "avx512" table on row-major weights: prefill (four
 * tokens or more) through the sixteen-row kernel, decode through the dot's. */
void mxfp4_gemm_avx512(const uint8_t *w, size_t row_bytes, int64_t r0, int64_t r1, const kern_act *a, float *y,
                       int64_t ldy) {
    if (a->T >= 4 && !a->decode_order) mx_gemm16(0, 1, w, row_bytes, r0, r1, a, y, ldy);
    else mx_gemm512(0, w, row_bytes, r0, r1, a, y, ldy);
}

/* kern_gemm_fn of the "avx512vnni" table on row-major weights. */
void mxfp4_gemm_avx512vnni(const uint8_t *w, size_t row_bytes, int64_t r0, int64_t r1, const kern_act *a, float *y,
                           int64_t ldy) {
    if (a->T >= 4 && !a->decode_order) mx_gemm16(1, 1, w, row_bytes, r0, r1, a, y, ldy);
    else mx_gemm512(1, w, row_bytes, r0, r1, a, y, ldy);
}

/* The "avx512" table's gemm over KERN_LAYOUT_X16 weights, every token count. */
void mxfp4_gemm_x16_avx512(const uint8_t *w, size_t row_bytes, int64_t r0, int64_t r1, const kern_act *a, float *y,
                           int64_t ldy) {
    mx_gemm16(0, 0, w, row_bytes, r0, r1, a, y, ldy);
}

/* The "avx512vnni" table's gemm over KERN_LAYOUT_X16 weights. */
void mxfp4_gemm_x16_avx512vnni(const uint8_t *w, size_t row_bytes, int64_t r0, int64_t r1, const kern_act *a,
                               float *y, int64_t ldy) {
    mx_gemm16(1, 0, w, row_bytes, r0, r1, a, y, ldy);
}

#endif
