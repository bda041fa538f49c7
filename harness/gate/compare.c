/*
 * compare.c - compare two runs (see compare.h): may they be compared at all,
 * what moved (medians, change, bootstrap CI, U test, the gate's verdict for
 * every metric the gate file names), and did the tokens change.
 */
#include "compare.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "gate.h"
#include "significance.h"
#include "store_gate.h"
#include "store_read.h"

/* See compare.h. */
int compare_runs(store *s, int64_t a, int64_t b, int force, const gate_conf *gc, FILE *out) {
    char diff[1024];
    if (store_comparable(s, a, b, diff, sizeof diff) < 0) {
        fprintf(stderr, "cortex-bench: compare: run %lld or %lld is not in the database\n", (long long)a, (long long)b);
        return CB_EXIT_USAGE;
    }
    if (diff[0] && !force) {
        fprintf(stderr, "cortex-bench: runs %lld and %lld are not comparable: %s (--force to compare anyway)\n",
                (long long)a, (long long)b, diff);
        return CB_EXIT_USAGE;
    }
    for (int side = 0; side < 2; side++) { /* an INVALID run is no measurement: nothing to compare, even with --force */
        store_run r;
        int64_t id = side ? b : a;
        if (store_run_load(s, id, &r) == 1 && strcmp(r.validity, "valid")) {
            fprintf(stderr, "cortex-bench: compare: run %lld is %s: %s\n", (long long)id,
                    !strcmp(r.validity, "invalid") ? "INVALID" : "not a complete measurement",
                    r.validity_reasons[0] ? r.validity_reasons : r.status);
            return CB_EXIT_INVALID;
        }
    }
    if (diff[0]) fprintf(out, "**FLAGGED: not comparable (%s); compared because of --force.**\n\n", diff);
    char (*names)[40];
    int nn;
    if (store_common_metrics(s, a, b, &names, &nn)) {
        free(names);
        return CB_EXIT_USAGE;
    }
    fprintf(out, "| metric | run %lld (median) | run %lld (median) | change | 95%% CI | p (U test) | verdict |\n"
                 "| --- | ---: | ---: | ---: | --- | ---: | --- |\n", (long long)a, (long long)b);
    int regressed = 0, inconclusive = 0, too_few = 0;
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
        regressed += rule && gate_exit_code(&v, 1, NULL) == CB_EXIT_REGRESSED;
        inconclusive += rule && v.v == GATE_INCONCLUSIVE;
        too_few += rule && v.v == GATE_INCONCLUSIVE && strstr(v.note, "too few repetitions") != NULL;
        fprintf(out, "| %s | %.3f | %.3f | %s | %s | %s | %s |\n", name, v.base_median, v.cand_median, ch, ci, pv,
                rule ? gate_v_name(v.v) : "(not gated)");
    }
    free(names);
    store_run ra, rb;
    if (too_few && store_run_load(s, a, &ra) == 1 && store_run_load(s, b, &rb) == 1)
        fprintf(out, "\n%d gated metric%s inconclusive: %d vs %d repetitions cannot show a change at p < %.2f (the"
                     " U test needs %d per side): no verdict either way.\n", too_few, too_few > 1 ? "s are" : " is",
                ra.reps, rb.reps, gc ? gc->alpha : 0.05, gate_min_reps(gc ? gc->alpha : 0.05));
    else if (inconclusive)
        fprintf(out, "\n%d gated metric%s past the threshold but not significant: inconclusive, not a regression.\n",
                inconclusive, inconclusive > 1 ? "s" : "");
    /* Correctness canaries: same model, same item, different greedy tokens. */
    store_canary_pair *cp;
    int ncp, changed = 0;
    if (store_canary_pairs(s, a, b, &cp, &ncp)) {
        free(cp);
        return CB_EXIT_USAGE;
    }
    for (int i = 0; i < ncp; i++) {
        if (!strcmp(cp[i].base, cp[i].cand)) continue;
        if (!changed++) fprintf(out, "\n**Correctness canary changed** (same model, different greedy tokens):\n\n");
        fprintf(out, "- %s: %s -> %s\n", cp[i].item, cp[i].base, cp[i].cand);
    }
    free(cp);
    return changed || regressed ? CB_EXIT_REGRESSED : CB_EXIT_OK;
}
