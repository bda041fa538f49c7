/*
 * test_stats.c - summary statistics (harness/util/stats.c): percentiles
 * against hand-computed (numpy) values, the summary's fields, errors, and a
 * variance that stays exact under a large offset.
 */
#include "cortex.h"
#include "stats.h"
#include "testing.h"

/* ---- statistics ------------------------------------------------------------ */

static void test_stats(void) {
    const double x4[] = {1, 2, 3, 4};
    CHECK_NEAR(stats_percentile(x4, 4, 50), 2.5, 1e-12, "p50 [1,2,3,4]");
    CHECK_NEAR(stats_percentile(x4, 4, 90), 3.7, 1e-12, "p90 [1,2,3,4]");
    CHECK_NEAR(stats_percentile(x4, 4, 99), 3.97, 1e-12, "p99 [1,2,3,4]");
    CHECK(stats_percentile(x4, 4, 0) == 1 && stats_percentile(x4, 4, 100) == 4, "p0, p100");
    CHECK_NEAR(stats_percentile(x4, 4, 25), 1.75, 1e-12, "p25 [1,2,3,4]");
    const double one[] = {7.5};
    CHECK(stats_percentile(one, 1, 0) == 7.5 && stats_percentile(one, 1, 99) == 7.5 && stats_percentile(one, 1, 100) == 7.5,
          "single element");
    /* numpy.percentile([10, 20, 30, 40, 50], [90, 99]) = 46, 49.6 */
    const double x5[] = {10, 20, 30, 40, 50};
    CHECK_NEAR(stats_percentile(x5, 5, 90), 46.0, 1e-12, "p90 of 5");
    CHECK_NEAR(stats_percentile(x5, 5, 99), 49.6, 1e-12, "p99 of 5");

    stats_summary s;
    const double unsorted[] = {4, 1, 3, 2};
    CHECK(stats_summarize(unsorted, 4, &s) == 0, "summarize");
    CHECK(s.n == 4 && s.min == 1 && s.max == 4 && s.mean == 2.5 && s.median == 2.5 && s.p50 == 2.5, "basic fields");
    CHECK_NEAR(s.p90, 3.7, 1e-12, "summary p90");
    CHECK_NEAR(s.p99, 3.97, 1e-12, "summary p99");
    CHECK_NEAR(s.stddev, 1.2909944487358056, 1e-12, "sample stddev of 1..4 (sqrt(5/3))");
    CHECK(unsorted[0] == 4 && unsorted[1] == 1, "input not modified");
    CHECK(stats_summarize(one, 1, &s) == 0 && s.stddev == 0 && s.p99 == 7.5 && s.mean == 7.5, "one value");
    CHECK(stats_summarize(x4, 0, &s) == CX_EINVAL && s.n == 0, "empty is an error");
    const double withnan[] = {1, NAN};
    CHECK(stats_summarize(withnan, 2, &s) == CX_EINVAL, "NaN is an error");
    /* Large offset: two-pass variance stays exact. */
    const double off[] = {1e9 + 1, 1e9 + 2, 1e9 + 3, 1e9 + 4};
    CHECK(stats_summarize(off, 4, &s) == 0, "offset summarize");
    CHECK_NEAR(s.stddev, 1.2909944487358056, 1e-9, "stddev with a 1e9 offset");
}

TEST_MAIN({
    test_stats();
})
