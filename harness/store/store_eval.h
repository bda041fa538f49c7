/*
 * store_eval.h - what the hardware-evaluation report (hwreport) reads: every
 * measurement (STORE_MEASUREMENT: complete and VALID) with the figures the
 * report sets side by side, one row per run. Machines are told apart by
 * testbed (runs before schema v13: "env-" and the environment fingerprint's
 * first 12 digits), and a machine measured under another kernel table,
 * pinning or NUMA policy is another configuration of it.
 */
#ifndef CB_STORE_EVAL_H
#define CB_STORE_EVAL_H

#include <stdint.h>

#include "store.h"

typedef struct {
    int64_t id, env_id;
    char testbed[96], fingerprint[72], isa[32], pinned[128], numa[64];
    char workload[256], kind[16], model[128], model_sha256[72], started[40];
    int threads, logical_cores;
    /* medians over repetitions (NAN: not recorded). tps is the run's headline rate: a synthetic test's
     * `tps` (generated tokens for tg, prompt tokens for pp), a prompt set's or trace's `output_tps` */
    double tps, decode_tps, peak_rss_mib, gen_tokens, bytes_per_token, flops_per_token, roofline_frac;
    /* package energy over the whole repetition (counter energy-pkg, phase total), mean over the repetitions
     * that counted it; NAN when none did, and then energy_reason says why */
    double energy_j;
    char energy_reason[160];
} store_eval_run;

/* Every measurement, ordered by testbed, workload, threads, id; when
 * `model` is set, only runs whose model name or sha256 starts with it.
 * Malloc'd into *out; 0 or -1 (store_errmsg says why). */
int store_eval_runs(store *s, const char *model, store_eval_run **out, int *n);

#endif
