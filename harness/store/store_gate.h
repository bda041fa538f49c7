/*
 * store_gate.h - what the regression gate, `compare`, `trend` and the
 * dashboard read and write: comparability of two runs, canaries, metric
 * histories, and the gates/verdicts tables (docs/harness.md, schema).
 */
#ifndef CB_STORE_GATE_H
#define CB_STORE_GATE_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

/* One item's greedy-token hash in two runs of the same model file. */
typedef struct store_canary_pair {
    char item[64], base[24], cand[24];
} store_canary_pair;

/* One item's greedy-token hash in the newest run that has it. */
typedef struct store_canary {
    char item[64], hash[24];
} store_canary;

/* A gate decision (gates row); base_run/cand_run 0 = none. */
typedef struct store_gate_row {
    int64_t id, base_run, cand_run;
    char created[40], mode[24], gate_file[512], gate_file_hash[72], verdict[16], summary[1600];
    char cand_commit[48], cand_workload[256]; /* read back only: the candidate run's */
} store_gate_row;

/* One metric's verdict of a gate (verdicts row); NAN for absent numbers.
 * base_run/cand_run: the two runs this verdict judged (schema v12; a gate
 * over several workloads judges a different pair per workload). Written as
 * NULL when 0; read back as the gate's own base_run/cand_run for rows
 * stored before v12 (NULL), 0 when neither is known. */
typedef struct store_verdict_row {
    char metric[96], direction[8], verdict[16], note[256];
    double threshold, base_median, cand_median, change, ci_lo, ci_hi, p;
    int n_base, n_cand;
    int64_t base_run, cand_run; /* the two runs this verdict judged (schema v12); 0: none (A/B); older rows: the gate's */
} store_verdict_row;

/* One point of a metric's history: a complete run's median. */
typedef struct store_history_point {
    char key[80], workload[256], commit[16];
    int64_t run;
    int dirty;
    double median;
} store_history_point;

/* Which comparability fields differ between runs a and b, each named with
 * a's value and b's, as "thread count: 1 vs 2; CPUs allowed: 0 vs 0-1"
 * (empty when they may be compared; a value not stored reads "none",
 * "unknown" or "not recorded", as fits the field); 0, or -1 if a run is
 * missing. */
int store_comparable(store *s, int64_t a, int64_t b, char *diff, size_t n);
/* The summary metric names both runs have, in a's order (malloc'd array of
 * 40-byte names; free() it). 0 or -1. */
int store_common_metrics(store *s, int64_t a, int64_t b, char (**names)[40], int *n);
/* Canary items of runs base and cand when both ran the same model file. 0 or -1. */
int store_canary_pairs(store *s, int64_t base, int64_t cand, store_canary_pair **out, int *n);
/* Every canary item with its hash in the newest run that has it. 0 or -1. */
int store_latest_canaries(store *s, store_canary **out, int *n);
/* Insert a gate decision and its verdicts in one transaction; the gate's id, or -1. */
int64_t store_gate_insert(store *s, const store_gate_row *g, const store_verdict_row *v, int n);
/* The newest `limit` gates, newest first, with the candidate run's commit and workload. 0 or -1. */
int store_gates_recent(store *s, int limit, store_gate_row **out, int *n);
/* A gate's verdicts: regressed first, then inconclusive, improved, the rest; by metric. 0 or -1. */
int store_verdicts_load(store *s, int64_t gate, store_verdict_row **out, int *n);
/* Medians of metric `name` over measurements (STORE_MEASUREMENT: complete
 * and VALID runs; of `workload` when not NULL), ordered by comparable series
 * (compare_key, workload) then run id. 0 or -1. */
int store_metric_history(store *s, const char *name, const char *workload, store_history_point **out, int *n);
/* Whether any stored run (of `workload` when not NULL), of any status or
 * validity, has a summary row of metric `name`: 1 yes, 0 no, -1 on a
 * database error. Tells a misspelt metric or workload from one whose runs
 * are all INVALID or failed. */
int store_metric_known(store *s, const char *name, const char *workload);

#endif
