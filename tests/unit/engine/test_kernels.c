/*
 * test_kernels.c - every SIMD kernel against its scalar reference, and the
 * properties the forward pass relies on:
 *   - activation quantizers of every table give identical codes and scales;
 *   - each weight type's dot agrees with the scalar table within a float
 *     rounding bound, on random and edge inputs (odd sizes, zeros, extremes);
 *   - each table's gemm equals its own dot bit for bit (so batched prefill and
 *     one-token decode agree exactly);
 *   - the quantized-activation dot stays within the analytic bound of the
 *     float-activation reference (each code is off by at most half a step);
 *   - the elementwise operators agree (RoPE, argmax and add bit for bit);
 *     attention at head_dim 64/128/odd and odd key counts; the AVX-512
 *     tables' attention and elementwise operators give AVX2's bits.
 *   - the interleaved layouts (X8, X16) give their row-major kernels' bits,
 *     and the AVX2 X8 and both AVX-512 X16 kernels give the same bits
 *     (K-quants and mxfp4: the scalar reference's bits);
 *   - MXFP4 rows of random bytes (every code, subnormal scales) agree too,
 *     and BF16 rows of raw bit patterns (subnormals, signed zeros).
 *   - the avx512bf16 table is avx512vnni's but for BF16, whose bf16-rounded
 *     activations get the wider bound of dot_tol; avxvnni is AVX2's but for
 *     q8_0/q4_0, whose vpdpbusd kernels give AVX2's bits.
 * Tolerances are stated where they are checked. Each SIMD table (avx2,
 * avxvnni, avx512, avx512vnni, avx512bf16) is skipped, with a line naming the missing
 * feature, on CPUs that lack it.
 */
#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cortex.h"
#include "kernels/kernels.h"
#include "kquant.h"
#include "mxfp4.h"
#include "quant.h"
#include "testing.h"
#include "util.h"
#include "cortex_tools.h"

/* splitmix64: reproducible inputs. */
static uint64_t rng_state = 42;
static uint64_t rnd(void) { return cx_splitmix64(&rng_state); }
static float unif(void) { return (float)((rnd() >> 11) * 0x1.0p-53) * 2.0f - 1.0f; }

enum { FILL_RANDOM, FILL_ZERO, FILL_EXTREME, FILL_SPARSE, FILL_HALVES, N_FILLS };
static const char *fill_name[] = {"random", "zeros", "extreme", "sparse", "half-steps"};

/* Test vectors: random, all zeros, huge magnitudes, mostly-zero, and values
 * landing exactly on rounding midpoints of the 8-bit quantizer. */
static void fill(float *x, int64_t n, int kind) {
    for (int64_t i = 0; i < n; i++) {
        switch (kind) {
        case FILL_RANDOM: x[i] = unif() * 3.0f; break;
        case FILL_ZERO: x[i] = 0.0f; break;
        case FILL_EXTREME: x[i] = (rnd() & 1 ? 1.0f : -1.0f) * (rnd() & 3 ? 3.0e4f : 1.0e-3f); break;
        case FILL_SPARSE: x[i] = (rnd() % 7 == 0) ? unif() : 0.0f; break;
        default: x[i] = (i % 32 == 0) ? 127.0f : (float)((int)(rnd() % 255) - 127) + 0.5f; break;
        }
    }
}

/* The SIMD tables this CPU runs (NULL: skipped); each is checked against the scalar one. */
enum { S_AVX2, S_AVXVNNI, S_AVX512, S_AVX512VNNI, S_AVX512BF16, N_SIMD };
static const char *simd_names[N_SIMD] = {"avx2", "avxvnni", "avx512", "avx512vnni", "avx512bf16"};
static const kern_ops *simd[N_SIMD];

/* ---- activation quantization: identical across tables ---- */
static void test_quantize_act(const kern_ops *v) {
    int64_t sizes[] = {32, 256, 288, 2048, 5632};
    for (int fmt = KERN_ACT_Q8_32; fmt <= KERN_ACT_Q8_256; fmt++)
        for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
            int64_t n = sizes[si];
            if (fmt == KERN_ACT_Q8_256 && n % 256) continue;
            for (int kind = 0; kind < N_FILLS; kind++) {
                float *x = malloc(sizeof(float) * (size_t)n);
                fill(x, n, kind);
                size_t bytes = kern_act_bytes(fmt, 1, n);
                void *m1 = aligned_alloc(64, (bytes + 63) & ~(size_t)63), *m2 = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
                kern_act a1, a2;
                kern_act_init(&a1, fmt, 1, n, m1);
                kern_act_init(&a2, fmt, 1, n, m2);
                kern_scalar_ops.quantize_act(x, &a1, 0);
                v->quantize_act(x, &a2, 0);
                int64_t nb = n / (fmt == KERN_ACT_Q8_32 ? 32 : 256), ns = n / (fmt == KERN_ACT_Q8_32 ? 32 : 16);
                CHECK(!memcmp(a1.qs, a2.qs, (size_t)n), "%s fmt %d n %lld %s: codes differ", v->name, fmt, (long long)n, fill_name[kind]);
                CHECK(!memcmp(a1.d, a2.d, sizeof(float) * (size_t)nb), "%s fmt %d n %lld %s: scales differ", v->name, fmt, (long long)n, fill_name[kind]);
                CHECK(!memcmp(a1.bsum, a2.bsum, sizeof(int16_t) * (size_t)ns), "%s fmt %d n %lld %s: sums differ", v->name, fmt, (long long)n, fill_name[kind]);
                /* every code is within half a step of x/d */
                double worst = 0;
                for (int64_t i = 0; i < n; i++) {
                    int64_t b = i / (fmt == KERN_ACT_Q8_32 ? 32 : 256);
                    double err = fabs((double)a1.qs[i] * a1.d[b] - x[i]);
                    double lim = 0.5 * fabs(a1.d[b]) * 1.0001 + 1e-30;
                    if (err / lim > worst) worst = err / lim;
                }
                CHECK(worst <= 1.0, "fmt %d %s: a code is %.3f half-steps off", fmt, fill_name[kind], worst);
                free(x);
                free(m1);
                free(m2);
            }
        }
}

/* A row of n weights of `type`, quantized from random or edge values. */
/* attn_values' block pointers over keys stored contiguously, `stride`
 * floats apart: block b starts at key b * KERN_VBLOCK. */
static const float *const *vblocks(const float *V, size_t stride, int kn, const float **out) {
    assert(kn <= 8 * KERN_VBLOCK);
    for (int b = 0; b * KERN_VBLOCK < kn; b++) out[b] = V + (size_t)b * KERN_VBLOCK * stride;
    return out;
}
static const float *vb[8]; /* vblocks' pointers for the calls below (one at a time) */

static void make_row(int type, int64_t n, int kind, uint8_t *row) {
    float *w = malloc(sizeof(float) * (size_t)n);
    fill(w, n, kind == FILL_HALVES ? FILL_RANDOM : kind);
    quant_quantize_row(type, w, row, n);
    free(w);
}

/* sum |w_i * x_i| over the dequantized row and the (dequantized) activations:
 * the scale float rounding errors are measured against. */
static double abs_dot(int type, const uint8_t *row, const kern_act *a, int t) {
    int64_t n = a->n;
    float *w = malloc(sizeof(float) * (size_t)n);
    quant_dequantize_row(type, row, w, n);
    double s = 0;
    for (int64_t i = 0; i < n; i++) {
        size_t at = (size_t)t * (size_t)n + (size_t)i;
        double xi = a->fmt == KERN_ACT_F32 ? a->f[at] : 0;
        if (a->fmt == KERN_ACT_Q8_32) xi = (double)a->qs[at] * a->d[at / 32];
        if (a->fmt == KERN_ACT_Q8_256) xi = (double)a->qs[at] * a->d[at / 256];
        s += fabs((double)w[i] * xi);
    }
    free(w);
    return s;
}

