/*
 * test_kquant.c - the K-quant formats Q4_K and Q6_K: hand-built blocks
 * dequantize to known values, the quantizers' error stays under the measured
 * bound, the scalar dots equal the float dot of the dequantized operands, the
 * AVX2 dots equal the scalar ones (and the AVX2 gemms the AVX2 dots, bit for
 * bit), and quant_mix_type follows llama.cpp's Q4_K_M rule.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cortex_tools.h"
#include "kernels/kernels.h"
#include "kquant.h"
#include "quant.h"
#include "testing.h"
#include "util.h"

/* ---- helpers: random numbers and Q8_256 activations ---- */

static uint64_t rng = 0x1234567887654321ull;

/* splitmix64 step. */
static uint64_t next_u64(void) { return cx_splitmix64(&rng); }

/* Uniform in [0, 1). */
static double uniform(void) { return (double)(next_u64() >> 11) * (1.0 / 9007199254740992.0); }

/* Standard normal (Box-Muller). */
static float normal(void) {
    double u1 = uniform() + 1e-300, u2 = uniform();
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* T activation rows of n values in KERN_ACT_Q8_256 layout (malloc'd). */
static kern_act act_new(int T, int64_t n) {
    assert(n % QK_K == 0);
    kern_act a = {.fmt = KERN_ACT_Q8_256, .T = T, .n = n};
    a.qs = aligned_alloc(32, (size_t)(T * n));
    a.d = malloc(sizeof(float) * (size_t)(T * n / QK_K));
    a.bsum = malloc(sizeof(int16_t) * (size_t)(T * n / 16));
    return a;
}

/* Free what act_new allocated. */
static void act_free(kern_act *a) {
    free(a->qs);
    free(a->d);
    free(a->bsum);
}

/* Recompute the code sums of row t after codes were set by hand. */
static void act_fix_bsums(kern_act *a, int t) {
    for (int64_t g = 0; g < a->n / 16; g++) {
        int s = 0;
        for (int i = 0; i < 16; i++) s += a->qs[t * a->n + 16 * g + i];
        a->bsum[t * (a->n / 16) + g] = (int16_t)s;
    }
}

/* Local copy of ggml's quantize_row_q8_K (until kern_quantize_act_scalar exists):
 * per 256 values the one of largest magnitude, with its sign, maps to -127;
 * d = 1/iscale (negative when that value is positive); codes clamped to 127. */
static void act_quantize(const float *x, kern_act *a, int t) {
    for (int64_t b = 0; b < a->n / QK_K; b++) {
        const float *xb = x + b * QK_K;
        int8_t *q = a->qs + t * a->n + b * QK_K;
        float amax = 0, max = 0;
        for (int i = 0; i < QK_K; i++)
            if (fabsf(xb[i]) > amax) {
                amax = fabsf(xb[i]);
                max = xb[i];
            }
        float *d = &a->d[t * (a->n / QK_K) + b];
        if (amax == 0) {
            *d = 0;
            memset(q, 0, QK_K);
            continue;
        }
        float iscale = -127.0f / max;
        for (int i = 0; i < QK_K; i++) {
            int v = (int)lrintf(iscale * xb[i]);
            q[i] = (int8_t)(v > 127 ? 127 : v);
        }
        *d = 1 / iscale;
    }
    act_fix_bsums(a, t);
}

/* Activation value i of row t as the kernels see it: d * code. */
static double act_value(const kern_act *a, int t, int64_t i) {
    return (double)a->d[t * (a->n / QK_K) + i / QK_K] * a->qs[t * a->n + i];
}

/* Random valid block bytes: random codes and scales, d (and dmin) fp16 of
 * magnitude in [dlo, 2*dlo) with random sign for Q6_K's d (Q4_K's are >= 0 in practice,
 * but the kernels must not care). */
static void random_blocks(int type, uint8_t *p, int64_t nb, float dlo) {
    size_t bs = type == CX_TYPE_Q4_K ? sizeof(block_q4_k) : sizeof(block_q6_k);
    for (size_t i = 0; i < (size_t)nb * bs; i++) p[i] = (uint8_t)next_u64();
    for (int64_t b = 0; b < nb; b++, p += bs) {
        uint16_t d = cx_fp32_to_fp16((float)(dlo * (1 + uniform())) * (next_u64() & 1 ? 1 : -1));
        uint16_t dm = cx_fp32_to_fp16((float)(dlo * (1 + uniform())));
        if (type == CX_TYPE_Q4_K) {
            memcpy(p, &d, 2);
            memcpy(p + 2, &dm, 2);
        } else {
            memcpy(p + 208, &d, 2);
        }
    }
}

/* Weight i of a row split into the part multiplying the codes and the constant
 * part: Q4_K (d*sc*q, -dmin*m); Q6_K (d*scale*(q-32), 0). */
static void weight_parts(int type, const uint8_t *row, int64_t i, double *wq, double *wm) {
    if (type == CX_TYPE_Q4_K) {
        const uint8_t *blk = row + (i / QK_K) * sizeof(block_q4_k);
        int j = (int)(i % QK_K) / 32, l = (int)(i % 32);
        uint8_t sc, m;
        kq_scale_min_k4(j, blk + 4, &sc, &m);
        uint8_t byte = blk[16 + 32 * (j / 2) + l];
        int q = j % 2 ? byte >> 4 : byte & 0x0F;
        *wq = (double)cx_fp16_to_fp32(cx_rd16(blk)) * sc * q;
        *wm = -(double)cx_fp16_to_fp32(cx_rd16(blk + 2)) * m;
    } else {
        float w[QK_K];
        kq_dequantize_row_q6_k(row + (i / QK_K) * sizeof(block_q6_k), w, QK_K);
        *wq = w[i % QK_K];
        *wm = 0;
    }
}

/* sum_i (|wq_i| + |wm_i|) * |x_i|: the scale against which dot tolerances are stated. */
static double dot_magnitude(int type, const uint8_t *row, const kern_act *a, int t) {
    double s = 0;
    for (int64_t i = 0; i < a->n; i++) {
        double wq, wm;
        weight_parts(type, row, i, &wq, &wm);
        s += (fabs(wq) + fabs(wm)) * fabs(act_value(a, t, i));
    }
    return s;
}

/* The scalar reference dot of a Q4_K or Q6_K row. */
static float scalar_dot(int type, const void *row, const kern_act *a, int t) {
    return type == CX_TYPE_Q4_K ? kq_dot_q4_k_scalar(row, a, t) : kq_dot_q6_k_scalar(row, a, t);
}

/* ---- hand-built blocks ---- */

/* Q4_K: d = 1, dmin = 0.5; scales/mins packed by hand (sub-blocks 4-7 use the top bits). */
static void test_q4_k_block(void) {
    static const uint8_t sc[8] = {1, 2, 3, 63, 17, 40, 63, 5}, mn[8] = {0, 1, 62, 7, 16, 33, 0, 63};
    uint8_t blk[144] = {0x00, 0x3C, 0x00, 0x38,
                        /* bytes 0-3: sc[0..3] | top bits of sc[4..7] (1, 2, 3, 0) << 6 */
                        0x41, 0x82, 0xC3, 0x3F,
                        /* bytes 4-7: mn[0..3] | top bits of mn[4..7] (1, 2, 0, 3) << 6 */
                        0x40, 0x81, 0x3E, 0xC7,
                        /* bytes 8-11: low nibbles of sc[4..7] | low nibbles of mn[4..7] << 4 */
                        0x01, 0x18, 0x0F, 0xF5};
    /* Chunk c, byte l: low nibble l % 16 (sub-block 2c), high nibble 15 - l % 16 (sub-block 2c+1). */
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) blk[16 + 32 * c + l] = (uint8_t)((l % 16) | ((15 - l % 16) << 4));
    for (int j = 0; j < 8; j++) {
        uint8_t s, m;
        kq_scale_min_k4(j, blk + 4, &s, &m);
        CHECK(s == sc[j] && m == mn[j], "sub-block %d: scale %d min %d, want %d %d", j, s, m, sc[j], mn[j]);
    }
    float out[QK_K];
    quant_dequantize_row(CX_TYPE_Q4_K, blk, out, QK_K);
    int bad = 0;
    for (int i = 0; i < QK_K; i++) {
        int j = i / 32, l = i % 32, q = j % 2 ? 15 - l % 16 : l % 16;
        float want = (float)(sc[j] * q) - 0.5f * (float)mn[j];
        if (out[i] != want && bad++ < 5) CHECK(0, "q4_k weight %d = %g, want %g", i, out[i], want);
    }
    CHECK(bad == 0, "q4_k hand-built block: %d wrong weights", bad);
}

/* Q6_K: d = 0.25, all codes 0 except a few set by hand in each quarter and half. */
static void test_q6_k_block(void) {
    static const int8_t sc[16] = {1, -1, 2, -2, 127, -128, 3, 0, 5, 6, 7, 8, -9, 10, 11, 12};
    uint8_t blk[210] = {0};
    memcpy(blk + 192, sc, 16);
    blk[208] = 0x00;
    blk[209] = 0x34; /* 0.25 */
    blk[0] = 0x21;        /* weight 0: low 1; weight 64: low 2 */
    blk[32] = 0x5A;       /* weight 32: low 10; weight 96: low 5 */
    blk[128] = 0xE4;      /* high bits: weight 0 -> 0, 32 -> 1, 64 -> 2, 96 -> 3 */
    blk[64 + 5] = 0xFF;   /* weights 133 and 197: low 15 */
    blk[128 + 32 + 5] = 0xFF; /* weights 133, 165, 197, 229: high bits 3 */
    static const struct { int i; float w; } known[] = {
        {0, 0.25f * 1 * (1 - 32)},      {32, 0.25f * 2 * (26 - 32)},  {64, 0.25f * 127 * (34 - 32)},
        {96, 0.25f * 3 * (53 - 32)},    {133, 0.25f * 5 * (63 - 32)}, {165, 0.25f * 7 * (48 - 32)},
        {197, 0.25f * -9 * (63 - 32)},  {229, 0.25f * 11 * (48 - 32)},
    };
    float out[QK_K];
    quant_dequantize_row(CX_TYPE_Q6_K, blk, out, QK_K);
    int bad = 0;
    for (int i = 0; i < QK_K; i++) {
        float want = 0.25f * (float)sc[i / 16] * -32.0f;
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
            if (known[k].i == i) want = known[k].w;
        if (out[i] != want && bad++ < 5) CHECK(0, "q6_k weight %d = %g, want %g", i, out[i], want);
    }
    CHECK(bad == 0, "q6_k hand-built block: %d wrong weights", bad);
}

/* ---- quantizers ---- */

/* Relative RMS error of quantize -> dequantize on normal(0,1) rows, against the
 * bound measured when the quantizers were written (kquant.c). */
static void test_quantize_rms(void) {
    static const int types[2] = {CX_TYPE_Q4_K, CX_TYPE_Q6_K};
    static const double bound[2] = {0.075, 0.0185}; /* measured 0.0712, 0.0173 */
    const int64_t n = 4096, rows = 64;
    float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
    uint8_t *q = malloc(quant_row_bytes(CX_TYPE_Q6_K, n));
    for (int k = 0; k < 2; k++) {
        double num = 0, den = 0;
        rng = 42;
        for (int64_t r = 0; r < rows; r++) {
            for (int64_t i = 0; i < n; i++) x[i] = normal();
            quant_quantize_row(types[k], x, q, n);
            quant_dequantize_row(types[k], q, y, n);
            for (int64_t i = 0; i < n; i++) {
                num += (double)(x[i] - y[i]) * (x[i] - y[i]);
                den += (double)x[i] * x[i];
            }
        }
        double rel = sqrt(num / den);
        printf("%s: relative RMS error on normal(0,1): %.4f\n", cx_type_name(types[k]), rel);
        CHECK(rel <= bound[k], "%s relative RMS error %.4f > %.4f", cx_type_name(types[k]), rel, bound[k]);
        /* Zeros stay exactly zero; a constant row comes back close (the min/scale catch it). */
        for (int64_t i = 0; i < n; i++) x[i] = 0;
        quant_quantize_row(types[k], x, q, n);
        quant_dequantize_row(types[k], q, y, n);
        int nz = 0;
        for (int64_t i = 0; i < n; i++) nz += y[i] != 0;
        CHECK(nz == 0, "%s: zero row has %d non-zero weights", cx_type_name(types[k]), nz);
        for (int64_t i = 0; i < n; i++) x[i] = -0.75f;
        quant_quantize_row(types[k], x, q, n);
        quant_dequantize_row(types[k], q, y, n);
        double worst = 0;
        for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs(y[i] + 0.75));
        CHECK(worst < 0.75 * 0.01, "%s: constant row off by %g", cx_type_name(types[k]), worst);
    }
    CHECK(quant_row_bytes(CX_TYPE_Q4_K, 512) == 288 && quant_row_bytes(CX_TYPE_Q6_K, 512) == 420, "row bytes");
    CHECK(quant_supported(CX_TYPE_Q4_K) && quant_supported(CX_TYPE_Q6_K) && !quant_supported(CX_FTYPE_Q4_K_M),
          "supported types");
    free(x);
    free(y);
    free(q);
}

