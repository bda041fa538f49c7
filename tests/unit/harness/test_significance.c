/*
 * test_significance.c - harness/gate/significance.c: Mann-Whitney U (exact and
 * asymptotic), the bootstrap CI of a ratio of medians, change-point
 * detection and the median helper.
 *
 * Expected values are checked against independent computations: exact
 * Mann-Whitney p values against brute-force enumeration of every rank
 * arrangement and against the classic count recurrence (a different
 * algorithm from the library's Gaussian-binomial product), the asymptotic p
 * against the formula worked by hand below, sig_steps against exhaustive
 * search over every partition of short series. Random data come from a
 * splitmix64 stream with fixed seeds, so every check is deterministic.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cortex.h"
#include "significance.h"
#include "testing.h"
#include "cortex_tools.h"

/* ---- test data -------------------------------------------------------------- */

/* splitmix64: the tests' own deterministic stream (independent of the
 * library's generator). */
static uint64_t t_next(uint64_t *s) { return cx_splitmix64(s); }

/* Uniform in (0, 1). */
static double t_unif(uint64_t *s) { return ((double)(t_next(s) >> 11) + 0.5) * 0x1p-53; }

/* Standard normal (Box-Muller). */
static double t_gauss(uint64_t *s) {
    double u = t_unif(s), v = t_unif(s);
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

/* ---- Mann-Whitney: independent references ---------------------------------- */

/* U of a by definition: pairs with a > b, ties 1/2 (O(na nb)). */
static double u_by_pairs(const double *a, size_t na, const double *b, size_t nb) {
    double u = 0;
    for (size_t i = 0; i < na; i++)
        for (size_t j = 0; j < nb; j++) u += a[i] > b[j] ? 1 : a[i] == b[j] ? 0.5 : 0;
    return u;
}

/* Exact two-sided p by enumerating every way to choose which m of the m + n
 * pooled ranks belong to the first sample (bitmasks), counting those whose U
 * is at least as far from m n / 2 as u. Feasible up to m + n = 16. */
static double p_by_enumeration(int m, int n, double u) {
    int N = m + n;
    double mid = m * n / 2.0, dev = fabs(u - mid);
    long hits = 0, total = 0;
    for (unsigned mask = 0; mask < (1u << N); mask++) {
        if (__builtin_popcount(mask) != m) continue;
        /* U = sum over first-sample ranks of the second-sample ranks below. */
        int ub = 0, below = 0;
        for (int r = 0; r < N; r++) {
            if (mask & (1u << r)) ub += below;
            else below++;
        }
        total++;
        if (fabs(ub - mid) >= dev - 1e-9) hits++;
    }
    return (double)hits / (double)total;
}

/* Exact two-sided p from the classic recurrence on counts, f(m, n, k) =
 * f(m-1, n, k-n) + f(m, n-1, k) (the largest pooled value is from the first
 * sample, beating all n of the second, or from the second), tabulated in
 * full: a different algorithm from the library's. */
static double p_by_recurrence(int m, int n, double u) {
    int K = m * n + 1;
    double *f = calloc((size_t)(m + 1) * (size_t)(n + 1) * (size_t)K, sizeof *f);
    if (!f) return NAN;
#define F(i, j, k) f[((size_t)(i) * (size_t)(n + 1) + (size_t)(j)) * (size_t)K + (size_t)(k)]
    for (int i = 0; i <= m; i++)
        for (int j = 0; j <= n; j++)
            for (int k = 0; k <= i * j; k++) {
                if (i == 0 || j == 0) {
                    F(i, j, k) = k == 0;
                    continue;
                }
                F(i, j, k) = (k >= j ? F(i - 1, j, k - j) : 0) + F(i, j - 1, k);
            }
    double umin = u < m * n - u ? u : m * n - u, tail = 0, total = 0;
    for (int k = 0; k <= m * n; k++) {
        total += F(m, n, k);
        if (k <= umin) tail += F(m, n, k);
    }
#undef F
    free(f);
    double p = 2 * tail / total;
    return p > 1 ? 1 : p;
}

/* Samples of m and n distinct values whose U (of a) is exactly u: b = 1..n,
 * a = half-integers placed so that a[k] exceeds c_k of the b's, sum c_k = u. */
static void samples_with_u(int m, int n, int u, double *a, double *b) {
    for (int j = 0; j < n; j++) b[j] = j + 1;
    for (int k = 0; k < m; k++) {
        int c = u > n ? n : u;
        u -= c;
        a[k] = c + 0.5 + 0.001 * k; /* distinct even when two c_k are equal */
    }
}

/* ---- Mann-Whitney tests ------------------------------------------------------ */

/* Complete separation 5 vs 5: U = 0, p = 2 / C(10, 5) = 2/252, and the mirror
 * image U = 25 with the same p. */
static void test_mw_separated(void) {
    double a[] = {1, 2, 3, 4, 5}, b[] = {6, 7, 8, 9, 10}, u, p;
    CHECK(sig_mann_whitney(a, 5, b, 5, &u, &p) == 0, "rc");
    CHECK_NEAR(u, 0, 0, "U separated");
    CHECK_NEAR(p, 2.0 / 252, 1e-15, "p separated");
    CHECK(sig_mann_whitney(b, 5, a, 5, &u, &p) == 0, "rc");
    CHECK_NEAR(u, 25, 0, "U swapped");
    CHECK_NEAR(p, 2.0 / 252, 1e-15, "p swapped");
}

/* a = {1,3,5}, b = {2,4,6}: U = 3 (3>2, 5>2, 5>4); of the C(6,3) = 20
 * arrangements 14 have |U - 4.5| >= 1.5 (null counts of U = 0..9 are
 * 1,1,2,3,3,3,3,2,1,1), so p = 0.7, confirmed by enumeration here. */
static void test_mw_interleaved(void) {
    double a[] = {1, 3, 5}, b[] = {2, 4, 6}, u, p;
    CHECK(sig_mann_whitney(a, 3, b, 3, &u, &p) == 0, "rc");
    CHECK_NEAR(u, 3, 0, "U");
    CHECK_NEAR(u, u_by_pairs(a, 3, b, 3), 0, "U by pairs");
    CHECK_NEAR(p, 0.7, 1e-15, "p");
    CHECK_NEAR(p_by_enumeration(3, 3, 3), 0.7, 1e-15, "p by enumeration");
}

/* The textbook critical value for n1 = n2 = 8, two-sided alpha = 0.05, is
 * U = 13: two-sided p(U = 13) = 2 * 321 / 12870 = 0.0498834 <= 0.05 and
 * p(U = 14) = 2 * 418 / 12870 = 0.0649573 > 0.05 (321 and 418 arrangements
 * of the C(16, 8) = 12870 have U <= 13 and U <= 14: enumerated here, and in
 * numpy when this test was written). */
static void test_mw_table_8_8(void) {
    double a[8], b[8], u, p13, p14;
    samples_with_u(8, 8, 13, a, b);
    CHECK(sig_mann_whitney(a, 8, b, 8, &u, &p13) == 0, "rc");
    CHECK_NEAR(u, 13, 0, "constructed U 13");
    samples_with_u(8, 8, 14, a, b);
    CHECK(sig_mann_whitney(a, 8, b, 8, &u, &p14) == 0, "rc");
    CHECK_NEAR(u, 14, 0, "constructed U 14");
    CHECK(p13 <= 0.05, "p(U=13) = %.6f must be <= 0.05", p13);
    CHECK(p14 > 0.05, "p(U=14) = %.6f must be > 0.05", p14);
    CHECK_NEAR(p13, 0.049883449883449886, 1e-14, "p(U=13)");
    CHECK_NEAR(p14, 0.06495726495726496, 1e-14, "p(U=14)");
    CHECK_NEAR(p13, p_by_enumeration(8, 8, 13), 1e-14, "p13 by enumeration");
    CHECK_NEAR(p14, p_by_enumeration(8, 8, 14), 1e-14, "p14 by enumeration");
}

/* Every U of several small size pairs (no ties) against enumeration, and
 * sizes up to the exact limit (25 vs 25) against the count recurrence. */
static void test_mw_exact_grid(void) {
    static const int sizes[][2] = {{1, 1}, {1, 4}, {2, 3}, {4, 4}, {3, 7}, {6, 5}, {7, 9}};
    double a[25], b[25], u, p;
    int bad = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int m = sizes[s][0], n = sizes[s][1];
        for (int uu = 0; uu <= m * n; uu++) {
            samples_with_u(m, n, uu, a, b);
            if (sig_mann_whitney(a, (size_t)m, b, (size_t)n, &u, &p) != 0 || u != uu ||
                fabs(p - p_by_enumeration(m, n, uu)) > 1e-13)
                bad++;
        }
    }
    CHECK(bad == 0, "%d exact p values differ from enumeration", bad);
    static const int big[][2] = {{10, 12}, {25, 3}, {20, 25}, {25, 25}};
    for (size_t s = 0; s < sizeof big / sizeof big[0]; s++) {
        int m = big[s][0], n = big[s][1];
        for (int uu = 0; uu <= m * n; uu += 1 + m * n / 40) {
            samples_with_u(m, n, uu, a, b);
            CHECK(sig_mann_whitney(a, (size_t)m, b, (size_t)n, &u, &p) == 0, "rc");
            double ref = p_by_recurrence(m, n, uu);
            CHECK(fabs(p - ref) <= 1e-12 * ref, "%dx%d U=%d: %.17g vs %.17g", m, n, uu, p,
                  ref);
        }
    }
}

