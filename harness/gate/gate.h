/*
 * gate.h - verdicts: is a candidate's metric better, the same, worse, or is
 * the evidence not enough to say? Used by `cortex-bench gate` and `compare`.
 */
#ifndef CB_GATE_H
#define CB_GATE_H

/* Most values of one metric read for one run (repetitions x requests). */
#define GATE_MAX_VALUES 1024

#include <stddef.h>
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
    char note[160];        /* how significance was decided, or why inconclusive */
} gate_verdict;

const char *gate_v_name(gate_v v);

/*
 * Judge one metric. A move counts only when it is past the threshold AND
 * significant: by the Mann-Whitney U test at `alpha` when the repetition
 * counts can reach it, otherwise by the bootstrap CI of the ratio excluding 1
 * (the two groups' intervals do not overlap). Within the threshold it is
 * unchanged; past it but not significant, inconclusive. With one value per
 * side (deterministic mode) the threshold alone decides.
 */
void gate_judge(const gate_metric *rule, const double *base, size_t nb, const double *cand, size_t nc, double alpha,
                int bootstrap, gate_verdict *out);

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
