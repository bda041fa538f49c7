/*
 * stats.h - summary statistics for benchmark samples (latencies, rates).
 *
 * Percentiles use linear interpolation between closest ranks, numpy's default
 * ("linear", type 7 of Hyndman & Fan): for p in [0, 100] over n sorted values
 * the index is h = p/100 * (n - 1) and the result x[floor h] +
 * (h - floor h) * (x[floor h + 1] - x[floor h]). So [1,2,3,4] has p50 2.5,
 * p90 3.7 and p99 3.97, and one value is every percentile of itself.
 */
#ifndef CX_HARNESS_STATS_H
#define CX_HARNESS_STATS_H

#include <stddef.h>

typedef struct stats_summary {
    size_t n;
    double min, max, mean;
    double median;     /* = p50 */
    double p50, p90, p99;
    double stddev;     /* sample standard deviation (divides by n - 1); 0 when n == 1 */
} stats_summary;

/* Sort n values ascending (qsort; the values must not be NaN). The one
 * sort of samples in the harness. */
void stats_sort(double *x, size_t n);

/* The p-th percentile (0 <= p <= 100) of n >= 1 values sorted ascending. */
double stats_percentile(const double *sorted, size_t n, double p);

/*
 * Summarize n values in any order (they are copied and sorted; x is not
 * modified). Returns 0, CX_EINVAL for n == 0 or a NaN value (s is zeroed),
 * or CX_ENOMEM.
 */
int stats_summarize(const double *x, size_t n, stats_summary *s);

#endif
