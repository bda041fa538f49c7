/*
 * significance.h - statistics for the regression gate and `cortex-bench trend`:
 * is a candidate run really slower/faster than its base, and where in a
 * series of commits did a metric step?
 *
 *   sig_bootstrap_ratio_ci  percentile-bootstrap CI of median(cand)/median(base)
 *   sig_mann_whitney        Mann-Whitney U test (exact or normal approximation)
 *   sig_mw_min_p            the smallest p the exact test can give at na, nb
 *   sig_steps               change points of a series (L1 optimal partitioning)
 *   sig_default_penalty     a robust default penalty for sig_steps
 *   sig_noise               the robust noise level (sigma) that penalty is made of
 *   sig_latest              is the newest point off the last fitted level? (a possible step)
 *   sig_median              median, sorting in place
 *
 * Everything is deterministic (the bootstrap's generator is seeded by the
 * caller and lives on the stack), uses no globals, and never modifies its
 * const inputs. Return codes: 0 on success; SIG_ENONPOS (-1) when a ratio is
 * undefined because the base median is not positive; CX_EINVAL (-5: NULL
 * pointer, empty group, NaN or, for the bootstrap and sig_steps, infinite
 * value, bad alpha/iters/penalty) and CX_ENOMEM (-6) from cortex.h. On
 * failure the outputs are NaN (bootstrap, U test) or *ncp = 0 (sig_steps).
 */
#ifndef CX_HARNESS_SIGNIFICANCE_H
#define CX_HARNESS_SIGNIFICANCE_H

#include <stddef.h>
#include <stdint.h>

/* The base group's median (or a bootstrap resample's) is <= 0: no ratio. */
#define SIG_ENONPOS (-1)

/* Exact Mann-Whitney null distribution is used up to this size per group. */
#define SIG_MW_EXACT_MAX 25

/* sig_steps: the minimum segment length used when min_seg is passed as 0. */
#define SIG_STEPS_MIN_SEG 2

/*
 * The median of x[0..n-1] (numpy's: the mean of the two middle values when n
 * is even). Sorts x in place (ascending). NaN when n == 0; x must not hold NaN.
 */
double sig_median(double *x, size_t n);

/*
 * Percentile-bootstrap (1 - alpha) confidence interval of the ratio
 * median(cand) / median(base). Each of `iters` iterations resamples base (nb
 * values) and cand (nc values) independently, with replacement, and takes the
 * ratio of the resamples' medians; *lo and *hi are the alpha/2 and
 * 1 - alpha/2 percentiles of those ratios (numpy 'linear' interpolation, as
 * stats_percentile). Same inputs and seed -> the same interval, bit for bit.
 * A group of one value always resamples to itself, so with nb == nc == 1 the
 * interval is the point ratio. iters >= 1 (1000..10000 is typical); 0 < alpha
 * < 1. Returns SIG_ENONPOS when median(base) <= 0, or when some resample of
 * base has a median <= 0 (only possible when base holds values <= 0);
 * CX_EINVAL for empty groups, non-finite values or bad iters/alpha;
 * CX_ENOMEM. *lo = *hi = NaN on failure.
 */
int sig_bootstrap_ratio_ci(const double *base, size_t nb, const double *cand, size_t nc,
                           int iters, uint64_t seed, double alpha, double *lo, double *hi);

/*
 * Mann-Whitney U test of a against b (two-sided). *u = U of sample a: the
 * number of pairs (a_i, b_j) with a_i > b_j, a tie counting 1/2, so
 * U(b, a) = na * nb - U(a, b). *p_two_sided is, as scipy.stats.mannwhitneyu:
 *   - no ties and na, nb <= SIG_MW_EXACT_MAX: exact, 2 * P(U <= min(U, na*nb - U))
 *     under the null (all C(na+nb, na) rank arrangements equally likely),
 *     capped at 1 (method='exact');
 *   - otherwise: normal approximation with tie correction and continuity
 *     correction (method='asymptotic', use_continuity=True):
 *     z = (max(U, na*nb - U) - na*nb/2 - 1/2) / sigma,
 *     sigma^2 = na*nb/12 * ((N + 1) - sum(t^3 - t) / (N (N - 1))), N = na + nb,
 *     t = the size of each group of tied values; p = 2 * (1 - Phi(z)), clipped
 *     to [0, 1] (1 when every value is tied, sigma = 0).
 * Either output pointer may be NULL. Returns 0, CX_EINVAL (empty group, NaN),
 * CX_ENOMEM.
 */
int sig_mann_whitney(const double *a, size_t na, const double *b, size_t nb,
                     double *u, double *p_two_sided);

