/*
 * dispatch.c - choose a kernel table.
 *
 * CPUID says what the processor has (read once per process); XGETBV says
 * whether the OS saves the wide registers (an AVX2 CPU under an OS that does
 * not enable YMM state must not run AVX2 code; AVX-512 needs the opmask and
 * ZMM states too: XCR0 bits 1, 2, 5, 6, 7). Each model gets its table at
 * load (cx_model_params.isa: the best by default; "scalar", "avx2", "avxvnni",
 * "avx512", "avx512vnni" or "avx512bf16" force one, for measuring each SIMD kernel's speed-up and
 * for tests); asking for one the CPU lacks is an error rather than a silent
 * fallback, so a benchmark never runs something other than what it says.
 * There is no process-wide table: two models of one process may run
 * different instruction sets.
 *
 * The avxvnni and AVX-512 tables are composed once: the AVX2 table, with the
 * entries kernels_avxvnni.c or kernels_avx512.c overrides (kern_avxvnni_part,
 * kern_avx512_part, kern_avx512vnni_part); the
 * avx512bf16 table is the avx512vnni one with bf16_avx512bf16.c's BF16
 * kernels. Those round activations to bf16 (vdpbf16ps), so "auto" never picks
 * that table: the default's bf16 results stay within float rounding of the
 * scalar reference (see bf16_avx512bf16.c for the bound it has instead).
 * The default is the first of avx512vnni, avxvnni, avx512, avx2, scalar the
 * CPU runs: AVX-VNNI (256-bit VNNI) is preferred to AVX-512 without VNNI, as
 * it is on the CPUs that have it and no AVX-512 (Alder Lake and later client
 * cores).
 */
#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cortex.h"
#include "../kquant.h"
#include "kernels.h"
#include "../util.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define CX_X86 1
#endif

typedef struct cpu_caps {
    int sse42, avx, avx2, fma, f16c, avx512f, avx512bw, avx512vl, avx512dq, avx512vnni, avx512bf16, avxvnni;
    int os_ymm, os_zmm;
} cpu_caps;

static cpu_caps caps;
static char features[200];
#ifdef CX_X86
static kern_ops avxvnni_ops, avx512_ops, avx512vnni_ops, avx512bf16_ops; /* composed in detect() */
#endif
static pthread_once_t once = PTHREAD_ONCE_INIT;

#ifdef CX_X86
/* XCR0: which register states the OS saves on a context switch. */
static unsigned long long xgetbv0(void) {
    unsigned int lo, hi;
    __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}
#endif

#ifdef CX_X86
/* *dst = the table `base` with every non-NULL entry of `over` in its place. */
static void compose(kern_ops *dst, const kern_ops *base, const kern_ops *over) {
    *dst = *base;
    dst->name = over->name;
    for (int t = 0; t < KERN_NTYPES; t++) {
        if (over->dot[t]) dst->dot[t] = over->dot[t];
        if (over->gemm[t]) dst->gemm[t] = over->gemm[t];
        if (over->gemm_x8[t]) dst->gemm_x8[t] = over->gemm_x8[t];
        if (over->gemm_x16[t]) dst->gemm_x16[t] = over->gemm_x16[t];
    }
#define TAKE(f) if (over->f) dst->f = over->f;
    KERN_OPS_SINGLE(TAKE)
#undef TAKE
}
#endif

