/*
 * test_quant.c - block formats against hand-computed values, and the scalar
 * dot kernels against dequantize-then-multiply.
 */
#include <string.h>

#include "cortex.h"
#include "cortex_tools.h"
#include "kernels/kernels.h"
#include "quant.h"
#include "testing.h"
#include "util.h"

/* Half-precision values whose float meaning is known exactly. */
static void test_fp16(void) {
    static const struct { uint16_t h; float f; } cases[] = {
        {0x0000, 0.0f}, {0x3C00, 1.0f}, {0xC000, -2.0f}, {0x7BFF, 65504.0f}, {0x0400, 6.103515625e-05f},
        {0x0001, 5.9604644775390625e-08f}, {0x03FF, 6.097555160522461e-05f}, {0x3555, 0.333251953125f},
        {0x3800, 0.5f}, {0xB400, -0.25f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK(cx_fp16_to_fp32(cases[i].h) == cases[i].f, "half %04x -> %g, want %g", cases[i].h,
              cx_fp16_to_fp32(cases[i].h), cases[i].f);
        CHECK(cx_fp32_to_fp16(cases[i].f) == cases[i].h, "float %g -> half %04x, want %04x", cases[i].f,
              cx_fp32_to_fp16(cases[i].f), cases[i].h);
    }
    CHECK(isinf(cx_fp16_to_fp32(0x7C00)), "0x7c00 is +inf");
    CHECK(isnan(cx_fp16_to_fp32(0x7E00)), "0x7e00 is NaN");
    CHECK(cx_fp32_to_fp16(1e6f) == 0x7C00, "overflow rounds to inf");
    CHECK(cx_fp32_to_fp16(-0.0f) == 0x8000, "negative zero keeps its sign");
    /* Round to nearest even: 1 + 2^-11 is a tie between 1 and 1 + 2^-10. */
    CHECK(cx_fp32_to_fp16(1.0f + 1.0f / 2048) == 0x3C00, "tie rounds to even (down)");
    CHECK(cx_fp32_to_fp16(1.0f + 3.0f / 2048) == 0x3C02, "tie rounds to even (up)");
    /* Every half survives a round trip through float. */
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7C00) == 0x7C00 && (h & 0x3FF)) continue; /* NaN payloads */
        if (cx_fp32_to_fp16(cx_fp16_to_fp32((uint16_t)h)) != h) bad++;
    }
    CHECK(bad == 0, "%d halves do not round-trip", bad);
}

/* bfloat16: widening is exact (the float's top half), narrowing rounds to
 * nearest even as ggml_compute_fp32_to_bf16 does, NaN stays a quiet NaN. */
static void test_bf16(void) {
    static const struct { uint16_t h; float f; } cases[] = {
        {0x0000, 0.0f}, {0x8000, -0.0f}, {0x3F80, 1.0f}, {0xC000, -2.0f}, {0x3EAB, 0.333984375f},
        {0x7F7F, 3.3895313892515355e38f}, {0x0080, 1.1754943508222875e-38f}, {0x0001, 9.183549615799121e-41f},
        {0x4780, 65536.0f}, {0xBE80, -0.25f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK(cx_bf16_to_fp32(cases[i].h) == cases[i].f, "bf16 %04x -> %g, want %g", cases[i].h,
              cx_bf16_to_fp32(cases[i].h), cases[i].f);
        CHECK(cx_fp32_to_bf16(cases[i].f) == cases[i].h, "float %g -> bf16 %04x, want %04x", cases[i].f,
              cx_fp32_to_bf16(cases[i].f), cases[i].h);
    }
    CHECK(cx_fp32_to_bf16(-0.0f) == 0x8000, "negative zero keeps its sign");
    CHECK(isinf(cx_bf16_to_fp32(0x7F80)) && cx_fp32_to_bf16(INFINITY) == 0x7F80, "+inf both ways");
    CHECK(cx_fp32_to_bf16(3.4e38f) == 0x7F80, "past the largest bf16 rounds to inf");
    /* 1 + 2^-8 is a tie between 1 and 1 + 2^-7: even (down); 1 + 3 * 2^-8: even (up). */
    CHECK(cx_fp32_to_bf16(1.0f + 1.0f / 256) == 0x3F80, "tie rounds to even (down)");
    CHECK(cx_fp32_to_bf16(1.0f + 3.0f / 256) == 0x3F82, "tie rounds to even (up)");
    CHECK(cx_fp32_to_bf16(1.0f + 1.0f / 256 + 1.0f / 65536) == 0x3F81, "past the tie rounds up");
    /* A signalling NaN whose payload sits in the low half only: quiet, not inf. */
    uint32_t snan = 0x7F800001u;
    float fs;
    memcpy(&fs, &snan, 4);
    CHECK(cx_fp32_to_bf16(fs) == 0x7FC0 && isnan(cx_bf16_to_fp32(cx_fp32_to_bf16(fs))), "NaN stays NaN (quiet)");
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7F80) == 0x7F80 && (h & 0x7F)) continue; /* NaN payloads */
        if (cx_fp32_to_bf16(cx_bf16_to_fp32((uint16_t)h)) != h) bad++;
    }
    CHECK(bad == 0, "%d bf16 values do not round-trip", bad);
    uint16_t row[3] = {0x3F80, 0xC000, 0x0001};
    float out[3];
    quant_dequantize_row(CX_TYPE_BF16, row, out, 3);
    CHECK(out[0] == 1.0f && out[1] == -2.0f && out[2] == cases[7].f, "bf16 row: %g %g %g", out[0], out[1], out[2]);
    CHECK(quant_supported(CX_TYPE_BF16) && quant_block_size(CX_TYPE_BF16) == 1 && quant_row_bytes(CX_TYPE_BF16, 7) == 14,
          "bf16 geometry");
    CHECK(!strcmp(cx_type_name(CX_TYPE_BF16), "bf16") && cx_type_from_name("BF16") == CX_TYPE_BF16, "bf16 name");
}