/* Swapping the samples mirrors U (U' = na nb - U) and keeps p, for random
 * tie-free samples of unequal sizes (exact) and larger ones (asymptotic). */
static void test_mw_symmetry(void) {
    uint64_t s = 42;
    for (int rep = 0; rep < 20; rep++) {
        size_t na = rep < 10 ? 7 : 31, nb = rep < 10 ? 11 : 40;
        double a[40], b[40], u1, p1, u2, p2;
        for (size_t i = 0; i < na; i++) a[i] = t_gauss(&s) + 0.3 * (rep % 3);
        for (size_t i = 0; i < nb; i++) b[i] = t_gauss(&s);
        CHECK(sig_mann_whitney(a, na, b, nb, &u1, &p1) == 0, "rc");
        CHECK(sig_mann_whitney(b, nb, a, na, &u2, &p2) == 0, "rc");
        CHECK_NEAR(u1 + u2, (double)(na * nb), 0, "U + U' = na nb");
        CHECK_NEAR(u1, u_by_pairs(a, na, b, nb), 0, "U by pairs");
        CHECK_NEAR(p1, p2, 1e-15, "same p either way");
        CHECK(p1 > 0 && p1 <= 1, "p in (0, 1]: %g", p1);
    }
}

/* Ties force the normal approximation. a = {1,2,2,3}, b = {2,3,3,4,5}:
 *   pooled ranks: 1 -> 1; the three 2s -> 3; the three 3s -> 6; 4 -> 8; 5 -> 9
 *   R_a = 1 + 3 + 3 + 6 = 13, U_a = 13 - 4*5/2 = 3 (by pairs: 0 + 0.5 + 0.5
 *   + (1 + 0.5 + 0.5) = 3), U_b = 20 - 3 = 17; mu = na nb / 2 = 10; N = 9;
 *   tie term sum(t^3 - t) = 24 + 24 = 48;
 *   sigma^2 = na nb / 12 * ((N + 1) - 48 / (N (N - 1))) = 5/3 * (10 - 2/3)
 *           = 140/9 = 15.5556, sigma = 3.944053;
 *   z = (max(U) - mu - 0.5) / sigma = 6.5 / 3.944053 = 1.648051;
 *   p = 2 (1 - Phi(z)) = erfc(z / sqrt 2) = 0.0993422478534653. */