/* 1 if table k rounds BF16 rows' activations to bf16 (vdpbf16ps). */
static int bf16_acts(const kern_ops *k, int type) { return type == CX_TYPE_BF16 && !strcmp(k->name, "avx512bf16"); }

/*
 * How far table k's dot of `row` with activation t may be from the scalar
 * reference's: float rounding of a sum of n terms split over 16 lanes and then
 * blocks, (n/16 + 16) * 2^-23 * sum|w*x|; for bf16-rounded activations also
 * 2^-8 |w_i x_i| per term (8 significant bits, nearest even), or all of it
 * where vdpbf16ps flushes (w_i, x_i or the product below 2^-125), and a
 * flushed subnormal partial sum (2^-126) per term.
 */
static double dot_tol(const kern_ops *k, int type, const uint8_t *row, const kern_act *a, int t) {
    double tol = ((double)a->n / 16 + 16) * 0x1.0p-23 * abs_dot(type, row, a, t) + 1e-30;
    if (!bf16_acts(k, type)) return tol;
    const float *x = a->f + (size_t)t * (size_t)a->n;
    for (int64_t i = 0; i < a->n; i++) {
        double w = fabs((double)cx_bf16_to_fp32(cx_rd16(row + 2 * i))), xi = fabs((double)x[i]), p = w * xi;
        int flushed = w < 0x1.0p-126 || xi < 0x1.0p-126 || p < 0x1.0p-125;
        tol += (flushed ? p : 0x1.0p-8 * p * (1 + 0x1.0p-8)) + 0x1.0p-126;
    }
    return tol;
}

/* ---- weight-row dots and gemms ---- */
static void test_dots(int type, const kern_ops *v) {
    int64_t sizes_q[] = {32, 64, 96, 288, 2048, 5632};
    int64_t sizes_k[] = {256, 768, 2816, 5632};
    int64_t sizes_f[] = {1, 7, 16, 17, 31, 64, 172, 288, 2048};
    int is_float = type == CX_TYPE_F32 || type == CX_TYPE_F16 || type == CX_TYPE_BF16;
    const int64_t *sizes = type == CX_TYPE_Q4_K || type == CX_TYPE_Q6_K ? sizes_k : is_float ? sizes_f : sizes_q;
    int n_sizes = type == CX_TYPE_Q4_K || type == CX_TYPE_Q6_K ? 4 : is_float ? 9 : 6;
    int fmt = kern_act_format(type);
    double worst = 0;
    for (int si = 0; si < n_sizes; si++) {
        int64_t n = sizes[si];
        enum { R = 5, T = 9 };
        size_t rb = quant_row_bytes(type, n);
        uint8_t *rows = malloc(rb * R);
        float *x = malloc(sizeof(float) * (size_t)(n * T));
        size_t bytes = kern_act_bytes(fmt, T, n);
        void *mem = aligned_alloc(64, bytes ? (bytes + 63) & ~(size_t)63 : 64);
        kern_act a;
        kern_act_init(&a, fmt, T, n, mem);
        a.f = x;
        for (int kind = 0; kind < N_FILLS; kind++) {
            for (int r = 0; r < R; r++) make_row(type, n, (kind + r) % N_FILLS, rows + rb * (size_t)r);
            for (int t = 0; t < T; t++) {
                fill(x + n * t, n, (kind + t) % N_FILLS);
                kern_act_set(&kern_scalar_ops, &a, t, x + n * t);
            }
            const kern_ops *tables[2] = {&kern_scalar_ops, v};
            float ys[2][R * T];
            for (int ti = 0; ti < 2; ti++) {
                const kern_ops *k = tables[ti];
                if (!k) continue;
                /* A gemm of fewer than four tokens (decode) must equal the dot bit for
                 * bit; a prefill gemm may sum in another order (the eight- and
                 * sixteen-row kernels of types with an interleaved layout) and must
                 * then agree within the rounding bound below. Other gemms are exact
                 * at any T. */
                float *y = ys[ti];
                if (k->gemm[type]) k->gemm[type](rows, rb, 0, R, &a, y, R);
                else kern_gemm_generic(k, type, rows, rb, 0, R, &a, y, R);
                kern_act few;
                kern_act_slice(&a, 2, 3, &few);
                float y3[3 * R];
                if (k->gemm[type]) k->gemm[type](rows, rb, 0, R, &few, y3, R);
                else kern_gemm_generic(k, type, rows, rb, 0, R, &few, y3, R);
                int same = 1, close = 1;
                for (int r = 0; r < R; r++) {
                    for (int t = 0; t < 3; t++) same &= y3[t * R + r] == k->dot[type](rows + rb * (size_t)r, &a, t + 2);
                    for (int t = 0; t < T; t++) {
                        double dv = k->dot[type](rows + rb * (size_t)r, &a, t);
                        double tol = dot_tol(k, type, rows + rb * (size_t)r, &a, t);
                        close &= fabs(y[t * R + r] - dv) <= tol;
                        if (!k->gemm_x8[type] && !k->gemm_x16[type]) same &= y[t * R + r] == dv;
                    }
                }
                CHECK(same, "%s %s n=%lld %s: gemm differs from dot", k->name, cx_type_name(type), (long long)n, fill_name[kind]);
                CHECK(close, "%s %s n=%lld %s: prefill gemm outside the rounding bound of dot", k->name, cx_type_name(type),
                      (long long)n, fill_name[kind]);
            }
            /* Tolerance: dot_tol's (float rounding; bf16 activations' rounding). */
            for (int r = 0; r < R; r++)
                    for (int t = 0; t < T; t++) {
                        double ref = ys[0][t * R + r], got = ys[1][t * R + r];
                        double tol = dot_tol(v, type, rows + rb * (size_t)r, &a, t);
                        double e = fabs(ref - got) / tol;
                        if (e > worst) worst = e;
                        if (e > 1.0)
                            CHECK(0, "%s %s n=%lld %s row %d tok %d: %.9g vs scalar %.9g (tol %.3g)", v->name, cx_type_name(type),
                                  (long long)n, fill_name[kind], r, t, got, ref, tol);
                    }
        }
        free(rows);
        free(x);
        free(mem);
    }
    CHECK(worst <= 1.0, "%s %s: worst error %.3f of tolerance", v->name, cx_type_name(type), worst);
    printf("%-5s %s vs scalar: worst error %.3f of the tolerance\n", cx_type_name(type), v->name, worst);
}

/* MXFP4 rows of random bytes (every code, both zeros) under exponents around
 * 2^0 and the two subnormal ones, against the scalar reference within the
 * rounding bound of test_dots; the decode gemm (three tokens) against the
 * dot bit for bit, and the prefill gemm (six) too, or, where the table has
 * an interleaved MXFP4 layout (its prefill runs the multi-row kernel),
 * against the scalar reference bit for bit. */
