/*
 * gate.c - per-metric verdicts and baseline resolution (see gate.h). The
 * statistics themselves live in significance.c; this file decides.
 */
#include "gate.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compare.h"
#include "significance.h"

const char *gate_v_name(gate_v v) {
    static const char *names[] = {"improved", "unchanged", "regressed", "inconclusive"};
    return names[v];
}

/* Median of n values (copied; the input is left alone). */
static double median_of(const double *x, size_t n) {
    double *t = malloc(sizeof(double) * (n ? n : 1));
    if (!t) return NAN;
    memcpy(t, x, sizeof(double) * n);
    double m = sig_median(t, n);
    free(t);
    return m;
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
    if (fabs(o->change) <= rule->threshold) {
        o->v = GATE_UNCHANGED;
        snprintf(o->note, sizeof o->note, "within ±%.1f%%", rule->threshold * 100);
        return;
    }
    int significant;
    if (nb == 1 && nc == 1) {
        significant = 1;
        snprintf(o->note, sizeof o->note, "single deterministic measurement per side: the threshold decides");
    } else if (sig_mw_min_p(nb, nc) <= alpha) {
        double u;
        sig_mann_whitney(base, nb, cand, nc, &u, &o->p);
        significant = o->p < alpha;
        snprintf(o->note, sizeof o->note, "Mann-Whitney U = %.1f, p = %.4f %s %.2f", u, o->p, significant ? "<" : ">=", alpha);
    } else {
        significant = !isnan(o->ci_lo) && (o->ci_lo > 0 || o->ci_hi < 0);
        snprintf(o->note, sizeof o->note, "%zu vs %zu repetitions cannot reach p < %.2f (min p %.3f): 95%% CI %s 1",
                 nb, nc, alpha, sig_mw_min_p(nb, nc), significant ? "excludes" : "includes");
    }
    if (!significant) o->v = GATE_INCONCLUSIVE;
    else o->v = worse > 0 ? GATE_REGRESSED : GATE_IMPROVED;
}

size_t gate_values(store *s, int64_t run, const char *name, double *out, size_t cap) {
    sqlite3_stmt *st;
    size_t n = 0;
    if (sqlite3_prepare_v2(store_db(s), "SELECT value FROM rep_metrics WHERE run_id = ? AND name = ? AND value IS NOT NULL"
                                        " ORDER BY rep", -1, &st, NULL) != SQLITE_OK)
        return 0;
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_text(st, 2, name, -1, SQLITE_TRANSIENT);
    while (sqlite3_step(st) == SQLITE_ROW && n < cap) out[n++] = sqlite3_column_double(st, 0);
    sqlite3_finalize(st);
    return n;
}

/* Is `ref` a whole positive number? */
static int is_number(const char *ref) {
    if (!*ref) return 0;
    for (const char *p = ref; *p; p++)
        if (*p < '0' || *p > '9') return 0;
    return 1;
}

int64_t gate_resolve(store *s, const char *ref, int64_t cand, char *err, size_t n) {
    sqlite3 *db = store_db(s);
    char diff[512];
    if (is_number(ref)) {
        int64_t id = strtoll(ref, NULL, 10);
        sqlite3_stmt *st;
        int complete = 0;
        if (sqlite3_prepare_v2(db, "SELECT status = 'complete' FROM runs WHERE id = ?", -1, &st, NULL) == SQLITE_OK) {
            sqlite3_bind_int64(st, 1, id);
            if (sqlite3_step(st) == SQLITE_ROW) complete = sqlite3_column_int(st, 0);
            sqlite3_finalize(st);
        }
        if (!complete) return snprintf(err, n, "baseline run %s is missing or not complete", ref), -1;
        if (compare_check(s, id, cand, diff, sizeof diff) < 0)
            return snprintf(err, n, "baseline run %s is not in the database", ref), -1;
        if (diff[0]) return snprintf(err, n, "baseline run %s is not comparable: %s differ", ref, diff), -1;
        return id;
    }
    /* Tagged runs first, then runs built from a commit with this prefix; newest comparable wins. */
    const char *sql = "SELECT r.id FROM runs r WHERE r.status = 'complete' AND r.id != ?2 AND r.compare_key ="
                      " (SELECT compare_key FROM runs WHERE id = ?2) AND r.workload = (SELECT workload FROM runs WHERE id = ?2)"
                      " AND (r.id IN (SELECT run_id FROM tags WHERE name = ?1) OR"
                      "      (NOT EXISTS (SELECT 1 FROM tags WHERE name = ?1) AND length(?1) >= 4 AND r.git_commit LIKE ?1 || '%'))"
                      " ORDER BY r.id DESC";
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        return snprintf(err, n, "resolve %s: %s", ref, sqlite3_errmsg(db)), -1;
    sqlite3_bind_text(st, 1, ref, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 2, cand);
    int64_t id = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        int64_t c = sqlite3_column_int64(st, 0);
        if (compare_check(s, c, cand, diff, sizeof diff) == 0 && !diff[0]) {
            id = c;
            break;
        }
    }
    sqlite3_finalize(st);
    return id;
}