static void test_mw_ties(void) {
    double a[] = {1, 2, 2, 3}, b[] = {2, 3, 3, 4, 5}, u, p;
    CHECK(sig_mann_whitney(a, 4, b, 5, &u, &p) == 0, "rc");
    CHECK_NEAR(u, 3, 0, "U with ties");
    CHECK_NEAR(p, 0.0993422478534653, 1e-12, "tie-corrected p");
    CHECK_NEAR(p, erfc(6.5 / sqrt(140.0 / 9) / sqrt(2.0)), 1e-15, "p from the formula");
    CHECK(sig_mann_whitney(b, 5, a, 4, &u, &p) == 0, "rc");
    CHECK_NEAR(u, 17, 0, "U swapped");
    CHECK_NEAR(p, 0.0993422478534653, 1e-12, "p swapped");

    /* All tied: sigma = 0, nothing to test, p = 1. U = na nb / 2. */
    double c[] = {7, 7}, d[] = {7, 7, 7};
    CHECK(sig_mann_whitney(c, 2, d, 3, &u, &p) == 0, "rc");
    CHECK_NEAR(u, 3, 0, "U all tied");
    CHECK_NEAR(p, 1, 0, "p all tied");

    /* U at its mean: the continuity correction would push p above 1: capped. */
    double e[] = {1, 4}, f[] = {2, 3, 3};
    CHECK(sig_mann_whitney(e, 2, f, 3, &u, &p) == 0, "rc");
    CHECK_NEAR(u, 3, 0, "U at mean");
    CHECK_NEAR(p, 1, 0, "p capped at 1");
}

/* Past the exact limit (26 vs 26, no ties) the normal approximation is used:
 * a = 0,2,..,50, b = 1,3,..,51: U_a = 0+1+..+25 = 325, max U = 351, mu = 338,
 * sigma^2 = 26*26/12 * 53 = 2985.667, z = 12.5 / 54.641 = 0.2287649,
 * p = erfc(z / sqrt 2) = 0.8190516642751772. */
static void test_mw_asymptotic(void) {
    double a[26], b[26], u, p;
    for (int i = 0; i < 26; i++) {
        a[i] = 2 * i;
        b[i] = 2 * i + 1;
    }
    CHECK(sig_mann_whitney(a, 26, b, 26, &u, &p) == 0, "rc");
    CHECK_NEAR(u, 325, 0, "U 26x26");
    CHECK_NEAR(p, 0.8190516642751772, 1e-12, "asymptotic p 26x26");
    /* 25 vs 25 of the same layout is still exact: the counts agree. */
    CHECK(sig_mann_whitney(a, 25, b, 25, &u, &p) == 0, "rc");
    CHECK_NEAR(p, p_by_recurrence(25, 25, u), 1e-12, "exact p 25x25");
}

/* Bad input: empty groups and NaN are CX_EINVAL; NULL outputs are allowed. */
static void test_mw_errors(void) {
    double a[] = {1, 2}, b[] = {3, NAN}, u = 0, p = 0;
    CHECK(sig_mann_whitney(a, 0, a, 2, &u, &p) == CX_EINVAL, "na = 0");
    CHECK(isnan(u) && isnan(p), "outputs NaN on error");
    CHECK(sig_mann_whitney(a, 2, a, 0, &u, &p) == CX_EINVAL, "nb = 0");
    CHECK(sig_mann_whitney(a, 2, b, 2, &u, &p) == CX_EINVAL, "NaN");
    CHECK(sig_mann_whitney(NULL, 2, a, 2, &u, &p) == CX_EINVAL, "NULL");
    /* a = {1, 2} below b = {3}: U = 0, p = 2 / C(3, 2) = 2/3. */
    CHECK(sig_mann_whitney(a, 2, b, 1, NULL, &p) == 0, "NULL u allowed");
    CHECK_NEAR(p, 2.0 / 3, 1e-15, "p with NULL u");
}

/* The smallest exact p: 2 / C(na + nb, na), capped at 1, and the exact test
 * reaches it at complete separation. */
