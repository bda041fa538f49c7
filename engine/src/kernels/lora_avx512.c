/*
 * lora_avx512.c - LoRA's up-projection (lora_kern.h) with AVX-512: 16
 * outputs in one vector for up to eight tokens, each panel block dequantized
 * once per group of eight tokens; a short last chunk is a masked load/store.
 */
#include <immintrin.h>
#include <string.h>

#include "cortex.h"
#include "lora_kern.h"

#define TOK 8 /* tokens sharing each dequantized block */

/* Outputs o..o+15 (o % 16 == 0) of block j's panel. */
static inline __m512 load16(const uint8_t *bt, int type, int rank, int64_t o, int j) {
    size_t blk = kern_lora_block_bytes(type);
    const uint8_t *p = bt + ((size_t)(o / KERN_LORA_PANEL) * (size_t)rank + (size_t)j) * blk;
    int half = (int)(o % KERN_LORA_PANEL); /* 0 or 16 */
    if (type == CX_TYPE_F32) return _mm512_loadu_ps((const float *)(const void *)p + half);
    uint16_t h;
    memcpy(&h, p, 2);
    __m128i q;
    if (type == CX_TYPE_Q4_0) { /* 16 nibbles: the low ones are outputs 0..15, the high ones 16..31 */
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(p + 2));
        if (half) b = _mm_srli_epi16(b, 4);
        q = _mm_sub_epi8(_mm_and_si128(b, _mm_set1_epi8(0x0f)), _mm_set1_epi8(8));
    } else {
        q = _mm_loadu_si128((const __m128i *)(const void *)(p + 2 + half));
    }
    return _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(h)), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)));
}

/* See lora_kern.h. */
void kern_lora_up_avx512(float *y, int64_t ldy, const float *u, int64_t ldu, int T, const uint8_t *bt, int type,
                         int rank, int64_t o0, int64_t o1) {
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
