/*
 * test_challenge.c - the challenge report's arithmetic against hand-computed
 * numbers: the spread over prompts (min, median, max), and the projection to
 * the challenge machine (bandwidth and compute roofs here and there, the
 * efficiency carried over and capped at 1, which roof binds, unknown
 * arithmetic leaving only the bandwidth roof); which thread count it starts
 * from (the fastest, not the most threads); one core's peak for the run's
 * kernels (AVX-512 FMA, AVX-512 VNNI, AVX2, scalar, and what stands in for
 * an unmeasured one), read back from the hw row's text columns.
 */
#include <math.h>
#include <string.h>

#include "challenge.h"
#include "testing.h"

/* min / median / max; an even count's median between the middle two; none: NANs. */
static void test_spread(void) {
    double v[] = {40, 10, 30, 20};
    chal_spread s = chal_spread_of(v, 4);
    CHECK(s.n == 4 && s.min == 10 && s.max == 40, "min %g max %g", s.min, s.max);
    CHECK_NEAR(s.median, 25, 0, "median of 10, 20, 30, 40");
    double w[] = {7};
    s = chal_spread_of(w, 1);
    CHECK(s.min == 7 && s.median == 7 && s.max == 7, "one value");
    s = chal_spread_of(NULL, 0);
    CHECK(s.n == 0 && isnan(s.min) && isnan(s.median) && isnan(s.max), "no value: NANs");
}

/* A 2 GB token at 20 GB/s here (2 threads) and 40 GB/s there (8 cores). */
static void test_projection(void) {
    chal_proj p;
    memset(&p, 0, sizeof p);
    p.bytes_per_token = 2e9;
    p.flops_per_token = 8e9;
    p.here_gbs = 20;
    p.core_gops = 100;
    p.here_threads = 2;
    p.here_decode_tps = 8;
    p.target_gbs = 40;
    p.target_cores = 8;
    chal_project(&p);
    CHECK_NEAR(p.here_bw_roof, 10, 1e-12, "20 GB/s / 2 GB = 10 tok/s");
    CHECK_NEAR(p.here_cpu_roof, 25, 1e-12, "2 cores x 100 G / 8 G = 25 tok/s");
    CHECK_NEAR(p.here_roof, 10, 1e-12, "the lower roof binds");
    CHECK_NEAR(p.efficiency, 0.8, 1e-12, "8 of 10 tok/s");
    CHECK_NEAR(p.target_bw_roof, 20, 1e-12, "40 GB/s / 2 GB");
    CHECK_NEAR(p.target_cpu_roof, 100, 1e-12, "8 cores x 100 G / 8 G");
    CHECK(!p.target_compute_bound, "bandwidth-bound there");
    CHECK_NEAR(p.projected_tps, 16, 1e-12, "20 tok/s x 0.8");
    /* faster than the roof here (a model in cache): the efficiency carried over is capped at 1 */
    p.here_decode_tps = 15;
    chal_project(&p);
    CHECK_NEAR(p.efficiency, 1.5, 1e-12, "measured above the roof");
    CHECK_NEAR(p.projected_tps, 20, 1e-12, "capped: the roof itself");
    /* arithmetic binds there when the bandwidth is large */
    p.here_decode_tps = 8;
    p.target_gbs = 400;
    chal_project(&p);
    CHECK(p.target_compute_bound, "compute-bound at 400 GB/s");
    CHECK_NEAR(p.projected_tps, 80, 1e-12, "100 tok/s x 0.8");
    /* unknown arithmetic: the bandwidth roof alone */
    p.flops_per_token = NAN;
    p.target_gbs = 40;
    chal_project(&p);
    CHECK(isinf(p.here_cpu_roof) && isinf(p.target_cpu_roof), "no compute roof");
    CHECK_NEAR(p.projected_tps, 16, 1e-12, "bandwidth roof x 0.8");
    /* no bytes per token: nothing to project */
    p.bytes_per_token = 0;
    chal_project(&p);
    CHECK(isnan(p.efficiency) && isnan(p.projected_tps), "no bytes: no efficiency, no projection");
}

/* The fastest decode_tps, not the most threads; a tie goes to fewer threads; NAN skipped; none: -1. */
static void test_best_run(void) {
    chal_run r[3];
    memset(r, 0, sizeof r);
    r[0].info.threads = 1, r[0].decode_tps = 8000;
    r[1].info.threads = 2, r[1].decode_tps = 900;
    r[2].info.threads = 4, r[2].decode_tps = NAN;
    CHECK(chal_best_run(r, 3) == 0, "1 thread at 8000 beats 2 threads at 900 (inverse scaling)");
    r[1].decode_tps = 9000;
    CHECK(chal_best_run(r, 3) == 1, "2 threads at 9000");
    r[0].decode_tps = 9000;
    CHECK(chal_best_run(r, 3) == 0, "a tie: fewer threads");
    r[0].decode_tps = r[1].decode_tps = NAN;
    CHECK(chal_best_run(r, 3) == -1, "no decode speed: none");
    CHECK(chal_best_run(r, 0) == -1, "no run");
}