/* ---- scalar dots ---- */

/* Scalar dot == float dot of dequantized weights and activations, over 1, 3 and 11 super-blocks. */
static void test_scalar_dot(void) {
    static const int types[2] = {CX_TYPE_Q4_K, CX_TYPE_Q6_K};
    static const int nbs[3] = {1, 3, 11};
    for (int k = 0; k < 2; k++)
        for (int s = 0; s < 3; s++) {
            int64_t n = (int64_t)nbs[s] * QK_K;
            kern_act a = act_new(2, n);
            float *x = malloc(sizeof(float) * (size_t)n), *w = malloc(sizeof(float) * (size_t)n);
            uint8_t *row = malloc(quant_row_bytes(types[k], n));
            for (int t = 0; t < 2; t++) {
                for (int64_t i = 0; i < n; i++) x[i] = normal() * (t ? 100.0f : 0.01f);
                act_quantize(x, &a, t);
            }
            for (int rep = 0; rep < 3; rep++) {
                if (rep == 0) { /* a quantized row, as in a model file */
                    for (int64_t i = 0; i < n; i++) x[i] = normal() * 0.02f;
                    quant_quantize_row(types[k], x, row, n);
                } else {
                    random_blocks(types[k], row, nbs[s], rep == 1 ? 1e-3f : 100.0f);
                }
                quant_dequantize_row(types[k], row, w, n);
                for (int t = 0; t < 2; t++) {
                    double ref = 0;
                    for (int64_t i = 0; i < n; i++) ref += (double)w[i] * act_value(&a, t, i);
                    double mag = dot_magnitude(types[k], row, &a, t);
                    float got = scalar_dot(types[k], row, &a, t);
                    CHECK(fabs(got - ref) <= 1e-5 * mag, "%s scalar dot, %d blocks, rep %d, t %d: %.9g vs %.9g (mag %g)",
                          cx_type_name(types[k]), nbs[s], rep, t, got, ref, mag);
                }
            }
            act_free(&a);
            free(x);
            free(w);
            free(row);
        }
}

