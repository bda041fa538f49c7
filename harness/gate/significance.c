/*
 * significance.c - bootstrap CIs, the Mann-Whitney U test and change-point
 * detection for the regression gate and `cortex-bench trend`.
 *
 * Determinism: the bootstrap draws from xoshiro256** seeded by splitmix64
 * from the caller's seed, state on the stack; index draws are unbiased
 * (rejection), sorts are qsort over totally ordered doubles. Same input, same
 * output, on any platform with IEEE doubles.
 *
 * The default change-point penalty (sig_default_penalty), and why:
 *   penalty = 3 * sigma * ln(n), sigma = robust noise level (see the header).
 *   Noise: splitting a segment of pure noise at its best position lowers the
 *   L1 cost by about 0.63 * sigma * X (the sample median's squared excursion
 *   times the density at the median, 1 / (sigma sqrt(2 pi)) for normal
 *   noise), X being the maximum over split positions of a chi-square(1)-like
 *   statistic, which grows only like 2 ln ln n: typically < 5 sigma, rarely
 *   above 10 sigma. The penalty is 9 sigma at n = 20, 11 sigma at n = 40,
 *   21 sigma at n = 1000, so noise does not pay for a change point; a
 *   2-point segment around a pair of outliers inside the series costs two
 *   penalties. Shifts: a step of D between segments of L1 and L2 points
 *   lowers the cost by about 0.4 D^2 / sigma * L1 L2 / (L1 + L2) for D near
 *   sigma and, for equal halves, by nearly (L1 + L2) * (D/2 - 0.8 sigma) for D
 *   of a few sigma (each point's distance to its own median instead of the
 *   shared one midway):
 *   20 + 20 points shifted by 3 sigma save about 28 sigma against 11.
 *   Measured with this code (normal noise, default penalty, min_seg 2,
 *   seeds 1000..): any change point in pure noise: 0.4% of 2000 series of
 *   n = 20, 0.3% at n = 40, none of 1000 at n = 100, none of 300 at n = 200,
 *   none of 50 at n = 1000; with 5% of points +10 sigma outliers (slow runs):
 *   2.3% at n = 20, 1.9% at n = 40, 0.7% at n = 200. A step found: 3 sigma
 *   between 10 + 10 points 86%, 20 + 20 100% (97% placed within +-1 of the
 *   true index); 2 sigma 20 + 20 80%, 50 + 50 100%; 1.5 sigma 20 + 20 39%.
 *   3 ln n is a BIC-like ln n per extra segment made 3-4 times stricter (BIC
 *   with a Laplace likelihood of scale b = 0.8 sigma and 2 parameters per
 *   segment, level and position, charges about 0.8 sigma ln n); with 2
 *   instead of 3 noise fires in 1-2.4% of normal series and 6-7% of series
 *   with outliers, too often for a trend report that must not cry wolf.
 */
#include "significance.h"

#include "rng.h"
#include "stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cortex.h"

/* ---- small helpers ---------------------------------------------------------- */

/* numpy 'linear' percentile (0 <= p <= 100) of n >= 1 sorted values; the same
 * rule as stats_percentile, repeated so this file links on its own. */
static double percentile_sorted(const double *s, size_t n, double p) {
    double h = p / 100.0 * (double)(n - 1);
    size_t k = (size_t)h;
    if (k >= n - 1) return s[n - 1];
    return s[k] + (h - (double)k) * (s[k + 1] - s[k]);
}

/* Median of n >= 1 sorted values (mean of the two middle ones when n is even),
 * so the bootstrap and sig_median agree with numpy.median. */