static void test_mw_min_p(void) {
    CHECK_NEAR(sig_mw_min_p(3, 3), 0.1, 1e-15, "3v3");
    CHECK_NEAR(sig_mw_min_p(5, 5), 2.0 / 252, 1e-15, "5v5");
    CHECK_NEAR(sig_mw_min_p(4, 4), 2.0 / 70, 1e-15, "4v4");
    CHECK_NEAR(sig_mw_min_p(8, 8), 2.0 / 12870, 1e-17, "8v8");
    CHECK_NEAR(sig_mw_min_p(2, 7), 2.0 / 36, 1e-15, "2v7");
    CHECK_NEAR(sig_mw_min_p(7, 2), 2.0 / 36, 1e-15, "7v2");
    CHECK_NEAR(sig_mw_min_p(1, 1), 1, 0, "1v1 capped");
    CHECK_NEAR(sig_mw_min_p(2, 2), 1.0 / 3, 1e-15, "2v2");
    CHECK_NEAR(sig_mw_min_p(0, 5), 1, 0, "empty group");
    CHECK(sig_mw_min_p(3, 3) > 0.05, "3 vs 3 can never reach p < 0.05");
    CHECK(sig_mw_min_p(4, 4) < 0.05, "4 vs 4 can");
    static const int sz[][2] = {{3, 3}, {5, 5}, {7, 4}, {2, 9}};
    for (size_t s = 0; s < sizeof sz / sizeof sz[0]; s++) {
        double a[12], b[12], u, p;
        samples_with_u(sz[s][0], sz[s][1], 0, a, b);
        CHECK(sig_mann_whitney(a, (size_t)sz[s][0], b, (size_t)sz[s][1], &u, &p) == 0, "rc");
        CHECK_NEAR(p, sig_mw_min_p((size_t)sz[s][0], (size_t)sz[s][1]), 1e-15,
                   "separation reaches min p");
    }
}

/* ---- bootstrap ------------------------------------------------------------------- */

/* n values 100 * scale * (1 + rel * N(0, 1)). */
static void fill(double *x, size_t n, double scale, double rel, uint64_t *s) {
    for (size_t i = 0; i < n; i++) x[i] = 100 * scale * (1 + rel * t_gauss(s));
}

/* Same seed, same interval (bit for bit); another seed, a slightly different
 * one; the input arrays are not modified. */
static void test_boot_determinism(void) {
    uint64_t s = 7;
    double base[10], cand[10], copy[10], lo1, hi1, lo2, hi2, lo3, hi3;
    fill(base, 10, 1, 0.05, &s);
    fill(cand, 10, 1, 0.05, &s);
    memcpy(copy, base, sizeof copy);
    CHECK(sig_bootstrap_ratio_ci(base, 10, cand, 10, 2000, 1, 0.05, &lo1, &hi1) == 0, "rc");
    CHECK(sig_bootstrap_ratio_ci(base, 10, cand, 10, 2000, 1, 0.05, &lo2, &hi2) == 0, "rc");
    CHECK(lo1 == lo2 && hi1 == hi2, "same seed: [%.17g, %.17g] vs [%.17g, %.17g]", lo1, hi1,
          lo2, hi2);
    CHECK(memcmp(copy, base, sizeof copy) == 0, "input untouched");
    CHECK(sig_bootstrap_ratio_ci(base, 10, cand, 10, 2000, 2, 0.05, &lo3, &hi3) == 0, "rc");
    CHECK(lo3 != lo1 || hi3 != hi1, "another seed gives another interval");
    CHECK(fabs(lo3 - lo1) < 0.03 && fabs(hi3 - hi1) < 0.03,
          "but only slightly: [%g, %g] vs [%g, %g]", lo1, hi1, lo3, hi3);
    CHECK(lo1 < hi1, "lo < hi");
}

/* A/A: both groups from one distribution -> the 95% CI contains 1. A/B with
 * cand = 1.2 x base in distribution (1% noise, n = 10): around 1.2,
 * excluding 1. */
static void test_boot_location(void) {
    uint64_t s = 11;
    double base[10], cand[10], lo, hi;
    fill(base, 10, 1, 0.03, &s);
    fill(cand, 10, 1, 0.03, &s);
    CHECK(sig_bootstrap_ratio_ci(base, 10, cand, 10, 4000, 3, 0.05, &lo, &hi) == 0, "rc");
    CHECK(lo <= 1 && hi >= 1, "A/A CI [%g, %g] contains 1", lo, hi);
    CHECK(hi - lo < 0.1, "A/A CI [%g, %g] is narrow", lo, hi);

    fill(base, 10, 1, 0.01, &s);
    fill(cand, 10, 1.2, 0.01, &s);
    CHECK(sig_bootstrap_ratio_ci(base, 10, cand, 10, 4000, 3, 0.05, &lo, &hi) == 0, "rc");
    CHECK(lo > 1.17 && hi < 1.23, "A/B CI [%g, %g] around 1.2", lo, hi);
    CHECK(lo < 1.2 && hi > 1.2, "A/B CI [%g, %g] contains the true 1.2", lo, hi);
    CHECK(lo > 1, "A/B CI excludes 1");
}

/* Coverage: 200 A/A pairs of n = 10 (seeds 1000..1199): the 95% CI contains
 * 1 in at least 90% of them (measured: see the message on failure). */
static void test_boot_coverage(void) {
    int covered = 0;
    for (int k = 0; k < 200; k++) {
        uint64_t s = 1000 + (uint64_t)k;
        double base[10], cand[10], lo, hi;
        fill(base, 10, 1, 0.05, &s);
        fill(cand, 10, 1, 0.05, &s);
        if (sig_bootstrap_ratio_ci(base, 10, cand, 10, 1000, (uint64_t)k, 0.05, &lo, &hi) == 0 &&
            lo <= 1 && hi >= 1)
            covered++;
    }
    CHECK(covered >= 180, "A/A coverage %d / 200", covered);
}