/* With d = dmin = 1, activation scale 1 and small codes every partial sum is an
 * integer below 2^24: scalar (and AVX2) must equal the integer dot exactly. */
static int64_t exact_row(int type, uint8_t *row, kern_act *a, int64_t nb) {
    random_blocks(type, row, nb, 1.0f);
    size_t bs = type == CX_TYPE_Q4_K ? sizeof(block_q4_k) : sizeof(block_q6_k);
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *blk = row + b * (int64_t)bs;
        if (type == CX_TYPE_Q4_K) {
            blk[0] = 0x00, blk[1] = 0x3C, blk[2] = 0x00, blk[3] = 0x3C;
        } else {
            blk[208] = 0x00, blk[209] = 0x3C;
        }
    }
    for (int64_t i = 0; i < a->n; i++) a->qs[i] = (int8_t)((int)(next_u64() % 9) - 4);
    for (int64_t b = 0; b < nb; b++) a->d[b] = 1.0f;
    act_fix_bsums(a, 0);
    int64_t want = 0;
    for (int64_t i = 0; i < a->n; i++) {
        double wq, wm;
        weight_parts(type, row, i, &wq, &wm);
        want += (int64_t)(wq + wm) * a->qs[i];
    }
    return want;
}

#if defined(__x86_64__)
typedef float (*dot_fn)(const void *, const kern_act *, int);
typedef void (*gemm_fn)(const uint8_t *, size_t, int64_t, int64_t, const kern_act *, float *, int64_t);
/* One SIMD implementation of the K-quant kernels, by table name. */
typedef struct kq_impl { const char *name; dot_fn dot4, dot6; gemm_fn gemm4, gemm6; } kq_impl;
static const kq_impl kq_impls[2] = {
    {"avx2", kq_dot_q4_k_avx2, kq_dot_q6_k_avx2, kq_gemm_q4_k_avx2, kq_gemm_q6_k_avx2},
    {"avx512", kq_dot_q4_k_avx512, kq_dot_q6_k_avx512, kq_gemm_q4_k_avx512, kq_gemm_q6_k_avx512},
};
static const kq_impl *impl; /* the one under test */
#endif