static double median_sorted(const double *s, size_t n) {
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

/* Sort x in place and return its median: callers that need the median of
 * their own scratch copy need nothing else. */
double sig_median(double *x, size_t n) {
    if (!x || n == 0) return NAN;
    stats_sort(x, n);
    return median_sorted(x, n);
}

/* ---- random numbers ------------------------------------------------------------ */

/* Uniform index in [0, n) from the harness RNG (rejection sampling, no bias). */
static size_t rng_index(rng *r, size_t n) { return (size_t)rng_below(r, (uint64_t)n); }

/* ---- bootstrap ------------------------------------------------------------------ */

/* Median of a with-replacement resample of the n sorted values s, without
 * building the resample: draw n indices, count each (cnt, n entries, zeroed
 * here), then walk the counts to the middle rank(s). The resample sorted is
 * s[i] repeated cnt[i] times, so this is its median exactly, in O(n). */
static double resample_median(const double *s, size_t n, size_t *cnt, rng *r) {
    if (n == 1) return s[0];
    memset(cnt, 0, n * sizeof *cnt);
    for (size_t k = 0; k < n; k++) cnt[rng_index(r, n)]++;
    size_t lo_rank = (n - 1) / 2, hi_rank = n / 2; /* equal when n is odd */
    size_t seen = 0, i = 0;
    while (seen + cnt[i] <= lo_rank) seen += cnt[i++];
    double lo = s[i];
    while (seen + cnt[i] <= hi_rank) seen += cnt[i++];
    return 0.5 * (lo + s[i]);
}

/* Percentile bootstrap of median(cand) / median(base): see significance.h.
 * Both groups are sorted once; each iteration resamples base then cand from
 * one generator stream, so the interval is a pure function of the inputs. */
int sig_bootstrap_ratio_ci(const double *base, size_t nb, const double *cand, size_t nc,
                           int iters, uint64_t seed, double alpha, double *lo, double *hi) {
    if (lo) *lo = NAN;
    if (hi) *hi = NAN;
    if (!base || !cand || !lo || !hi || nb == 0 || nc == 0 || iters < 1 ||
        !(alpha > 0 && alpha < 1))
        return CX_EINVAL;
    for (size_t i = 0; i < nb; i++)
        if (!isfinite(base[i])) return CX_EINVAL;
    for (size_t i = 0; i < nc; i++)
        if (!isfinite(cand[i])) return CX_EINVAL;

    size_t nr = (size_t)iters;
    double *buf = malloc((nb + nc + nr) * sizeof *buf);
    size_t *cnt = malloc((nb > nc ? nb : nc) * sizeof *cnt);
    if (!buf || !cnt) {
        free(buf);
        free(cnt);
        return CX_ENOMEM;
    }
    double *sb = buf, *sc = buf + nb, *ratio = buf + nb + nc;
    memcpy(sb, base, nb * sizeof *sb);
    memcpy(sc, cand, nc * sizeof *sc);
    stats_sort(sb, nb);
    stats_sort(sc, nc);
    int rc = 0;
    if (!(median_sorted(sb, nb) > 0)) {
        rc = SIG_ENONPOS;
        goto out;
    }
    rng gen;
    rng_seed(&gen, seed, 0);
    for (size_t it = 0; it < nr; it++) {
        double mb = resample_median(sb, nb, cnt, &gen);
        double mc = resample_median(sc, nc, cnt, &gen);
        if (!(mb > 0)) {
            rc = SIG_ENONPOS;
            goto out;
        }
        ratio[it] = mc / mb;
    }
    stats_sort(ratio, nr);
    *lo = percentile_sorted(ratio, nr, 100.0 * alpha / 2);
    *hi = percentile_sorted(ratio, nr, 100.0 * (1 - alpha / 2));
out:
    free(buf);
    free(cnt);
    return rc;
}

/* ---- Mann-Whitney U ------------------------------------------------------------- */

/* One pooled observation: its value and whether it came from sample a. */
typedef struct mw_obs {
    double v;
    int from_a;
} mw_obs;

/* qsort order of pooled observations by value (ties in any order: midranks
 * do not depend on it). */
static int cmp_obs(const void *a, const void *b) {
    double x = ((const mw_obs *)a)->v, y = ((const mw_obs *)b)->v;
    return (x > y) - (x < y);
}

/* Standard normal upper tail 1 - Phi(z), accurate far into the tail (erfc,
 * not 1 - erf). */
static double norm_sf(double z) { return 0.5 * erfc(z / sqrt(2.0)); }

/* Exact two-sided p of U = umin (an integer <= m n / 2 here) for samples of
 * m and n without ties. The null counts c[k] of arrangements with U = k are
 * the coefficients of the Gaussian binomial [m+n choose m]_q =
 * prod_{i=1..m} (1 - q^{n+i}) / (1 - q^i); the product is built one factor
 * at a time (multiply by 1 - q^{n+i}, then divide by 1 - q^i, i.e. the running
 * sum c[k] += c[k-i]): a DP over counts in O(m * m n) with exact integers
 * (every count <= 2 C(50, 25) < 2^63). Returns -1 on allocation failure. */
static double mw_exact_p(size_t m, size_t n, double umin) {
    size_t deg = m * n;
    int64_t *c = calloc(deg + 1, sizeof *c);
    if (!c) return -1;
    c[0] = 1;
    for (size_t i = 1; i <= m; i++) {
        for (size_t k = deg; k >= n + i && k <= deg; k--) c[k] -= c[k - (n + i)];
        for (size_t k = i; k <= deg; k++) c[k] += c[k - i];
    }
    double total = 0, tail = 0;
    for (size_t k = 0; k <= deg; k++) {
        total += (double)c[k];
        if ((double)k <= umin) tail += (double)c[k];
    }
    free(c);
    double p = 2 * tail / total;
    return p > 1 ? 1 : p;
}

/* Mann-Whitney U and its two-sided p (see significance.h): pooled sort,
 * midranks for tied groups, U = R_a - na (na + 1) / 2; exact null
 * distribution for small tie-free samples, else scipy's asymptotic formula. */
int sig_mann_whitney(const double *a, size_t na, const double *b, size_t nb,
                     double *u, double *p_two_sided) {
    if (u) *u = NAN;
    if (p_two_sided) *p_two_sided = NAN;
    if (!a || !b || na == 0 || nb == 0) return CX_EINVAL;
    for (size_t i = 0; i < na; i++)
        if (isnan(a[i])) return CX_EINVAL;
    for (size_t i = 0; i < nb; i++)
        if (isnan(b[i])) return CX_EINVAL;
    size_t n = na + nb;
    mw_obs *o = malloc(n * sizeof *o);
    if (!o) return CX_ENOMEM;
    for (size_t i = 0; i < na; i++) o[i] = (mw_obs){a[i], 1};
    for (size_t i = 0; i < nb; i++) o[na + i] = (mw_obs){b[i], 0};
    qsort(o, n, sizeof *o, cmp_obs);

    double rank_a = 0, tie_term = 0;
    int ties = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && o[j].v == o[i].v) j++;
        double t = (double)(j - i), midrank = 0.5 * (double)(i + 1 + j); /* ranks i+1..j */
        for (size_t k = i; k < j; k++)
            if (o[k].from_a) rank_a += midrank;
        if (j - i > 1) {
            ties = 1;
            tie_term += t * t * t - t;
        }
        i = j;
    }
    free(o);
    double dna = (double)na, dnb = (double)nb, dn = (double)n;
    double u_a = rank_a - dna * (dna + 1) / 2, u_other = dna * dnb - u_a;
    double p;
    if (!ties && na <= SIG_MW_EXACT_MAX && nb <= SIG_MW_EXACT_MAX) {
        p = mw_exact_p(na, nb, u_a < u_other ? u_a : u_other);
        if (p < 0) return CX_ENOMEM;
    } else {
        double var = dna * dnb / 12 * ((dn + 1) - tie_term / (dn * (dn - 1)));
        double num = (u_a > u_other ? u_a : u_other) - dna * dnb / 2 - 0.5;
        p = var > 0 ? 2 * norm_sf(num / sqrt(var)) : 1;
        if (p > 1) p = 1;
        if (p < 0) p = 0;
    }
    if (u) *u = u_a;
    if (p_two_sided) *p_two_sided = p;
    return 0;
}

