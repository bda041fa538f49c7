/*
 * lora_avx2.c - LoRA's up-projection (lora_kern.h) with AVX2 and FMA: 16
 * outputs (two vectors) at a time for up to four tokens, each panel block
 * dequantized once per group of four tokens and used by all of them.
 */
#include <immintrin.h>
#include <string.h>

#include "cortex.h"
#include "lora_kern.h"

#define TOK 4 /* tokens sharing each dequantized block */

/* Outputs o..o+15 (o % 16 == 0) of block j's panel as two vectors. */
static inline void load16(const uint8_t *bt, int type, int rank, int64_t o, int j, __m256 *w0, __m256 *w1) {
    size_t blk = kern_lora_block_bytes(type);
    const uint8_t *p = bt + ((size_t)(o / KERN_LORA_PANEL) * (size_t)rank + (size_t)j) * blk;
    int half = (int)(o % KERN_LORA_PANEL); /* 0 or 16 */
    if (type == CX_TYPE_F32) {
        const float *f = (const float *)(const void *)p + half;
        *w0 = _mm256_loadu_ps(f);
        *w1 = _mm256_loadu_ps(f + 8);
        return;
    }
    uint16_t h;
    memcpy(&h, p, 2);
    __m256 d = _mm256_set1_ps(_cvtsh_ss(h));
    __m128i q;
    if (type == CX_TYPE_Q4_0) { /* 16 nibbles: the low ones are outputs 0..15, the high ones 16..31 */
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(p + 2));
        if (half) b = _mm_srli_epi16(b, 4);
        q = _mm_sub_epi8(_mm_and_si128(b, _mm_set1_epi8(0x0f)), _mm_set1_epi8(8));
    } else {
        q = _mm_loadu_si128((const __m128i *)(const void *)(p + 2 + half));
    }
    *w0 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)));
    *w1 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8))));
}

/* See lora_kern.h. */
void kern_lora_up_avx2(float *y, int64_t ldy, const float *u, int64_t ldu, int T, const uint8_t *bt, int type,
                       int rank, int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; o += 16) {
        int n = o1 - o < 16 ? (int)(o1 - o) : 16; /* the last chunk may be short */
        for (int t0 = 0; t0 < T; t0 += TOK) {
            int nt = T - t0 < TOK ? T - t0 : TOK;
            __m256 acc[TOK][2];
            for (int t = 0; t < TOK; t++) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
            for (int j = 0; j < rank; j++) {
                __m256 w0, w1;
                load16(bt, type, rank, o, j, &w0, &w1);
                for (int t = 0; t < nt; t++) {
                    __m256 uj = _mm256_broadcast_ss(u + (t0 + t) * ldu + j);
                    acc[t][0] = _mm256_fmadd_ps(uj, w0, acc[t][0]);
                    acc[t][1] = _mm256_fmadd_ps(uj, w1, acc[t][1]);
                }
            }
            for (int t = 0; t < nt; t++) {
                float *yt = y + (t0 + t) * ldy + o;
                if (n == 16) {
                    _mm256_storeu_ps(yt, _mm256_add_ps(_mm256_loadu_ps(yt), acc[t][0]));
                    _mm256_storeu_ps(yt + 8, _mm256_add_ps(_mm256_loadu_ps(yt + 8), acc[t][1]));
                } else {
                    float tmp[16];
                    _mm256_storeu_ps(tmp, acc[t][0]);
                    _mm256_storeu_ps(tmp + 8, acc[t][1]);
                    for (int i = 0; i < n; i++) yt[i] += tmp[i];
                }
            }
        }
    }
}
