/*
 * stats.c - percentiles and summaries of benchmark samples. Means and
 * deviations are two-pass (mean first, then squared deviations from it), which
 * keeps the variance accurate when samples are large and close together, as
 * latencies in seconds are.
 */
#include "stats.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cortex.h"

/* numpy 'linear': interpolate between the ranks around p/100 * (n - 1). */
double stats_percentile(const double *sorted, size_t n, double p) {
    assert(sorted && n >= 1 && p >= 0 && p <= 100);
    double h = p / 100.0 * (double)(n - 1);
    size_t lo = (size_t)h; /* floor: h >= 0 */
    if (lo >= n - 1) return sorted[n - 1];
    double frac = h - (double)lo;
    assert(sorted[lo] <= sorted[lo + 1]);
    return sorted[lo] + frac * (sorted[lo + 1] - sorted[lo]);
}

/* qsort order for doubles (no NaNs: callers reject them first). */
static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void stats_sort(double *x, size_t n) {
    if (n > 1) qsort(x, n, sizeof *x, cmp_double);
}

/* Sort a copy, then read min/max/percentiles off it; mean and sample
 * standard deviation in two passes. */
int stats_summarize(const double *x, size_t n, stats_summary *s) {
    assert(s && (x || n == 0));
    memset(s, 0, sizeof *s);
    if (n == 0) return CX_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (isnan(x[i])) return CX_EINVAL;
    double *v = malloc(n * sizeof *v);
    if (!v) return CX_ENOMEM;
    memcpy(v, x, n * sizeof *v);
    stats_sort(v, n);
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += v[i];
    double mean = sum / (double)n, ss = 0;
    for (size_t i = 0; i < n; i++) ss += (v[i] - mean) * (v[i] - mean);
    s->n = n;
    s->min = v[0];
    s->max = v[n - 1];
    s->mean = mean;
    s->p50 = s->median = stats_percentile(v, n, 50);
    s->p90 = stats_percentile(v, n, 90);
    s->p99 = stats_percentile(v, n, 99);
    s->stddev = n > 1 ? sqrt(ss / (double)(n - 1)) : 0;
    free(v);
    return 0;
}
