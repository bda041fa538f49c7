/*
 * compare.h - side-by-side comparison of two stored runs (comparability:
 * store_comparable in store_gate.h).
 */
#ifndef CB_COMPARE_H
#define CB_COMPARE_H

#include <stdint.h>
#include <stdio.h>

#include "gatefile.h"
#include "store.h"


/*
 * Print, per metric, both medians, the change, its bootstrap 95% CI, the
 * Mann-Whitney p and (for metrics the gate file `gc` names) the verdict, then
 * every correctness canary that changed. Runs whose fingerprints differ are
 * refused (exit 2) unless `force`, then flagged. Returns an exit code: 0, 1 a
 * gated metric regressed or a canary changed, 2 refused or error.
 */
int compare_runs(store *s, int64_t a, int64_t b, int force, const gate_conf *gc, FILE *out);

#endif