/* Degenerate and exactly known cases. One value per group: the interval is
 * the point ratio. base = {50}, cand = {1, 2}: resample medians of cand are
 * 1, 1.5, 2 with probabilities 1/4, 1/2, 1/4, so the 2.5% and 97.5%
 * percentiles of the ratio are 1/50 and 2/50 exactly. iters = 1: lo = hi. */
static void test_boot_degenerate(void) {
    double b1[] = {4}, c1[] = {5}, lo, hi;
    CHECK(sig_bootstrap_ratio_ci(b1, 1, c1, 1, 500, 9, 0.05, &lo, &hi) == 0, "rc");
    CHECK(lo == 1.25 && hi == 1.25, "n = 1: [%g, %g] = 1.25", lo, hi);
    double b2[] = {50}, c2[] = {1, 2};
    CHECK(sig_bootstrap_ratio_ci(b2, 1, c2, 2, 4000, 9, 0.05, &lo, &hi) == 0, "rc");
    CHECK(lo == 1.0 / 50 && hi == 2.0 / 50, "three-valued: [%g, %g]", lo, hi);
    CHECK(sig_bootstrap_ratio_ci(b2, 1, c2, 2, 4000, 9, 0.6, &lo, &hi) == 0, "rc");
    CHECK(lo == 1.5 / 50 && hi == 1.5 / 50, "central 40%%: [%g, %g]", lo, hi);
    /* cand = {1, 2, 3}: resample medians 1, 2, 3 with probabilities 7/27,
     * 13/27, 7/27 (median 1 needs at least two of the three draws to be 1:
     * 3 * (1/3)^2 * (2/3) + (1/3)^3). alpha = 0.4 -> the 20th and 80th
     * percentiles: 1/50 and 3/50 (the 40th would be 2/50). */
    double c4[] = {1, 2, 3};
    CHECK(sig_bootstrap_ratio_ci(b2, 1, c4, 3, 4000, 9, 0.4, &lo, &hi) == 0, "rc");
    CHECK(lo == 1.0 / 50 && hi == 3.0 / 50, "alpha/2 tails: [%g, %g]", lo, hi);
    double b3[] = {1, 2, 3}, c3[] = {2, 3, 4};
    CHECK(sig_bootstrap_ratio_ci(b3, 3, c3, 3, 1, 9, 0.05, &lo, &hi) == 0, "rc");
    CHECK(lo == hi && lo > 0, "iters = 1: a single ratio %g", lo);
}

/* numpy 'linear' interpolation: with iters = 2 the ratios are some r1 <= r2
 * (the same for any alpha at one seed: alpha does not touch the generator),
 * and percentile q is r1 + q/100 (r2 - r1). alpha = 0.5 gives r1 + d/4 and
 * r1 + 3d/4, hence r1 and d; alpha = 0.05 must then give r1 + 0.025 d and
 * r1 + 0.975 d. */
static void test_boot_interpolation(void) {
    double base[] = {1, 2, 3, 4}, cand[] = {2, 3, 5, 8}, lo, hi, lo5, hi5;
    int checked = 0;
    for (uint64_t seed = 1; seed <= 20 && checked < 5; seed++) {
        CHECK(sig_bootstrap_ratio_ci(base, 4, cand, 4, 2, seed, 0.5, &lo, &hi) == 0, "rc");
        double d = 2 * (hi - lo), r1 = lo - d / 4;
        if (!(d > 0)) continue;
        checked++;
        CHECK(sig_bootstrap_ratio_ci(base, 4, cand, 4, 2, seed, 0.05, &lo5, &hi5) == 0, "rc");
        CHECK_NEAR(lo5, r1 + 0.025 * d, 1e-12, "2.5th percentile of two ratios");
        CHECK_NEAR(hi5, r1 + 0.975 * d, 1e-12, "97.5th percentile of two ratios");
    }
    CHECK(checked == 5, "found %d seeds with two distinct ratios", checked);
}

/* Error codes: base median <= 0 -> SIG_ENONPOS (-1); a positive base median
 * whose resamples can reach a non-positive median -> SIG_ENONPOS; bad
 * arguments -> CX_EINVAL, with the outputs NaN. */
