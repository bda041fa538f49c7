/*
 * calibrate_cmd.c - `cortex-bench calibrate`: A/A runs of one build against
 * itself, judged like the gate judges, to set thresholds from (docs/gates.md).
 */
#include "gate_cmd.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli_util.h"
#include "gate.h"
#include "gatefile.h"
#include "run_cmd.h"
#include "significance.h"
#include "store_gate.h"
#include "store_read.h"
#include "store.h"

/* See gate_cmd.h. */
void calibrate_opts_init(void *op) {
    calibrate_opts *o = op;
    memset(o, 0, sizeof *o);
    o->db = cli_default_db();
    o->gate_file = "ci/gates.conf";
    o->pairs = 5;
}

/* A/A: run the same build against itself `pairs` times and report how far
 * each metric moves when nothing changed, to set thresholds from. */
int cmd_calibrate(void *opts, const cli_args *args) {
    const calibrate_opts *o = opts;
    const char *workload = o->workload;
    long pairs = o->pairs;
    if (!o->model) return cli_fail(2, "%s", "calibrate needs --model MODEL");
    gate_conf c;
    char err[512];
    if (gate_conf_load(o->gate_file, &c, err, sizeof err)) return cli_fail(2, "%s", err);
    store *s;
    cli_ensure_default_dir(o->db);
    if (store_open(o->db, &s, err, sizeof err)) return cli_fail(2, "%s", err);
    int nw = workload ? 1 : c.n_workloads;
    printf("| workload | metric | pairs | median |change| | max |change| | A/A judged regressed | suggested threshold |\n"
           "| --- | --- | ---: | ---: | ---: | ---: | ---: |\n");
    for (int w = 0; w < nw; w++) {
        const char *wl = workload ? workload : c.workloads[w];
        static double changes[GATE_MAX_METRICS][1000];
        int false_alarms[GATE_MAX_METRICS] = {0}, n[GATE_MAX_METRICS] = {0};
        for (long p = 0; p < pairs; p++) {
            int64_t a = run_once(o->model, wl, o->db, o->threads, c.reps, 1, args->argc, args->argv);
            int64_t b = run_once(o->model, wl, o->db, o->threads, c.reps, 1, args->argc, args->argv);
            if (a < 0 || b < 0) { store_close(s); return cli_fail(1, "calibration run of %s failed", wl); }
            for (int m = 0; m < c.n_metrics; m++) {
                double va[GATE_MAX_VALUES], vb[GATE_MAX_VALUES];
                size_t na = store_metric_values(s, a, c.metrics[m].name, va, GATE_MAX_VALUES);
                size_t nb = store_metric_values(s, b, c.metrics[m].name, vb, GATE_MAX_VALUES);
                if (!na || !nb) continue;
                gate_verdict v;
                gate_judge(&c.metrics[m], va, na, vb, nb, c.alpha, c.bootstrap, &v);
                changes[m][n[m]++] = fabs(v.change);
                false_alarms[m] += v.v == GATE_REGRESSED;
            }
            fprintf(stderr, "calibrate %s: pair %ld/%ld done\n", wl, p + 1, pairs);
        }
        for (int m = 0; m < c.n_metrics; m++) {
            if (!n[m]) continue;
            double med = sig_median(changes[m], (size_t)n[m]), max = changes[m][n[m] - 1]; /* sorted by sig_median */
            double suggest = fmax(2.0 * max, 0.02);
            printf("| %s | %s | %d | %.2f%% | %.2f%% | %d | %.0f%% (configured %.0f%%) |\n", wl, c.metrics[m].name, n[m],
                   med * 100, max * 100, false_alarms[m], suggest * 100, c.metrics[m].threshold * 100);
        }
    }
    store_close(s);
    return 0;
}
