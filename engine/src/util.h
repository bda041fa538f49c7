/*
 * util.h - small helpers shared by every engine module: error reporting and
 * half-precision conversion. Nothing here allocates.
 */
#ifndef CX_UTIL_H
#define CX_UTIL_H

#include <stdint.h>
#include <string.h>
#include <time.h>

#include "cortex.h"

#if defined(__GNUC__)
#define CX_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CX_PRINTF(a, b)
#endif

/* Fill `err` (if not NULL) with code and a printf-style message; returns code. */
int cx_fail(cx_err *err, int code, const char *fmt, ...) CX_PRINTF(3, 4);

/* IEEE half <-> single, exact for every half value (round-to-nearest-even down). */
float cx_fp16_to_fp32(uint16_t h);
uint16_t cx_fp32_to_fp16(float f);
/* bfloat16 <-> single. bf16 is the top half of a float, so widening is a
 * shift (exact); narrowing rounds to nearest even and keeps NaN a quiet NaN,
 * bit for bit as ggml's ggml_compute_fp32_to_bf16 (and gguf-py) do. */
static inline float cx_bf16_to_fp32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline uint16_t cx_fp32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 64); /* NaN: force quiet */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

/* Unaligned little-endian loads: model files are byte streams, not structs. */
static inline uint16_t cx_rd16(const void *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static inline uint32_t cx_rd32(const void *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t cx_rd64(const void *p) { uint64_t v; memcpy(&v, p, 8); return v; }

/* Monotonic nanoseconds, for latencies (KV page restores). */
static inline int64_t cx_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The file name part of a path, for messages. */
const char *cx_basename(const char *path);

#endif
