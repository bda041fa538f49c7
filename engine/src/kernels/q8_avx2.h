/*
 * q8_avx2.h - the q8_0 and q4_0 kernels of the 256-bit tables (include only
 * from files built with the AVX2 flags): one row at a time (decode on
 * row-major weights), eight rows at a time (prefill), and the X8 layout
 * (kern_repack_x8), with the table entry points dot_q8_0, dot_q4_0,
 * gemm_q8_0, gemm_q4_0, gemm_q8_0_x8 and gemm_q4_0_x8.
 *
 * The integer products go through two primitives the including file defines
 * first:
 *   __m256i i8dot4(__m256i acc, __m256i u, __m256i s)
 *     acc + per int32 lane the sum of the four u8 x s8 products of its bytes;
 *   __m256i i8dot4x2(__m256i acc, __m256i u1, __m256i s1, __m256i u2, __m256i s2)
 *     the same for two pairs of operands.
 * kernels_avx2.c does them with maddubs and madd, kernels_avxvnni.c with
 * AVX-VNNI's vpdpbusd. The operands never saturate maddubs's int16 pair sums
 * (u is |w| <= 128 against |s| <= 127, or a nibble <= 15), so both give the
 * same int32 sums, hence the same floats: the two tables agree bit for bit.
 * PREFETCH_AHEAD, UNROLL4 and ALWAYS_INLINE come from the includer too.
 */
#ifndef CX_Q8_AVX2_H
#define CX_Q8_AVX2_H

#include <immintrin.h>
#include <string.h>

#include "../kquant.h"
#include "kernels.h"
#include "simd_avx2.h"

ALWAYS_INLINE float fp16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

/* ---- q8_0 and q4_0, one row at a time (decode on row-major weights) ---- */

/* 32 nibbles of a q4_0 block as bytes 0..15: weights 0..15 from the low
 * nibbles, 16..31 from the high ones (ggml's order), minus 8 (signed). */
ALWAYS_INLINE __m256i q4_0_unpack(const uint8_t *qs) {
    __m128i raw = _mm_loadu_si128((const __m128i *)qs);
    __m256i both = _mm256_set_m128i(_mm_srli_epi16(raw, 4), raw);
    return _mm256_sub_epi8(_mm256_and_si256(both, _mm256_set1_epi8(0x0f)), _mm256_set1_epi8(8));
}

/* NT tokens (t0..t0+NT-1) against one q8_0 (Q4 = 0) or q4_0 (Q4 = 1) row; Q4
 * and NT are constants after inlining. The two formats differ only in the
 * block size and in how the 32 signed weights are loaded. */
ALWAYS_INLINE void q_row(int Q4, const uint8_t *row, const kern_act *a, int t0, int NT, float *out) {
    int64_t nb = a->n / 32;
    size_t bs = Q4 ? 18 : 34;
    __m256 acc[4][2];
    const int8_t *x[4];
    const float *dx[4];
    UNROLL4 for (int k = 0; k < NT; k++) {
        acc[k][0] = acc[k][1] = _mm256_setzero_ps();
        x[k] = a->qs + (size_t)(t0 + k) * (size_t)a->n;
        dx[k] = a->d + (size_t)(t0 + k) * (size_t)nb;
    }
#define Q_STEP(b, j)                                                                                        \
    do {                                                                                                    \
        const uint8_t *blk = row + (size_t)(b) * bs;                                                        \
        if (NT == 1) _mm_prefetch((const char *)blk + PREFETCH_AHEAD, _MM_HINT_T0);                          \
        float dw = fp16(blk);                                                                               \
        __m256i w = Q4 ? q4_0_unpack(blk + 2) : _mm256_loadu_si256((const __m256i *)(blk + 2));             \
        __m256i aw = _mm256_sign_epi8(w, w);                                                                \
        UNROLL4 for (int k = 0; k < NT; k++) {                                                              \
            __m256i y = _mm256_loadu_si256((const __m256i *)(x[k] + (b) * 32));                             \
            __m256 p = _mm256_cvtepi32_ps(i8dot4(_mm256_setzero_si256(), aw, _mm256_sign_epi8(y, w)));       \
            acc[k][j] = _mm256_fmadd_ps(_mm256_set1_ps(dw * dx[k][b]), p, acc[k][j]);                       \
        }                                                                                                   \
    } while (0)
    int64_t b = 0;
    for (; b + 1 < nb; b += 2) {
        Q_STEP(b, 0);
        Q_STEP(b + 1, 1);
    }
    if (b < nb) Q_STEP(b, 0);
#undef Q_STEP
    UNROLL4 for (int k = 0; k < NT; k++) out[k] = simd_hsum8(_mm256_add_ps(acc[k][0], acc[k][1]));
}