/* Integer pipelines exact: scalar (and each SIMD version this CPU runs) equal exact_row's integer dot. */
static void test_exact_integers(void) {
    static const int types[2] = {CX_TYPE_Q4_K, CX_TYPE_Q6_K};
    for (int k = 0; k < 2; k++) {
        const int64_t nb = 3, n = nb * QK_K;
        kern_act a = act_new(1, n);
        uint8_t *row = malloc(quant_row_bytes(types[k], n));
        for (int rep = 0; rep < 20; rep++) {
            int64_t want = exact_row(types[k], row, &a, nb);
            float got = scalar_dot(types[k], row, &a, 0);
            CHECK(got == (float)want, "%s exact: scalar %.1f, want %lld", cx_type_name(types[k]), got, (long long)want);
#if defined(__x86_64__)
            for (int i = 0; i < 2; i++) {
                if (!kern_table(kq_impls[i].name)) continue;
                float v = types[k] == CX_TYPE_Q4_K ? kq_impls[i].dot4(row, &a, 0) : kq_impls[i].dot6(row, &a, 0);
                CHECK(v == (float)want, "%s exact: %s %.1f, want %lld", cx_type_name(types[k]), kq_impls[i].name, v,
                      (long long)want);
            }
#endif
        }
        act_free(&a);
        free(row);
    }
}