/* 2 / C(na + nb, na), capped at 1: the p of complete separation, the most
 * extreme arrangement the exact test knows. The binomial is built as a
 * running product in doubles (exact while it stays below 2^53). */
double sig_mw_min_p(size_t na, size_t nb) {
    size_t k = na < nb ? na : nb, n = na + nb;
    double c = 1;
    for (size_t i = 1; i <= k; i++) c = c * (double)(n - k + i) / (double)i;
    double p = 2 / c;
    return p > 1 ? 1 : p;
}

/* ---- change points ---------------------------------------------------------------- */

/* A running median with the sum of absolute deviations from it, for one
 * growing segment: a max-heap of the lower half (lo, ceil(k/2) values) and a
 * min-heap of the upper half (hi, floor(k/2)), with their sums. For any m
 * between the two middle values, sum |y - m| = sum(hi) - sum(lo) +
 * (|lo| - |hi|) m, and m = max(lo) is the median when k is odd. */
typedef struct run_med {
    double *lo, *hi; /* heap arrays, capacity n each */
    size_t nlo, nhi;
    double slo, shi;
} run_med;

/* Restore the heap property upwards from index i; sign = +1 for a max-heap,
 * -1 for a min-heap (compare sign * value). */
static void heap_up(double *h, size_t i, double sign) {
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!(sign * h[i] > sign * h[p])) break;
        double t = h[i];
        h[i] = h[p];
        h[p] = t;
        i = p;
    }
}