static void test_mxfp4_codes(const kern_ops *v) {
    enum { R = 6, T = 6, N = 96 * 3 };
    const size_t rb = quant_row_bytes(CX_TYPE_MXFP4, N);
    uint8_t rows[R * (N / 32) * 17];
    float x[T * N], y[T * R];
    _Alignas(64) uint8_t mem[4096];
    CHECK(kern_act_bytes(KERN_ACT_Q8_32, T, N) <= sizeof mem, "activation buffer");
    kern_act a;
    kern_act_init(&a, KERN_ACT_Q8_32, T, N, mem);
    for (size_t i = 0; i < sizeof rows; i++) rows[i] = (uint8_t)rnd();
    for (int r = 0; r < R; r++)
        for (int b = 0; b < N / 32; b++) {
            uint8_t *e = rows + rb * (size_t)r + 17 * (size_t)b;
            *e = (r == 0 && b < 2) ? (uint8_t)b : (uint8_t)(107 + rnd() % 41);
        }
    for (int t = 0; t < T; t++) {
        fill(x + N * t, N, t % 2 ? FILL_EXTREME : FILL_RANDOM);
        kern_act_set(&kern_scalar_ops, &a, t, x + N * t);
    }
    v->gemm[CX_TYPE_MXFP4](rows, rb, 0, R, &a, y, R);
    kern_act few;
    kern_act_slice(&a, 1, 3, &few);
    float y3[3 * R];
    v->gemm[CX_TYPE_MXFP4](rows, rb, 0, R, &few, y3, R);
    const int multi = v->gemm_x8[CX_TYPE_MXFP4] || v->gemm_x16[CX_TYPE_MXFP4];
    int same = 1, close = 1, decode = 1;
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) {
            float got = v->dot[CX_TYPE_MXFP4](rows + rb * (size_t)r, &a, t);
            float ref = kern_scalar_ops.dot[CX_TYPE_MXFP4](rows + rb * (size_t)r, &a, t);
            double tol = ((double)N / 16 + 16) * 0x1.0p-23 * abs_dot(CX_TYPE_MXFP4, rows + rb * (size_t)r, &a, t) + 1e-30;
            close &= fabs((double)got - ref) <= tol;
            same &= y[t * R + r] == (multi ? ref : got);
            if (t >= 1 && t < 4) decode &= y3[(t - 1) * R + r] == got;
        }
    CHECK(close, "%s mxfp4 raw codes: outside the rounding bound of the scalar dot", v->name);
    CHECK(same, "%s mxfp4 raw codes: prefill gemm differs from the %s", v->name, multi ? "scalar reference" : "dot");
    CHECK(decode, "%s mxfp4 raw codes: decode gemm differs from dot", v->name);
}

/* Q6_K rows whose every code is 32 (weight 0) under nonzero scales: the
 * dot and the gemm must be exactly 0 for any activations. A kernel that
 * rounds q.a and its 32*bsum correction separately (lane by lane) leaves
 * the rounding of terms that cancel; the scalar reference sums each block
 * in int32 first. */
static void test_q6_k_cancel(const kern_ops *v) {
    enum { R = 3, T = 5, N = 512 };
    const size_t rb = quant_row_bytes(CX_TYPE_Q6_K, N);
    uint8_t rows[R * (N / 256) * 210];
    float x[T * N], y[T * R];
    _Alignas(64) uint8_t mem[8192];
    CHECK(kern_act_bytes(KERN_ACT_Q8_256, T, N) <= sizeof mem, "activation buffer");
    kern_act a;
    kern_act_init(&a, KERN_ACT_Q8_256, T, N, mem);
    for (int r = 0; r < R; r++)
        for (int b = 0; b < N / 256; b++) {
            uint8_t *blk = rows + rb * (size_t)r + 210 * (size_t)b;
            memset(blk, 0, 128);            /* low nibbles 0 */
            memset(blk + 128, 0xAA, 64);    /* high bit pairs 2: every code 0x20 = 32 */
            for (int j = 0; j < 16; j++) blk[192 + j] = (uint8_t)(int8_t)(rnd() % 255 - 127);
            blk[208] = 0x00, blk[209] = 0x3C; /* d = 1.0 */
        }
    for (int t = 0; t < T; t++) {
        fill(x + N * t, N, t % 2 ? FILL_EXTREME : FILL_RANDOM);
        kern_act_set(&kern_scalar_ops, &a, t, x + N * t);
    }
    v->gemm[CX_TYPE_Q6_K](rows, rb, 0, R, &a, y, R);
    int zero = 1;
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) zero &= v->dot[CX_TYPE_Q6_K](rows + rb * (size_t)r, &a, t) == 0.0f && y[t * R + r] == 0.0f;
    CHECK(zero, "%s q6_k rows of zero weights (codes 32): dot or gemm not exactly 0", v->name);
}

/* BF16 rows of raw bit patterns: every mantissa, both zeros, subnormals and
 * exponents from 2^-133 to 2^+12 (products stay finite), against the scalar
 * reference within dot_tol's bound; the gemm equals the dot bit for
 * bit (the float kernels do one pair's arithmetic at any tile size). */
static void test_bf16_bits(const kern_ops *v) {
    enum { R = 7, T = 5, N = 203 };
    const size_t rb = quant_row_bytes(CX_TYPE_BF16, N);
    uint16_t rows[R * N];
    float x[T * N], y[T * R];
    for (int i = 0; i < R * N; i++) {
        uint16_t sign = (uint16_t)(rnd() & 0x8000), man = (uint16_t)(rnd() & 0x7F);
        uint16_t exp = (uint16_t)(i % 11 == 0 ? 0 : rnd() % 140); /* 0: zero or subnormal */
        rows[i] = (uint16_t)(sign | exp << 7 | man);
    }
    rows[0] = 0x8000; /* -0 */
    kern_act a;
    kern_act_init(&a, KERN_ACT_F32, T, N, NULL);
    a.f = x;
    for (int t = 0; t < T; t++) fill(x + N * t, N, t % 2 ? FILL_EXTREME : FILL_RANDOM);
    v->gemm[CX_TYPE_BF16]((const uint8_t *)rows, rb, 0, R, &a, y, R);
    int same = 1, close = 1;
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) {
            const uint16_t *row = rows + (size_t)r * N;
            float got = v->dot[CX_TYPE_BF16](row, &a, t), ref = kern_scalar_ops.dot[CX_TYPE_BF16](row, &a, t);
            double tol = dot_tol(v, CX_TYPE_BF16, (const uint8_t *)row, &a, t);
            close &= fabs((double)got - ref) <= tol;
            same &= y[t * R + r] == got;
        }
    CHECK(close, "%s bf16 raw bits: outside the rounding bound of the scalar dot", v->name);
    CHECK(same, "%s bf16 raw bits: gemm differs from dot", v->name);
}

/* Quantized activations against the float-activation reference: each
 * activation is off by at most half its block's step, so
 * |dot(w, q(x)) - dot(w, x)| <= sum_i |w_i| * d_block(i) / 2 (+ rounding). */
static void test_activation_error(int type) {
    int64_t n = type == CX_TYPE_Q4_K || type == CX_TYPE_Q6_K ? 2048 : 2048;
    int fmt = kern_act_format(type);
    size_t rb = quant_row_bytes(type, n);
    uint8_t *row = malloc(rb);
    float *x = malloc(sizeof(float) * (size_t)n), *w = malloc(sizeof(float) * (size_t)n);
    void *mem = aligned_alloc(64, (kern_act_bytes(fmt, 1, n) + 63) & ~(size_t)63);
    kern_act a;
    kern_act_init(&a, fmt, 1, n, mem);
    int ok = 1;
    for (int trial = 0; trial < 50; trial++) {
        make_row(type, n, FILL_RANDOM, row);
        fill(x, n, FILL_RANDOM);
        kern_act_set(&kern_scalar_ops, &a, 0, x);
        quant_dequantize_row(type, row, w, n);
        double bound = 0, absd = 0;
        for (int64_t i = 0; i < n; i++) {
            double d = fmt == KERN_ACT_Q8_32 ? a.d[i / 32] : a.d[i / 256];
            bound += fabs(w[i]) * fabs(d) * 0.5;
            absd += fabs((double)w[i] * x[i]);
        }
        double got = kern_scalar_ops.dot[type](row, &a, 0), ref = kern_dot_scalar(type, row, x, n);
        if (type == CX_TYPE_Q4_K || type == CX_TYPE_Q6_K) {
            ref = 0;
            for (int64_t i = 0; i < n; i++) ref += (double)w[i] * x[i];
        }
        ok &= fabs(got - ref) <= bound + 1e-5 * absd;
    }
    CHECK(ok, "%s: quantized-activation dot outside the half-step bound", cx_type_name(type));
    free(row);
    free(x);
    free(w);
    free(mem);
}