/*
 * The smallest two-sided p the exact Mann-Whitney test can produce with
 * groups of na and nb values: 2 / C(na + nb, na), capped at 1 (complete
 * separation). 3 vs 3 -> 0.1, 4 vs 4 -> 0.0286, 5 vs 5 -> 2/252 = 0.0079: a
 * gate at p < 0.05 cannot fire with 3 repetitions per side, whatever the data,
 * and must fall back to another criterion (e.g. non-overlapping CIs).
 */
double sig_mw_min_p(size_t na, size_t nb);

/*
 * Change points of y[0..n-1] (in commit order): the partition into
 * contiguous segments, each at least min_seg long, minimising
 *   sum over segments of ( sum |y_i - median(segment)| + penalty ).
 * Exact optimum by dynamic programming, O(n^2 log n) time, O(n) memory (n in
 * the thousands is fine). The L1 cost makes the fit robust: with min_seg >= 2
 * a single outlier cannot form a segment of its own, and moves the segment
 * medians little. min_seg == 0 means SIG_STEPS_MIN_SEG (2). penalty >= 0, in
 * the units of y (see sig_default_penalty); larger -> fewer change points.
 * On success cp[0..*ncp-1] are the start indices of segments 2..k, ascending
 * (a step between y[cp-1] and y[cp]); cp must have room for n / min_seg
 * entries (n always suffices). Ties between partitions of equal cost are
 * broken towards earlier segment starts (deterministic). Series shorter than
 * 2 * min_seg have no change point. Returns 0, CX_EINVAL (NULL, a NaN or
 * infinite value, penalty < 0 or NaN), CX_ENOMEM; *ncp = 0 on failure.
 * About 0.2 s of CPU for n = 2000 and 0.8 s for n = 5000 (measured here).
 */
int sig_steps(const double *y, size_t n, size_t min_seg, double penalty, size_t *cp,
              size_t *ncp);

/*
 * A robust default penalty for sig_steps: 3 * sigma * ln(n), with sigma the
 * noise level estimated from the first differences, 1.4826 * median|y_{i+1} -
 * y_i| / sqrt(2) (a step moves one difference, not the median of them, so
 * sigma is not inflated by the steps it is meant to find). Fallbacks when that
 * is 0 (quantised or noise-free data): 1.4826 * MAD(y), then the mean
 * absolute deviation from the median, then 1e-9 * |median| (constant series).
 * Why it holds on noise and fires on shifts (with measured rates): see
 * significance.c. 0 for n < 2 (or y NULL); NaN if allocation fails; y must
 * be finite.
 */
double sig_default_penalty(const double *y, size_t n);

/*
 * The noise level sig_default_penalty is made of: sigma = 1.4826 *
 * median|y_{i+1} - y_i| / sqrt(2), with its fallbacks (see above). 0 for
 * n < 2 (or y NULL); NaN if allocation fails; y must be finite.
 */
double sig_noise(const double *y, size_t n);

/* sig_latest's answer. */
typedef struct sig_latest_check {
    int flag;       /* the newest point is off the level by more than k_sigma * sigma and the threshold */
    size_t k;       /* the points the level is the median of (0: the series is too short to judge) */
    double level;   /* the median of those k points; NaN when k is 0 */
    double change;  /* newest / level - 1 (signed, relative to |level|); NaN when the level is 0 or unknown */
    double sigma;   /* sig_noise of the whole series */
} sig_latest_check;

/*
 * A step needs a segment of at least 2 points, so sig_steps cannot see a
 * move at the newest point alone (the night a regression lands). This checks
 * the newest point y[n-1] against the last fitted level: the median of the
 * k points from the last change point (cp[ncp-1], 0 without one) up to but
 * not including the newest (when the newest starts a segment of its own, the
 * segment before). It flags when |y[n-1] - level| > k_sigma * sigma (sigma:
 * sig_noise over the whole series) and, when rel_threshold > 0, also
 * |y[n-1] / level - 1| > rel_threshold (e.g. the gate file's threshold of
 * the metric): a possible step, not confirmed until another point agrees.
 * Series shorter than 3 are not judged (k = 0, flag 0). cp/ncp as sig_steps
 * returns them. Returns 0, CX_EINVAL (NULL out or y, a non-finite value, a
 * change point outside 1..n-1, k_sigma < 0 or NaN, rel_threshold NaN),
 * CX_ENOMEM.
 */
int sig_latest(const double *y, size_t n, const size_t *cp, size_t ncp, double k_sigma, double rel_threshold,
               sig_latest_check *out);

#endif
