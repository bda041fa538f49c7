/*
 * gatefile.h - the gate configuration file (ci/gates.conf): which metrics the
 * regression gate judges, in which direction, with which threshold, and what
 * it runs. Line format and meaning: the comments at the top of ci/gates.conf.
 */
#ifndef CB_GATEFILE_H
#define CB_GATEFILE_H

#include <stddef.h>

#define GATE_MAX_METRICS 32
#define GATE_MAX_WORKLOADS 8
/* The deterministic mode's one metric (instructions of the micro workload);
 * every other configured metric is a wall-clock metric. */
#define GATE_DET_METRIC "instructions"

typedef struct gate_metric {
    char name[40];
    int higher_is_better;
    double threshold; /* relative, e.g. 0.10 */
    int deterministic; /* a count that repeats exactly (GATE_DET_METRIC): the threshold alone decides */
} gate_metric;

typedef struct gate_conf {
    char path[512];
    char sha256[65];
    int version;
    double alpha;
    int bootstrap, budget, reps;
    char workloads[GATE_MAX_WORKLOADS][64];
    int n_workloads;
    gate_metric metrics[GATE_MAX_METRICS];
    int n_metrics;
    int micro_prompt, micro_gen;
    /* A baseline is recorded only from a run measured on a quiet machine with
     * a tight spread (docs/gates.md, "Baselines"): at most max_load CPUs busy
     * with other work (the median of other_load_cpus), and every gated metric's
     * robust spread (1.4826 MAD / median over the repetitions) at most max_spread. */
    double max_load, max_spread;
} gate_conf;

#define GATE_DEFAULT_MAX_LOAD 0.5
#define GATE_DEFAULT_MAX_SPREAD 0.10

/* Parse a gate file; errors name FILE:LINE and the problem. */
int gate_conf_load(const char *path, gate_conf *c, char *err, size_t errlen);
/* The metric's rule, or NULL when the gate does not judge it. */
const gate_metric *gate_conf_metric(const gate_conf *c, const char *name);

/* Every wall-clock metric of `c` (all but GATE_DET_METRIC) must come out of
 * some workload of the gate: produced[i] says whether metric i did. Returns
 * how many did not, naming them and the workloads in one line in `msg`. */
int gate_conf_unmeasured(const gate_conf *c, const int *produced, char *err, size_t errlen);

#endif