/* ---- the interleaved layouts (X8, X16): repacking and their gemms ----
 * y_layout(k) is table k's gemm over rows repacked to `layout` (8 or 16 rows
 * per group), R rows by T tokens: it must equal the same table's row-major
 * prefill gemm (T >= 4) bit for bit, and one token at a time must equal the
 * batch. Returns 0 and leaves y alone when the table has no such gemm. */
enum { RP_R = 48, RP_T = 13 };
static int check_repacked(const kern_ops *k, int type, int layout, int64_t n, const uint8_t *rows, const kern_act *a,
                          float *y) {
    kern_gemm_fn g = layout == KERN_LAYOUT_X16 ? k->gemm_x16[type] : k->gemm_x8[type];
    if (!g) return 0;
    int group = kern_layout_group(layout);
    const char *lname = layout == KERN_LAYOUT_X16 ? "X16" : "X8";
    size_t rb = quant_row_bytes(type, n);

    uint8_t *packed = malloc(rb * RP_R), *scratch = malloc(rb * 16);
    memcpy(packed, rows, rb * RP_R);
    for (int gi = 0; gi < RP_R / group; gi++) {
        uint8_t *p = packed + (size_t)gi * (size_t)group * rb;
        CHECK((layout == KERN_LAYOUT_X16 ? kern_repack_x16(type, p, rb, n, scratch) : kern_repack_x8(type, p, rb, n, scratch)) == 0,
              "repack %s", lname);
    }
    float *y1 = malloc(sizeof(float) * RP_R * RP_T);
    k->gemm[type](rows, rb, 0, RP_R, a, y1, RP_R); /* T >= 4: the row-major prefill kernel */
    g(packed, rb, 0, RP_R, a, y, RP_R);
    CHECK(!memcmp(y1, y, sizeof(float) * RP_R * RP_T), "%s %s: %s gemm differs from the row-major gemm", k->name,
          cx_type_name(type), lname);
    if (type == CX_TYPE_Q4_K || type == CX_TYPE_Q6_K || type == CX_TYPE_MXFP4) { /* the scalar reference's float arithmetic: equal bit for bit */
        int exact = 1;
        for (int t = 0; t < RP_T; t++)
            for (int r = 0; r < RP_R; r++) exact &= y[t * RP_R + r] == kern_scalar_ops.dot[type](rows + rb * (size_t)r, a, t);
        CHECK(exact, "%s %s: %s gemm differs from the scalar reference", k->name, cx_type_name(type), lname);
    }
    /* the row-major kernel on a row count that is no multiple of the group: the same values */
    k->gemm[type](rows, rb, 0, RP_R - 5, a, y1, RP_R);
    int same = 1;
    for (int t = 0; t < RP_T; t++)
        for (int r = 0; r < RP_R - 5; r++) same &= y1[t * RP_R + r] == y[t * RP_R + r];
    CHECK(same, "%s %s: row-major gemm of %d rows differs", k->name, cx_type_name(type), RP_R - 5);
    /* one token at a time (decode), from the second group on, equals the batch */
    same = 1;
    for (int t = 0; t < RP_T; t++) {
        kern_act one;
        kern_act_slice(a, t, 1, &one);
        float y3[RP_R];
        g(packed, rb, group, RP_R, &one, y3, RP_R);
        for (int r = group; r < RP_R; r++) same &= y3[r] == y[t * RP_R + r];
    }
    CHECK(same, "%s %s: %s decode differs from %s prefill", k->name, cx_type_name(type), lname, lname);
    free(packed);
    free(scratch);
    free(y1);
    return 1;
}

/* Every table's interleaved gemm of a type; AVX2's X8 and the AVX-512 X16
 * kernels sum each block the same way (q8_0/q4_0: exact int32, then
 * fma(dw*dx, isum); the K-quants and mxfp4: the scalar reference's float
 * operations), so all of them must give the same bits. MXFP4 also gets rows
 * of random bytes (every code, the subnormal scales e = 0 and 1, large e). */
static void test_repacked(int type) {
    /* f16, bf16: one packed chunk of 256 columns, then 32 + 12 (the row-major gemm's tails) */
    int64_t n = type == CX_TYPE_Q4_K || type == CX_TYPE_Q6_K ? 768 : type == CX_TYPE_F16 || type == CX_TYPE_BF16 ? 300 : 288;
    int fmt = kern_act_format(type);
    size_t rb = quant_row_bytes(type, n);
    uint8_t *rows = malloc(rb * RP_R), *scratch = malloc(rb * 16);
    for (int r = 0; r < RP_R; r++) make_row(type, n, r % N_FILLS == FILL_ZERO ? FILL_RANDOM : r % N_FILLS, rows + rb * (size_t)r);
    if (type == CX_TYPE_MXFP4)
        for (int r = 3; r < RP_R; r += 4)
            for (int64_t b = 0; b < n / 32; b++) {
                uint8_t *blk = rows + rb * (size_t)r + 17 * (size_t)b;
                for (int i = 1; i < 17; i++) blk[i] = (uint8_t)rnd();
                blk[0] = b < 2 ? (uint8_t)b : (uint8_t)(107 + rnd() % 41 + (r == 7 ? 60 : 0));
            }
    CHECK(kern_repack_x8(CX_TYPE_F32, scratch, rb, n, scratch) == -1, "f32 has no X8 layout");
    CHECK(kern_repack_x16(CX_TYPE_F32, scratch, rb, n, scratch) == -1, "f32 has no X16 layout");
    float *x = malloc(sizeof(float) * (size_t)(n * RP_T));
    void *mem = aligned_alloc(64, (kern_act_bytes(fmt, RP_T, n) + 63) & ~(size_t)63);
    kern_act a;
    kern_act_init(&a, fmt, RP_T, n, mem);
    for (int t = 0; t < RP_T; t++) {
        fill(x + n * t, n, t % 3 == 2 ? FILL_EXTREME : FILL_RANDOM);
        kern_act_set(&kern_scalar_ops, &a, t, x + n * t);
    }
    if (fmt == KERN_ACT_F32) a.f = x; /* float activations are read in place */
    float *first = malloc(sizeof(float) * RP_R * RP_T), *y = malloc(sizeof(float) * RP_R * RP_T);
    const char *first_name = NULL;
    for (int i = 0; i < N_SIMD; i++)
        for (int layout = KERN_LAYOUT_X8; layout <= KERN_LAYOUT_X16; layout++) {
            if (!simd[i] || !check_repacked(simd[i], type, layout, n, rows, &a, y)) continue;
            if (!first_name) {
                memcpy(first, y, sizeof(float) * RP_R * RP_T);
                first_name = simd[i]->name;
            } else
                CHECK(!memcmp(first, y, sizeof(float) * RP_R * RP_T), "%s: %s %s gemm differs from %s's", cx_type_name(type),
                      simd[i]->name, layout == KERN_LAYOUT_X16 ? "X16" : "X8", first_name);
        }
    free(rows);
    free(scratch);
    free(x);
    free(mem);
    free(first);
    free(y);
}

