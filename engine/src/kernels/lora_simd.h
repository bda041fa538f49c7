/*
 * lora_simd.h - what the AVX2 and AVX-512 LoRA kernels (lora_avx2.c,
 * lora_avx512.c) read the same way: the 16 codes of half a quantized panel
 * block, as signed bytes in one 128-bit vector. Included only by those
 * files (each compiled with its own instruction set, both a superset of the
 * SSE2 used here).
 */
#ifndef CX_LORA_SIMD_H
#define CX_LORA_SIMD_H

#include <immintrin.h>

#include "lora_kern.h"

/* Codes of outputs half..half+15 (half: 0 or 16) of the q8_0 or q4_0 panel
 * block p (its fp16 scale first): q8_0's int8 codes; q4_0's nibbles (low:
 * outputs 0..15, high: 16..31) minus 8. */
static inline __m128i kern_lora_panel_codes(const uint8_t *p, int type, int half) {
    if (type != CX_TYPE_Q4_0) return _mm_loadu_si128((const __m128i *)(const void *)(p + 2 + half));
    __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(p + 2));
    if (half) b = _mm_srli_epi16(b, 4);
    return _mm_sub_epi8(_mm_and_si128(b, _mm_set1_epi8(0x0f)), _mm_set1_epi8(8));
}

#endif