/* One core's peak for the run's kernels and weights, and what stands in for an unmeasured one. */
static void test_core_peak(void) {
    hw_peaks h;
    memset(&h, 0, sizeof h);
    h.id = 7;
    h.fp32_scalar_1t = 5, h.fp32_avx2_1t = 84, h.int8_avx2_1t = 143;
    h.fp32_avx512_1t = hw_store_text_peak_1t("measured: FMA 160.9 GFLOP/s (1 thread), 285.2 (2 threads)");
    h.int8_vnni_1t = hw_store_text_peak_1t("measured: AVX-512 VNNI 592.0 GOP/s (1 thread), 903.7 (2 threads)");
    CHECK_NEAR(h.fp32_avx512_1t, 160.9, 0, "FMA text parsed");
    CHECK_NEAR(h.int8_vnni_1t, 592.0, 0, "VNNI text parsed (not the 512 of AVX-512)");
    char fig[256];
    CHECK_NEAR(chal_core_peak(&h, "avx512vnni+hpx16", "q8_0", fig, sizeof fig), 592.0, 0, "VNNI kernels, int8: VNNI");
    CHECK(strstr(fig, "AVX-512 VNNI") != NULL, "%s", fig);
    CHECK_NEAR(chal_core_peak(&h, "avx512bf16", "mxfp4", fig, sizeof fig), 592.0, 0, "bf16 table: VNNI for int8");
    CHECK_NEAR(chal_core_peak(&h, "avx512vnni", "f32", fig, sizeof fig), 160.9, 0, "AVX-512, float: AVX-512 FMA");
    CHECK(strstr(fig, "AVX-512 FMA") != NULL, "%s", fig);
    CHECK_NEAR(chal_core_peak(&h, "avx512+hp", "bf16", fig, sizeof fig), 160.9, 0, "avx512 table, bf16: FMA");
    CHECK_NEAR(chal_core_peak(&h, "avx512", "q4_0", fig, sizeof fig), 143, 0, "avx512 without VNNI: AVX2 int8 stands in");
    CHECK(strstr(fig, "standing in") && strstr(fig, "does not measure"), "%s", fig);
    CHECK_NEAR(chal_core_peak(&h, "avx2", "q8_0", fig, sizeof fig), 143, 0, "avx2 int8");
    CHECK_NEAR(chal_core_peak(&h, "avx2+hp", "f16", fig, sizeof fig), 84, 0, "avx2 float");
    CHECK_NEAR(chal_core_peak(&h, "avxvnni", "q8_0", fig, sizeof fig), 143, 0, "avxvnni: AVX2 int8 stands in");
    CHECK(strstr(fig, "standing in") != NULL, "%s", fig);
    CHECK_NEAR(chal_core_peak(&h, "scalar", "q8_0", fig, sizeof fig), 5, 0, "scalar kernels");
    CHECK_NEAR(chal_core_peak(&h, "", "q8_0", fig, sizeof fig), 143, 0, "kernels not recorded: AVX2");
    CHECK(strstr(fig, "not recorded") != NULL, "%s", fig);
    /* the hw row has no AVX-512 figure (text "available" or "not available"): AVX2, said so */
    h.fp32_avx512_1t = hw_store_text_peak_1t("available");
    h.int8_vnni_1t = hw_store_text_peak_1t("not available on this CPU");
    CHECK(isnan(h.fp32_avx512_1t) && isnan(h.int8_vnni_1t), "no figure in the text: NAN");
    CHECK_NEAR(chal_core_peak(&h, "avx512vnni", "q8_0", fig, sizeof fig), 143, 0, "no VNNI figure: AVX2 int8");
    CHECK(strstr(fig, "hw row 7 has no AVX-512 VNNI figure") != NULL, "%s", fig);
    CHECK_NEAR(chal_core_peak(&h, "avx512vnni", "f32", fig, sizeof fig), 84, 0, "no FMA figure: AVX2 FMA");
    /* no AVX2 either: scalar */
    h.int8_avx2_1t = NAN;
    CHECK_NEAR(chal_core_peak(&h, "avx2", "q8_0", fig, sizeof fig), 5, 0, "no AVX2 figure: scalar");
    CHECK(strstr(fig, "no AVX2 figure") != NULL, "%s", fig);
}

/* The text parser: what hw.c writes, and nothing else. */
static void test_text_peak(void) {
    CHECK_NEAR(hw_store_text_peak_1t("measured: FMA 0.5 GFLOP/s (1 thread), 1.0 (2 threads)"), 0.5, 0, "small");
    static const char *const bad[] = {NULL, "", "measured:", "measured: FMA", "measured: FMA 12 GFLOP/s",
                                      "measured: FMA 12 GFLOP/s (2 threads)", "measured: FMA x GFLOP/s (1 thread)",
                                      "measured: FMA -3 GFLOP/s (1 thread)", "measured: FMA inf GFLOP/s (1 thread)",
                                      "measured: FMA 12 MFLOP/s (1 thread)", "FMA 12 GFLOP/s (1 thread)",
                                      "measured: FMA 12GFLOP/s (1 thread)", "measured: FMA nan GOP/s (1 thread)"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(isnan(hw_store_text_peak_1t(bad[i])), "'%s' is no figure", bad[i] ? bad[i] : "(null)");
}

TEST_MAIN({
    test_spread();
    test_projection();
    test_best_run();
    test_core_peak();
    test_text_peak();
})
