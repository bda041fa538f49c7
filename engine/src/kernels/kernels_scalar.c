/*
 * kernels_scalar.c - scalar reference kernels (see kernels.h).
 */
#include <math.h>
#include <string.h>

#include "../quant.h"
#include "../util.h"
#include "cortex.h"
#include "kernels.h"

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
    default:
        break;
    }
    return (float)sum;
}

void kern_rmsnorm(float *out, const float *x, const float *w, int n, float eps) {
    float ss = 0.0f;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    float scale = 1.0f / sqrtf(ss / (float)n + eps);
    for (int i = 0; i < n; i++) out[i] = w[i] * (scale * x[i]);
}

void kern_softmax(float *x, int n) {
    float max = x[0];
    for (int i = 1; i < n; i++) max = x[i] > max ? x[i] : max;
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    for (int i = 0; i < n; i++) x[i] = (float)(x[i] / sum);
}

void kern_rope(float *v, int n_heads, int head_dim, int pos, const double *inv_freq) {
    for (int i = 0; i < head_dim / 2; i++) {
        double angle = (double)pos * inv_freq[i];
        float c = (float)cos(angle), s = (float)sin(angle);
        for (int h = 0; h < n_heads; h++) {
            float *p = v + h * head_dim + 2 * i;
            float a = p[0], b = p[1];
            p[0] = a * c - b * s;
            p[1] = a * s + b * c;
        }
    }
}

void kern_swiglu(float *gate, const float *up, int n) {
    for (int i = 0; i < n; i++) {
        float g = gate[i];
        gate[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

int kern_argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}