/* ---- SIMD versions (AVX2, AVX-512) ---- */

#if defined(__x86_64__)
static double worst_ratio; /* largest |simd - scalar| / magnitude seen */

/* SIMD dot vs scalar dot on one prepared (rows, activations) set: |diff| <= 1e-5 * magnitude. */
static void compare_simd(int type, const uint8_t *w, int rows, size_t rb, const kern_act *a, const char *what) {
    dot_fn dot = type == CX_TYPE_Q4_K ? impl->dot4 : impl->dot6;
    int bad = 0;
    for (int r = 0; r < rows; r++)
        for (int t = 0; t < a->T; t++) {
            float s = scalar_dot(type, w + r * rb, a, t), v = dot(w + r * rb, a, t);
            double mag = dot_magnitude(type, w + r * rb, a, t);
            if (mag > 0) worst_ratio = fmax(worst_ratio, fabs((double)v - s) / mag);
            if (!(fabs((double)v - s) <= 1e-5 * mag) && bad++ < 3)
                CHECK(0, "%s %s row %d token %d: %s %.9g scalar %.9g (mag %g)", cx_type_name(type), what, r, t,
                      impl->name, v, s, mag);
        }
    CHECK(bad == 0, "%s %s: %d %s dots off", cx_type_name(type), what, bad, impl->name);
}

/* Gemm over rows [r0, r1) x all tokens == dot bit for bit; other columns untouched. */
static void compare_gemm(int type, const uint8_t *w, int rows, size_t rb, const kern_act *a) {
    dot_fn dot = type == CX_TYPE_Q4_K ? impl->dot4 : impl->dot6;
    gemm_fn gemm = type == CX_TYPE_Q4_K ? impl->gemm4 : impl->gemm6;
    const int64_t ldy = rows + 3, r0 = 1, r1 = rows;
    float *y = malloc(sizeof(float) * (size_t)(ldy * a->T));
    for (int64_t i = 0; i < ldy * a->T; i++) y[i] = -12345.0f;
    gemm(w, rb, r0, r1, a, y, ldy);
    int bad = 0;
    for (int t = 0; t < a->T; t++)
        for (int64_t r = 0; r < ldy; r++) {
            float want = r >= r0 && r < r1 ? dot(w + r * rb, a, t) : -12345.0f;
            if (memcmp(&y[t * ldy + r], &want, sizeof want) && bad++ < 3)
                CHECK(0, "%s gemm row %lld token %d: %.9g, dot %.9g", cx_type_name(type), (long long)r, t,
                      y[t * ldy + r], want);
        }
    CHECK(bad == 0, "%s %s gemm == dot bit for bit (%d tokens): %d differ", impl->name, cx_type_name(type), a->T, bad);
    free(y);
}