/* A Q8_0 block written byte by byte: d = 0.5 (0x3800), w = d * q. */
static void test_q8_0_block(void) {
    uint8_t blk[34] = {0x00, 0x38};
    int8_t q[32] = {0, 1, -1, 127, -128, 2, -2, 64};
    for (int j = 8; j < 32; j++) q[j] = (int8_t)(j - 16);
    memcpy(blk + 2, q, 32);
    float out[32];
    quant_dequantize_row(CX_TYPE_Q8_0, blk, out, 32);
    const float want[8] = {0, 0.5f, -0.5f, 63.5f, -64.0f, 1.0f, -1.0f, 32.0f};
    for (int j = 0; j < 8; j++) CHECK(out[j] == want[j], "q8_0 weight %d = %g, want %g", j, out[j], want[j]);
    for (int j = 8; j < 32; j++) CHECK(out[j] == 0.5f * (float)(j - 16), "q8_0 weight %d", j);
}

/* A Q4_0 block: d = 2.0 (0x4000); byte j has weight j (low nibble) and j+16 (high). */
static void test_q4_0_block(void) {
    uint8_t blk[18] = {0x00, 0x40, 0x1F, 0x80, 0x08, 0xF0};
    for (int j = 4; j < 16; j++) blk[2 + j] = 0x88; /* both nibbles 8: weight 0 */
    float out[32];
    quant_dequantize_row(CX_TYPE_Q4_0, blk, out, 32);
    CHECK(out[0] == 14.0f, "low nibble 15 -> (15-8)*2 = 14, got %g", out[0]);
    CHECK(out[16] == -14.0f, "high nibble 1 -> (1-8)*2 = -14, got %g", out[16]);
    CHECK(out[1] == -16.0f, "low nibble 0 -> -16, got %g", out[1]);
    CHECK(out[17] == 0.0f, "high nibble 8 -> 0, got %g", out[17]);
    CHECK(out[2] == 0.0f && out[18] == -16.0f, "byte 0x08: %g %g", out[2], out[18]);
    CHECK(out[3] == -16.0f && out[19] == 14.0f, "byte 0xF0: %g %g", out[3], out[19]);
    for (int j = 4; j < 16; j++) CHECK(out[j] == 0 && out[j + 16] == 0, "weight %d", j);
}

/* F16 rows dequantize element-wise. */
static void test_f16_row(void) {
    uint16_t h[4] = {0x3C00, 0xC000, 0x3555, 0x0001};
    float out[4];
    quant_dequantize_row(CX_TYPE_F16, h, out, 4);
    CHECK(out[0] == 1.0f && out[1] == -2.0f && out[2] == 0.333251953125f && out[3] == 5.9604644775390625e-08f,
          "f16 row: %g %g %g %g", out[0], out[1], out[2], out[3]);
}

