/*
 * lora_scalar.c - LoRA's B panels (lora_kern.h): packing, and the scalar
 * reference of the up-projection kernel that lora_avx2.c and lora_avx512.c
 * are tested against.
 */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "../quant.h"
#include "../util.h"
#include "cortex.h"
#include "kernels.h"
#include "lora_kern.h"

/* See lora_kern.h. */
size_t kern_lora_block_bytes(int type) {
    return type == CX_TYPE_F32    ? KERN_LORA_PANEL * sizeof(float)
           : type == CX_TYPE_Q8_0 ? sizeof(block_q8_0)
           : type == CX_TYPE_Q4_0 ? sizeof(block_q4_0) : 0;
}

/* See lora_kern.h. */
size_t kern_lora_b_bytes(int type, int64_t n_out, int rank) {
    if (type == KERN_LORA_I8) /* groups of 16 outputs: 64 bytes per 4 ranks, then 16 scales */
        return (size_t)((n_out + 15) / 16) * ((size_t)(rank + 3) / 4 * 64 + 16 * sizeof(float));
    if (type == KERN_LORA_I4) /* groups of 16 outputs: 64 bytes per 8 ranks, then 16 scales */
        return (size_t)((n_out + 15) / 16) * ((size_t)(rank + 7) / 8 * 64 + 16 * sizeof(float));
    size_t panels = (size_t)((n_out + KERN_LORA_PANEL - 1) / KERN_LORA_PANEL);
    return panels * (size_t)rank * kern_lora_block_bytes(type);
}

/* See lora_kern.h. Each block gathers column j of 32 rows, zero past n_out,
 * then is copied (f32) or quantized like any q8_0 row of 32 values. */
void kern_lora_pack_b(int type, const float *b, int64_t n_out, int rank, uint8_t *dst, const struct kern_ops *k) {
    if (type == KERN_LORA_I4) {
        size_t pairs = (size_t)(rank + 7) / 8;
        for (int64_t g = 0; g * 16 < n_out; g++) {
            uint8_t *codes = dst + (size_t)g * (pairs * 64 + 16 * sizeof(float));
            float scales[16] = {0};
            memset(codes, 0x88, pairs * 64); /* code 8 (value 0) in both nibbles */
            for (int i = 0; i < 16 && g * 16 + i < n_out; i++) {
                const float *row = b + (g * 16 + i) * rank;
                float m = 0.0f;
                for (int j = 0; j < rank; j++) m = fabsf(row[j]) > m ? fabsf(row[j]) : m;
                float id = m > 0 ? 7.0f / m : 0.0f;
                if (!isfinite(id)) id = 0.0f, m = 0.0f; /* a row too small to scale: zero */
                scales[i] = m / 7.0f;
                for (int j = 0; j < rank; j++) {
                    float v = fminf(fmaxf(row[j] * id, -7.0f), 7.0f); /* clamped first: id may be huge */
                    int c = (int)(v + (v >= 0 ? 0.5f : -0.5f)) + 8;
                    int chunk = j / 4, hi = chunk % 2;
                    uint8_t *at = &codes[(size_t)(chunk / 2) * 64 + (size_t)i * 4 + (size_t)(j % 4)];
                    *at = hi ? (uint8_t)((*at & 0x0f) | (c << 4)) : (uint8_t)((*at & 0xf0) | c);
                }
            }
            memcpy(codes + pairs * 64, scales, sizeof scales);
        }
        return;
    }
    if (type == KERN_LORA_I8) {
        size_t chunks = (size_t)(rank + 3) / 4;
        for (int64_t g = 0; g * 16 < n_out; g++) {
            uint8_t *codes = dst + (size_t)g * (chunks * 64 + 16 * sizeof(float));
            float scales[16] = {0};
            memset(codes, 128, chunks * 64); /* code 0 for padding and rows past n_out */
            for (int i = 0; i < 16 && g * 16 + i < n_out; i++) {
                const float *row = b + (g * 16 + i) * rank;
                float m = 0.0f;
                for (int j = 0; j < rank; j++) m = fabsf(row[j]) > m ? fabsf(row[j]) : m;
                float id = m > 0 ? 127.0f / m : 0.0f;
                if (!isfinite(id)) id = 0.0f, m = 0.0f; /* a row too small to scale: zero */
                scales[i] = m / 127.0f;
                for (int j = 0; j < rank; j++) {
                    float v = fminf(fmaxf(row[j] * id, -127.0f), 127.0f); /* clamped first: id may be huge */
                    int c = (int)(v + (v >= 0 ? 0.5f : -0.5f));
                    codes[(size_t)(j / 4) * 64 + (size_t)i * 4 + (size_t)(j % 4)] = (uint8_t)(c + 128);
                }
            }
            memcpy(codes + chunks * 64, scales, sizeof scales);
        }
        return;
    }
    size_t blk = kern_lora_block_bytes(type);
    assert(blk);
    float col[KERN_LORA_PANEL];
    _Alignas(64) uint8_t scratch[256];
    assert(kern_act_bytes(KERN_ACT_Q8_32, 1, KERN_LORA_PANEL) <= sizeof scratch);
    for (int64_t p = 0; p * KERN_LORA_PANEL < n_out; p++)
        for (int j = 0; j < rank; j++, dst += blk) {
            for (int i = 0; i < KERN_LORA_PANEL; i++) {
                int64_t o = p * KERN_LORA_PANEL + i;
                col[i] = o < n_out ? b[o * rank + j] : 0.0f;
            }
            if (type == CX_TYPE_F32) memcpy(dst, col, sizeof col);
            else if (type == CX_TYPE_Q8_0 && k) kern_q8_0_from_f32(k, col, KERN_LORA_PANEL, dst, scratch);
            else quant_quantize_row(type, col, dst, KERN_LORA_PANEL);
        }
}

