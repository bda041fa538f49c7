/*
 * lora_avx2.c - LoRA's up-projection (lora_kern.h) with AVX2 and FMA: 16
 * outputs (two vectors) at a time for up to four tokens, each panel block
 * dequantized once per group of four tokens and used by all of them.
 */
#include <immintrin.h>
#include <string.h>

#include "cortex.h"
#include "lora_simd.h"

#define TOK 4 /* tokens sharing each dequantized block */

/* Outputs o..o+15 (o % 16 == 0) of block j's panel as two vectors. */
static inline void load16(const uint8_t *bt, int type, int rank, int64_t o, int j, __m256 *w0, __m256 *w1) {
    const uint8_t *p = kern_lora_panel_block(bt, type, rank, o, j);
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
    __m128i q = kern_lora_panel_codes(p, type, half);
    *w0 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)));
    *w1 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8))));
}

/* KERN_LORA_I8 and KERN_LORA_I4 (lora_kern.h): per group of 16 outputs, two
 * vectors of 8 lanes, each lane four offset codes against a token's four u
 * codes: maddubs (pairs fit int16: 255 x 63 x 2 < 32768) then madd into
 * int32. I4's nibbles are masked out first. */
static void up_int(int I4, float *y, int64_t ldy, const float *u, int64_t ldu, int T, const uint8_t *bt, int rank,
                   int64_t o0, int64_t o1) {
    static _Thread_local int8_t q[TOK][4096 + 8];
    int32_t su[TOK];
    float d[TOK];
    /* I8: a chunk of 4 ranks per 64 bytes; I4: two (low and high nibbles) */
    size_t chunks = I4 ? (size_t)(rank + 7) / 8 * 2 : (size_t)(rank + 3) / 4;
    size_t gbytes = kern_lora_group_bytes(I4 ? KERN_LORA_I4 : KERN_LORA_I8, rank);
    const __m256i ones = _mm256_set1_epi16(1), low = _mm256_set1_epi8(0x0f);
    for (int t0 = 0; t0 < T; t0 += TOK) {
        int nt = T - t0 < TOK ? T - t0 : TOK;
        for (int t = 0; t < nt; t++) kern_lora_quant_u(u + (t0 + t) * ldu, rank, q[t], &su[t], &d[t]);
        for (int64_t o = o0; o < o1; o += 16) {
            const uint8_t *grp = bt + (size_t)(o / 16) * gbytes;
            __m256i acc[TOK][2];
            for (int t = 0; t < TOK; t++) acc[t][0] = acc[t][1] = _mm256_setzero_si256();
            for (size_t c = 0; c < chunks; c++) {
                const uint8_t *at = grp + (I4 ? c / 2 : c) * 64;
                __m256i b0 = _mm256_loadu_si256((const __m256i *)(const void *)at);
                __m256i b1 = _mm256_loadu_si256((const __m256i *)(const void *)(at + 32));
                if (I4) {
                    b0 = _mm256_and_si256(c % 2 ? _mm256_srli_epi16(b0, 4) : b0, low);
                    b1 = _mm256_and_si256(c % 2 ? _mm256_srli_epi16(b1, 4) : b1, low);
                }
                for (int t = 0; t < nt; t++) {
                    int32_t w;
                    memcpy(&w, q[t] + c * 4, 4);
                    __m256i uu = _mm256_set1_epi32(w);
                    acc[t][0] = _mm256_add_epi32(acc[t][0], _mm256_madd_epi16(_mm256_maddubs_epi16(b0, uu), ones));
                    acc[t][1] = _mm256_add_epi32(acc[t][1], _mm256_madd_epi16(_mm256_maddubs_epi16(b1, uu), ones));
                }
            }
            const float *sc = (const float *)(const void *)(grp + gbytes - 16 * sizeof(float));
            __m256 s0 = _mm256_loadu_ps(sc), s1 = _mm256_loadu_ps(sc + 8);
            int n = o1 - o < 16 ? (int)(o1 - o) : 16;
            for (int t = 0; t < nt; t++) {
                if (d[t] == 0.0f) continue;
                __m256i corr = _mm256_set1_epi32((I4 ? 8 : 128) * su[t]);
                __m256 dd = _mm256_set1_ps(d[t]);
                __m256 f0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(acc[t][0], corr)), _mm256_mul_ps(s0, dd));
                __m256 f1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(acc[t][1], corr)), _mm256_mul_ps(s1, dd));
                float *yt = y + (t0 + t) * ldy + o;
                if (n == 16) {
                    _mm256_storeu_ps(yt, _mm256_add_ps(_mm256_loadu_ps(yt), f0));
                    _mm256_storeu_ps(yt + 8, _mm256_add_ps(_mm256_loadu_ps(yt + 8), f1));
                } else {
                    float tmp[16];
                    _mm256_storeu_ps(tmp, f0);
                    _mm256_storeu_ps(tmp + 8, f1);
                    for (int i = 0; i < n; i++) yt[i] += tmp[i];
                }
            }
        }
    }
}

/* See lora_kern.h. */
void kern_lora_up_avx2(float *y, int64_t ldy, const float *u, int64_t ldu, int T, const uint8_t *bt, int type,
                       int rank, int64_t o0, int64_t o1) {
    if (type == KERN_LORA_I8 || type == KERN_LORA_I4) {
        up_int(type == KERN_LORA_I4, y, ldy, u, ldu, T, bt, rank, o0, o1);
        return;
    }
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