/* impl's dots vs scalar on random, quantized, zero and extreme rows of 1, 3 and 11 super-blocks;
 * gemms vs dots bit for bit. */
static void test_simd(const kq_impl *which) {
    impl = which;
    worst_ratio = 0;
    static const int types[2] = {CX_TYPE_Q4_K, CX_TYPE_Q6_K};
    static const int nbs[3] = {1, 3, 11};
    const int rows = 6, T = 7; /* 7 tokens: one pass of 4 plus a tail of 3 */
    for (int k = 0; k < 2; k++)
        for (int s = 0; s < 3; s++) {
            int64_t n = (int64_t)nbs[s] * QK_K;
            size_t rb = quant_row_bytes(types[k], n);
            uint8_t *w = malloc(rb * rows);
            float *x = malloc(sizeof(float) * (size_t)n);
            kern_act a = act_new(T, n);
            /* Random weights and activations, a quantized row, a zero row. */
            random_blocks(types[k], w, nbs[s] * (rows - 2), 0.01f);
            for (int64_t i = 0; i < n; i++) x[i] = normal();
            quant_quantize_row(types[k], x, w + (rows - 2) * rb, n);
            memset(w + (rows - 1) * rb, 0, rb);
            for (int t = 0; t < T; t++) {
                for (int64_t i = 0; i < n; i++) x[i] = normal() * (float)(t + 1);
                if (t == 5) memset(x, 0, sizeof(float) * (size_t)n); /* a zero activation row */
                act_quantize(x, &a, t);
            }
            compare_simd(types[k], w, rows, rb, &a, "random");
            compare_gemm(types[k], w, rows, rb, &a);

            /* Extremes: d, dmin = +-65504, all scales and codes at their ends,
             * activation codes +-127 and -128 (the quantizer never makes -128). */
            for (int r = 0; r < rows; r++) {
                uint8_t *row = w + r * rb;
                uint16_t d = r % 2 ? 0xFBFF : 0x7BFF, dm = 0x7BFF;
                for (int b = 0; b < nbs[s]; b++) {
                    uint8_t *blk = row + b * (int64_t)(rb / (size_t)nbs[s]);
                    if (types[k] == CX_TYPE_Q4_K) {
                        memset(blk, r < 3 ? 0xFF : 0x00, rb / (size_t)nbs[s]);
                        if (r == 2) memset(blk + 4, 0xFF, 12), memset(blk + 16, 0x0F, 128);
                        memcpy(blk, &d, 2);
                        memcpy(blk + 2, &dm, 2);
                    } else {
                        memset(blk, r < 3 ? 0xFF : 0x00, rb / (size_t)nbs[s]);
                        memset(blk + 192, r % 3 == 0 ? 0x80 : r % 3 == 1 ? 0x7F : 0x81, 16); /* -128, 127, -127 */
                        memcpy(blk + 208, &d, 2);
                    }
                }
            }
            for (int t = 0; t < T; t++) {
                for (int64_t i = 0; i < n; i++) a.qs[t * n + i] = (int8_t)(t == 0 ? 127 : t == 1 ? -127 : t == 2 ? -128
                                                                          : (i % 2 ? 127 : -128));
                for (int64_t b = 0; b < n / QK_K; b++) a.d[t * (n / QK_K) + b] = t % 2 ? -1e3f : 1e3f;
                act_fix_bsums(&a, t);
            }
            compare_simd(types[k], w, rows, rb, &a, "extreme");
            compare_gemm(types[k], w, rows, rb, &a);
            act_free(&a);
            free(w);
            free(x);
        }
    printf("%s vs scalar: largest |difference| / magnitude %.3g (tolerance 1e-5)\n", impl->name, worst_ratio);
}
#endif

/* ---- the Q4_K_M mixture rule ---- */