/* Fill caps and the feature string from CPUID leaves 1, 7 and 7.1; compose the AVX-512 tables. */
static void detect(void) {
#ifdef CX_X86
    unsigned int a, b, c, d;
    if (__get_cpuid(1, &a, &b, &c, &d)) {
        caps.sse42 = (c >> 20) & 1;
        caps.fma = (c >> 12) & 1;
        caps.f16c = (c >> 29) & 1;
        caps.avx = (c >> 28) & 1;
        int osxsave = (c >> 27) & 1;
        if (osxsave) {
            unsigned long long xcr0 = xgetbv0();
            caps.os_ymm = (xcr0 & 0x6) == 0x6;
            caps.os_zmm = (xcr0 & 0xe6) == 0xe6;
        }
    }
    if (__get_cpuid_max(0, NULL) >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        caps.avx2 = (b >> 5) & 1;
        caps.avx512f = (b >> 16) & 1;
        caps.avx512bw = (b >> 30) & 1;
        caps.avx512vl = (b >> 31) & 1;
        caps.avx512dq = (b >> 17) & 1;
        caps.avx512vnni = (c >> 11) & 1;
        unsigned int max_sub = a;
        if (max_sub >= 1) {
            __cpuid_count(7, 1, a, b, c, d);
            caps.avxvnni = (a >> 4) & 1;
            caps.avx512bf16 = (a >> 5) & 1;
        }
    }
    compose(&avxvnni_ops, &kern_avx2_ops, &kern_avxvnni_part);
    compose(&avx512_ops, &kern_avx2_ops, &kern_avx512_part);
    compose(&avx512vnni_ops, &kern_avx2_ops, &kern_avx512vnni_part);
    compose(&avx512bf16_ops, &avx512vnni_ops, &kern_avx512bf16_part);
    /* its BF16 kernel is the row-major vdpbf16ps one: a repacked bf16 matrix
     * would go to avx512vnni's widening X16 kernel instead */
    avx512bf16_ops.gemm_x16[CX_TYPE_BF16] = NULL;
#endif
    snprintf(features, sizeof features, "%s%s%s%s%s%s%s%s%s%s%s%s", caps.sse42 ? "sse4.2 " : "",
             caps.avx ? "avx " : "", caps.avx2 ? "avx2 " : "", caps.fma ? "fma " : "", caps.f16c ? "f16c " : "",
             caps.avx512f ? "avx512f " : "", caps.avx512bw ? "avx512bw " : "", caps.avx512vl ? "avx512vl " : "",
             caps.avx512dq ? "avx512dq " : "", caps.avx512vnni ? "avx512vnni " : "",
             caps.avx512bf16 ? "avx512bf16 " : "", caps.avxvnni ? "avxvnni " : "");
    size_t len = strlen(features);
    if (len) features[len - 1] = 0;
    else snprintf(features, sizeof features, "none");
}

/* 1 if the AVX2 table can run here: the instructions and the OS's YMM state. */
static int avx2_usable(void) { return caps.avx2 && caps.fma && caps.f16c && caps.os_ymm; }
/* The avxvnni table: the AVX2 table's features and AVX-VNNI (it shares the OS's YMM state). */
static int avxvnni_usable(void) { return avx2_usable() && caps.avxvnni; }
/* The AVX-512 table: F, BW, VL, DQ, the OS's ZMM and opmask state, and AVX2 (it reuses that table's kernels). */
static int avx512_usable(void) {
    return avx2_usable() && caps.avx512f && caps.avx512bw && caps.avx512vl && caps.avx512dq && caps.os_zmm;
}
static int avx512vnni_usable(void) { return avx512_usable() && caps.avx512vnni; }
/* The avx512bf16 table: the avx512vnni table's features (it reuses that table) and AVX-512 BF16. */
static int avx512bf16_usable(void) { return avx512vnni_usable() && caps.avx512bf16; }

/* The features an instruction set needs that this CPU (or OS) lacks, in words, for errors and SKIP lines. */
static const char *missing(const char *isa) {
    if (!strcmp(isa, "avx2")) return !caps.avx2 ? "AVX2" : !caps.fma ? "FMA" : !caps.f16c ? "F16C" : "OS YMM state";
    if (!avx2_usable()) return missing("avx2");
    if (!strcmp(isa, "avxvnni")) return caps.avxvnni ? "nothing" : "AVX-VNNI";
    if (!caps.avx512f || !caps.avx512bw || !caps.avx512vl || !caps.avx512dq) return "AVX-512 F/BW/VL/DQ";
    if (!caps.os_zmm) return "OS ZMM state (XCR0)";
    if ((!strcmp(isa, "avx512vnni") || !strcmp(isa, "avx512bf16")) && !caps.avx512vnni) return "AVX-512 VNNI";
    if (!strcmp(isa, "avx512bf16") && !caps.avx512bf16) return "AVX-512 BF16";
    return "nothing";
}

