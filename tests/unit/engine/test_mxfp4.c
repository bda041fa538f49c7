/*
 * test_mxfp4.c - the MXFP4 weight type (ggml type 39) against values worked
 * out from the OCP MX spec rather than from the engine's table:
 *   - every code under every E8M0 exponent dequantizes to E2M1(code) * 2^(e-127)
 *     (E2M1 decoded from its sign, exponent and mantissa bits), element j from
 *     the low nibble of byte j and element j + 16 from its high nibble;
 *   - the quantizer picks ggml's shared exponent, rounds to the nearest code
 *     (ties to the lower code), clips above 6 and clamps tiny blocks, and a
 *     block whose largest value is 4 or 6 times its scale survives a round trip;
 *   - the scalar kernels agree with dequantize-then-multiply;
 *   - the type's plumbing: GGUF geometry and name, CLI names, file type,
 *     activation format, the mixture rule's fallback.
 * The SIMD kernels are checked against the scalar one in test_kernels.c.
 */
#include <math.h>
#include <string.h>

#include "cortex.h"
#include "cortex_tools.h"
#include "gguf.h"
#include "gguf_write.h"
#include "kernels/kernels.h"
#include "mxfp4.h"
#include "quant.h"
#include "testing.h"

/* E2M1 from its bits: sign bit 3, exponent bits 2-1 (bias 1), mantissa bit 0;
 * exponent 0 is subnormal (0 or 0.5). */
static double e2m1(int code) {
    int sign = code >> 3, ex = (code >> 1) & 3, man = code & 1;
    double mag = ex == 0 ? 0.5 * man : (1.0 + 0.5 * man) * ldexp(1.0, ex - 1);
    return sign ? -mag : mag;
}

/* All 256 exponents x all 16 codes in both nibble positions. */
static void test_dequantize(void) {
    int bad = 0;
    for (int e = 0; e < 256; e++) {
        uint8_t blk[17] = {(uint8_t)e};
        for (int j = 0; j < 16; j++) blk[1 + j] = (uint8_t)(j | (15 - j) << 4);
        float out[32];
        quant_dequantize_row(CX_TYPE_MXFP4, blk, out, 32);
        for (int j = 0; j < 32; j++) {
            int code = j < 16 ? j : 15 - (j - 16);
            float want = ldexpf((float)e2m1(code), e - 127); /* exact, or inf past the float range */
            if (out[j] != want && bad++ < 5) CHECK(0, "e %d element %d (code %d): %g, want %g", e, j, code, out[j], want);
        }
    }
    CHECK(bad == 0, "%d dequantized values differ from the spec", bad);
    CHECK(mxfp4_half_scale(0) == ldexpf(1.0f, -128) && mxfp4_half_scale(1) == ldexpf(1.0f, -127) &&
              mxfp4_half_scale(127) == 0.5f && mxfp4_half_scale(255) == ldexpf(1.0f, 127),
          "half scales 2^(e-128), subnormals included");
    /* Two blocks in a row: the second starts 17 bytes on. */
    uint8_t two[34] = {127, 0x71};
    two[17] = 129;
    two[18] = 0x0F;
    float out[64];
    quant_dequantize_row(CX_TYPE_MXFP4, two, out, 64);
    CHECK(out[0] == 0.5f && out[16] == 6.0f && out[1] == 0.0f && out[32] == -24.0f && out[48] == 0.0f,
          "two blocks: %g %g %g %g", out[0], out[16], out[32], out[48]);
}

/* Quantize one block of 32 values (rest zero) and return it. */
static block_mxfp4 quantize_block(const float *x, int n) {
    float v[32] = {0};
    memcpy(v, x, sizeof(float) * (size_t)n);
    block_mxfp4 b;
    quant_quantize_row(CX_TYPE_MXFP4, v, &b, 32);
    return b;
}

/* Code of element j of a block. */
static int code_of(const block_mxfp4 *b, int j) { return j < 16 ? b->qs[j] & 15 : b->qs[j - 16] >> 4; }