/* ---- elementwise operators ---- */
static void test_ops(const kern_ops *v) {
    const kern_ops *s = &kern_scalar_ops;
    for (int n = 1; n <= 67; n += (n < 20 ? 1 : 7)) {
        float x[80], w[80], a1[80], a2[80], b1[80], b2[80];
        fill(x, n, FILL_RANDOM);
        fill(w, n, FILL_RANDOM);
        /* rmsnorm: both sum squares in double; 2 ulp */
        s->rmsnorm(a1, x, w, n, 1e-5f);
        v->rmsnorm(a2, x, w, n, 1e-5f);
        for (int i = 0; i < n; i++) CHECK_NEAR(a1[i], a2[i], 2.5e-7 * fabs(a1[i]) + 1e-30, "rmsnorm");
        /* softmax: vector exp within 2 ulp of expf, sums in float vs double: 1e-6 relative */
        memcpy(a1, x, sizeof x);
        memcpy(a2, x, sizeof x);
        for (int i = 0; i < n; i++) a1[i] = a2[i] = x[i] * 20.0f;
        s->softmax(a1, n);
        v->softmax(a2, n);
        for (int i = 0; i < n; i++) CHECK_NEAR(a1[i], a2[i], 1e-6 * a1[i] + 1e-37, "softmax");
        /* exp_shift: same bound, and the sums */
        for (int i = 0; i < n; i++) a1[i] = a2[i] = x[i] * 30.0f;
        double s1 = s->exp_shift(a1, n, 5.0f), s2 = v->exp_shift(a2, n, 5.0f);
        for (int i = 0; i < n; i++) CHECK_NEAR(a1[i], a2[i], 1e-6 * a1[i] + 1e-37, "exp_shift");
        CHECK_NEAR(s1, s2, 1e-6 * s1, "exp_shift sum");
        /* swiglu: silu through the vector exp: 1e-6 relative */
        for (int i = 0; i < n; i++) { a1[i] = a2[i] = x[i] * 12.0f; b1[i] = w[i]; }
        s->swiglu(a1, b1, n);
        v->swiglu(a2, b1, n);
        for (int i = 0; i < n; i++) CHECK_NEAR(a1[i], a2[i], 1e-6 * fabs(a1[i]) + 1e-30, "swiglu");
        /* rope: the same three roundings, bit for bit */
        if (n % 2 == 0) {
            float cs[80];
            double inv[40];
            for (int i = 0; i < n / 2; i++) inv[i] = 1.0 / pow(10000.0, 2.0 * i / n);
            kern_rope_table(cs, n, 417, inv);
            memcpy(a1, x, sizeof x);
            memcpy(a2, x, sizeof x);
            s->rope(a1, 1, n, cs);
            v->rope(a2, 1, n, cs);
            CHECK(!memcmp(a1, a2, sizeof(float) * (size_t)n), "rope n=%d differs", n);
        }
        /* argmax (ties: lowest index), add: exact */
        memcpy(a1, x, sizeof x);
        a1[n / 2] = a1[n - 1] = 5.0f;
        CHECK(s->argmax(a1, n) == v->argmax(a1, n) && s->argmax(a1, n) == (n == 1 ? 0 : n / 2), "argmax n=%d", n);
        memcpy(b1, x, sizeof x);
        memcpy(b2, x, sizeof x);
        s->add(b1, w, n);
        v->add(b2, w, n);
        CHECK(!memcmp(b1, b2, sizeof(float) * (size_t)n), "add n=%d", n);
        /* attention: scores (kernels.h's chain) the scalar bits, within n + 1
         * ulp of sum|q*k| of the double dot; values in double: 1e-15 relative */
        {
            float K[5 * 80], V[5 * 80], sc1[5], sc2[5];
            fill(K, 5 * 80, FILL_RANDOM);
            fill(V, 5 * 80, FILL_RANDOM);
            s->attn_scores(sc1, 5, x, 80, 1, K, 80, 5, n, 0.125f);
            v->attn_scores(sc2, 5, x, 80, 1, K, 80, 5, n, 0.125f);
            CHECK(!memcmp(sc1, sc2, sizeof sc1), "attn_scores n=%d: not the scalar bits", n);
            for (int j = 0; j < 5; j++) {
                double mag = 0, dot = 0;
                for (int i = 0; i < n; i++) {
                    mag += fabs((double)x[i] * K[j * 80 + i]) * 0.125;
                    dot += (double)x[i] * K[j * 80 + i] * 0.125;
                }
                CHECK_NEAR(sc2[j], dot, (n + 1) * 0x1.0p-24 * mag + 1e-30, "attn_scores");
            }
            double d1[80], d2[80];
            for (int i = 0; i < n; i++) d1[i] = d2[i] = x[i];
            s->attn_values(d1, sc1, vblocks(V, 80, 5, vb), 80, 5, n);
            v->attn_values(d2, sc1, vblocks(V, 80, 5, vb), 80, 5, n);
            s->scale_f64(d1, 1.7, n);
            v->scale_f64(d2, 1.7, n);
            for (int i = 0; i < n; i++) CHECK_NEAR(d1[i], d2[i], 1e-15 * (fabs(d1[i]) + 1), "attn_values/scale f64");
        }
    }
}

/*
 * Attention at the forward pass's shapes: head_dim 64 and 128 and odd ones,
 * key counts around the 16-key groups (odd ones too), random, zero and
 * extreme vectors (|x| up to 3e4), keys an odd number of floats apart.
 * Scores the scalar bits (kernels.h's chain) and within the chain's error
 * bound of the double dot; each key's score the same bits wherever it sits
 * in the call (alone, or among others) and whatever other queries share the
 * call: the tiles of a query may be cut anywhere, and an item's queries
 * scored together, without changing its arithmetic. Values:
 * float x float is exact in double and every table adds the keys of a
 * dimension in order, so the scalar bits. swiglu per element the same bits
 * wherever the element sits (prefill's one call over many rows vs decode's).
 */
