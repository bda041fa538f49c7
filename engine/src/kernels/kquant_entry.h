/*
 * kquant_entry.h - the kernel-table entry points of one K-quant file
 * (kquant_avx2.c, kquant_avx512.c): the dots and gemms around its k4_rows /
 * k6_rows bodies. Included at the end of such a file, after KQ_ISA (the
 * name suffix: avx2, avx512), KQ_NT and KQ_INLINE are defined, so the loops
 * are written once and compiled with each file's own instruction set.
 *
 * The dot is the body with one token, and the gemm runs the same body over
 * KQ_NT tokens per pass of a weight row (the rest one at a time), so every
 * (row, token) of the gemm equals the dot bit for bit.
 */
#define KQ_CAT2(a, b) a##b
#define KQ_CAT(a, b) KQ_CAT2(a, b)
#define KQ_NAME(stem) KQ_CAT(stem, KQ_ISA)

/* kern_dot_fn for Q4_K rows (one token of k4_rows). */
float KQ_NAME(kq_dot_q4_k_)(const void *row, const kern_act *a, int t) {
    assert(a->fmt == KERN_ACT_Q8_256 && a->n % QK_K == 0 && t >= 0 && t < a->T);
    float out;
    k4_rows(row, a, t, 1, &out);
    return out;
}

/* kern_dot_fn for Q6_K rows (one token of k6_rows). */
float KQ_NAME(kq_dot_q6_k_)(const void *row, const kern_act *a, int t) {
    assert(a->fmt == KERN_ACT_Q8_256 && a->n % QK_K == 0 && t >= 0 && t < a->T);
    float out;
    k6_rows(row, a, t, 1, &out);
    return out;
}

/* Rows r0..r1 of a Q4_K (K6 = 0) or Q6_K (K6 = 1) matrix: KQ_NT tokens per
 * pass over a row, the remainder one at a time. */
KQ_INLINE void kq_gemm(int K6, const uint8_t *w, size_t row_bytes, int64_t r0, int64_t r1, const kern_act *a, float *y,
                       int64_t ldy) {
    assert(a->fmt == KERN_ACT_Q8_256 && a->n % QK_K == 0 && r0 <= r1);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w + (size_t)r * row_bytes;
        float out[KQ_NT];
        int t0 = 0;
        for (; t0 + KQ_NT <= a->T; t0 += KQ_NT) {
            if (K6) k6_rows(row, a, t0, KQ_NT, out);
            else k4_rows(row, a, t0, KQ_NT, out);
            for (int k = 0; k < KQ_NT; k++) y[(t0 + k) * ldy + r] = out[k];
        }
        for (; t0 < a->T; t0++) {
            if (K6) k6_rows(row, a, t0, 1, out);
            else k4_rows(row, a, t0, 1, out);
            y[t0 * ldy + r] = out[0];
        }
    }
}

/* kern_gemm_fn for Q4_K: each weight row is unpacked once per KQ_NT tokens. */
void KQ_NAME(kq_gemm_q4_k_)(const uint8_t *w, size_t row_bytes, int64_t r0, int64_t r1, const kern_act *a, float *y,
                            int64_t ldy) {
    kq_gemm(0, w, row_bytes, r0, r1, a, y, ldy);
}

/* kern_gemm_fn for Q6_K: each weight row is unpacked once per KQ_NT tokens. */
void KQ_NAME(kq_gemm_q6_k_)(const uint8_t *w, size_t row_bytes, int64_t r0, int64_t r1, const kern_act *a, float *y,
                            int64_t ldy) {
    kq_gemm(1, w, row_bytes, r0, r1, a, y, ldy);
}

#undef KQ_NAME
#undef KQ_CAT
#undef KQ_CAT2