ALWAYS_INLINE void q8_0_row(const uint8_t *row, const kern_act *a, int t0, int NT, float *out) {
    q_row(0, row, a, t0, NT, out);
}
ALWAYS_INLINE void q4_0_row(const uint8_t *row, const kern_act *a, int t0, int NT, float *out) {
    q_row(1, row, a, t0, NT, out);
}

/* ---- the table's q8_0/q4_0 entry points ---- */

static float dot_q8_0(const void *row, const kern_act *a, int t) {
    float r;
    q8_0_row(row, a, t, 1, &r);
    return r;
}
static float dot_q4_0(const void *row, const kern_act *a, int t) {
    float r;
    q4_0_row(row, a, t, 1, &r);
    return r;
}

/* Rows r0..r1, four tokens at a time, remainder one at a time. */
#define DEFINE_GEMM(name, CALL)                                                                          \
    static void name(const uint8_t *w, size_t rb, int64_t r0, int64_t r1, const kern_act *a, float *y,   \
                     int64_t ldy) {                                                                      \
        for (int64_t r = r0; r < r1; r++) {                                                              \
            const uint8_t *row = w + (size_t)r * rb;                                                     \
            float o[4];                                                                                  \
            int t = 0;                                                                                   \
            for (; t + 4 <= a->T; t += 4) {                                                              \
                CALL(row, a, t, 4, o);                                                                   \
                for (int k = 0; k < 4; k++) y[(size_t)(t + k) * (size_t)ldy + (size_t)r] = o[k];         \
            }                                                                                            \
            for (; t < a->T; t++) {                                                                      \
                CALL(row, a, t, 1, o);                                                                   \
                y[(size_t)t * (size_t)ldy + (size_t)r] = o[0];                                           \
            }                                                                                            \
        }                                                                                                \
    }

/* ---- eight rows at a time: q8_0 and q4_0 ----
 *
 * The row kernels pay, per (row, token, block), for an int32->float
 * conversion, a scale product, a broadcast and an FMA on top of the integer
 * work. Here eight weight rows share them: each row's block product is
 * reduced to one int32 (a horizontal-add tree puts row r in lane r), then one
 * conversion and one FMA with the eight rows' scales handle all eight. Each
 * row's result is therefore sum over blocks of fma(dw*dx, (float)isum, acc)
 * in block order, one lane per row: the integer sums are exact, so the lane,
 * the token count and the row's neighbours do not change a bit. The single
 * row dot runs the same kernel with the row in every lane.
 *
 * q4_0 needs no sign trick: its nibbles (0..15) are maddubs' unsigned
 * operand against the signed activation codes, and the -8 offset becomes
 * -8 * (sum of the activation block's codes), the same for all eight rows.
 */

/* Lane r of the result = the sum of the eight int32 lanes of m_r. Built from
 * unpacks and adds (one-cycle shuffles on their own ports) rather than
 * vphaddd, which is several micro-ops on AMD Zen. */
ALWAYS_INLINE __m256i sum8x8(__m256i m0, __m256i m1, __m256i m2, __m256i m3, __m256i m4, __m256i m5, __m256i m6,
                             __m256i m7) {
    __m256i p01 = _mm256_add_epi32(_mm256_unpacklo_epi32(m0, m1), _mm256_unpackhi_epi32(m0, m1));
    __m256i p23 = _mm256_add_epi32(_mm256_unpacklo_epi32(m2, m3), _mm256_unpackhi_epi32(m2, m3));
    __m256i p45 = _mm256_add_epi32(_mm256_unpacklo_epi32(m4, m5), _mm256_unpackhi_epi32(m4, m5));
    __m256i p67 = _mm256_add_epi32(_mm256_unpacklo_epi32(m6, m7), _mm256_unpackhi_epi32(m6, m7));
    /* per 128-bit lane: p01 = [r0 r1 r0 r1], partial sums; combine to [r0 r1 r2 r3] */
    __m256i q03 = _mm256_add_epi32(_mm256_unpacklo_epi64(p01, p23), _mm256_unpackhi_epi64(p01, p23));
    __m256i q47 = _mm256_add_epi32(_mm256_unpacklo_epi64(p45, p67), _mm256_unpackhi_epi64(p45, p67));
    return _mm256_add_epi32(_mm256_permute2x128_si256(q03, q47, 0x20), _mm256_permute2x128_si256(q03, q47, 0x31));
}

