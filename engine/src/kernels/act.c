/*
 * act.c - activation buffers: the form a matrix product's input takes for
 * the weight type it meets (kernels.h: kern_act), and the product that
 * consumes them row by row when a table has no gemm of its own.
 *
 * kern_act_format maps a weight type to its activation format, kern_act_bytes
 * and kern_act_init lay the codes, scales and code sums out in caller memory
 * (64-byte aligned arrays, so nothing here allocates), kern_act_slice views
 * a range of rows, kern_act_set fills a row through the table's quantizer.
 * kern_gemm_generic is the gemm a table's NULL entry stands for: its dot
 * for every (row, token).
 */
#include <assert.h>
#include <string.h>

#include "cortex.h"
#include "kernels.h"

int kern_act_format(int type) {
    switch (type) {
    case CX_TYPE_F32:
    case CX_TYPE_F16:
    case CX_TYPE_BF16: return KERN_ACT_F32;
    case CX_TYPE_Q8_0:
    case CX_TYPE_Q4_0:
    case CX_TYPE_MXFP4: return KERN_ACT_Q8_32;
    case CX_TYPE_Q4_K:
    case CX_TYPE_Q6_K: return KERN_ACT_Q8_256;
    default: return -1;
    }
}

/* Round up to 64 bytes so every array of the layout starts aligned. */
static size_t up64(size_t x) { return (x + 63) & ~(size_t)63; }

size_t kern_act_bytes(int fmt, int T, int64_t n) {
    if (fmt == KERN_ACT_F32) return 0;
    size_t rows = (size_t)T;
    size_t blocks = fmt == KERN_ACT_Q8_32 ? (size_t)n / 32 : (size_t)n / 256;
    size_t sums = fmt == KERN_ACT_Q8_32 ? (size_t)n / 32 : (size_t)n / 16;
    return up64(rows * (size_t)n) + up64(rows * blocks * sizeof(float)) + up64(rows * sums * sizeof(int16_t));
}

void kern_act_init(kern_act *a, int fmt, int T, int64_t n, void *mem) {
    memset(a, 0, sizeof *a);
    a->fmt = fmt;
    a->T = T;
    a->n = n;
    if (fmt == KERN_ACT_F32) return;
    size_t rows = (size_t)T;
    size_t blocks = fmt == KERN_ACT_Q8_32 ? (size_t)n / 32 : (size_t)n / 256;
    uint8_t *p = mem;
    a->qs = (int8_t *)p;
    p += up64(rows * (size_t)n);
    a->d = (float *)p;
    p += up64(rows * blocks * sizeof(float));
    a->bsum = (int16_t *)p;
}

void kern_act_slice(const kern_act *a, int t0, int T, kern_act *out) {
    assert(t0 >= 0 && T >= 0 && t0 + T <= a->T);
    *out = *a;
    out->T = T;
    size_t n = (size_t)a->n, row0 = (size_t)t0;
    if (a->f) out->f = a->f + row0 * n;
    if (a->fmt == KERN_ACT_F32) return;
    out->qs = a->qs + row0 * n;
    out->d = a->d + row0 * (a->fmt == KERN_ACT_Q8_32 ? n / 32 : n / 256);
    out->bsum = a->bsum + row0 * (a->fmt == KERN_ACT_Q8_32 ? n / 32 : n / 16);
}

void kern_act_set(const kern_ops *k, kern_act *a, int t, const float *x) {
    if (a->fmt == KERN_ACT_F32) return; /* F32 activations are read in place via a->f */
    k->quantize_act(x, a, t);
}

void kern_gemm_generic(const kern_ops *k, int type, const uint8_t *w, size_t row_bytes, int64_t r0, int64_t r1,
                       const kern_act *a, float *y, int64_t ldy) {
    kern_dot_fn dot = k->dot[type];
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w + (size_t)r * row_bytes;
        for (int t = 0; t < a->T; t++) y[(size_t)t * (size_t)ldy + (size_t)r] = dot(row, a, t);
    }
}
