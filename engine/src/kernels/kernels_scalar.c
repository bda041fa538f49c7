/*
 * kernels_scalar.c - the scalar kernel table: the reference every SIMD kernel
 * is tested against, and the fallback on CPUs without AVX2 (CORTEX_ISA=scalar
 * forces it). Written for clarity; integer parts are exact, float parts
 * accumulate in double where the SIMD versions can afford no more than float.
 */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "../kquant.h"
#include "../mxfp4.h"
#include "../quant.h"
#include "../util.h"
#include "cortex.h"
#include "kernels.h"

/* Dot of a row stored as `type` with float x: the float-activation reference
 * (no activation quantization), used by tests to bound what quantizing the
 * activations costs. */
float kern_dot_scalar(int type, const void *row, const float *x, int64_t n) {
    const uint8_t *p = row;
    double sum = 0.0;
    switch (type) {
    case CX_TYPE_F32: {
        const float *w = row;
        for (int64_t i = 0; i < n; i++) sum += (double)w[i] * x[i];
        break;
    }
    case CX_TYPE_F16:
        for (int64_t i = 0; i < n; i++) sum += cx_fp16_to_fp32(cx_rd16(p + 2 * i)) * x[i];
        break;
    case CX_TYPE_BF16:
        for (int64_t i = 0; i < n; i++) sum += cx_bf16_to_fp32(cx_rd16(p + 2 * i)) * x[i];
        break;
    case CX_TYPE_Q8_0:
        for (int64_t b = 0; b < n / QK; b++, p += sizeof(block_q8_0)) {
            const int8_t *q = (const int8_t *)(p + 2);
            const float *xb = x + b * QK;
            float s = 0.0f;
            for (int j = 0; j < QK; j++) s += (float)q[j] * xb[j];
            sum += s * cx_fp16_to_fp32(cx_rd16(p));
        }
        break;
    case CX_TYPE_Q4_0:
        for (int64_t b = 0; b < n / QK; b++, p += sizeof(block_q4_0)) {
            const uint8_t *q = p + 2;
            const float *xb = x + b * QK;
            float s = 0.0f;
            for (int j = 0; j < QK / 2; j++)
                s += (float)((q[j] & 0x0f) - 8) * xb[j] + (float)((q[j] >> 4) - 8) * xb[j + QK / 2];
            sum += s * cx_fp16_to_fp32(cx_rd16(p));
        }
        break;
    case CX_TYPE_MXFP4:
        for (int64_t b = 0; b < n / MXFP4_QK; b++, p += sizeof(block_mxfp4)) {
            const float *xb = x + b * MXFP4_QK;
            float s = 0.0f;
            for (int j = 0; j < MXFP4_QK / 2; j++)
                s += (float)MXFP4_KV[p[1 + j] & 0x0F] * xb[j] + (float)MXFP4_KV[p[1 + j] >> 4] * xb[j + MXFP4_QK / 2];
            sum += s * mxfp4_half_scale(p[0]);
        }
        break;
    default:
        break;
    }
    return (float)sum;
}

/* ---- activation quantization ---- */

/*
 * Q8_32: per 32 values d = max|x|/127, q = round-half-even(x/d) (as ggml's
 * quantize_row_q8_0 SIMD code rounds), plus the sum of each block's codes
 * (Q4_0's -8 offset becomes -8*sum). Q8_256: ggml's quantize_row_q8_K: the
 * value of largest magnitude maps to -127 (iscale = -127/max), codes clamped
 * to 127, d = 1/iscale, code sums per 16. SIMD quantizers must reproduce these
 * codes and scales exactly: the multiply and the rounding are the same IEEE
 * operations.
 */