static void test_boot_errors(void) {
    double lo = 0, hi = 0, c[] = {1, 2, 3};
    double zero[] = {0, 0, 1}, neg[] = {-3, -1, 2}, mixed[] = {-1, 1, 2};
    CHECK(SIG_ENONPOS == -1, "documented value");
    CHECK(sig_bootstrap_ratio_ci(zero, 3, c, 3, 100, 1, 0.05, &lo, &hi) == SIG_ENONPOS, "zero");
    CHECK(isnan(lo) && isnan(hi), "NaN outputs on error");
    CHECK(sig_bootstrap_ratio_ci(neg, 3, c, 3, 100, 1, 0.05, &lo, &hi) == SIG_ENONPOS, "neg");
    CHECK(sig_bootstrap_ratio_ci(mixed, 3, c, 3, 1000, 1, 0.05, &lo, &hi) == SIG_ENONPOS,
          "resample median <= 0");
    double inf[] = {1, INFINITY}, nan[] = {1, NAN};
    CHECK(sig_bootstrap_ratio_ci(c, 3, inf, 2, 100, 1, 0.05, &lo, &hi) == CX_EINVAL, "inf");
    CHECK(sig_bootstrap_ratio_ci(nan, 2, c, 3, 100, 1, 0.05, &lo, &hi) == CX_EINVAL, "nan");
    CHECK(sig_bootstrap_ratio_ci(c, 0, c, 3, 100, 1, 0.05, &lo, &hi) == CX_EINVAL, "nb 0");
    CHECK(sig_bootstrap_ratio_ci(c, 3, c, 0, 100, 1, 0.05, &lo, &hi) == CX_EINVAL, "nc 0");
    CHECK(sig_bootstrap_ratio_ci(c, 3, c, 3, 0, 1, 0.05, &lo, &hi) == CX_EINVAL, "iters 0");
    CHECK(sig_bootstrap_ratio_ci(c, 3, c, 3, 10, 1, 0, &lo, &hi) == CX_EINVAL, "alpha 0");
    CHECK(sig_bootstrap_ratio_ci(c, 3, c, 3, 10, 1, 1, &lo, &hi) == CX_EINVAL, "alpha 1");
    CHECK(sig_bootstrap_ratio_ci(c, 3, c, 3, 10, 1, NAN, &lo, &hi) == CX_EINVAL, "alpha NaN");
    CHECK(sig_bootstrap_ratio_ci(c, 3, c, 3, 10, 1, 0.05, NULL, &hi) == CX_EINVAL, "NULL lo");
}

/* ---- change points ------------------------------------------------------------------ */

/* The newest point against the last fitted level: by hand; after a step;
 * the threshold; rates on noise and on a drop; short series and errors. */
static void test_latest(void) {
    sig_latest_check k;
    /* level: median of the 7 before = 10; differences 1 x 6 and 4: sigma = 1.4826 / sqrt 2 */
    double y[] = {10, 11, 10, 11, 10, 11, 10, 6};
    CHECK(sig_latest(y, 8, NULL, 0, 3, 0, &k) == 0, "rc");
    CHECK(k.flag && k.k == 7, "flag %d k %zu", k.flag, k.k);
    CHECK_NEAR(k.level, 10, 0, "level");
    CHECK_NEAR(k.sigma, 1.4826 / sqrt(2.0), 1e-12, "sigma");
    CHECK_NEAR(k.change, -0.4, 1e-12, "change");
    CHECK(sig_latest(y, 8, NULL, 0, 3, 0.5, &k) == 0 && !k.flag, "40%% is within a 50%% threshold");
    CHECK(sig_latest(y, 8, NULL, 0, 4, 0, &k) == 0 && !k.flag, "4 is within 4 sigma (4.19)");
    y[7] = 7; /* 3 below: within 3 sigma (3.15) */
    CHECK(sig_latest(y, 8, NULL, 0, 3, 0, &k) == 0 && !k.flag, "3 below is within 3 sigma");
    /* after a step at 4 the level is the new segment's, not the whole series' */
    double z[] = {10, 10.5, 10, 10.5, 20, 20.5, 20, 20.5, 20, 14};
    size_t cp[] = {4};
    CHECK(sig_latest(z, 10, cp, 1, 3, 0, &k) == 0 && k.k == 5 && k.level == 20 && k.flag, "level %g k %zu", k.level, k.k);
    CHECK_NEAR(k.change, -0.3, 1e-12, "30%% below the new level");
    /* too short to judge */
    CHECK(sig_latest(y, 2, NULL, 0, 3, 0, &k) == 0 && k.k == 0 && !k.flag && isnan(k.level), "n = 2 not judged");
    /* errors */
    double bad[] = {1, NAN, 2, 3};
    size_t out_of_range[] = {4};
    CHECK(sig_latest(bad, 4, NULL, 0, 3, 0, &k) == CX_EINVAL, "NaN");
    CHECK(sig_latest(z, 10, NULL, 1, 3, 0, &k) == CX_EINVAL, "cp NULL with ncp 1");
    CHECK(sig_latest(z, 4, out_of_range, 1, 3, 0, &k) == CX_EINVAL, "cp past the end");
    CHECK(sig_latest(z, 10, NULL, 0, -1, 0, &k) == CX_EINVAL, "k_sigma < 0");
    CHECK(sig_latest(z, 10, NULL, 0, 3, NAN, &k) == CX_EINVAL, "threshold NaN");
    CHECK(sig_latest(z, 10, NULL, 0, 3, 0, NULL) == CX_EINVAL, "NULL out");
    /* normal noise, n = 20: rarely flagged at 3 sigma; a 5-sigma drop on the newest almost always */
    int noise = 0, drop = 0;
    for (uint64_t seed = 1; seed <= 2000; seed++) {
        uint64_t st = seed;
        double w[20];
        for (int i = 0; i < 20; i++) w[i] = 100 + t_gauss(&st);
        sig_latest(w, 20, NULL, 0, 3, 0, &k);
        noise += k.flag;
        w[19] -= 5;
        sig_latest(w, 20, NULL, 0, 3, 0, &k);
        drop += k.flag;
    }
    CHECK(noise <= 50, "noise flagged in %d of 2000 series (measured: 37)", noise);
    CHECK(drop >= 1750, "a 5-sigma drop flagged in %d of 2000 series (measured: 1790)", drop);
}

/* Run sig_steps with the default penalty and min_seg 2; returns ncp. */
static size_t steps_default(const double *y, size_t n, size_t *cp) {
    size_t ncp = 99;
    int rc = sig_steps(y, n, 0, sig_default_penalty(y, n), cp, &ncp);
    CHECK(rc == 0, "sig_steps rc %d", rc);
    return ncp;
}