static void test_attention(const kern_ops *v) {
    const kern_ops *s = &kern_scalar_ops;
    uint64_t saved = rng_state; /* the draws here leave the other tests' inputs as they were */
    static const int hds[] = {1, 7, 16, 31, 64, 67, 80, 128}, kns[] = {1, 3, 15, 16, 17, 31, 64};
    enum { MAXK = 64, MAXD = 128, STRIDE = MAXD + 5 };
    float *K = malloc(sizeof(float) * MAXK * STRIDE), *V = malloc(sizeof(float) * MAXK * STRIDE);
    float q[MAXD], p[MAXK], sc1[MAXK], sc2[MAXK], one;
    double d1[MAXD], d2[MAXD];
    for (int kind = FILL_RANDOM; kind <= FILL_EXTREME; kind++)
        for (size_t hi = 0; hi < sizeof hds / sizeof *hds; hi++)
            for (size_t ki = 0; ki < sizeof kns / sizeof *kns; ki++) {
                int hd = hds[hi], kn = kns[ki];
                fill(q, hd, kind);
                fill(K, MAXK * STRIDE, kind);
                fill(V, MAXK * STRIDE, kind);
                s->attn_scores(sc1, MAXK, q, MAXD, 1, K, STRIDE, kn, hd, 0.125f);
                v->attn_scores(sc2, MAXK, q, MAXD, 1, K, STRIDE, kn, hd, 0.125f);
                int near = 1, placed = 1;
                for (int j = 0; j < kn; j++) {
                    double mag = 0, dot = 0;
                    for (int i = 0; i < hd; i++) {
                        mag += fabs((double)q[i] * K[j * STRIDE + i]) * 0.125;
                        dot += (double)q[i] * K[j * STRIDE + i] * 0.125;
                    }
                    near &= fabs(sc2[j] - dot) <= (hd + 1) * 0x1.0p-24 * mag + 1e-30;
                    v->attn_scores(&one, 1, q, MAXD, 1, K + (size_t)j * STRIDE, STRIDE, 1, hd, 0.125f);
                    placed &= one == sc2[j];
                }
                CHECK(!memcmp(sc1, sc2, sizeof(float) * (size_t)kn), "%s attn_scores hd %d kn %d %s: not the scalar bits",
                      v->name, hd, kn, fill_name[kind]);
                CHECK(near, "%s attn_scores hd %d kn %d %s: off the double dot", v->name, hd, kn, fill_name[kind]);
                CHECK(placed, "%s attn_scores hd %d kn %d %s: a key's score depends on its place", v->name, hd, kn,
                      fill_name[kind]);
                /* many queries at once (the forward pass's call: every (head,
                 * query) of an item against a block): each query's scores as
                 * it gets them alone, past the eight-query groups and the
                 * 64-query batches */
                {
                    enum { NQ = 75 };
                    static float qs[NQ * MAXD], all[NQ * MAXK], alone[MAXK];
                    fill(qs, NQ * MAXD, kind);
                    v->attn_scores(all, MAXK, qs, MAXD, NQ, K, STRIDE, kn, hd, 0.125f);
                    int same = 1;
                    for (int i = 0; i < NQ; i++) {
                        s->attn_scores(alone, MAXK, qs + (size_t)i * MAXD, MAXD, 1, K, STRIDE, kn, hd, 0.125f);
                        same &= !memcmp(alone, all + (size_t)i * MAXK, sizeof(float) * (size_t)kn);
                    }
                    CHECK(same, "%s attn_scores hd %d kn %d %s: %d queries at once differ from each alone", v->name, hd, kn,
                          fill_name[kind], NQ);
                }
                for (int j = 0; j < kn; j++) p[j] = kind == FILL_ZERO ? 0.0f : (float)((rnd() >> 11) * 0x1.0p-53);
                for (int i = 0; i < hd; i++) d1[i] = d2[i] = kind == FILL_EXTREME ? 1e9 * unif() : unif();
                s->attn_values(d1, p, vblocks(V, STRIDE, kn, vb), STRIDE, kn, hd);
                v->attn_values(d2, p, vblocks(V, STRIDE, kn, vb), STRIDE, kn, hd);
                CHECK(!memcmp(d1, d2, sizeof(double) * (size_t)hd), "%s attn_values hd %d kn %d %s: not the scalar bits",
                      v->name, hd, kn, fill_name[kind]);
            }
    for (int n = 1; n <= 70; n += 3) {
        float g[80], u[80], all[80];
        fill(g, n, FILL_RANDOM);
        fill(u, n, FILL_RANDOM);
        for (int i = 0; i < n; i++) g[i] *= 12.0f;
        memcpy(all, g, sizeof(float) * (size_t)n);
        v->swiglu(all, u, n);
        int placed = 1;
        for (int i = 0; i < n; i++) {
            float one_g = g[i];
            v->swiglu(&one_g, u + i, 1);
            placed &= one_g == all[i];
        }
        CHECK(placed, "%s swiglu n=%d: an element's result depends on its place", v->name, n);
    }
    /* int8 scores (q8 keys), 1-5 or 70 queries at once (past the AVX-512
     * VNNI kernel's batch of 64): the scalar definition's bits, and that
     * definition the exact integer dot times the scales; codes of all
     * magnitudes up to +-127 (the extremes: every product +-127^2), head
     * widths with and without SIMD tails (not a multiple of 4: the VNNI
     * kernel's fallback; past 64: its chains kept between chunks), odd key
     * counts, row strides, query counts. */
    {
        enum { K8 = 40, D8 = 272, S8 = D8 + 9, NQ = 70, LDS = K8 + 3 };
        static int8_t q8[NQ * S8], k8[K8 * S8];
        float kd[K8], qd[NQ];
        int32_t qs[NQ]; /* the queries' code sums, as the forward pass gives them */
        static float a[NQ * LDS], b[NQ * LDS];
        static const int hd8[] = {1, 8, 31, 32, 63, 64, 65, 100, 128, 136, 256, 272}, kn8[] = {1, 5, 8, 16, 17, 33, 40};
        int same = 1, exact = 1, cases = 0;
        for (int extreme = 0; extreme < 2; extreme++)
            for (size_t hi = 0; hi < sizeof hd8 / sizeof *hd8; hi++)
                for (size_t ki = 0; ki < sizeof kn8 / sizeof *kn8; ki++) {
                    int hd = hd8[hi], kn = kn8[ki], nq = (hi + ki) % 6 == 5 ? NQ : 1 + (int)((hi + ki) % 6);
                    for (int i = 0; i < NQ * S8; i++)
                        q8[i] = (int8_t)(extreme ? (rnd() & 1 ? 127 : -127) : (int)(rnd() % 255) - 127);
                    for (int i = 0; i < K8 * S8; i++)
                        k8[i] = (int8_t)(extreme ? (rnd() & 1 ? 127 : -127) : (int)(rnd() % 255) - 127);
                    for (int j = 0; j < K8; j++) kd[j] = (float)unif() * 0.01f + 1e-4f;
                    for (int i = 0; i < NQ; i++) {
                        qd[i] = (float)unif() * 0.02f + 1e-4f;
                        qs[i] = 0;
                        for (int d = 0; d < hd; d++) qs[i] += q8[i * S8 + d];
                    }
                    memset(a, 0, sizeof a);
                    memset(b, 0, sizeof b);
                    s->attn_scores_i8(a, LDS, q8, S8, qd, qs, nq, k8, S8, kd, kn, hd, 0.125f);
                    v->attn_scores_i8(b, LDS, q8, S8, qd, qs, nq, k8, S8, kd, kn, hd, 0.125f);
                    same &= !memcmp(a, b, sizeof a); /* the entries past kn and nq untouched too */
                    for (int i = 0; i < nq; i++)
                        for (int j = 0; j < kn; j++) {
                            int64_t dot = 0;
                            for (int d = 0; d < hd; d++) dot += (int64_t)q8[i * S8 + d] * k8[(size_t)j * S8 + d];
                            exact &= a[i * LDS + j] == (float)dot * (qd[i] * kd[j]) * 0.125f;
                        }
                    cases++;
                }
        CHECK(same, "%s attn_scores_i8: the scalar bits (%d cases: head widths 1-272, 1-40 keys, 1-5 and 70 queries, extreme codes)",
              v->name, cases);
        CHECK(exact, "attn_scores_i8 (scalar): the exact integer dot times the scales");
    }
    free(K);
    free(V);
    rng_state = saved;
}

/* Elements equal as floats (so +0 == -0: a sum of no terms may be either). */
static int same_floats(const float *a, const float *b, int n) {
    for (int i = 0; i < n; i++)
        if (!(a[i] == b[i])) return 0;
    return 1;
}

/*
 * The AVX-512 tables' attention and elementwise operators (ops_avx512.c)
 * against AVX2's: the same bits, at every size (head_dim 64 and 128 and odd
 * ones, key counts around the 16-key groups, vector lengths around 8 and 16),
 * on random, zero and extreme inputs. Then the two tables agree on everything
 * but the matrix products.
 */