static void test_quantize_rules(void) {
    /* amax 6: floor(log2 6) = 2, e = 127, values on the grid 0, 0.5, ..., 6 */
    float a[] = {6.0f, 2.5f, -2.5f, 5.0f, 0.25f, -0.25f, 0.74f, -1.26f, 3.0f, -6.0f};
    block_mxfp4 b = quantize_block(a, 10);
    int want[] = {7, 4, 12, 6, 0, 0, 1, 11, 5, 15};
    CHECK(b.e == 127, "e for max 6: %d", b.e);
    for (int j = 0; j < 10; j++) CHECK(code_of(&b, j) == want[j], "value %g -> code %d, want %d", a[j], code_of(&b, j), want[j]);
    for (int j = 10; j < 32; j++) CHECK(code_of(&b, j) == 0, "zero -> code 0 (+0)");
    /* amax 7.9: still e = 127, clipped to 6; the high half holds elements 16.. */
    float c[20] = {7.9f};
    c[16] = -7.9f;
    c[17] = 1.0f;
    b = quantize_block(c, 20);
    CHECK(b.e == 127 && code_of(&b, 0) == 7 && code_of(&b, 16) == 15 && code_of(&b, 17) == 2 && (b.qs[0] >> 4) == 15,
          "7.9 clips to 6 (e %d, codes %d %d %d)", b.e, code_of(&b, 0), code_of(&b, 16), code_of(&b, 17));
    /* amax exactly 8: e = 128, grid doubled */
    float d8[] = {8.0f, 1.0f, 1.5f};
    b = quantize_block(d8, 3);
    CHECK(b.e == 128 && code_of(&b, 0) == 6 && code_of(&b, 1) == 1 && code_of(&b, 2) == 1, "amax 8: e %d", b.e);
    /* zeros: e = 0; tiny: clamped to 0, not wrapped; huge: 127 + 125; infinite: at most 254 */
    float z[1] = {0.0f}, tiny[1] = {1e-40f}, huge[1] = {3e38f}, inf[1] = {INFINITY};
    CHECK(quantize_block(z, 1).e == 0, "zero block e = 0");
    CHECK(quantize_block(tiny, 1).e == 0, "tiny block e clamps to 0");
    b = quantize_block(huge, 1);
    CHECK(b.e == 252 && code_of(&b, 0) == 7, "3e38 = 14.1 * 2^124: e %d code %d", b.e, code_of(&b, 0));
    CHECK(quantize_block(inf, 1).e == 254, "infinity: e clamps to 254");
}

/* Blocks whose top value is 4 or 6 times the scale requantize to themselves. */
static void test_round_trip(void) {
    uint64_t st = 99;
    int bad = 0;
    for (int trial = 0; trial < 2000; trial++) {
        uint8_t blk[17];
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        blk[0] = (uint8_t)((st >> 33) % 251); /* 6 * 2^(e-127) stays finite */
        for (int j = 0; j < 16; j++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            int lo = (int)(st >> 40) % 16, hi = (int)(st >> 50) % 16;
            if (lo == 8) lo = 0; /* -0 requantizes to +0 */
            if (hi == 8) hi = 0;
            blk[1 + j] = (uint8_t)(lo | hi << 4);
        }
        blk[1] = (uint8_t)((blk[1] & 0xF0) | (trial & 1 ? 7 : 14)); /* element 0: 6 or -4 */
        float w[32];
        uint8_t back[17];
        quant_dequantize_row(CX_TYPE_MXFP4, blk, w, 32);
        quant_quantize_row(CX_TYPE_MXFP4, w, back, 32);
        bad += memcmp(blk, back, 17) != 0;
    }
    CHECK(bad == 0, "%d of 2000 blocks changed in a round trip", bad);
}

/* The scalar dots: float activations against dequantize + double dot; Q8_32
 * activations against the exact sum over their dequantized codes. */