/* Remove and return the root of a heap of *n values (sign as heap_up). */
static double heap_pop(double *h, size_t *n, double sign) {
    double top = h[0];
    h[0] = h[--*n];
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, r = l + 1, best = i;
        if (l < *n && sign * h[l] > sign * h[best]) best = l;
        if (r < *n && sign * h[r] > sign * h[best]) best = r;
        if (best == i) break;
        double t = h[i];
        h[i] = h[best];
        h[best] = t;
        i = best;
    }
    return top;
}

/* Add one value to the running median, rebalancing so that |lo| is |hi| or
 * |hi| + 1. O(log k). */
static void run_med_add(run_med *m, double x) {
    if (m->nlo == 0 || x <= m->lo[0]) {
        m->lo[m->nlo] = x;
        heap_up(m->lo, m->nlo++, 1);
        m->slo += x;
    } else {
        m->hi[m->nhi] = x;
        heap_up(m->hi, m->nhi++, -1);
        m->shi += x;
    }
    if (m->nlo > m->nhi + 1) {
        double v = heap_pop(m->lo, &m->nlo, 1);
        m->slo -= v;
        m->hi[m->nhi] = v;
        heap_up(m->hi, m->nhi++, -1);
        m->shi += v;
    } else if (m->nhi > m->nlo) {
        double v = heap_pop(m->hi, &m->nhi, -1);
        m->shi -= v;
        m->lo[m->nlo] = v;
        heap_up(m->lo, m->nlo++, 1);
        m->slo += v;
    }
}

/* Sum of |y - median| over the values added so far; clamped at 0 because
 * rounding in the running sums can leave a tiny negative for equal values. */
static double run_med_cost(const run_med *m) {
    double c = m->shi - m->slo + (double)(m->nlo - m->nhi) * m->lo[0];
    return c > 0 ? c : 0;
}

/* Optimal partitioning (Jackson et al. 2005) with the L1-to-median cost:
 * F(0) = 0, F(j) = min over i <= j - min_seg of F(i) + cost(i, j) + penalty.
 * Run forwards: start i is final once all earlier starts have been
 * extended, and one running median grown from i yields cost(i, j) for every
 * j, so each cost is O(log n) and memory O(n). Values are entered relative
 * to y[i] (the cost is shift invariant), which keeps the running sums small
 * and their rounding far below any sensible penalty. */