void kern_quantize_act_scalar(const float *x, kern_act *a, int t) {
    int64_t n = a->n;
    int8_t *q = a->qs + (size_t)t * (size_t)n;
    if (a->fmt == KERN_ACT_Q8_32) {
        float *d = a->d + (size_t)t * (size_t)(n / 32);
        int16_t *bs = a->bsum + (size_t)t * (size_t)(n / 32);
        for (int64_t b = 0; b < n / 32; b++) {
            const float *xb = x + b * 32;
            float amax = 0.0f;
            for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(xb[j]));
            float db = amax / 127.0f, id = db != 0.0f ? 127.0f / amax : 0.0f;
            int sum = 0;
            for (int j = 0; j < 32; j++) {
                int v = (int)nearbyintf(xb[j] * id);
                q[b * 32 + j] = (int8_t)v;
                sum += v;
            }
            d[b] = db;
            bs[b] = (int16_t)sum;
        }
    } else {
        assert(a->fmt == KERN_ACT_Q8_256);
        float *d = a->d + (size_t)t * (size_t)(n / 256);
        int16_t *bs = a->bsum + (size_t)t * (size_t)(n / 16);
        for (int64_t b = 0; b < n / 256; b++) {
            const float *xb = x + b * 256;
            float amax = 0.0f, max = 0.0f;
            for (int j = 0; j < 256; j++)
                if (fabsf(xb[j]) > amax) { amax = fabsf(xb[j]); max = xb[j]; }
            int8_t *qb = q + b * 256;
            if (amax == 0.0f) {
                d[b] = 0.0f;
                memset(qb, 0, 256);
                for (int g = 0; g < 16; g++) bs[b * 16 + g] = 0;
                continue;
            }
            float iscale = -127.0f / max;
            for (int j = 0; j < 256; j++) {
                int v = (int)nearbyintf(iscale * xb[j]);
                qb[j] = (int8_t)(v > 127 ? 127 : v);
            }
            for (int g = 0; g < 16; g++) {
                int sum = 0;
                for (int j = 0; j < 16; j++) sum += qb[g * 16 + j];
                bs[b * 16 + g] = (int16_t)sum;
            }
            d[b] = 1.0f / iscale;
        }
    }
}

/* ---- weight-row dot products ---- */

/* f32 weights, f32 activations; double accumulation (the F32 path is the one
 * checked against the float64 reference to 1e-4). */
static float dot_f32_row(const void *row, const kern_act *a, int t) {
    const float *w = row, *x = a->f + (size_t)t * (size_t)a->n;
    double sum = 0.0;
    for (int64_t i = 0; i < a->n; i++) sum += (double)w[i] * x[i];
    return (float)sum;
}

/* f16 and bf16 weights, f32 activations: each weight widened exactly, double accumulation. */
static float dot_f16_row(const void *row, const kern_act *a, int t) {
    const uint8_t *p = row;
    const float *x = a->f + (size_t)t * (size_t)a->n;
    double sum = 0.0;
    for (int64_t i = 0; i < a->n; i++) sum += (double)cx_fp16_to_fp32(cx_rd16(p + 2 * i)) * x[i];
    return (float)sum;
}

static float dot_bf16_row(const void *row, const kern_act *a, int t) {
    const uint8_t *p = row;
    const float *x = a->f + (size_t)t * (size_t)a->n;
    double sum = 0.0;
    for (int64_t i = 0; i < a->n; i++) sum += (double)cx_bf16_to_fp32(cx_rd16(p + 2 * i)) * x[i];
    return (float)sum;
}

/* q8_0 weights x Q8_32 activations: exact int32 per block, then both scales. */
static float dot_q8_0_row(const void *row, const kern_act *a, int t) {
    const uint8_t *p = row;
    int64_t nb = a->n / 32;
    const int8_t *x = a->qs + (size_t)t * (size_t)a->n;
    const float *dx = a->d + (size_t)t * (size_t)nb;
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++, p += sizeof(block_q8_0)) {
        const int8_t *q = (const int8_t *)(p + 2);
        int32_t isum = 0;
        for (int j = 0; j < 32; j++) isum += q[j] * x[b * 32 + j];
        sum += (float)isum * (cx_fp16_to_fp32(cx_rd16(p)) * dx[b]);
    }
    return sum;
}

/* q4_0 weights x Q8_32 activations: sum(nibble*x) - 8*sum(x) per block. */
static float dot_q4_0_row(const void *row, const kern_act *a, int t) {
    const uint8_t *p = row;
    int64_t nb = a->n / 32;
    const int8_t *x = a->qs + (size_t)t * (size_t)a->n;
    const float *dx = a->d + (size_t)t * (size_t)nb;
    const int16_t *bs = a->bsum + (size_t)t * (size_t)nb;
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++, p += sizeof(block_q4_0)) {
        const uint8_t *q = p + 2;
        int32_t isum = 0;
        for (int j = 0; j < 16; j++) isum += (q[j] & 0x0f) * x[b * 32 + j] + (q[j] >> 4) * x[b * 32 + j + 16];
        isum -= 8 * bs[b];
        sum += (float)isum * (cx_fp16_to_fp32(cx_rd16(p)) * dx[b]);
    }
    return sum;
}