const kern_ops *kern_table(const char *isa) {
    pthread_once(&once, detect);
    if (!strcmp(isa, "scalar")) return &kern_scalar_ops;
#ifdef CX_X86
    if (!strcmp(isa, "avx2")) return avx2_usable() ? &kern_avx2_ops : NULL;
    if (!strcmp(isa, "avxvnni")) return avxvnni_usable() ? &avxvnni_ops : NULL;
    if (!strcmp(isa, "avx512")) return avx512_usable() ? &avx512_ops : NULL;
    if (!strcmp(isa, "avx512vnni")) return avx512vnni_usable() ? &avx512vnni_ops : NULL;
    if (!strcmp(isa, "avx512bf16")) return avx512bf16_usable() ? &avx512bf16_ops : NULL;
#endif
    return NULL;
}

const char *kern_missing(const char *isa) {
    pthread_once(&once, detect);
    return kern_table(isa) ? NULL : missing(isa);
}

/* The fastest table this CPU runs whose results stay within float rounding
 * of the scalar reference (so not avx512bf16). */
static const kern_ops *best_table(void) {
#ifdef CX_X86
    if (avx512vnni_usable()) return &avx512vnni_ops;
    if (avxvnni_usable()) return &avxvnni_ops;
    if (avx512_usable()) return &avx512_ops;
    if (avx2_usable()) return &kern_avx2_ops;
#endif
    return &kern_scalar_ops;
}

/* See kernels.h: NULL, "" or "auto" is the best table; a name the CPU lacks is
 * an error rather than a silent fallback. */
int kern_select(const char *isa, const kern_ops **out, char *msg, size_t msg_size) {
    pthread_once(&once, detect);
    *out = NULL;
    if (!isa || !*isa || !strcmp(isa, "auto")) {
        *out = best_table();
        return 0;
    }
    if (strcmp(isa, "scalar") && strcmp(isa, "avx2") && strcmp(isa, "avxvnni") && strcmp(isa, "avx512") &&
        strcmp(isa, "avx512vnni") && strcmp(isa, "avx512bf16")) {
        snprintf(msg, msg_size,
                 "instruction set '%s' is not one of auto, scalar, avx2, avxvnni, avx512, avx512vnni, avx512bf16", isa);
        return -1;
    }
    if (!(*out = kern_table(isa))) {
        snprintf(msg, msg_size, "instruction set '%s': this CPU does not support it (no %s; CPU has: %s)", isa,
                 missing(isa), features);
        return -1;
    }
    return 0;
}

const char *kern_cpu_features(void) {
    pthread_once(&once, detect);
    return features;
}

const char *cx_cpu_features(void) { return kern_cpu_features(); }

/* See cortex.h: the name of the table kern_select gives, or NULL with err. */
const char *cx_isa_resolve(const char *isa, cx_err *err) {
    char msg[512];
    const kern_ops *k;
    if (kern_select(isa, &k, msg, sizeof msg)) {
        cx_fail(err, CX_EINVAL, "%s", msg);
        return NULL;
    }
    return k->name;
}

/* ---- activation buffers ---- */

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

int kern_layout_group(int layout) { return layout == KERN_LAYOUT_X16 ? 16 : layout == KERN_LAYOUT_X8 ? 8 : 1; }

/* Block size of a type with the q8_0-style interleaved layouts (q8_0 34,
 * q4_0 18, mxfp4 17), 0 for others; *scale_bytes: the block's leading scale
 * (an fp16, or MXFP4's E8M0 byte), the rest are codes. */