/* See lora_kern.h. */
void kern_q8_0_from_f32(const struct kern_ops *k, const float *x, int64_t n, uint8_t *dst, void *scratch) {
    kern_act a;
    kern_act_init(&a, KERN_ACT_Q8_32, 1, n, scratch);
    k->quantize_act(x, &a, 0);
    for (int64_t b = 0; b < n / 32; b++) {
        block_q8_0 *o = (block_q8_0 *)(void *)(dst + (size_t)b * sizeof(block_q8_0));
        uint16_t d = cx_fp32_to_fp16(a.d[b]);
        memcpy(&o->d, &d, sizeof d);
        memcpy(o->qs, a.qs + b * 32, 32);
    }
}

/* Element (o, j) of B stored as panels. */
static float b_at(const uint8_t *bt, int type, int rank, int64_t o, int j) {
    size_t blk = kern_lora_block_bytes(type);
    const uint8_t *p = bt + ((size_t)(o / KERN_LORA_PANEL) * (size_t)rank + (size_t)j) * blk;
    int i = (int)(o % KERN_LORA_PANEL);
    if (type == CX_TYPE_F32) {
        float v;
        memcpy(&v, p + sizeof(float) * (size_t)i, sizeof v);
        return v;
    }
    if (type == CX_TYPE_Q4_0) { /* ggml's q4_0: element i < 16 in the low nibble of qs[i], i >= 16 in the high of qs[i-16] */
        uint8_t q = p[2 + i % 16];
        return cx_fp16_to_fp32(cx_rd16(p)) * (float)((i < 16 ? q & 0x0f : q >> 4) - 8);
    }
    return cx_fp16_to_fp32(cx_rd16(p)) * (float)((const int8_t *)(p + 2))[i];
}

/* KERN_LORA_I4 for one token (lora_kern.h). */
static void up_i4(float *y, const float *u, const uint8_t *bt, int rank, int64_t o0, int64_t o1) {
    int8_t q[4096 + 8];
    int32_t su;
    float d;
    assert(rank <= 4096);
    kern_lora_quant_u(u, rank, q, &su, &d);
    if (d == 0.0f) return;
    size_t pairs = (size_t)(rank + 7) / 8, gbytes = pairs * 64 + 16 * sizeof(float);
    for (int64_t o = o0; o < o1; o++) {
        const uint8_t *grp = bt + (size_t)(o / 16) * gbytes;
        int i = (int)(o % 16);
        int32_t acc = 0;
        for (size_t j = 0; j < pairs * 8; j++) {
            uint8_t byte = grp[(j / 8) * 64 + (size_t)i * 4 + j % 4];
            acc += (int32_t)((j / 4) % 2 ? byte >> 4 : byte & 0x0f) * q[j];
        }
        float s;
        memcpy(&s, grp + pairs * 64 + sizeof(float) * (size_t)i, sizeof s);
        y[o] += (float)(acc - 8 * su) * (s * d);
    }
}

/* KERN_LORA_I8 for one token: exact integer sums, then the scale (lora_kern.h). */
static void up_i8(float *y, const float *u, const uint8_t *bt, int rank, int64_t o0, int64_t o1) {
    int8_t q[4096 + 8];
    int32_t su;
    float d;
    assert(rank <= 4096);
    kern_lora_quant_u(u, rank, q, &su, &d);
    if (d == 0.0f) return;
    size_t chunks = (size_t)(rank + 3) / 4, gbytes = chunks * 64 + 16 * sizeof(float);
    for (int64_t o = o0; o < o1; o++) {
        const uint8_t *grp = bt + (size_t)(o / 16) * gbytes;
        int i = (int)(o % 16);
        int32_t acc = 0;
        for (size_t c = 0; c < chunks; c++)
            for (int k = 0; k < 4; k++) acc += (int32_t)grp[c * 64 + (size_t)i * 4 + (size_t)k] * q[c * 4 + (size_t)k];
        float s;
        memcpy(&s, grp + chunks * 64 + sizeof(float) * (size_t)i, sizeof s);
        y[o] += (float)(acc - 128 * su) * (s * d);
    }
}

/* See lora_kern.h: the definition the SIMD kernels are checked against. */
void kern_lora_up_scalar(float *y, int64_t ldy, const float *u, int64_t ldu, int T, const uint8_t *bt, int type,
                         int rank, int64_t o0, int64_t o1) {
    assert(o0 % 16 == 0 && o0 <= o1);
    if (type == KERN_LORA_I8 || type == KERN_LORA_I4) {
        for (int t = 0; t < T; t++)
            (type == KERN_LORA_I8 ? up_i8 : up_i4)(y + t * ldy, u + t * ldu, bt, rank, o0, o1);
        return;
    }
    for (int t = 0; t < T; t++)
        for (int64_t o = o0; o < o1; o++) {
            float acc = 0.0f;
            for (int j = 0; j < rank; j++) acc += u[t * ldu + j] * b_at(bt, type, rank, o, j);
            y[t * ldy + o] += acc;
        }
}
