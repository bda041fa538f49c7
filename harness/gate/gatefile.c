/*
 * gatefile.c - parse ci/gates.conf (see gatefile.h).
 */
#include "gatefile.h"

#include "gate.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sha256.h"
#include "hx_err.h"

/* Whole-token number parsing: "0.10" yes, "0.1x" no. */
static int num(const char *s, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (!s || errno || end == s || *end || !(v >= lo && v <= hi)) return -1;
    *out = v;
    return 0;
}

int gate_conf_load(const char *path, gate_conf *c, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    snprintf(c->path, sizeof c->path, "%s", path);
    c->alpha = 0.05;
    c->bootstrap = 2000;
    c->budget = 6;
    c->reps = 5;
    c->micro_prompt = 64;
    c->micro_gen = 32;
    c->max_load = GATE_DEFAULT_MAX_LOAD;
    c->max_spread = GATE_DEFAULT_MAX_SPREAD;
    FILE *f = fopen(path, "r");
    if (!f) return hx_fail(err, errlen, "%s: cannot open gate file: %s", path, strerror(errno));
    char line[512];
    int ln = 0, rc = 0;
    while (!rc && fgets(line, sizeof line, f)) {
        ln++;
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        char *tok[6] = {0};
        int nt = 0;
        for (char *t = strtok(line, " \t\r\n"); t && nt < 6; t = strtok(NULL, " \t\r\n")) tok[nt++] = t;
        if (!nt) continue;
        double v, w;
#define BAD(...) (rc = hx_fail_at(err, errlen, -1, path, (size_t)ln, __VA_ARGS__))
        if (!strcmp(tok[0], "version")) {
            if (nt != 2 || num(tok[1], 1, 1, &v)) BAD("version must be 1 (this cortex-bench reads version 1)");
            else c->version = 1;
        } else if (!strcmp(tok[0], "alpha")) {
            if (nt != 2 || num(tok[1], 1e-6, 0.5, &v)) BAD("alpha takes one number in (0, 0.5]");
            else c->alpha = v;
        } else if (!strcmp(tok[0], "bootstrap") || !strcmp(tok[0], "budget") || !strcmp(tok[0], "reps")) {
            int is_boot = tok[0][0] == 'b' && tok[0][1] == 'o';
            if (nt != 2 || num(tok[1], is_boot ? 100 : !strcmp(tok[0], "reps"), is_boot ? 1e6 : 1000, &v))
                BAD("%s takes one whole number", tok[0]);
            else if (is_boot) c->bootstrap = (int)v;
            else if (!strcmp(tok[0], "budget")) c->budget = (int)v;
            else c->reps = (int)v;
        } else if (!strcmp(tok[0], "max_load")) {
            if (nt != 2 || num(tok[1], 0, 1024, &v)) BAD("max_load takes one number of CPUs in [0, 1024]");
            else c->max_load = v;
        } else if (!strcmp(tok[0], "max_spread")) {
            if (nt != 2 || num(tok[1], 0, 10, &v)) BAD("max_spread takes one relative spread in [0, 10], e.g. 0.05");
            else c->max_spread = v;
        } else if (!strcmp(tok[0], "workload")) {
            if (nt != 2 || c->n_workloads >= GATE_MAX_WORKLOADS || strlen(tok[1]) >= sizeof c->workloads[0])
                BAD("workload takes one name (at most %d workloads)", GATE_MAX_WORKLOADS);
            else snprintf(c->workloads[c->n_workloads++], sizeof c->workloads[0], "%s", tok[1]);
        } else if (!strcmp(tok[0], "micro")) {
            if (nt != 3 || num(tok[1], 1, 1e5, &v) || num(tok[2], 1, 1e5, &w)) BAD("micro takes two token counts: PROMPT GEN");
            else c->micro_prompt = (int)v, c->micro_gen = (int)w;
        } else if (!strcmp(tok[0], "metric")) {
            if (nt != 4 || (strcmp(tok[2], "higher") && strcmp(tok[2], "lower")) || num(tok[3], 0, 10, &v) ||
                strlen(tok[1]) >= sizeof c->metrics[0].name)
                BAD("expected 'metric NAME higher|lower THRESHOLD'");
            else if (c->n_metrics >= GATE_MAX_METRICS) BAD("more than %d metrics", GATE_MAX_METRICS);
            else if (gate_conf_metric(c, tok[1])) BAD("metric %s is listed twice", tok[1]);
            else {
                gate_metric *m = &c->metrics[c->n_metrics++];
                snprintf(m->name, sizeof m->name, "%s", tok[1]);
                m->higher_is_better = !strcmp(tok[2], "higher");
                m->deterministic = !strcmp(tok[1], GATE_DET_METRIC);
                m->threshold = v;
            }
        } else {
            BAD("unknown setting '%s'", tok[0]);
        }
#undef BAD
    }
    fclose(f);
    if (!rc && c->version != 1) rc = hx_fail(err, errlen, "%s: missing 'version 1' line", path);
    if (!rc && !c->n_metrics) rc = hx_fail(err, errlen, "%s: no metric lines: the gate would judge nothing", path);
    /* A wall-clock gate whose repetitions cannot reach alpha could never find a regression: refuse it. */
    int min_reps = gate_min_reps(c->alpha);
    if (!rc && c->n_workloads && c->reps < min_reps)
        rc = hx_fail(err, errlen, "%s: reps %d cannot decide: the exact Mann-Whitney U test needs %d repetitions per side"
                     " to reach p < %g", path, c->reps, min_reps, c->alpha);
    if (!rc && sha256_hex_file(path, c->sha256, err, errlen)) rc = -1;
    return rc;
}

/* See gatefile.h. The message lists every missing metric, so one gate run
 * shows the whole problem. */
int gate_conf_unmeasured(const gate_conf *c, const int *produced, char *err, size_t errlen) {
    char names[512] = "", wls[512] = "";
    size_t kn = 0, kw = 0;
    int missing = 0;
    for (int i = 0; i < c->n_metrics; i++) {
        if (produced[i] || !strcmp(c->metrics[i].name, GATE_DET_METRIC)) continue;
        if (kn < sizeof names) kn += (size_t)snprintf(names + kn, sizeof names - kn, "%s'%s'", missing ? ", " : "", c->metrics[i].name);
        missing++;
    }
    for (int w = 0; w < c->n_workloads && kw < sizeof wls; w++)
        kw += (size_t)snprintf(wls + kw, sizeof wls - kw, "%s%s", w ? ", " : "", c->workloads[w]);
    if (missing)
        hx_fail(err, errlen, "%s: metric%s %s %s measured by none of the gate's workloads (%s): add a workload that"
                " produces %s, or remove the metric line", c->path, missing > 1 ? "s" : "", names,
                missing > 1 ? "are" : "is", c->n_workloads ? wls : "none", missing > 1 ? "them" : "it");
    return missing;
}

/* The rule for metric `name`, or NULL. */
const gate_metric *gate_conf_metric(const gate_conf *c, const char *name) {
    for (int i = 0; i < c->n_metrics; i++)
        if (!strcmp(c->metrics[i].name, name)) return &c->metrics[i];
    return NULL;
}