/* The eight rows' fp16 block scales at byte offset `off` of each row, as floats. */
ALWAYS_INLINE __m256 scales8(const uint8_t *const rows[8], size_t off) {
    __m128i h = _mm_setzero_si128();
    uint16_t v;
#define LANE(i) memcpy(&v, rows[i] + off, 2); h = _mm_insert_epi16(h, v, i);
    LANE(0) LANE(1) LANE(2) LANE(3) LANE(4) LANE(5) LANE(6) LANE(7)
#undef LANE
    return _mm256_cvtph_ps(h);
}

/* Row r's int32 block product against activation codes y: q8_0 as
 * maddubs(|y|, w carrying y's sign) (the weight is read straight from memory,
 * so nothing per row stays in a register); q4_0 as maddubs(nibbles, y). */
ALWAYS_INLINE __m256i block8(int Q4, const uint8_t *wrow, const __m256i *nib, __m256i y, __m256i ay) {
    const __m256i zero = _mm256_setzero_si256();
    return Q4 ? i8dot4(zero, _mm256_load_si256(nib), y)
              : i8dot4(zero, ay, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)wrow), y));
}

/* acc[k] (lane r = row r) for tokens t0..t0+NT-1 against rows[0..7]; Q4 selects q4_0.
 * Few values stay live (the activation, its magnitude, four accumulators and
 * the reduction in progress) so nothing spills: spilled accumulators cost a
 * store-to-load round trip per block (measured: IPC 1.5 and no gain). */
ALWAYS_INLINE void rows8(const uint8_t *const rows[8], int X8, int Q4, const kern_act *a, int t0, int NT, __m256 out[4]) {
    int64_t nb = a->n / 32;
    __m256 acc[4]; /* local, so it can live in registers (the caller's array would be memory) */
    size_t bs = Q4 ? 18 : 34;
    const int8_t *x[4];
    const float *dx[4];
    const int16_t *bsum[4];
    _Alignas(32) __m256i nib[8]; /* q4_0: this block's nibbles of the eight rows, unpacked once */
    UNROLL4 for (int k = 0; k < NT; k++) {
        acc[k] = _mm256_setzero_ps();
        x[k] = a->qs + (size_t)(t0 + k) * (size_t)a->n;
        dx[k] = a->d + (size_t)(t0 + k) * (size_t)nb;
        bsum[k] = a->bsum + (size_t)(t0 + k) * (size_t)nb;
    }
    for (int64_t b = 0; b < nb; b++) {
        /* q[r]: row r's codes of block b; the scales: row-major (gathered) or X8 (contiguous) */
        const uint8_t *q[8];
        __m256 dw;
        if (X8) {
            const uint8_t *base = rows[0] + (size_t)b * 8 * bs;
            if (NT == 1) /* decode streams the weights once: ask for them PREFETCH_AHEAD bytes early */
                for (size_t o = 0; o < 8 * bs; o += 64) _mm_prefetch((const char *)base + PREFETCH_AHEAD + o, _MM_HINT_T0);
            dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)base));
            for (int r = 0; r < 8; r++) q[r] = base + 16 + (size_t)r * (bs - 2);
        } else {
            size_t off = (size_t)b * bs;
            dw = scales8(rows, off);
            for (int r = 0; r < 8; r++) q[r] = rows[r] + off + 2;
        }
        if (Q4)
            _Pragma("GCC unroll 8") for (int r = 0; r < 8; r++) {
                __m128i raw = _mm_loadu_si128((const __m128i *)q[r]);
                _mm256_store_si256(&nib[r], _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw),
                                                             _mm256_set1_epi8(0x0f)));
            }
        UNROLL4 for (int k = 0; k < NT; k++) {
            __m256i y = _mm256_loadu_si256((const __m256i *)(x[k] + b * 32));
            __m256i ay = Q4 ? y : _mm256_abs_epi8(y);
            __m256i s = sum8x8(block8(Q4, q[0], &nib[0], y, ay), block8(Q4, q[1], &nib[1], y, ay),
                               block8(Q4, q[2], &nib[2], y, ay), block8(Q4, q[3], &nib[3], y, ay),
                               block8(Q4, q[4], &nib[4], y, ay), block8(Q4, q[5], &nib[5], y, ay),
                               block8(Q4, q[6], &nib[6], y, ay), block8(Q4, q[7], &nib[7], y, ay));
            if (Q4) s = _mm256_sub_epi32(s, _mm256_set1_epi32(8 * bsum[k][b]));
            acc[k] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(dx[k][b])), _mm256_cvtepi32_ps(s), acc[k]);
        }
    }
    UNROLL4 for (int k = 0; k < NT; k++) out[k] = acc[k];
}