/* ---- the other operators ---- */

/* See kernels.h: the definition. */
static void attn_scores(float *sc, size_t ldsc, const float *q, size_t ldq, int nq, const float *K, size_t stride, int kn,
                        int hd, float scale) {
    for (int i = 0; i < nq; i++)
        for (int j = 0; j < kn; j++) {
            const float *qi = q + (size_t)i * ldq, *k = K + (size_t)j * stride;
            float s = 0.0f;
            for (int d = 0; d < hd; d++) s = fmaf(qi[d], k[d], s);
            sc[(size_t)i * ldsc + (size_t)j] = s * scale;
        }
}

/* See kernels.h: the definition. */
static void attn_scores_i8(float *sc, size_t ldsc, const int8_t *q, size_t ldq, const float *qd, const int32_t *qsum, int nq,
                           const int8_t *K, size_t stride, const float *kd, int kn, int hd, float scale) {
    for (int i = 0; i < nq; i++)
        for (int j = 0; j < kn; j++) {
            const int8_t *qi = q + (size_t)i * ldq, *k = K + (size_t)j * stride;
            int32_t s = 0;
            for (int d = 0; d < hd; d++) s += (int32_t)qi[d] * k[d];
            sc[(size_t)i * ldsc + (size_t)j] = (float)s * (qd[i] * kd[j]) * scale;
        }
}

/* kernels.h's order, which every table keeps: per group of blocks and
 * dimension, kern_values_group_dim's float, added to acc in double, group
 * after group. */
static void attn_values(double *acc, const float *p, const float *const *V, size_t stride, int kn, int hd) {
    for (int b0 = 0; b0 * KERN_VBLOCK < kn; b0 += KERN_VGROUP)
        for (int d = 0; d < hd; d++) acc[d] += (double)kern_values_group_dim(p, V, stride, kn, b0, (size_t)d);
}

/* See kernels.h. */
float kern_e4m3_value(uint8_t b) {
    int e = (b >> 3) & 15, m = b & 7;
    float v = (b & 0x7f) == 0x7f ? NAN : e ? ldexpf(1.0f + (float)m / 8.0f, e - 7) : ldexpf((float)m, -9);
    return b & 0x80 ? -v : v;
}

/* See kernels.h. */
float kern_e5m2_value(uint8_t b) { return cx_fp16_to_fp32((uint16_t)(b << 8)); }

/* See kernels.h. */
float kern_kv_value(int elem, const uint8_t *row, int c) {
    switch (elem) {
    case KERN_KV_F32: {
        float f;
        memcpy(&f, row + 4 * (size_t)c, 4);
        return f;
    }
    case KERN_KV_F16: return cx_fp16_to_fp32(cx_rd16(row + 2 * (size_t)c));
    case KERN_KV_BF16: return cx_bf16_to_fp32(cx_rd16(row + 2 * (size_t)c));
    case KERN_KV_I8: return (float)(int8_t)row[c];
    case KERN_KV_I4: return (float)(((c % 2 ? row[c / 2] >> 4 : row[c / 2]) & 15) - 8);
    case KERN_KV_E4M3: return kern_e4m3_value(row[c]);
    default: assert(elem == KERN_KV_E5M2); return kern_e5m2_value(row[c]);
    }
}

/* kern_hadamard32's butterflies on 32 values of type T at x (the float
 * and the double transform share them). */
#define HADAMARD32_BUTTERFLIES(T, x)                                                                                   \
    for (int h = 1; h < 32; h *= 2)                                                                                    \
        for (int i = 0; i < 32; i += 2 * h)                                                                            \
            for (int j = i; j < i + h; j++) {                                                                          \
                T a_ = (x)[j], b_ = (x)[j + h];                                                                        \
                (x)[j] = a_ + b_;                                                                                      \
                (x)[j + h] = a_ - b_;                                                                                  \
            }

/* See kernels.h. */
void kern_hadamard32(float *x) {
    HADAMARD32_BUTTERFLIES(float, x)
    for (int i = 0; i < 32; i++) x[i] *= KERN_RSQRT32;
}

