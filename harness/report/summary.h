/*
 * summary.h - the CI step summary (summary.c): a markdown block that `run`
 * and `gate` append to $GITHUB_STEP_SUMMARY (GitHub Actions shows the file
 * on the job's page) or to --step-summary FILE. docs/harness.md, "CI
 * integration".
 */
#ifndef CB_SUMMARY_H
#define CB_SUMMARY_H

#include <stdint.h>
#include <stdio.h>

#include "store.h"

/*
 * The step summary to append to: `path` when not NULL, else
 * $GITHUB_STEP_SUMMARY when set and not empty; NULL when neither (nothing to
 * do) or when it cannot be opened (one warning line on stderr: a summary
 * that cannot be written does not fail the measurement).
 */
FILE *summary_open(const char *path);
/* Close it, warning on stderr when a write failed. */
void summary_close(FILE *f);

/*
 * `run`'s block: a heading, then one row per run: id, workload, model,
 * threads, commit, VALID or INVALID (with the reasons) and, for a VALID run
 * only, its headline medians (throughput, TTFT p50, TPOT p50, end-to-end
 * p50, request rate, whichever it has).
 */
void summary_runs(FILE *f, store *s, const int64_t *ids, int n_ids);

/*
 * Under the gate's verdict table (which the gate writes itself): the
 * baseline and candidate runs it judged last, each with its commit and
 * VALID/INVALID ("no stored run" for 0: e.g. --baseline-instructions).
 */
void summary_gate_runs(FILE *f, store *s, int64_t base, int64_t cand);

#endif