/* Rows r0..r1 in groups of eight, four tokens at a time. Row-major (X8 = 0):
 * the last group repeats its final row in the unused lanes. Interleaved
 * (X8 = 1, kern_repack_x8): r0 and r1 are multiples of 8 and group g starts
 * at w + g * 8 * rb, the bytes rows 8g..8g+7 occupied before repacking. */
ALWAYS_INLINE void gemm_rows8(int X8, int Q4, const uint8_t *w, size_t rb, int64_t r0, int64_t r1, const kern_act *a,
                              float *y, int64_t ldy) {
    for (int64_t r = r0; r < r1; r += 8) {
        const uint8_t *rows[8];
        int nr = r1 - r < 8 ? (int)(r1 - r) : 8;
        for (int i = 0; i < 8; i++) rows[i] = w + (size_t)(r + (i < nr ? i : nr - 1)) * rb;
        __m256 acc[4];
        float o[8];
        int t = 0;
        for (; t + 4 <= a->T; t += 4) {
            rows8(rows, X8, Q4, a, t, 4, acc);
            for (int k = 0; k < 4; k++) {
                _mm256_storeu_ps(o, acc[k]);
                memcpy(y + (size_t)(t + k) * (size_t)ldy + (size_t)r, o, sizeof(float) * (size_t)nr);
            }
        }
        for (; t < a->T; t++) {
            rows8(rows, X8, Q4, a, t, 1, acc);
            _mm256_storeu_ps(o, acc[0]);
            memcpy(y + (size_t)t * (size_t)ldy + (size_t)r, o, sizeof(float) * (size_t)nr);
        }
    }
}

DEFINE_GEMM(gemm_q8_0_rows, q8_0_row)
DEFINE_GEMM(gemm_q4_0_rows, q4_0_row)

/* Decode (fewer than four tokens) takes the row kernels, which need no
 * per-block gather of eight scales; prefill takes the eight-row kernel. The
 * two sum in different orders, so a token's logits in a prefill batch and in
 * decode agree to float rounding, not bit for bit (tests/unit/engine/test_forward.c),
 * unless the activations ask for decode's order (kern_act.decode_order). */
static void gemm_q8_0(const uint8_t *w, size_t rb, int64_t r0, int64_t r1, const kern_act *a, float *y, int64_t ldy) {
    if (a->T >= 4 && !a->decode_order) gemm_rows8(0, 0, w, rb, r0, r1, a, y, ldy);
    else gemm_q8_0_rows(w, rb, r0, r1, a, y, ldy);
}
static void gemm_q4_0(const uint8_t *w, size_t rb, int64_t r0, int64_t r1, const kern_act *a, float *y, int64_t ldy) {
    if (a->T >= 4 && !a->decode_order) gemm_rows8(0, 1, w, rb, r0, r1, a, y, ldy);
    else gemm_q4_0_rows(w, rb, r0, r1, a, y, ldy);
}

/* Interleaved weights (kern_repack_x8): the eight-row kernel at every T, so
 * decode and prefill agree bit for bit again, and decode needs no gather. */