/* Quantizers follow ggml's rounding, checked on hand-made blocks. */
static void test_quantize(void) {
    float x[32];
    for (int j = 0; j < 32; j++) x[j] = (float)(j - 16) / 4.0f; /* -4 .. 3.75 */
    block_q8_0 q8;
    quant_quantize_row(CX_TYPE_Q8_0, x, &q8, 32);
    CHECK(cx_fp16_to_fp32(q8.d) == cx_fp16_to_fp32(cx_fp32_to_fp16(4.0f / 127.0f)), "q8_0 d = amax/127");
    CHECK(q8.qs[0] == -127 && q8.qs[16] == 0, "q8_0 extremes: %d %d", q8.qs[0], q8.qs[16]);
    CHECK(q8.qs[31] == 119, "q8_0 3.75 -> round(3.75*127/4) = 119, got %d", q8.qs[31]);
    block_q4_0 q4;
    quant_quantize_row(CX_TYPE_Q4_0, x, &q4, 32);
    /* max |x| is -4 (x[0]), so d = -4/-8 = 0.5 and q = x/0.5 + 8. */
    CHECK(cx_fp16_to_fp32(q4.d) == 0.5f, "q4_0 d = max/-8 = 0.5, got %g", cx_fp16_to_fp32(q4.d));
    CHECK((q4.qs[0] & 15) == 0, "x=-4 -> q 0, got %d", q4.qs[0] & 15);
    CHECK((q4.qs[0] >> 4) == 8, "x[16]=0 -> q 8, got %d", q4.qs[0] >> 4);
    CHECK((q4.qs[15] >> 4) == 15, "x[31]=3.75 -> 3.75/0.5+8.5 = 16 clamps to 15, got %d", q4.qs[15] >> 4);
    /* Dequantized error stays within the format's step. */
    float y[32];
    quant_dequantize_row(CX_TYPE_Q4_0, &q4, y, 32);
    for (int j = 0; j < 32; j++) CHECK(fabsf(y[j] - x[j]) <= 0.5f, "q4_0 weight %d error %g", j, y[j] - x[j]);
    quant_dequantize_row(CX_TYPE_Q8_0, &q8, y, 32);
    for (int j = 0; j < 32; j++) CHECK(fabsf(y[j] - x[j]) <= 0.5f * 4.0f / 127.0f + 1e-6f, "q8_0 weight %d", j);
    /* All-zero block: d = 0, no division by zero. */
    float z[32] = {0};
    quant_quantize_row(CX_TYPE_Q4_0, z, &q4, 32);
    quant_dequantize_row(CX_TYPE_Q4_0, &q4, y, 32);
    for (int j = 0; j < 32; j++) CHECK(y[j] == 0.0f, "zero block weight %d = %g", j, y[j]);
}

/* The scalar dot kernel equals dequantize + float dot for every type. */
static void test_dot_reference(void) {
    enum { N = 96 };
    float w[N], x[N], deq[N];
    uint64_t st = 12345;
    for (int i = 0; i < N; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        w[i] = (float)((int)(st >> 40) % 2001 - 1000) / 997.0f;
        x[i] = (float)((int)(st >> 20) % 2001 - 1000) / 1013.0f;
    }
    static const int types[] = {CX_TYPE_F32, CX_TYPE_F16, CX_TYPE_Q8_0, CX_TYPE_Q4_0, CX_TYPE_BF16};
    for (int t = 0; t < 5; t++) {
        uint8_t buf[N * 4];
        quant_quantize_row(types[t], w, buf, N);
        quant_dequantize_row(types[t], buf, deq, N);
        double ref = 0;
        for (int i = 0; i < N; i++) ref += (double)deq[i] * x[i];
        float got = kern_dot_scalar(types[t], buf, x, N);
        CHECK_NEAR(got, ref, 1e-4 * (1 + fabs(ref)), cx_type_name(types[t]));
        CHECK(quant_row_bytes(types[t], N) == (types[t] == CX_TYPE_F32 ? 384u
                                             : types[t] == CX_TYPE_F16 || types[t] == CX_TYPE_BF16 ? 192u
                                             : types[t] == CX_TYPE_Q8_0 ? 102u : 54u), "row bytes %s",
              cx_type_name(types[t]));
    }
}

TEST_MAIN({
    test_fp16();
    test_bf16();
    test_q8_0_block();
    test_q4_0_block();
    test_f16_row();
    test_quantize();
    test_dot_reference();
})
