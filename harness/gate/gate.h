/*
 * gate.h - verdicts: is a candidate's metric better, the same, worse, or is
 * the evidence not enough to say? Used by `cortex-bench gate` and `compare`.
 */
#ifndef CB_GATE_H
#define CB_GATE_H

/* Most values of one metric read for one run (repetitions x requests). */
#define GATE_MAX_VALUES 1024

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "gatefile.h"
#include "store.h"

typedef enum { GATE_IMPROVED, GATE_UNCHANGED, GATE_REGRESSED, GATE_INCONCLUSIVE } gate_v;

typedef struct gate_verdict {
    char metric[96];       /* "tg32/decode_tps", or "canary:p03" */
    int higher_is_better;
    double threshold;
    double base_median, cand_median;
    double change;         /* cand/base - 1 */
    double ci_lo, ci_hi;   /* bootstrap (1 - alpha) CI of cand/base - 1 */
    double p;              /* Mann-Whitney two-sided p, NAN when the sizes cannot reach alpha */
    int n_base, n_cand;
    gate_v v;
    char note[200];        /* how significance was decided, or why inconclusive */
    int64_t base_run, cand_run; /* the runs the values came from (0: not stored runs, e.g. A/B) */
} gate_verdict;

const char *gate_v_name(gate_v v);

/*
 * Judge one metric: the one verdict rule of `gate` and `compare`
 * (docs/gates.md, "Verdicts").
 *
 *   - no values on a side, or a base median <= 0: inconclusive;
 *   - a deterministic metric (rule->deterministic: instruction counts, which
 *     repeat exactly): the threshold alone decides, on the medians;
 *   - a wall-clock metric with too few repetitions for the test (the exact
 *     Mann-Whitney U test cannot reach p < alpha with nb and nc values, e.g.
 *     3 vs 3 at 0.05): inconclusive, whatever the medians say, never
 *     "regressed" nor "unchanged";
 *   - otherwise within the threshold: unchanged; past it, regressed or
 *     improved only when the U test gives p < alpha, else inconclusive.
 *
 * The bootstrap CI of the ratio is reported alongside, never decisive.
 */
void gate_judge(const gate_metric *rule, const double *base, size_t nb, const double *cand, size_t nc, double alpha,
                int bootstrap, gate_verdict *out);
/* The fewest values per side with which the exact U test can reach p < alpha
 * (4 at 0.05, 5 at 0.01): a wall-clock gate with fewer repetitions cannot decide. */
int gate_min_reps(double alpha);
/* Exit code of a judgement (cli_util.h's table): CB_EXIT_REGRESSED when a
 * judged verdict regressed or a canary changed (counted among the verdicts
 * too), else CB_EXIT_OK. `judged[i]` 0 skips verdict i (compare's ungated
 * metrics); NULL judges all. */
int gate_exit_code(const gate_verdict *v, int n, const int *judged);
/* gate_print.c: the verdict table in markdown, headed "## cortex-bench gate
 * (MODE): VERDICT" and the error when there is one. */
void gate_print_table(FILE *f, const gate_verdict *v, int n, const char *mode, const char *verdict, const char *error);
/* The same as JUnit XML at `path`: 0, or -1 when it cannot be written. */
int gate_write_junit(const char *path, const gate_verdict *v, int n, const char *mode, const char *error);

/*
 * Resolve a baseline reference to a run comparable with `cand_run` on
 * `workload`: a run id, a tag (latest tagged comparable run), or a git commit
 * prefix (latest comparable run built from it). 0 if none (err then says
 * why when the tag or commit names runs: the closest one and the fields it
 * differs in, baseline vs candidate; "" when it names none); -1 on error
 * (a run id that is missing, incomplete or not comparable: err says which).
 */
int64_t gate_resolve(store *s, const char *ref, int64_t cand_run, char *err, size_t errlen);

#endif