static void test_dots(void) {
    enum { N = 96 };
    float w[N], x[N], deq[N];
    uint64_t st = 12345;
    for (int i = 0; i < N; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        w[i] = (float)((int)(st >> 40) % 2001 - 1000) / 997.0f;
        x[i] = (float)((int)(st >> 20) % 2001 - 1000) / 1013.0f;
    }
    uint8_t buf[N];
    CHECK(quant_row_bytes(CX_TYPE_MXFP4, N) == 51, "row bytes: 3 blocks of 17");
    quant_quantize_row(CX_TYPE_MXFP4, w, buf, N);
    quant_dequantize_row(CX_TYPE_MXFP4, buf, deq, N);
    double ref = 0, mag = 0;
    for (int i = 0; i < N; i++) ref += (double)deq[i] * x[i], mag += fabs((double)deq[i] * x[i]);
    CHECK_NEAR(kern_dot_scalar(CX_TYPE_MXFP4, buf, x, N), ref, 1e-6 * mag, "float-activation dot");
    _Alignas(64) uint8_t mem[4096];
    CHECK(kern_act_bytes(KERN_ACT_Q8_32, 1, N) <= sizeof mem, "activation buffer");
    kern_act a;
    kern_act_init(&a, KERN_ACT_Q8_32, 1, N, mem);
    kern_quantize_act_scalar(x, &a, 0);
    double want = 0;
    for (int i = 0; i < N; i++) want += (double)deq[i] * a.qs[i] * a.d[i / 32];
    CHECK_NEAR(mxfp4_dot_scalar(buf, &a, 0), want, 1e-6 * mag, "Q8_32 dot");
    CHECK(kern_scalar_ops.dot[CX_TYPE_MXFP4] == mxfp4_dot_scalar, "the scalar table has it");
}

/* Names, sizes and rules other subsystems look up by type. */
static void test_plumbing(void) {
    CHECK(gguf_type_block_bytes(39) == 17 && gguf_type_block_elems(39) == 32 && !strcmp(gguf_type_name(39), "mxfp4"),
          "GGUF geometry of type 39");
    CHECK(!strcmp(cx_type_name(CX_TYPE_MXFP4), "mxfp4") && cx_type_from_name("MXFP4") == CX_TYPE_MXFP4, "names");
    CHECK(gguf_file_type(CX_TYPE_MXFP4) == 38, "general.file_type: llama.cpp's MOSTLY_MXFP4_MOE");
    CHECK(quant_supported(CX_TYPE_MXFP4) && quant_block_size(CX_TYPE_MXFP4) == 32, "supported, blocks of 32");
    CHECK(kern_act_format(CX_TYPE_MXFP4) == KERN_ACT_Q8_32, "activations: 8-bit per 32");
    CHECK(CX_TYPE_MXFP4 < KERN_NTYPES && CX_TYPE_MXFP4 < CX_QUANT_NTYPES, "tables indexed by type reach 39");
    CHECK(quant_mix_type(CX_TYPE_MXFP4, "blk.0.ffn_gate.weight", 0, 1, 64) == CX_TYPE_MXFP4 &&
              quant_mix_type(CX_TYPE_MXFP4, "blk.0.ffn_down.weight", 0, 1, 172) == CX_TYPE_F16 &&
              quant_mix_type(CX_TYPE_MXFP4, "blk.0.attn_norm.weight", 0, 1, 64) == CX_TYPE_F32 &&
              quant_mix_type(CX_TYPE_MXFP4, "token_embd.weight", -1, 1, 64) == CX_TYPE_MXFP4,
          "mixture rule: matrices mxfp4, 172 columns fall back to f16, norms f32");
    const kern_ops *v[3] = {kern_table("avx2"), kern_table("avx512"), kern_table("avx512vnni")};
    for (int i = 0; i < 3; i++)
        if (v[i]) CHECK(v[i]->dot[CX_TYPE_MXFP4] && v[i]->gemm[CX_TYPE_MXFP4], "%s has mxfp4 kernels", v[i]->name);
}

TEST_MAIN({
    test_dequantize();
    test_quantize_rules();
    test_round_trip();
    test_dots();
    test_plumbing();
})
