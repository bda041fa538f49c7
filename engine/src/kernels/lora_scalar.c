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
size_t kern_lora_b_bytes(int type, int64_t n_out, int rank) {
    if (type == KERN_LORA_I8 || type == KERN_LORA_I4) return (size_t)((n_out + 15) / 16) * kern_lora_group_bytes(type, rank);
    size_t panels = (size_t)((n_out + KERN_LORA_PANEL - 1) / KERN_LORA_PANEL);
    return panels * (size_t)rank * kern_lora_block_bytes(type);
}

/* Where code j of lane i lies in a group of an integer layout: the byte (for
 * KERN_LORA_I4, its low nibble when chunk j / 4 is even, else its high one). */
static size_t code_at(int type, int i, int j) {
    return (size_t)(j / (type == KERN_LORA_I4 ? 8 : 4)) * 64 + (size_t)i * 4 + (size_t)(j % 4);
}

/* B as an integer layout (lora_kern.h): per row, codes of round(B / s) with
 * s = max|B[o]| / 127 (I8) or / 7 (I4), offset by 128 or 8; a row too small
 * to scale is zero. */
static void pack_int(int type, const float *b, int64_t n_out, int rank, uint8_t *dst) {
    int i4 = type == KERN_LORA_I4, zero = i4 ? 8 : 128;
    float lim = i4 ? 7.0f : 127.0f;
    size_t gbytes = kern_lora_group_bytes(type, rank), ncodes = gbytes - 16 * sizeof(float);
    for (int64_t g = 0; g * 16 < n_out; g++) {
        uint8_t *codes = dst + (size_t)g * gbytes;
        float scales[16] = {0};
        memset(codes, i4 ? 0x88 : 128, ncodes); /* the zero code for padding and rows past n_out */
        for (int i = 0; i < 16 && g * 16 + i < n_out; i++) {
            const float *row = b + (g * 16 + i) * rank;
            float m = 0.0f;
            for (int j = 0; j < rank; j++) m = fabsf(row[j]) > m ? fabsf(row[j]) : m;
            float id = m > 0 ? lim / m : 0.0f;
            if (!isfinite(id)) id = 0.0f, m = 0.0f; /* a row too small to scale: zero */
            scales[i] = m / lim;
            for (int j = 0; j < rank; j++) {
                float v = fminf(fmaxf(row[j] * id, -lim), lim); /* clamped first: id may be huge */
                int c = (int)(v + (v >= 0 ? 0.5f : -0.5f)) + zero;
                uint8_t *at = codes + code_at(type, i, j);
                if (!i4) *at = (uint8_t)c;
                else if ((j / 4) % 2) *at = (uint8_t)((*at & 0x0f) | (c << 4));
                else *at = (uint8_t)((*at & 0xf0) | c);
            }
        }
        memcpy(codes + ncodes, scales, sizeof scales);
    }
}

/* See lora_kern.h. Each panel block gathers column j of 32 rows, zero past
 * n_out, then is copied (f32) or quantized like any q8_0/q4_0 row of 32
 * values; the integer layouts are pack_int's. */
void kern_lora_pack_b(int type, const float *b, int64_t n_out, int rank, uint8_t *dst, const struct kern_ops *k) {
    if (type == KERN_LORA_I8 || type == KERN_LORA_I4) {
        pack_int(type, b, n_out, rank, dst);
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
    const uint8_t *p = kern_lora_panel_block(bt, type, rank, o, j);
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

/* An integer layout for one token: exact integer sums, then the scale (lora_kern.h). */
static void up_int(int type, float *y, const float *u, const uint8_t *bt, int rank, int64_t o0, int64_t o1) {
    int8_t q[4096 + 8];
    int32_t su;
    float d;
    assert(rank <= 4096);
    kern_lora_quant_u(u, rank, q, &su, &d);
    if (d == 0.0f) return;
    int i4 = type == KERN_LORA_I4;
    size_t gbytes = kern_lora_group_bytes(type, rank), ncodes = gbytes - 16 * sizeof(float);
    for (int64_t o = o0; o < o1; o++) {
        const uint8_t *grp = bt + (size_t)(o / 16) * gbytes;
        int i = (int)(o % 16);
        int32_t acc = 0;
        for (int j = 0; j < rank; j++) { /* the padding's u codes are 0 */
            uint8_t byte = grp[code_at(type, i, j)];
            acc += (int32_t)(!i4 ? byte : (j / 4) % 2 ? byte >> 4 : byte & 0x0f) * q[j];
        }
        float s;
        memcpy(&s, grp + ncodes + sizeof(float) * (size_t)i, sizeof s);
        y[o] += (float)(acc - (i4 ? 8 : 128) * su) * (s * d);
    }
}

/* See lora_kern.h: the definition the SIMD kernels are checked against. */
void kern_lora_up_scalar(float *y, int64_t ldy, const float *u, int64_t ldu, int T, const uint8_t *bt, int type,
                         int rank, int64_t o0, int64_t o1) {
    assert(o0 % 16 == 0 && o0 <= o1);
    if (type == KERN_LORA_I8 || type == KERN_LORA_I4) {
        for (int t = 0; t < T; t++) up_int(type, y + t * ldy, u + t * ldu, bt, rank, o0, o1);
        return;
    }
    for (int t = 0; t < T; t++)
        for (int64_t o = o0; o < o1; o++) {
            float acc = 0.0f;
            for (int j = 0; j < rank; j++) acc += u[t * ldu + j] * b_at(bt, type, rank, o, j);
            y[t * ldy + o] += acc;
        }
}