/* quant_mix_type: llama.cpp's Q4_K_M rule on a 32-layer model, norms, fallbacks; type names. */
static void test_mix_type(void) {
    const int n = 32; /* n/8 = 4, 7n/8 = 28: more bits in 0-3, 28-31 and 6, 9, ..., 27 */
    int q6_v = 0;
    for (int l = 0; l < n; l++) {
        char v[64], d[64], q[64];
        snprintf(v, sizeof v, "blk.%d.attn_v.weight", l);
        snprintf(d, sizeof d, "blk.%d.ffn_down.weight", l);
        snprintf(q, sizeof q, "blk.%d.attn_q.weight", l);
        int more = l < 4 || l >= 28 || (l - 4) % 3 == 2;
        int tv = quant_mix_type(CX_FTYPE_Q4_K_M, v, l, n, 4096), td = quant_mix_type(CX_FTYPE_Q4_K_M, d, l, n, 11008);
        CHECK(tv == (more ? CX_TYPE_Q6_K : CX_TYPE_Q4_K) && td == tv, "layer %d: attn_v %s, ffn_down %s", l,
              cx_type_name(tv), cx_type_name(td));
        CHECK(quant_mix_type(CX_FTYPE_Q4_K_M, q, l, n, 4096) == CX_TYPE_Q4_K, "layer %d attn_q is q4_k", l);
        q6_v += tv == CX_TYPE_Q6_K;
    }
    CHECK(q6_v == 16, "llama-2-7b shape: %d of 32 layers get q6_k attn_v (llama.cpp: 16)", q6_v);
    CHECK(quant_mix_type(CX_FTYPE_Q4_K_M, "output.weight", -1, n, 4096) == CX_TYPE_Q6_K, "output is q6_k");
    CHECK(quant_mix_type(CX_FTYPE_Q4_K_M, "token_embd.weight", -1, n, 4096) == CX_TYPE_Q4_K, "token_embd is q4_k");
    CHECK(quant_mix_type(CX_FTYPE_Q4_K_M, "blk.0.attn_norm.weight", 0, n, 4096) == CX_TYPE_F32, "norms stay f32");
    CHECK(quant_mix_type(CX_TYPE_Q8_0, "output_norm.weight", -1, n, 4096) == CX_TYPE_F32, "norms stay f32 (q8_0)");
    /* Fallbacks: 288 columns (stories15m) are not whole 256-blocks. */
    CHECK(quant_mix_type(CX_FTYPE_Q4_K_M, "blk.0.attn_q.weight", 0, 6, 288) == CX_TYPE_Q8_0, "q4_k -> q8_0 at 288");
    CHECK(quant_mix_type(CX_FTYPE_Q4_K_M, "blk.0.ffn_down.weight", 0, 6, 768) == CX_TYPE_Q4_K, "768 fits");
    CHECK(quant_mix_type(CX_FTYPE_Q4_K_M, "blk.5.ffn_down.weight", 5, 6, 768) == CX_TYPE_Q6_K, "last layer q6_k");
    CHECK(quant_mix_type(CX_TYPE_Q6_K, "blk.0.attn_q.weight", 0, 6, 100) == CX_TYPE_F16, "q6_k -> f16 at 100");
    CHECK(quant_mix_type(CX_TYPE_Q4_0, "blk.0.attn_q.weight", 0, 6, 48) == CX_TYPE_F16, "q4_0 -> f16 at 48");
    CHECK(quant_mix_type(CX_TYPE_F16, "blk.0.attn_q.weight", 0, 6, 7) == CX_TYPE_F16, "f16 fits anything");
    CHECK(quant_mix_type(CX_TYPE_Q6_K, "blk.0.attn_q.weight", 0, 6, 512) == CX_TYPE_Q6_K, "plain q6_k");
    CHECK(quant_mix_type(99, "blk.0.attn_q.weight", 0, 6, 512) == -1, "unknown file type");
    CHECK(cx_type_from_name("Q4_K_M") == CX_FTYPE_Q4_K_M && cx_type_from_name("q4_k") == CX_TYPE_Q4_K &&
          cx_type_from_name("q6_K") == CX_TYPE_Q6_K && !strcmp(cx_type_name(CX_FTYPE_Q4_K_M), "q4_k_m"), "names");
}

TEST_MAIN({
    test_q4_k_block();
    test_q6_k_block();
    test_quantize_rms();
    test_scalar_dot();
    test_mix_type();
    test_exact_integers();
#if defined(__x86_64__)
    for (int i = 0; i < 2; i++) {
        if (kern_table(kq_impls[i].name)) test_simd(&kq_impls[i]);
        else printf("SKIP: %s checks (this CPU lacks %s)\n", kq_impls[i].name, kern_missing(kq_impls[i].name));
    }
#else
    printf("SKIP: AVX2 and AVX-512 checks (not an x86-64 CPU)\n");
#endif
})