static size_t repack_block_bytes(int type, size_t *scale_bytes) {
    *scale_bytes = type == CX_TYPE_MXFP4 ? 1 : 2;
    return type == CX_TYPE_Q8_0 ? 34 : type == CX_TYPE_Q4_0 ? 18 : type == CX_TYPE_MXFP4 ? 17 : 0;
}

int kern_repack_x8(int type, uint8_t *group, size_t row_bytes, int64_t n, uint8_t *scratch) {
    size_t sb, bs = repack_block_bytes(type, &sb), qb = bs - sb;
    if (!bs) return -1;
    int64_t nb = n / 32;
    assert(row_bytes == (size_t)nb * bs);
    memcpy(scratch, group, 8 * row_bytes);
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *dst = group + (size_t)b * 8 * bs;
        for (int r = 0; r < 8; r++) {
            const uint8_t *src = scratch + (size_t)r * row_bytes + (size_t)b * bs;
            memcpy(dst + sb * (size_t)r, src, sb);
            memcpy(dst + 8 * sb + (size_t)r * qb, src + sb, qb);
        }
    }
    return 0;
}

int kern_repack_x16(int type, uint8_t *group, size_t row_bytes, int64_t n, uint8_t *scratch) {
    if (type == CX_TYPE_F16 || type == CX_TYPE_BF16) { /* column k of row r at (16 k + r) * 2 */
        assert(row_bytes == (size_t)n * 2);
        memcpy(scratch, group, 16 * row_bytes);
        uint16_t *dst = (uint16_t *)(void *)group;
        for (int r = 0; r < 16; r++) {
            const uint16_t *src = (const uint16_t *)(const void *)(scratch + (size_t)r * row_bytes);
            for (int64_t k = 0; k < n; k++) dst[16 * k + r] = src[k];
        }
        return 0;
    }
    if (type == CX_TYPE_Q4_K || type == CX_TYPE_Q6_K) { /* word i of row r's block at 64 i + 4 r */
        size_t bs = type == CX_TYPE_Q4_K ? Q4K_BYTES : Q6K_BYTES, words = bs / 4; /* Q6_K: 52 words, then d */
        int64_t nb = n / 256;
        assert(row_bytes == (size_t)nb * bs);
        memcpy(scratch, group, 16 * row_bytes);
        for (int64_t b = 0; b < nb; b++)
            for (int r = 0; r < 16; r++) {
                const uint8_t *src = scratch + (size_t)r * row_bytes + (size_t)b * bs;
                uint8_t *dst = group + (size_t)b * 16 * bs;
                for (size_t i = 0; i < words; i++) memcpy(dst + (16 * i + (size_t)r) * 4, src + 4 * i, 4);
                if (type == CX_TYPE_Q6_K) memcpy(dst + 16 * Q6K_D_AT + 2 * (size_t)r, src + Q6K_D_AT, 2);
            }
        return 0;
    }
    size_t sb, bs = repack_block_bytes(type, &sb), qb = bs - sb;
    if (!bs) return -1;
    int64_t nb = n / 32;
    assert(row_bytes == (size_t)nb * bs && qb % 4 == 0);
    memcpy(scratch, group, 16 * row_bytes);
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *dst = group + (size_t)b * 16 * bs;
        for (int r = 0; r < 16; r++) {
            const uint8_t *src = scratch + (size_t)r * row_bytes + (size_t)b * bs;
            memcpy(dst + sb * (size_t)r, src, sb);
            for (size_t c = 0; c < qb / 4; c++)
                memcpy(dst + 16 * sb + (16 * c + (size_t)r) * 4, src + sb + 4 * c, 4);
        }
    }
    return 0;
}

void kern_rope_table(float *cs, int head_dim, int pos, const double *inv_freq) {
    for (int i = 0; i < head_dim / 2; i++) {
        double angle = (double)pos * inv_freq[i];
        cs[2 * i] = (float)cos(angle);
        cs[2 * i + 1] = (float)sin(angle);
    }
}