static void test_ops_equal(const kern_ops *v, const kern_ops *a2) {
    uint64_t saved = rng_state;
    static const int hds[] = {1, 7, 8, 9, 16, 24, 31, 64, 67, 72, 80, 128}, kns[] = {1, 3, 8, 15, 16, 17, 33, 64};
    enum { MAXK = 64, MAXD = 128, STRIDE = MAXD + 3, MAXN = 300 };
    float *K = malloc(sizeof(float) * MAXK * STRIDE), *V = malloc(sizeof(float) * MAXK * STRIDE);
    float q[MAXD], sc1[MAXK], sc2[MAXK];
    double d1[MAXD], d2[MAXD];
    int ok[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    for (int kind = FILL_RANDOM; kind <= FILL_EXTREME; kind++) {
        fill(K, MAXK * STRIDE, kind);
        fill(V, MAXK * STRIDE, kind);
        for (size_t hi = 0; hi < sizeof hds / sizeof *hds; hi++)
            for (size_t ki = 0; ki < sizeof kns / sizeof *kns; ki++) {
                int hd = hds[hi], kn = kns[ki];
                fill(q, hd, kind);
                a2->attn_scores(sc1, MAXK, q, MAXD, 1, K, STRIDE, kn, hd, 0.125f);
                v->attn_scores(sc2, MAXK, q, MAXD, 1, K, STRIDE, kn, hd, 0.125f);
                ok[0] &= same_floats(sc1, sc2, kn);
                for (int j = 0; j < kn; j++) sc1[j] = sc2[j] = sc1[j] * 0.01f;
                double e1 = a2->exp_shift(sc1, kn, 0.5f), e2 = v->exp_shift(sc2, kn, 0.5f);
                ok[1] &= same_floats(sc1, sc2, kn) && e1 == e2;
                for (int i = 0; i < hd; i++) d1[i] = d2[i] = unif();
                a2->attn_values(d1, sc1, vblocks(V, STRIDE, kn, vb), STRIDE, kn, hd);
                v->attn_values(d2, sc1, vblocks(V, STRIDE, kn, vb), STRIDE, kn, hd);
                a2->scale_f64(d1, 0.7, hd);
                v->scale_f64(d2, 0.7, hd);
                ok[2] &= !memcmp(d1, d2, sizeof(double) * (size_t)hd);
            }
    }
    for (int n = 1; n <= MAXN; n += (n < 40 ? 1 : 13)) {
        float x[MAXN], w[MAXN], y1[MAXN], y2[MAXN];
        fill(x, n, FILL_RANDOM);
        fill(w, n, FILL_RANDOM);
        a2->rmsnorm(y1, x, w, n, 1e-5f);
        v->rmsnorm(y2, x, w, n, 1e-5f);
        ok[3] &= same_floats(y1, y2, n);
        for (int i = 0; i < n; i++) y1[i] = y2[i] = x[i] * 20.0f;
        a2->softmax(y1, n);
        v->softmax(y2, n);
        ok[4] &= same_floats(y1, y2, n);
        for (int i = 0; i < n; i++) y1[i] = y2[i] = x[i] * 12.0f;
        a2->swiglu(y1, w, n);
        v->swiglu(y2, w, n);
        ok[5] &= same_floats(y1, y2, n);
        memcpy(y1, x, sizeof(float) * (size_t)n);
        memcpy(y2, x, sizeof(float) * (size_t)n);
        a2->add(y1, w, n);
        v->add(y2, w, n);
        ok[6] &= same_floats(y1, y2, n);
        if (n % 2 == 0 && n <= 2 * MAXD) {
            float cs[2 * MAXD];
            double inv[MAXD];
            for (int i = 0; i < n / 2; i++) inv[i] = 1.0 / pow(10000.0, 2.0 * i / n);
            kern_rope_table(cs, n, 91, inv);
            memcpy(y1, x, sizeof(float) * (size_t)n);
            memcpy(y2, x, sizeof(float) * (size_t)n);
            a2->rope(y1, 1, n, cs);
            v->rope(y2, 1, n, cs);
            ok[7] &= same_floats(y1, y2, n);
        }
    }
    static const char *what[8] = {"attn_scores", "exp_shift", "attn_values/scale_f64", "rmsnorm", "softmax", "swiglu", "add", "rope"};
    for (int i = 0; i < 8; i++) CHECK(ok[i], "%s %s: not %s's bits", v->name, what[i], a2->name);
    free(K);
    free(V);
    rng_state = saved;
}

/* ---- dispatch ---- */
static void test_dispatch(void) {
    CHECK(kern_table("scalar") == &kern_scalar_ops, "scalar table");
    CHECK(kern_table("avx512f") == NULL && kern_table("bogus") == NULL, "unknown tables are NULL");
    cx_err err = {0};
    const char *msg = err.msg;
    const kern_ops *k = NULL, *best = &kern_scalar_ops;
    /* auto: avx512vnni, else avxvnni, else avx512, else avx2; never avx512bf16 (it rounds activations) */
    static const int order[] = {S_AVX2, S_AVX512, S_AVXVNNI, S_AVX512VNNI};
    for (int i = 0; i < 4; i++)
        if (simd[order[i]]) best = simd[order[i]];
    CHECK(kern_select(NULL, &k, &err) == 0 && k == best, "NULL: the best table: %s", msg);
    CHECK(kern_select("auto", &k, &err) == 0 && k == best, "auto: the best table: %s", msg);
    CHECK(kern_select("scalar", &k, &err) == 0 && k == &kern_scalar_ops, "scalar: %s", msg);
    CHECK(kern_missing("scalar") == NULL, "scalar runs everywhere");
    for (int i = 0; i < N_SIMD; i++) {
        int rc = kern_select(simd_names[i], &k, &err);
        CHECK(rc == (simd[i] ? 0 : CX_EINVAL) && k == simd[i], "%s iff the CPU has it", simd_names[i]);
        CHECK(!simd[i] || !strcmp(simd[i]->name, simd_names[i]), "%s table's name", simd_names[i]);
        CHECK(!!kern_missing(simd_names[i]) == !simd[i], "%s: kern_missing agrees", simd_names[i]);
        if (!simd[i])
            CHECK(rc == CX_EINVAL && strstr(msg, "does not support") && strstr(msg, kern_missing(simd_names[i])),
                  "%s unavailable: one message naming the missing feature: %s", simd_names[i], msg);
    }
    /* a table that runs needs every table below it */
    CHECK(!simd[S_AVX512BF16] || simd[S_AVX512VNNI], "avx512bf16 without avx512vnni");
    CHECK(!simd[S_AVX512VNNI] || simd[S_AVX512], "avx512vnni without avx512");
    CHECK(!simd[S_AVX512] || simd[S_AVX2], "avx512 without avx2");
    CHECK(!simd[S_AVXVNNI] || simd[S_AVX2], "avxvnni without avx2");
    CHECK(kern_select("bogus", &k, &err) == CX_EINVAL && !k && strstr(msg, "'bogus' is not one of") &&
              strstr(msg, "avx512vnni") && strstr(msg, "avx512bf16") && strstr(msg, "avxvnni"),
          "unknown: %s", msg);
    CHECK(cx_isa_resolve(NULL, &err) && !strcmp(cx_isa_resolve(NULL, &err), best->name), "cx_isa_resolve(NULL)");
    CHECK(!cx_isa_resolve("bogus", &err) && err.code == CX_EINVAL && strstr(err.msg, "bogus"), "cx_isa_resolve bad");
    CHECK(kern_layout_group(KERN_LAYOUT_ROWS) == 1 && kern_layout_group(KERN_LAYOUT_X8) == 8 &&
              kern_layout_group(KERN_LAYOUT_X16) == 16, "layout groups");
    printf("cpu: %s; best table: %s\n", kern_cpu_features(), best->name);
}

/* Table b is table `base` but for the dot and gemms of types own[0..n-1]
 * (the avx512bf16 table: avx512vnni's but for BF16; avxvnni: AVX2's but for
 * q8_0 and q4_0): every other entry the same function, those its own. */
static void test_composed(const kern_ops *b, const kern_ops *base, const int *own, int n) {
    int same = 1, mine = 1;
    for (int t = 0; t < KERN_NTYPES; t++) {
        int is_own = 0;
        for (int i = 0; i < n; i++) is_own |= own[i] == t;
        if (is_own) mine &= b->dot[t] != base->dot[t] && b->gemm[t] != base->gemm[t];
        else
            same &= b->dot[t] == base->dot[t] && b->gemm[t] == base->gemm[t] && b->gemm_x8[t] == base->gemm_x8[t] &&
                    b->gemm_x16[t] == base->gemm_x16[t];
    }
    same &= b->quantize_act == base->quantize_act && b->attn_scores == base->attn_scores &&
            b->attn_values == base->attn_values && b->exp_shift == base->exp_shift && b->scale_f64 == base->scale_f64 &&
            b->rmsnorm == base->rmsnorm && b->softmax == base->softmax && b->rope == base->rope &&
            b->swiglu == base->swiglu && b->argmax == base->argmax && b->add == base->add && b->lora_up == base->lora_up;
    CHECK(same, "%s differs from %s beyond its own kernels", b->name, base->name);
    CHECK(mine, "%s has its own kernels", b->name);
}

/* avxvnni's q8_0/q4_0 kernels against AVX2's: vpdpbusd gives maddubs+madd's
 * int32 sums, so every dot and gemm (one row, eight rows, X8) is the same
 * bits, on edge inputs too (q8_0 codes of +-127 against +-127 activations
 * reach maddubs's largest pair sums). */
static void test_avxvnni_equals_avx2(const kern_ops *v, const kern_ops *a2) {
    enum { R = 24, T = 11 };
    const int64_t n = 288;
    for (int type = CX_TYPE_Q4_0; type <= CX_TYPE_Q8_0; type += CX_TYPE_Q8_0 - CX_TYPE_Q4_0) {
        size_t rb = quant_row_bytes(type, n);
        uint8_t *rows = malloc(rb * R), *packed = malloc(rb * R), *scratch = malloc(rb * 16);
        for (int r = 0; r < R; r++) make_row(type, n, r % N_FILLS, rows + rb * (size_t)r);
        float *x = malloc(sizeof(float) * (size_t)(n * T));
        void *mem = aligned_alloc(64, (kern_act_bytes(KERN_ACT_Q8_32, T, n) + 63) & ~(size_t)63);
        kern_act a;
        kern_act_init(&a, KERN_ACT_Q8_32, T, n, mem);
        for (int t = 0; t < T; t++) {
            fill(x + n * t, n, t % N_FILLS);
            if (t == T - 1)
                for (int64_t i = 0; i < n; i++) x[n * t + i] = i % 2 ? -1.0f : 1.0f; /* codes of +-127 */
            kern_act_set(a2, &a, t, x + n * t);
        }
        memcpy(packed, rows, rb * R);
        for (int g = 0; g < R / 8; g++) kern_repack_x8(type, packed + (size_t)g * 8 * rb, rb, n, scratch);
        float y1[R * T], y2[R * T];
        int same = 1;
        for (int t = 0; t < T; t++)
            for (int r = 0; r < R; r++) same &= v->dot[type](rows + rb * (size_t)r, &a, t) == a2->dot[type](rows + rb * (size_t)r, &a, t);
        CHECK(same, "avxvnni %s dot differs from avx2's", cx_type_name(type));
        v->gemm[type](rows, rb, 0, R - 3, &a, y1, R);
        a2->gemm[type](rows, rb, 0, R - 3, &a, y2, R);
        same = 1;
        for (int t = 0; t < T; t++)
            for (int r = 0; r < R - 3; r++) same &= y1[t * R + r] == y2[t * R + r];
        CHECK(same, "avxvnni %s gemm differs from avx2's", cx_type_name(type));
        v->gemm_x8[type](packed, rb, 0, R, &a, y1, R);
        a2->gemm_x8[type](packed, rb, 0, R, &a, y2, R);
        CHECK(!memcmp(y1, y2, sizeof y1), "avxvnni %s X8 gemm differs from avx2's", cx_type_name(type));
        free(rows);
        free(packed);
        free(scratch);
        free(x);
        free(mem);
    }
}

static void run_all(void) {
    for (int i = 0; i < N_SIMD; i++) {
        simd[i] = kern_table(simd_names[i]);
        if (!simd[i]) printf("SKIP %s comparisons: this CPU lacks %s (%s)\n", simd_names[i], kern_missing(simd_names[i]),
                             kern_cpu_features());
    }
    test_dispatch();
    int types[] = {CX_TYPE_F32, CX_TYPE_F16, CX_TYPE_Q8_0, CX_TYPE_Q4_0, CX_TYPE_Q4_K, CX_TYPE_Q6_K};
    for (int i = 0; i < 6; i++)
        if (types[i] != CX_TYPE_F32 && types[i] != CX_TYPE_F16) test_activation_error(types[i]);
    static const int bf16_own[] = {CX_TYPE_BF16}, vnni_own[] = {CX_TYPE_Q8_0, CX_TYPE_Q4_0};
    if (simd[S_AVX512BF16]) test_composed(simd[S_AVX512BF16], simd[S_AVX512VNNI], bf16_own, 1);
    if (simd[S_AVXVNNI]) {
        test_composed(simd[S_AVXVNNI], simd[S_AVX2], vnni_own, 2);
        test_avxvnni_equals_avx2(simd[S_AVXVNNI], simd[S_AVX2]);
    }
    for (int v = 0; v < N_SIMD; v++) {
        if (!simd[v] || v == S_AVX512BF16) continue; /* avx512vnni's kernels but BF16's (test_composed) */
        test_quantize_act(simd[v]);
        for (int i = 0; i < 6; i++) test_dots(types[i], simd[v]);
        test_ops(simd[v]);
        test_attention(simd[v]);
        if ((v == S_AVX512 || v == S_AVX512VNNI) && simd[S_AVX2]) test_ops_equal(simd[v], simd[S_AVX2]);
    }
    /* MXFP4 last, so the inputs drawn for the types above stay what they were. */
    test_activation_error(CX_TYPE_MXFP4);
    for (int v = 0; v < N_SIMD; v++) {
        if (!simd[v] || v == S_AVX512BF16) continue;
        test_dots(CX_TYPE_MXFP4, simd[v]);
        test_mxfp4_codes(simd[v]);
    }
    /* BF16 after MXFP4, for the same reason; the avx512bf16 table within dot_tol's wider bound. */
    for (int v = 0; v < N_SIMD; v++) {
        if (!simd[v]) continue;
        test_dots(CX_TYPE_BF16, simd[v]);
        test_bf16_bits(simd[v]);
    }
    for (int v = 0; v < N_SIMD; v++) /* last: its draws leave the inputs above as they were */
        if (simd[v] && v != S_AVX512BF16) test_q6_k_cancel(simd[v]);
    test_repacked(CX_TYPE_F16);
    test_repacked(CX_TYPE_BF16);
    test_repacked(CX_TYPE_Q8_0);
    test_repacked(CX_TYPE_Q4_0);
    test_repacked(CX_TYPE_Q4_K);
    test_repacked(CX_TYPE_Q6_K);
    test_repacked(CX_TYPE_MXFP4);
}

TEST_MAIN(run_all())
