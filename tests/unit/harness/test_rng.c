/*
 * test_rng.c - the harness's random numbers (harness/util/rng.c): its own log
 * and exp against libm, seeds and streams, uniform, bounded and normal draws.
 * Fixed seeds make the statistical checks deterministic; their thresholds are
 * still the textbook ones: means within 4 standard errors (sigma / sqrt(n),
 * CLT), a 6e-5 chance of a false alarm per check; rng_below's counts by a
 * chi-square at p = 0.001.
 */
#include <math.h>
#include <stdint.h>

#include "rng.h"
#include "testing.h"

/* ---- RNG and distributions ------------------------------------------------- */

static void test_rng(void) {
    /* Own log/exp agree with libm to ~1 ulp over a wide range. */
    double worst_log = 0, worst_exp = 0;
    for (double x = 1e-300; x < 1e300; x *= 1.37) {
        double a = rng_log(x), b = log(x);
        double rel = fabs(a - b) / (fabs(b) > 1e-300 ? fabs(b) : 1);
        if (rel > worst_log) worst_log = rel;
    }
    for (double x = 0.5; x < 2; x += 0.001) {
        double a = rng_log(x), b = log(x);
        double abs_err = fabs(a - b);
        if (abs_err > worst_log) worst_log = abs_err;
    }
    for (double x = -700; x < 700; x += 0.0137) {
        double a = rng_exp(x), b = exp(x);
        double rel = fabs(a - b) / b;
        if (rel > worst_exp) worst_exp = rel;
    }
    CHECK(worst_log < 1e-15, "rng_log vs log: worst %.3g", worst_log);
    CHECK(worst_exp < 1e-15, "rng_exp vs exp: worst relative %.3g", worst_exp);
    CHECK(rng_log(1) == 0 && rng_exp(0) == 1, "log 1 = 0, exp 0 = 1 exactly");
    CHECK(rng_log(0) == -INFINITY && isnan(rng_log(-1)) && rng_exp(1000) == INFINITY && rng_exp(-1000) == 0, "edges");

    /* Same seed and stream -> same numbers; other stream -> others. */
    rng a, b, c;
    rng_seed(&a, 42, 1);
    rng_seed(&b, 42, 1);
    rng_seed(&c, 42, 2);
    int same = 1, diff = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t x = rng_next(&a), y = rng_next(&b), z = rng_next(&c);
        same &= x == y;
        diff += x != z;
    }
    CHECK(same && diff == 100, "streams");
    /* Uniform in [0, 1) with mean 1/2 (sd 1/sqrt(12 n)); rng_below in range and fair. */
    enum { N = 100000 };
    double sum = 0, lo = 1, hi = 0;
    int counts[7] = {0};
    for (int i = 0; i < N; i++) {
        double u = rng_uniform(&a);
        sum += u;
        if (u < lo) lo = u;
        if (u > hi) hi = u;
        counts[rng_below(&a, 7)]++;
    }
    CHECK(lo >= 0 && hi < 1, "uniform range [%g, %g]", lo, hi);
    CHECK_NEAR(sum / N, 0.5, 4 / sqrt(12.0 * N), "uniform mean");
    double chi2 = 0;
    for (int k = 0; k < 7; k++) chi2 += (counts[k] - N / 7.0) * (counts[k] - N / 7.0) / (N / 7.0);
    CHECK(chi2 < 22.458, "rng_below(7) chi-square %.2f < 22.458 (chi2(6), p = 0.001)", chi2);
    /* Standard normal: mean 0 (se 1/sqrt(n)), variance 1 (se sqrt(2/n)). */
    double s1 = 0, s2 = 0;
    for (int i = 0; i < N; i++) {
        double z = rng_normal(&a);
        s1 += z;
        s2 += z * z;
    }
    CHECK_NEAR(s1 / N, 0, 4 / sqrt((double)N), "normal mean");
    CHECK_NEAR(s2 / N, 1, 4 * sqrt(2.0 / N), "normal variance");
}

TEST_MAIN({
    test_rng();
})
