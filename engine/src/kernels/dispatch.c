/*
 * dispatch.c - compose the kernel tables and choose one.
 *
 * Each model gets its table at load (cx_model_params.isa: the best by
 * default; "scalar", "avx2", "avxvnni", "avx512", "avx512vnni" or
 * "avx512bf16" force one, for measuring each SIMD kernel's speed-up and for
 * tests); asking for one the CPU lacks (cpu.c says which run here) is an
 * error rather than a silent fallback, so a benchmark never runs something
 * other than what it says. There is no process-wide table: two models of one
 * process may run different instruction sets.
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
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cortex.h"
#include "cpu.h"
#include "kernels.h"
#include "../util.h"

#ifdef CX_X86
static kern_ops avxvnni_ops, avx512_ops, avx512vnni_ops, avx512bf16_ops; /* composed once, by compose_all() */
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* *dst = the table `base` with every non-NULL entry of `over` in its place. */
static void compose(kern_ops *dst, const kern_ops *base, const kern_ops *over) {
    *dst = *base;
    dst->name = over->name;
    if (over->decode_tile) dst->decode_tile = over->decode_tile;
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

/* The avxvnni and AVX-512 tables from the AVX2 one and their parts. */
static void compose_all(void) {
    compose(&avxvnni_ops, &kern_avx2_ops, &kern_avxvnni_part);
    compose(&avx512_ops, &kern_avx2_ops, &kern_avx512_part);
    compose(&avx512vnni_ops, &kern_avx2_ops, &kern_avx512vnni_part);
    compose(&avx512bf16_ops, &avx512vnni_ops, &kern_avx512bf16_part);
    /* its BF16 kernel is the row-major vdpbf16ps one: a repacked bf16 matrix
     * would go to avx512vnni's widening X16 kernel instead */
    avx512bf16_ops.gemm_x16[CX_TYPE_BF16] = NULL;
}
#endif

const kern_ops *kern_table(const char *isa) {
    if (!strcmp(isa, "scalar")) return &kern_scalar_ops;
#ifdef CX_X86
    pthread_once(&once, compose_all);
    if (!kern_cpu_runs(isa)) return NULL;
    if (!strcmp(isa, "avx2")) return &kern_avx2_ops;
    if (!strcmp(isa, "avxvnni")) return &avxvnni_ops;
    if (!strcmp(isa, "avx512")) return &avx512_ops;
    if (!strcmp(isa, "avx512vnni")) return &avx512vnni_ops;
    if (!strcmp(isa, "avx512bf16")) return &avx512bf16_ops;
#endif
    return NULL;
}

const char *kern_missing(const char *isa) { return kern_table(isa) ? NULL : kern_cpu_lacks(isa); }

/* The fastest table this CPU runs whose results stay within float rounding
 * of the scalar reference (so not avx512bf16). */
static const kern_ops *best_table(void) {
    static const char *const order[] = {"avx512vnni", "avxvnni", "avx512", "avx2"};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        const kern_ops *k = kern_table(order[i]);
        if (k) return k;
    }
    return &kern_scalar_ops;
}

/* See kernels.h: NULL, "" or "auto" is the best table; a name the CPU lacks is
 * an error rather than a silent fallback. */
int kern_select(const char *isa, const kern_ops **out, cx_err *err) {
    *out = NULL;
    if (!isa || !*isa || !strcmp(isa, "auto")) {
        *out = best_table();
        return 0;
    }
    if (strcmp(isa, "scalar") && strcmp(isa, "avx2") && strcmp(isa, "avxvnni") && strcmp(isa, "avx512") &&
        strcmp(isa, "avx512vnni") && strcmp(isa, "avx512bf16")) {
        return cx_fail(err, CX_EINVAL,
                       "instruction set '%s' is not one of auto, scalar, avx2, avxvnni, avx512, avx512vnni, avx512bf16",
                       isa);
    }
    if (!(*out = kern_table(isa))) {
        return cx_fail(err, CX_EINVAL, "instruction set '%s': this CPU does not support it (no %s; CPU has: %s)", isa,
                       kern_cpu_lacks(isa), kern_cpu_features());
    }
    return 0;
}

/* See cortex.h: the name of the table kern_select gives, or NULL with err. */
const char *cx_isa_resolve(const char *isa, cx_err *err) {
    const kern_ops *k;
    return kern_select(isa, &k, err) ? NULL : k->name;
}