static void gemm_q8_0_x8(const uint8_t *w, size_t rb, int64_t r0, int64_t r1, const kern_act *a, float *y, int64_t ldy) {
    gemm_rows8(1, 0, w, rb, r0, r1, a, y, ldy);
}
/*
 * q4_0 in the X8 layout, two rows per register: the eight rows' 16-byte code
 * arrays of a block are contiguous, so one 32-byte load holds rows r and r+1.
 * Their low nibbles are weights 0..15 of both rows, their high nibbles
 * weights 16..31; against the activation's first and second 16 codes
 * (broadcast to both lanes) two maddubs and one add give both rows' products
 * at once, so the unpacking and the reduction cost half as much per row as
 * in rows8. The reduction leaves rows in lane order 0 2 4 6 1 3 5 7; the
 * scales are permuted to match and the result permuted back.
 */
ALWAYS_INLINE void q4x8_rows(const uint8_t *group, const kern_act *a, int t0, int NT, __m256 out[4]) {
    int64_t nb = a->n / 32;
    __m256 acc[4];
    const int8_t *x[4];
    const float *dx[4];
    const int16_t *bsum[4];
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i to_lane_order = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    UNROLL4 for (int k = 0; k < NT; k++) {
        acc[k] = _mm256_setzero_ps();
        x[k] = a->qs + (size_t)(t0 + k) * (size_t)a->n;
        dx[k] = a->d + (size_t)(t0 + k) * (size_t)nb;
        bsum[k] = a->bsum + (size_t)(t0 + k) * (size_t)nb;
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *base = group + (size_t)b * Q4K_BYTES;
        if (NT == 1) _mm_prefetch((const char *)base + PREFETCH_AHEAD, _MM_HINT_T0),
                     _mm_prefetch((const char *)base + PREFETCH_AHEAD + 64, _MM_HINT_T0),
                     _mm_prefetch((const char *)base + PREFETCH_AHEAD + 128, _MM_HINT_T0);
        __m256 dw = _mm256_permutevar8x32_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)base)), to_lane_order);
        __m256i lo[4], hi[4];
        for (int p = 0; p < 4; p++) {
            __m256i raw = _mm256_loadu_si256((const __m256i *)(base + 16 + 32 * p));
            lo[p] = _mm256_and_si256(raw, low4);
            hi[p] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
        }
        UNROLL4 for (int k = 0; k < NT; k++) {
            __m256i y0 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(x[k] + b * 32)));
            __m256i y1 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(x[k] + b * 32 + 16)));
            __m256i m[4];
            for (int p = 0; p < 4; p++) m[p] = i8dot4x2(_mm256_setzero_si256(), lo[p], y0, hi[p], y1);
            /* m[p] = [row 2p: 4 partial sums | row 2p+1: 4 partial sums] */
            __m256i p01 = _mm256_add_epi32(_mm256_unpacklo_epi32(m[0], m[1]), _mm256_unpackhi_epi32(m[0], m[1]));
            __m256i p23 = _mm256_add_epi32(_mm256_unpacklo_epi32(m[2], m[3]), _mm256_unpackhi_epi32(m[2], m[3]));
            __m256i s = _mm256_add_epi32(_mm256_unpacklo_epi64(p01, p23), _mm256_unpackhi_epi64(p01, p23));
            s = _mm256_sub_epi32(s, _mm256_set1_epi32(8 * bsum[k][b]));
            acc[k] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(dx[k][b])), _mm256_cvtepi32_ps(s), acc[k]);
        }
    }
    const __m256i to_row_order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    UNROLL4 for (int k = 0; k < NT; k++) out[k] = _mm256_permutevar8x32_ps(acc[k], to_row_order);
}

static void gemm_q4_0_x8(const uint8_t *w, size_t rb, int64_t r0, int64_t r1, const kern_act *a, float *y, int64_t ldy) {
    for (int64_t r = r0; r < r1; r += 8) {
        const uint8_t *group = w + (size_t)r * rb;
        __m256 acc[4];
        int t = 0;
        for (; t + 4 <= a->T; t += 4) {
            q4x8_rows(group, a, t, 4, acc);
            for (int k = 0; k < 4; k++) _mm256_storeu_ps(y + (size_t)(t + k) * (size_t)ldy + (size_t)r, acc[k]);
        }
        for (; t < a->T; t++) {
            q4x8_rows(group, a, t, 1, acc);
            _mm256_storeu_ps(y + (size_t)t * (size_t)ldy + (size_t)r, acc[0]);
        }
    }
}

#endif