/* One clean step: 20 points at 10 then 20 at 12, noise sd 0.1 (a 20-sigma
 * step): exactly one change point, at index 20, for 50 different seeds. */
static void test_steps_one(void) {
    int exact = 0;
    for (uint64_t seed = 1; seed <= 50; seed++) {
        uint64_t s = seed;
        double y[40];
        size_t cp[40];
        for (int i = 0; i < 40; i++) y[i] = (i < 20 ? 10 : 12) + 0.1 * t_gauss(&s);
        size_t ncp = steps_default(y, 40, cp);
        if (ncp == 1 && cp[0] == 20) exact++;
    }
    CHECK(exact == 50, "one step at 20 in %d / 50 series", exact);
    /* Noise-free: the penalty falls back from the (zero) difference MAD. */
    double z[20];
    size_t cp[20];
    for (int i = 0; i < 20; i++) z[i] = i < 10 ? 5.0 : 6.0;
    CHECK(sig_default_penalty(z, 20) > 0, "fallback penalty > 0");
    size_t ncp = steps_default(z, 20, cp);
    CHECK(ncp == 1 && cp[0] == 10, "noise-free step: ncp %zu cp0 %zu", ncp, ncp ? cp[0] : 0);
}

/* Two steps 10 -> 12 -> 9 at 15 and 30 (noise sd 0.1): found exactly. */
static void test_steps_two(void) {
    int exact = 0;
    for (uint64_t seed = 1; seed <= 50; seed++) {
        uint64_t s = seed * 977;
        double y[45];
        size_t cp[45];
        for (int i = 0; i < 45; i++) y[i] = (i < 15 ? 10 : i < 30 ? 12 : 9) + 0.1 * t_gauss(&s);
        size_t ncp = steps_default(y, 45, cp);
        if (ncp == 2 && cp[0] == 15 && cp[1] == 30) exact++;
    }
    CHECK(exact == 50, "two steps at 15, 30 in %d / 50 series", exact);
}

/* No step: constant series with noise (n = 40 and 100, 100 seeds each, and
 * exactly constant ones) give no change point. */
static void test_steps_none(void) {
    int fired = 0;
    for (uint64_t seed = 1; seed <= 100; seed++) {
        uint64_t s = seed * 31;
        double y[100];
        size_t cp[100];
        for (int i = 0; i < 100; i++) y[i] = 50 + t_gauss(&s);
        if (steps_default(y, 40, cp) != 0) fired++;
        if (steps_default(y, 100, cp) != 0) fired++;
    }
    CHECK(fired == 0, "change points in %d pure-noise series", fired);
    double c[30];
    size_t cp[30];
    for (int i = 0; i < 30; i++) c[i] = 0.1;
    CHECK(steps_default(c, 30, cp) == 0, "constant 0.1");
    for (int i = 0; i < 30; i++) c[i] = 0;
    CHECK(steps_default(c, 30, cp) == 0, "constant 0");
}

/* A single outlier (+100 sigma) anywhere, even at either end, is not a
 * segment: min_seg 2 and the L1 cost absorb it. */
static void test_steps_outlier(void) {
    int fired = 0;
    for (int pos = 0; pos < 40; pos++) {
        uint64_t s = 5;
        double y[40];
        size_t cp[40];
        for (int i = 0; i < 40; i++) y[i] = 10 + 0.1 * t_gauss(&s);
        y[pos] += 10;
        if (steps_default(y, 40, cp) != 0) fired++;
        y[pos] -= 20; /* a dip */
        if (steps_default(y, 40, cp) != 0) fired++;
    }
    CHECK(fired == 0, "%d single outliers became change points", fired);
}

/* min_seg is honoured: a 3-point plateau is two change points with min_seg 2
 * or 3, and cannot be isolated with min_seg 4 (every segment >= 4). */
static void test_steps_min_seg(void) {
    double y[30];
    size_t cp[30], ncp;
    for (int i = 0; i < 30; i++) y[i] = i >= 10 && i < 13 ? 100 : 10;
    CHECK(sig_steps(y, 30, 2, 5, cp, &ncp) == 0 && ncp == 2 && cp[0] == 10 && cp[1] == 13,
          "plateau, min_seg 2: ncp %zu", ncp);
    CHECK(sig_steps(y, 30, 3, 5, cp, &ncp) == 0 && ncp == 2 && cp[0] == 10 && cp[1] == 13,
          "plateau, min_seg 3: ncp %zu", ncp);
    CHECK(sig_steps(y, 30, 4, 5, cp, &ncp) == 0, "rc");
    size_t start = 0;
    int ok = 1;
    for (size_t k = 0; k <= ncp; k++) {
        size_t end = k < ncp ? cp[k] : 30;
        if (end - start < 4) ok = 0;
        start = end;
    }
    CHECK(ok, "min_seg 4: every segment at least 4 long");
    /* Shorter than 2 * min_seg: no change point possible. */
    CHECK(sig_steps(y, 3, 2, 0, cp, &ncp) == 0 && ncp == 0, "n = 3");
    CHECK(sig_steps(y, 0, 2, 0, cp, &ncp) == 0 && ncp == 0, "n = 0");
}

/* L1 cost of y[i..j) around its median (reference, by sorting a copy). */
static double seg_cost(const double *y, size_t i, size_t j) {
    double t[16];
    memcpy(t, y + i, (j - i) * sizeof *t);
    double m = sig_median(t, j - i), c = 0;
    for (size_t k = i; k < j; k++) c += fabs(y[k] - m);
    return c;
}

