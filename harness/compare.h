/*
 * compare.h - side-by-side comparison of two stored runs.
 */
#ifndef CB_COMPARE_H
#define CB_COMPARE_H

#include <stdint.h>
#include <stdio.h>

#include "store.h"

/* Which comparability fields differ between runs a and b, as "cpu, threads"
 * (empty when they may be compared); -1 if a run is missing. */
int compare_check(store *s, int64_t a, int64_t b, char *diff, size_t n);

/*
 * Print medians of both runs and the relative change per metric, and every
 * correctness canary that changed. Runs whose fingerprints differ are refused
 * (exit 2) unless `force`, then flagged. Returns an exit code: 0 comparable and
 * canaries equal, 1 canaries changed, 2 refused or error.
 */
int compare_runs(store *s, int64_t a, int64_t b, int force, FILE *out);

#endif