int sig_steps(const double *y, size_t n, size_t min_seg, double penalty, size_t *cp,
              size_t *ncp) {
    if (ncp) *ncp = 0;
    if (!y || !cp || !ncp || !(penalty >= 0)) return CX_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(y[i])) return CX_EINVAL;
    if (min_seg == 0) min_seg = SIG_STEPS_MIN_SEG;
    if (n < 2 * min_seg) return 0;

    double *f = malloc((3 * n + 1) * sizeof *f);
    size_t *prev = malloc((n + 1) * sizeof *prev);
    if (!f || !prev) {
        free(f);
        free(prev);
        return CX_ENOMEM;
    }
    run_med m = {.lo = f + n + 1, .hi = f + 2 * n + 1};
    f[0] = 0;
    prev[0] = 0;
    for (size_t j = 1; j <= n; j++) f[j] = INFINITY;
    for (size_t i = 0; i + min_seg <= n; i++) {
        if (isinf(f[i])) continue; /* no valid partition of y[0..i) */
        m.nlo = m.nhi = 0;
        m.slo = m.shi = 0;
        for (size_t j = i + 1; j <= n; j++) {
            run_med_add(&m, y[j - 1] - y[i]);
            if (j - i < min_seg) continue;
            double c = f[i] + run_med_cost(&m) + penalty;
            if (c < f[j]) {
                f[j] = c;
                prev[j] = i;
            }
        }
    }
    /* Walk back from n: the segment starts, last first, then reverse. */
    size_t k = 0;
    for (size_t j = prev[n]; j > 0; j = prev[j]) cp[k++] = j;
    for (size_t a = 0, b = k; a + 1 < b; a++, b--) {
        size_t t = cp[a];
        cp[a] = cp[b - 1];
        cp[b - 1] = t;
    }
    *ncp = k;
    free(f);
    free(prev);
    return 0;
}

/* sigma from the first differences (robust to the steps themselves), with
 * fallbacks for data whose typical difference is exactly 0 (see the header). */
double sig_noise(const double *y, size_t n) {
    if (!y || n < 2) return 0;
    double *d = malloc(n * sizeof *d);
    if (!d) return NAN;
    for (size_t i = 0; i + 1 < n; i++) d[i] = fabs(y[i + 1] - y[i]);
    double sigma = 1.4826 * sig_median(d, n - 1) / sqrt(2.0);
    if (!(sigma > 0)) {
        memcpy(d, y, n * sizeof *d);
        double med = sig_median(d, n);
        for (size_t i = 0; i < n; i++) d[i] = fabs(y[i] - med);
        sigma = 1.4826 * sig_median(d, n);
        if (!(sigma > 0)) {
            double s = 0;
            for (size_t i = 0; i < n; i++) s += d[i];
            sigma = s / (double)n;
        }
        if (!(sigma > 0)) sigma = 1e-9 * fabs(med);
    }
    free(d);
    return sigma;
}

/* The 3 ln n scaling is justified at the top of this file. */
double sig_default_penalty(const double *y, size_t n) {
    if (!y || n < 2) return 0;
    return 3 * sig_noise(y, n) * log((double)n);
}

/* See significance.h. The level is the median of the last segment's points
 * before the newest, so the newest point does not pull the level it is
 * judged against. */
int sig_latest(const double *y, size_t n, const size_t *cp, size_t ncp, double k_sigma, double rel_threshold,
               sig_latest_check *out) {
    if (!out) return CX_EINVAL;
    memset(out, 0, sizeof *out);
    out->level = out->change = out->sigma = NAN;
    if (!y || (ncp && !cp) || !(k_sigma >= 0) || isnan(rel_threshold)) return CX_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(y[i])) return CX_EINVAL;
    size_t a = ncp ? cp[ncp - 1] : 0;
    if (ncp && (a == 0 || a >= n)) return CX_EINVAL; /* change points lie inside the series */
    if (n < 3) return 0; /* too short for a noise level that a single point cannot make by itself */
    if (a == n - 1) a = ncp >= 2 ? cp[ncp - 2] : 0; /* a segment of the newest alone (min_seg 1): the one before */
    out->k = n - 1 - a;
    double *tmp = malloc(out->k * sizeof *tmp);
    if (!tmp) return CX_ENOMEM;
    memcpy(tmp, y + a, out->k * sizeof *tmp);
    out->level = sig_median(tmp, out->k);
    free(tmp);
    out->sigma = sig_noise(y, n);
    if (isnan(out->sigma)) return CX_ENOMEM;
    double d = y[n - 1] - out->level;
    out->change = out->level != 0 ? d / fabs(out->level) : NAN;
    out->flag = fabs(d) > k_sigma * out->sigma &&
                (rel_threshold <= 0 || (!isnan(out->change) && fabs(out->change) > rel_threshold));
    return 0;
}
