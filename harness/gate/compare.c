/*
 * compare.c - compare two runs (see compare.h): may they be compared at all,
 * what moved (medians, change, bootstrap CI, U test, the gate's verdict for
 * every metric the gate file names), and did the tokens change.
 */
#include "compare.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gate.h"
#include "significance.h"
#include "store_gate.h"
#include "store_read.h"

/* See compare.h. */
int compare_runs(store *s, int64_t a, int64_t b, int force, const gate_conf *gc, FILE *out) {
    char diff[1024];
    if (store_comparable(s, a, b, diff, sizeof diff) < 0) {
        fprintf(stderr, "cortex-bench: compare: run %lld or %lld is not in the database\n", (long long)a, (long long)b);
        return 2;
    }
    if (diff[0] && !force) {
        fprintf(stderr, "cortex-bench: runs %lld and %lld are not comparable: %s (--force to compare anyway)\n",
                (long long)a, (long long)b, diff);
        return 2;
    }
    if (diff[0]) fprintf(out, "**FLAGGED: not comparable (%s); compared because of --force.**\n\n", diff);
    char (*names)[40];
    int nn;
    if (store_common_metrics(s, a, b, &names, &nn)) {
        free(names);
        return 2;
    }
    fprintf(out, "| metric | run %lld (median) | run %lld (median) | change | 95%% CI | p (U test) | verdict |\n"
                 "| --- | ---: | ---: | ---: | --- | ---: | --- |\n", (long long)a, (long long)b);
    int regressed = 0;
    static double va[GATE_MAX_VALUES], vb[GATE_MAX_VALUES];
    for (int i = 0; i < nn; i++) {
        const char *name = names[i];
        size_t na = store_metric_values(s, a, name, va, GATE_MAX_VALUES), nb = store_metric_values(s, b, name, vb, GATE_MAX_VALUES);
        const gate_metric *rule = gc ? gate_conf_metric(gc, name) : NULL;
        gate_metric plain;
        if (!rule) { /* not gated: statistics without a verdict */
            memset(&plain, 0, sizeof plain);
            snprintf(plain.name, sizeof plain.name, "%s", name);
            plain.threshold = 1e300;
        }
        gate_verdict v;
        gate_judge(rule ? rule : &plain, va, na, vb, nb, gc ? gc->alpha : 0.05, gc ? gc->bootstrap : 2000, &v);
        double p = v.p;
        if (isnan(p) && na > 1 && nb > 1) sig_mann_whitney(va, na, vb, nb, NULL, &p);
        char ch[32] = "", ci[64] = "", pv[32] = "-";
        if (!isnan(v.change)) snprintf(ch, sizeof ch, "%+.1f%%", v.change * 100);
        if (!isnan(v.ci_lo)) snprintf(ci, sizeof ci, "[%+.1f%%, %+.1f%%]", v.ci_lo * 100, v.ci_hi * 100);
        if (!isnan(p)) snprintf(pv, sizeof pv, "%.4f", p);
        regressed += rule && v.v == GATE_REGRESSED;
        fprintf(out, "| %s | %.3f | %.3f | %s | %s | %s | %s |\n", name, v.base_median, v.cand_median, ch, ci, pv,
                rule ? gate_v_name(v.v) : "(not gated)");
    }
    free(names);
    /* Correctness canaries: same model, same item, different greedy tokens. */
    store_canary_pair *cp;
    int ncp, changed = 0;
    if (store_canary_pairs(s, a, b, &cp, &ncp)) {
        free(cp);
        return 2;
    }
    for (int i = 0; i < ncp; i++) {
        if (!strcmp(cp[i].base, cp[i].cand)) continue;
        if (!changed++) fprintf(out, "\n**Correctness canary changed** (same model, different greedy tokens):\n\n");
        fprintf(out, "- %s: %s -> %s\n", cp[i].item, cp[i].base, cp[i].cand);
    }
    free(cp);
    return changed || regressed ? 1 : 0;
}