/* Total objective of the partition given by cp (penalty per segment). */
static double part_cost(const double *y, size_t n, const size_t *cp, size_t ncp, double pen) {
    double c = 0;
    size_t start = 0;
    for (size_t k = 0; k <= ncp; k++) {
        size_t end = k < ncp ? cp[k] : n;
        c += seg_cost(y, start, end) + pen;
        start = end;
    }
    return c;
}

/* The DP is optimal: on 200 random short series (n = 12, random steps and
 * heavy noise, random penalty and min_seg 1..3) its partition's objective
 * equals the minimum over every one of the 2^11 partitions. */
static void test_steps_bruteforce(void) {
    int bad = 0;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        uint64_t s = seed * 7919;
        size_t n = 12, min_seg = 1 + (size_t)(seed % 3), cp[12], ncp;
        double y[12], level = 0;
        for (size_t i = 0; i < n; i++) {
            if (t_unif(&s) < 0.2) level += 4 * t_gauss(&s);
            y[i] = level + t_gauss(&s);
        }
        double pen = 4 * t_unif(&s);
        if (sig_steps(y, n, min_seg, pen, cp, &ncp) != 0) {
            bad++;
            continue;
        }
        double best = INFINITY;
        for (unsigned mask = 0; mask < (1u << (n - 1)); mask++) {
            size_t bcp[12], nb = 0, start = 0;
            int ok = 1;
            for (size_t k = 1; k < n; k++)
                if (mask & (1u << (k - 1))) bcp[nb++] = k;
            for (size_t k = 0; k <= nb; k++) {
                size_t end = k < nb ? bcp[k] : n;
                if (end - start < min_seg) ok = 0;
                start = end;
            }
            if (ok) {
                double c = part_cost(y, n, bcp, nb, pen);
                if (c < best) best = c;
            }
        }
        if (fabs(part_cost(y, n, cp, ncp, pen) - best) > 1e-9) bad++;
    }
    CHECK(bad == 0, "%d series where sig_steps is not optimal", bad);
}

/* Penalty formula: y alternating 0, 1 (n = 10): every |difference| is 1, so
 * sigma = 1.4826 / sqrt 2 and the penalty is 3 sigma ln 10; bad input. */
static void test_steps_penalty_and_errors(void) {
    double y[10];
    for (int i = 0; i < 10; i++) y[i] = i % 2;
    CHECK_NEAR(sig_default_penalty(y, 10), 3 * 1.4826 / sqrt(2.0) * log(10.0), 1e-12,
               "default penalty");
    CHECK(sig_default_penalty(y, 1) == 0, "n = 1");
    size_t cp[10], ncp = 7;
    CHECK(sig_steps(y, 10, 2, -1, cp, &ncp) == CX_EINVAL && ncp == 0, "negative penalty");
    CHECK(sig_steps(y, 10, 2, NAN, cp, &ncp) == CX_EINVAL, "NaN penalty");
    y[3] = NAN;
    CHECK(sig_steps(y, 10, 2, 1, cp, &ncp) == CX_EINVAL, "NaN value");
    y[3] = INFINITY;
    CHECK(sig_steps(y, 10, 2, 1, cp, &ncp) == CX_EINVAL, "infinite value");
    CHECK(sig_steps(NULL, 10, 2, 1, cp, &ncp) == CX_EINVAL, "NULL y");
}

/* A longer series runs in reasonable time and finds its one step. */
static void test_steps_long(void) {
    size_t n = 1500;
    double *y = malloc(n * sizeof *y);
    size_t *cp = malloc(n * sizeof *cp);
    uint64_t s = 3;
    for (size_t i = 0; i < n; i++) y[i] = (i < 900 ? 100 : 97) + t_gauss(&s);
    size_t ncp = steps_default(y, n, cp);
    CHECK(ncp == 1 && cp[0] >= 895 && cp[0] <= 905, "n 1500: ncp %zu cp0 %zu", ncp,
          ncp ? cp[0] : 0);
    free(y);
    free(cp);
}

/* ---- median ------------------------------------------------------------------------ */

/* numpy.median convention, sorting in place. */
static void test_median(void) {
    double a[] = {3, 1, 2}, b[] = {4, 1, 3, 2}, c[] = {5};
    CHECK_NEAR(sig_median(a, 3), 2, 0, "odd");
    CHECK(a[0] == 1 && a[1] == 2 && a[2] == 3, "sorted in place");
    CHECK_NEAR(sig_median(b, 4), 2.5, 0, "even");
    CHECK_NEAR(sig_median(c, 1), 5, 0, "one");
    CHECK(isnan(sig_median(c, 0)), "empty");
}

TEST_MAIN({
    test_mw_separated();
    test_mw_interleaved();
    test_mw_table_8_8();
    test_mw_exact_grid();
    test_mw_symmetry();
    test_mw_ties();
    test_mw_asymptotic();
    test_mw_errors();
    test_mw_min_p();
    test_boot_determinism();
    test_boot_location();
    test_boot_coverage();
    test_boot_degenerate();
    test_boot_interpolation();
    test_boot_errors();
    test_steps_one();
    test_steps_two();
    test_steps_none();
    test_steps_outlier();
    test_steps_min_seg();
    test_steps_bruteforce();
    test_steps_penalty_and_errors();
    test_steps_long();
    test_latest();
    test_median();
})