/* See kernels.h. */
void kern_hadamard32_add_f64(double *acc, double *r) {
    HADAMARD32_BUTTERFLIES(double, r)
    for (int i = 0; i < 32; i++) acc[i] += r[i] * 0.17677669529663687; /* 1/sqrt(32) */
}

/* See kernels.h. */
float kern_kv_scaled(const kern_kv_src *src, int elem, const uint8_t *row, int r, int c) {
    float v = kern_kv_value(elem, row, c);
    if (src->row_scale) return v * src->row_scale[r];
    if (src->col_scale) return v * src->col_scale[c];
    if (src->group_scale) return v * src->group_scale[(size_t)r * src->group_stride + (size_t)(c / 32)];
    return v;
}

/* See kernels.h: the definition, element by element. */
static void kv_unpack(const kern_kv_src *src, int n, int nc, float *out, size_t ld) {
    assert(!src->hadamard || nc % 32 == 0);
    for (int r = 0; r < n; r++) {
        const uint8_t *row = src->codes + (size_t)r * src->row_bytes;
        float *o = out + (size_t)r * ld;
        for (int c = 0; c < nc; c++) o[c] = kern_kv_scaled(src, src->elem, row, r, c);
        if (src->hadamard)
            for (int c = 0; c < nc; c += 32) kern_hadamard32(o + c);
    }
}

static double exp_shift(float *x, int n, float shift) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - shift);
        sum += x[i];
    }
    return sum;
}

static void scale_f64(double *acc, double s, int n) {
    for (int i = 0; i < n; i++) acc[i] *= s;
}

static void rmsnorm(float *out, const float *x, const float *w, int n, float eps) {
    double ss = 0.0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float scale = (float)(1.0 / sqrt(ss / n + eps));
    for (int i = 0; i < n; i++) out[i] = w[i] * (scale * x[i]);
}

static void softmax(float *x, int n) {
    float max = x[0];
    for (int i = 1; i < n; i++) max = x[i] > max ? x[i] : max;
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    float inv = (float)(1.0 / sum);
    for (int i = 0; i < n; i++) x[i] *= inv;
}

/* See kernels.h: every table's rope reads this one table, so it is no table entry. */
void kern_rope_table(float *cs, int head_dim, int pos, const double *inv_freq) {
    for (int i = 0; i < head_dim / 2; i++) {
        double angle = (double)pos * inv_freq[i];
        cs[2 * i] = (float)cos(angle);
        cs[2 * i + 1] = (float)sin(angle);
    }
}

static void rope(float *v, int n_heads, int head_dim, const float *cs) {
    for (int h = 0; h < n_heads; h++)
        for (int i = 0; i < head_dim; i += 2) {
            float *p = v + h * head_dim + i, c = cs[i], s = cs[i + 1];
            float x0 = p[0], x1 = p[1];
            p[0] = x0 * c - x1 * s;
            p[1] = x0 * s + x1 * c;
        }
}

static void swiglu(float *gate, const float *up, int n) {
    for (int i = 0; i < n; i++) {
        float g = gate[i];
        gate[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static void add(float *y, const float *x, int n) {
    for (int i = 0; i < n; i++) y[i] += x[i];
}

const kern_ops kern_scalar_ops = {
    .name = "scalar",
    .decode_tile = KERN_TILE_IN_PLACE,
    .dot = {[CX_TYPE_F32] = dot_f32_row, [CX_TYPE_F16] = dot_f16_row, [CX_TYPE_BF16] = dot_bf16_row,
            [CX_TYPE_Q8_0] = dot_q8_0_row,
            [CX_TYPE_Q4_0] = dot_q4_0_row, [CX_TYPE_Q4_K] = kq_dot_q4_k_scalar, [CX_TYPE_Q6_K] = kq_dot_q6_k_scalar,
            [CX_TYPE_MXFP4] = mxfp4_dot_scalar},
    .quantize_act = kern_quantize_act_scalar,
    .attn_scores = attn_scores,
    .attn_scores_i8 = attn_scores_i8,
    .attn_values = attn_values,
    .exp_shift = exp_shift,
    .scale_f64 = scale_f64,
    .rmsnorm = rmsnorm,
    .softmax = softmax,
    .rope = rope,
    .swiglu = swiglu,
    .argmax = argmax,
    .add = add,
    .lora_up = kern_lora_up_scalar,
    .kv_unpack = kv_unpack,
};
