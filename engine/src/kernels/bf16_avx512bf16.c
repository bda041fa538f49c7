/*
 * bf16_avx512bf16.c - the "avx512bf16" table's own entries: BF16 weights
 * against activations rounded to bf16, multiplied by vdpbf16ps.
 *
 * Built with the AVX-512 flags plus -mavx512bf16 (this file only, see the
 * Makefile); dispatch.c hands the table out only where CPUID says AVX-512
 * BF16 (leaf 7 subleaf 1, EAX bit 5) beside the avx512vnni table's features
 * and XCR0 has the ZMM state, and composes it from the avx512vnni table with
 * these entries in place. The table is never the default: it is chosen by
 * name (CORTEX_ISA=avx512bf16), because it rounds differently.
 *
 * vdpbf16ps multiplies bf16 pairs and adds both products into one float
 * lane, 32 multiply-adds per instruction where a float FMA does 16, and it
 * needs no widening of the weights; but both operands are bf16, so each
 * activation is rounded to 8 significant bits (vcvtne2ps2bf16: nearest
 * even; like vdpbf16ps it treats subnormal inputs as zero and flushes
 * subnormal results). Against the scalar reference (bf16 weights widened,
 * float activations, double sums) a dot then differs by up to
 *   sum_i e_i + (n/16 + 16) * 2^-23 * sum_i |w_i x_i|,
 *   e_i = 2^-8 |w_i x_i|, or |w_i x_i| where w_i, x_i or their product is
 *   below 2^-125 (flushed),
 * about 2^-8 of the sum of magnitudes where the float path stays within float
 * rounding (test_kernels.c checks this bound). llama.cpp's bf16 matmul makes
 * the same trade (it converts the activations to bf16 too). The default
 * tables keep float activations, so a bf16 model's logits stay within 1e-4 of
 * the float64 reference and its greedy text is the same on every table.
 *
 * The tiling is float_tiles_avx512.h's (four rows by three tokens, two
 * accumulators per pair, masked tail): every (row, token) pair gets the same
 * arithmetic whatever the tile, so the gemm equals the dot bit for bit. The
 * activations are converted where they are loaded, once per tile of four
 * rows: a conversion per four vdpbf16ps, and nothing to allocate.
 */
#include <immintrin.h>

#include "cortex.h"
#include "kernels.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))
/* Per-row and per-token loops must unroll fully so their arrays become registers. */
#define UNROLL8 _Pragma("GCC unroll 8")

/* 32 weights from column i as bf16 pairs (m: which lanes; the rest read as zero). */
ALWAYS_INLINE __m512bh bf16_w32(const uint8_t *row, int64_t i, __mmask32 m) {
    return (__m512bh)_mm512_maskz_loadu_epi16(m, row + 2 * i);
}

/* 32 activations from column i rounded to bf16 (lanes outside lo/hi are zero). */
ALWAYS_INLINE __m512bh bf16_x32(const float *x, int64_t i, __mmask16 lo, __mmask16 hi) {
    return _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, x + i + 16), _mm512_maskz_loadu_ps(lo, x + i));
}

/*
 * NR (1..4) rows of bf16 weights against NT (1..3) tokens: the tile kernel of
 * float_tiles_avx512.h. Two accumulators per pair (columns 64i..64i+31 and
 * 64i+32..64i+63), the tail through masked loads, the pair's sum reduced
 * last. 24 accumulators, four weights and one activation of the 32 registers.
 * `kind` is unused: one weight format.
 */
ALWAYS_INLINE void float_rows(const uint8_t *const row[4], int NR, int kind, const kern_act *a, int t0, int NT,
                              float out[4][3]) {
    (void)kind;
    const int64_t n = a->n;
    __m512 acc[4][3][2];
    const float *x[3];
    UNROLL8 for (int k = 0; k < NT; k++) x[k] = a->f + (size_t)(t0 + k) * (size_t)n;
    UNROLL8 for (int r = 0; r < NR; r++) UNROLL8 for (int k = 0; k < NT; k++) acc[r][k][0] = acc[r][k][1] = _mm512_setzero_ps();
#define BF16_STEP(i_, h, mw, lo, hi)                                                                   \
    do {                                                                                               \
        __m512bh wv[4];                                                                                \
        UNROLL8 for (int r = 0; r < NR; r++) wv[r] = bf16_w32(row[r], (i_), (mw));                     \
        UNROLL8 for (int k = 0; k < NT; k++) {                                                         \
            __m512bh xv = bf16_x32(x[k], (i_), (lo), (hi));                                            \
            UNROLL8 for (int r = 0; r < NR; r++) acc[r][k][h] = _mm512_dpbf16_ps(acc[r][k][h], wv[r], xv); \
        }                                                                                              \
    } while (0)
    const __mmask32 all32 = 0xffffffffu;
    const __mmask16 all16 = 0xffff;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        BF16_STEP(i, 0, all32, all16, all16);
        BF16_STEP(i + 32, 1, all32, all16, all16);
    }
    if (i + 32 <= n) {
        BF16_STEP(i, 0, all32, all16, all16);
        i += 32;
    }
    if (i < n) {
        int rem = (int)(n - i); /* 1..31 */
        __mmask16 lo = (__mmask16)(rem >= 16 ? 0xffff : (1u << rem) - 1);
        __mmask16 hi = (__mmask16)(rem > 16 ? (1u << (rem - 16)) - 1 : 0);
        BF16_STEP(i, 1, (__mmask32)((1u << rem) - 1), lo, hi);
    }
#undef BF16_STEP
    UNROLL8 for (int r = 0; r < NR; r++) UNROLL8 for (int k = 0; k < NT; k++)
        out[r][k] = _mm512_reduce_add_ps(_mm512_add_ps(acc[r][k][0], acc[r][k][1]));
}

#include "float_tiles_avx512.h"

/* The table's BF16 dot and gemm. */
static float dot_bf16(const void *row, const kern_act *a, int t) { return float_dot(row, 0, a, t); }
static void gemm_bf16(const uint8_t *w, size_t rb, int64_t r0, int64_t r1, const kern_act *a, float *y, int64_t ldy) {
    float_gemm(0, w, rb, r0, r1, a, y, ldy);
}

const kern_ops kern_avx512bf16_part = {
    .name = "avx512bf16",
    .dot = {[CX_TYPE_BF16] = dot_bf16},
    .gemm = {[CX_TYPE_BF16] = gemm_bf16},
};
