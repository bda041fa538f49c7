/*
 * test_challenge.c - the challenge report's arithmetic against hand-computed
 * numbers: the spread over prompts (min, median, max), and the projection to
 * the challenge machine (bandwidth and compute roofs here and there, the
 * efficiency carried over and capped at 1, which roof binds, unknown
 * arithmetic leaving only the bandwidth roof).
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

TEST_MAIN({
    test_spread();
    test_projection();
})
