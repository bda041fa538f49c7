/*
 * lora_avx512.c - LoRA's up-projection (lora_kern.h) with AVX-512: 16
 * outputs in one vector for up to eight tokens, each panel block dequantized
 * once per group of eight tokens; a short last chunk is a masked load/store.
 */
#include <immintrin.h>
#include <string.h>

#include "cortex.h"
#include "lora_simd.h"

#define TOK 8 /* tokens sharing each dequantized block */

/* Outputs o..o+15 (o % 16 == 0) of block j's panel. */
static inline __m512 load16(const uint8_t *bt, int type, int rank, int64_t o, int j) {
    const uint8_t *p = kern_lora_panel_block(bt, type, rank, o, j);
    int half = (int)(o % KERN_LORA_PANEL); /* 0 or 16 */
    if (type == CX_TYPE_F32) return _mm512_loadu_ps((const float *)(const void *)p + half);
    uint16_t h;
    memcpy(&h, p, 2);
    __m128i q = kern_lora_panel_codes(p, type, half);
    return _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(h)), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)));
}

/* KERN_LORA_I8 and KERN_LORA_I4 (lora_kern.h): a group of 16 outputs is one
 * vector, each lane four offset codes against a token's four u codes:
 * vpdpbusd (VNNI), or maddubs + madd (pairs fit int16: 255 x 63 x 2 <
 * 32768): the same exact integer sums. I4's nibbles are masked out first. */
static inline __attribute__((always_inline)) void up_int(int VNNI, int I4, float *y, int64_t ldy, const float *u,
                                                          int64_t ldu, int T, const uint8_t *bt, int rank, int64_t o0,
                                                          int64_t o1) {
    static _Thread_local int8_t q[TOK][4096 + 8];
    int32_t su[TOK];
    float d[TOK];
    /* I8: a chunk of 4 ranks per 64 bytes; I4: two (low and high nibbles) */
    size_t chunks = I4 ? (size_t)(rank + 7) / 8 * 2 : (size_t)(rank + 3) / 4;
    size_t gbytes = kern_lora_group_bytes(I4 ? KERN_LORA_I4 : KERN_LORA_I8, rank);
    const __m512i ones = _mm512_set1_epi16(1), low = _mm512_set1_epi8(0x0f);
    for (int t0 = 0; t0 < T; t0 += TOK) {
        int nt = T - t0 < TOK ? T - t0 : TOK;
        for (int t = 0; t < nt; t++) kern_lora_quant_u(u + (t0 + t) * ldu, rank, q[t], &su[t], &d[t]);
        for (int64_t o = o0; o < o1; o += 16) {
            const uint8_t *grp = bt + (size_t)(o / 16) * gbytes;
            __m512i acc[TOK];
            for (int t = 0; t < TOK; t++) acc[t] = _mm512_setzero_si512();
            for (size_t c = 0; c < chunks; c++) {
                __m512i b = _mm512_loadu_si512((const void *)(grp + (I4 ? c / 2 : c) * 64));
                if (I4) b = _mm512_and_si512(c % 2 ? _mm512_srli_epi16(b, 4) : b, low);
                for (int t = 0; t < nt; t++) {
                    int32_t w;
                    memcpy(&w, q[t] + c * 4, 4);
                    __m512i uu = _mm512_set1_epi32(w);
                    if (VNNI) acc[t] = _mm512_dpbusd_epi32(acc[t], b, uu);
                    else acc[t] = _mm512_add_epi32(acc[t], _mm512_madd_epi16(_mm512_maddubs_epi16(b, uu), ones));
                }
            }
            __m512 s = _mm512_loadu_ps((const void *)(grp + gbytes - 16 * sizeof(float)));
            int n = o1 - o < 16 ? (int)(o1 - o) : 16;
            __mmask16 m = (__mmask16)((1u << n) - 1);
            for (int t = 0; t < nt; t++) {
                if (d[t] == 0.0f) continue;
                __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc[t], _mm512_set1_epi32((I4 ? 8 : 128) * su[t]))),
                                         _mm512_mul_ps(s, _mm512_set1_ps(d[t])));
                float *yt = y + (t0 + t) * ldy + o;
                _mm512_mask_storeu_ps(yt, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, yt), f));
            }
        }
    }
}

/* See lora_kern.h: kern_lora_up_avx512 with vpdpbusd for KERN_LORA_I8. */
void kern_lora_up_avx512vnni(float *y, int64_t ldy, const float *u, int64_t ldu, int T, const uint8_t *bt, int type,
                             int rank, int64_t o0, int64_t o1) {
    if (type == KERN_LORA_I8) up_int(1, 0, y, ldy, u, ldu, T, bt, rank, o0, o1);
    else if (type == KERN_LORA_I4) up_int(1, 1, y, ldy, u, ldu, T, bt, rank, o0, o1);
    else kern_lora_up_avx512(y, ldy, u, ldu, T, bt, type, rank, o0, o1);
}

/* See lora_kern.h. */
void kern_lora_up_avx512(float *y, int64_t ldy, const float *u, int64_t ldu, int T, const uint8_t *bt, int type,
                         int rank, int64_t o0, int64_t o1) {
    if (type == KERN_LORA_I8 || type == KERN_LORA_I4) {
        if (type == KERN_LORA_I8) up_int(0, 0, y, ldy, u, ldu, T, bt, rank, o0, o1);
        else up_int(0, 1, y, ldy, u, ldu, T, bt, rank, o0, o1);
        return;
    }
    for (int64_t o = o0; o < o1; o += 16) {
        int n = o1 - o < 16 ? (int)(o1 - o) : 16;
        __mmask16 m = (__mmask16)((1u << n) - 1);
        for (int t0 = 0; t0 < T; t0 += TOK) {
            int nt = T - t0 < TOK ? T - t0 : TOK;
            __m512 acc[TOK];
            for (int t = 0; t < TOK; t++) acc[t] = _mm512_setzero_ps();
            for (int j = 0; j < rank; j++) {
                __m512 w = load16(bt, type, rank, o, j);
                for (int t = 0; t < nt; t++)
                    acc[t] = _mm512_fmadd_ps(_mm512_set1_ps(u[(t0 + t) * ldu + j]), w, acc[t]);
            }
            for (int t = 0; t < nt; t++) {
                float *yt = y + (t0 + t) * ldy + o;
                _mm512_mask_storeu_ps(yt, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, yt), acc[t]));
            }
        }
    }
}
