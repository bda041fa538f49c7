/*
 * gate.c - per-metric verdicts and baseline resolution (see gate.h). The
 * statistics themselves live in significance.c; this file decides.
 */
#include "gate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "significance.h"
#include "store_gate.h"
#include "store_read.h"
#include "hx_err.h"

const char *gate_v_name(gate_v v) {
    static const char *names[] = {"improved", "unchanged", "regressed", "inconclusive"};
    return names[v];
}

/* Median of n values (copied; the input is left alone). */
static double median_of(const double *x, size_t n) {
    double *t = malloc(sizeof(double) * (n ? n : 1));
    if (!t) return NAN;
    if (n) memcpy(t, x, sizeof(double) * n); /* x may be NULL when n is 0 (one side has no values) */
    double m = sig_median(t, n);
    free(t);
    return m;
}

int gate_min_reps(double alpha) {
    int n = 1;
    while (n < 64 && sig_mw_min_p((size_t)n, (size_t)n) > alpha) n++;
    return n;
}

void gate_judge(const gate_metric *rule, const double *base, size_t nb, const double *cand, size_t nc, double alpha,
                int bootstrap, gate_verdict *o) {
    memset(o, 0, sizeof *o);
    snprintf(o->metric, sizeof o->metric, "%s", rule->name);
    o->higher_is_better = rule->higher_is_better;
    o->threshold = rule->threshold;
    o->n_base = (int)nb;
    o->n_cand = (int)nc;
    o->p = o->ci_lo = o->ci_hi = NAN;
    o->base_median = median_of(base, nb);
    o->cand_median = median_of(cand, nc);
    if (!nb || !nc || !(o->base_median > 0)) {
        o->change = NAN;
        o->v = GATE_INCONCLUSIVE;
        snprintf(o->note, sizeof o->note, "no comparable values (%zu base, %zu candidate)", nb, nc);
        return;
    }
    o->change = o->cand_median / o->base_median - 1.0;
    double lo, hi;
    if (sig_bootstrap_ratio_ci(base, nb, cand, nc, bootstrap, 0xC0FFEE, alpha, &lo, &hi) == 0) {
        o->ci_lo = lo - 1.0;
        o->ci_hi = hi - 1.0;
    }
    double worse = rule->higher_is_better ? -o->change : o->change; /* > 0: the wrong way */
    int within = fabs(o->change) <= rule->threshold;
    if (rule->deterministic) { /* a count that repeats to ~2e-7: no sampling noise to test against */
        o->v = within ? GATE_UNCHANGED : worse > 0 ? GATE_REGRESSED : GATE_IMPROVED;
        snprintf(o->note, sizeof o->note, "deterministic count: the ±%.1f%% threshold decides", rule->threshold * 100);
        return;
    }
    double min_p = sig_mw_min_p(nb, nc);
    if (min_p > alpha) { /* no outcome of the test could be significant: too few samples to decide */
        o->v = GATE_INCONCLUSIVE;
        snprintf(o->note, sizeof o->note, "too few repetitions to decide: %zu vs %zu cannot reach p < %.2f (at best"
                 " p = %.3f; needs %d per side)%s", nb, nc, alpha, min_p, gate_min_reps(alpha),
                 within ? "; the medians are within the threshold" : "");
        return;
    }
    if (within) {
        o->v = GATE_UNCHANGED;
        snprintf(o->note, sizeof o->note, "within ±%.1f%%", rule->threshold * 100);
        return;
    }
    double u;
    sig_mann_whitney(base, nb, cand, nc, &u, &o->p);
    int significant = o->p < alpha;
    snprintf(o->note, sizeof o->note, "Mann-Whitney U = %.1f, p = %.4f %s %.2f", u, o->p, significant ? "<" : ">=", alpha);
    if (!significant) o->v = GATE_INCONCLUSIVE;
    else o->v = worse > 0 ? GATE_REGRESSED : GATE_IMPROVED;
}

int gate_exit_code(const gate_verdict *v, int n, const int *judged) {
    for (int i = 0; i < n; i++)
        if ((!judged || judged[i]) && v[i].v == GATE_REGRESSED) return CB_EXIT_REGRESSED;
    return CB_EXIT_OK;
}

/* Is `ref` a whole positive number? */
static int is_number(const char *ref) {
    if (!*ref) return 0;
    for (const char *p = ref; *p; p++)
        if (*p < '0' || *p > '9') return 0;
    return 1;
}

/* See gate.h. The reference is resolved as every command resolves one
 * (store_resolve_run, preferring runs of the candidate's configuration,
 * then of its workload, then the newest); the gate then insists on
 * comparability. When a tag or commit names runs but its best match is not
 * comparable, err says which run that is and how it differs: otherwise "no
 * baseline" leaves the user guessing what to fix. */
int64_t gate_resolve(store *s, const char *ref, int64_t cand, char *err, size_t errlen) {
    char diff[1024];
    int64_t id;
    int numeric = is_number(ref);
    if (errlen) err[0] = 0;
    if (store_resolve_run(s, ref, cand, cand, &id, err, errlen)) {
        if (!numeric) { /* no such tag or commit: no baseline, nothing to explain */
            if (errlen) err[0] = 0;
            return 0;
        }
        return hx_fail(err, errlen, "baseline run %s is missing or not complete", ref);
    }
    store_run r;
    if (store_run_load(s, id, &r) != 1 || strcmp(r.status, "complete")) {
        if (!numeric) return hx_fail_code(err, errlen, 0, "'%s' names run %lld, which is not complete", ref, (long long)id);
        return hx_fail(err, errlen, "baseline run %s is missing or not complete", ref);
    }
    if (store_comparable(s, id, cand, diff, sizeof diff) < 0)
        return hx_fail(err, errlen, "baseline run %s is not in the database", ref);
    if (diff[0]) {
        if (!numeric) /* the best match of a tag or commit is not comparable: none is */
            return hx_fail_code(err, errlen, 0,
                                "the closest is run %lld ('%s'), which differs (baseline vs candidate) in %s",
                                (long long)id, ref, diff);
        return hx_fail(err, errlen,
                       "baseline run %s is not comparable: it differs (baseline vs candidate) in %s", ref, diff);
    }
    return id;
}
