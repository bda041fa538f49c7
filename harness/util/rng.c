/*
 * rng.c - see rng.h.
 */
#include "rng.h"

#include <assert.h>
#include <math.h>
#include <stdint.h>

#include "cortex_tools.h"

/* splitmix64 step (cx_splitmix64): used to expand a seed into xoshiro state. */
static uint64_t splitmix64(uint64_t *x) { return cx_splitmix64(x); }

/* Seed from (seed, stream): the stream is hashed and mixed into the splitmix
 * start, so neighbouring streams are unrelated. The state is never all zero
 * (splitmix64 outputs are a bijection of distinct counters). */
void rng_seed(rng *r, uint64_t seed, uint64_t stream) {
    uint64_t h = stream;
    uint64_t x = seed ^ splitmix64(&h);
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

/* Rotate left. */
static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* xoshiro256** (Blackman & Vigna): fast, 256-bit state, passes BigCrush. */
uint64_t rng_next(rng *r) {
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

/* Top 53 bits scaled by 2^-53: every value a multiple of 2^-53 in [0, 1). */
double rng_uniform(rng *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }

/* Rejection sampling: draw below the largest multiple of n, then reduce. */
uint64_t rng_below(rng *r, uint64_t n) {
    assert(n >= 1);
    uint64_t limit = UINT64_MAX - UINT64_MAX % n; /* values >= limit would bias */
    uint64_t x;
    do x = rng_next(r);
    while (x >= limit);
    return x % n;
}

/* Inverse CDF: -log(1 - U) / rate, with 1 - U in (0, 1] so the log is finite. */
double rng_exponential(rng *r, double rate) {
    assert(rate > 0);
    return -rng_log(1.0 - rng_uniform(r)) / rate;
}

/* Marsaglia polar: a uniform point in the unit disc gives a normal; the
 * second normal of the pair is dropped to keep the state to the RNG alone. */
double rng_normal(rng *r) {
    double u, v, s;
    do {
        u = 2.0 * rng_uniform(r) - 1.0;
        v = 2.0 * rng_uniform(r) - 1.0;
        s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    return u * sqrt(-2.0 * rng_log(s) / s);
}

/* ln 2 split so that k * LN2_HI is exact for |k| < 2^20 (fdlibm's constants). */
static const double LN2_HI = 6.93147180369123816490e-01;
static const double LN2_LO = 1.90821492927058770002e-10;

/* log(x) = e ln2 + 2 atanh((m - 1)/(m + 1)) with x = m 2^e, m in [0.707, 1.414):
 * |t| <= 0.172 so 14 odd terms of the atanh series reach 1e-17. */
double rng_log(double x) {
    if (isnan(x) || x < 0) return NAN;
    if (x == 0) return -INFINITY;
    if (isinf(x)) return x;
    int e;
    double m = frexp(x, &e); /* exact: m in [0.5, 1) */
    if (m < 0.70710678118654752440) {
        m *= 2;
        e--;
    }
    double t = (m - 1.0) / (m + 1.0), t2 = t * t, poly = 0;
    for (int k = 13; k >= 0; k--) poly = poly * t2 + 1.0 / (double)(2 * k + 1);
    return (double)e * LN2_HI + ((double)e * LN2_LO + 2.0 * t * poly);
}

/* exp(x) = 2^k e^r with k = round(x / ln2), |r| <= 0.35: a 17-term Taylor
 * series for e^r, then an exact scaling by 2^k. */
double rng_exp(double x) {
    if (isnan(x)) return x;
    if (x > 709.8) return INFINITY;
    if (x < -745.2) return 0;
    double k = floor(x * 1.44269504088896338700 + 0.5);
    double r = (x - k * LN2_HI) - k * LN2_LO;
    double poly = 1;
    for (int n = 17; n >= 1; n--) poly = 1.0 + poly * r / (double)n;
    return ldexp(poly, (int)k);
}

