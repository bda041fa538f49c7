/*
 * judge_cmd.c - `cortex-bench judge` (see judge.h): read samples (judge.c), group them
 * by metric and side, judge each metric with gate_judge at one threshold,
 * print the gate's table, exit with the gate's codes.
 */
#include "judge.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "gate.h"

/* The samples of one metric. */
typedef struct judge_metric {
    char name[96];   /* the whole name (gate_metric's holds 39 bytes) */
    gate_metric rule;
    double *v[2];
    size_t n[2];
} judge_metric;

static double *grow(double *v, size_t n) {
    if (n && (n & (n - 1))) return v; /* room left: capacities are powers of two */
    return realloc(v, sizeof(double) * (n ? 2 * n : 8));
}

/* See judge.h. */
void judge_opts_init(void *op) {
    judge_opts *o = op;
    memset(o, 0, sizeof *o);
    o->title = "judge";
    o->threshold = 0.10;
    o->alpha = 0.05;
}

int cmd_judge(void *opts, const cli_args *a) {
    const judge_opts *o = opts;
    const char *path = a->flags->n_pos ? a->flags->pos[0] : NULL, *title = o->title, *junit = o->junit,
               *summary = o->summary;
    double threshold = o->threshold, alpha = o->alpha;
    if (!path) return cli_fail(CB_EXIT_USAGE, "%s", "judge needs a FILE of samples (or - for standard input)");
    FILE *f = strcmp(path, "-") ? fopen(path, "r") : stdin;
    if (!f) return cli_fail(CB_EXIT_USAGE, "%s: %s", path, strerror(errno));
    static judge_metric m[JUDGE_MAX_METRICS];
    int nm = 0, rc = 0;
    char line[1024], err[256];
    for (int ln = 1; !rc && fgets(line, sizeof line, f); ln++) {
        size_t len = strlen(line);
        if (len && line[len - 1] == '\n') line[--len] = 0;
        else if (!feof(f)) rc = cli_fail(CB_EXIT_USAGE, "%s:%d: line longer than %zu bytes", path, ln, sizeof line - 2);
        judge_sample s;
        int k = rc ? 0 : judge_parse_line(line, &s, err, sizeof err);
        if (k < 0) rc = cli_fail(CB_EXIT_USAGE, "%s:%d: %s", path, ln, err);
        if (k <= 0) continue;
        int j = 0;
        while (j < nm && strcmp(m[j].name, s.metric)) j++;
        if (j == nm && nm == JUDGE_MAX_METRICS) {
            rc = cli_fail(CB_EXIT_USAGE, "%s:%d: more than %d metrics", path, ln, JUDGE_MAX_METRICS);
            break;
        }
        if (j == nm) {
            memset(&m[nm], 0, sizeof m[nm]);
            snprintf(m[nm].name, sizeof m[nm].name, "%s", s.metric);
            snprintf(m[nm].rule.name, sizeof m[nm].rule.name, "%.*s", (int)sizeof m[nm].rule.name - 1, s.metric);
            m[nm].rule.higher_is_better = s.higher_is_better;
            m[nm].rule.threshold = threshold;
            nm++;
        } else if (m[j].rule.higher_is_better != s.higher_is_better) {
            rc = cli_fail(CB_EXIT_USAGE, "%s:%d: %s is %s here, %s before", path, ln, m[j].name,
                          s.higher_is_better ? "higher" : "lower", s.higher_is_better ? "lower" : "higher");
            break;
        }
        double *g = m[j].n[s.cand] < GATE_MAX_VALUES ? grow(m[j].v[s.cand], m[j].n[s.cand]) : NULL;
        if (!g) {
            rc = cli_fail(CB_EXIT_USAGE, "%s:%d: more than %d values of %s on one side (or out of memory)", path, ln,
                          GATE_MAX_VALUES, s.metric);
            break;
        }
        m[j].v[s.cand] = g;
        g[m[j].n[s.cand]++] = s.value;
    }
    if (f != stdin) fclose(f);
    if (!rc && !nm) rc = cli_fail(CB_EXIT_USAGE, "%s: no samples", path);
    /* a metric on one side only (a kernel added or renamed) is judged inconclusive by gate_judge; none on both
     * sides means the two sides measured different things: an error */
    int both = 0;
    for (int j = 0; j < nm; j++) both += m[j].n[0] && m[j].n[1];
    if (!rc && !both) rc = cli_fail(CB_EXIT_USAGE, "%s: no metric has both base and cand values", path);
    static gate_verdict v[JUDGE_MAX_METRICS];
    for (int j = 0; !rc && j < nm; j++) {
        gate_judge(&m[j].rule, m[j].v[0], m[j].n[0], m[j].v[1], m[j].n[1], alpha, 2000, &v[j]);
        snprintf(v[j].metric, sizeof v[j].metric, "%.95s", m[j].name);
    }
    for (int j = 0; j < nm; j++) free(m[j].v[0]), free(m[j].v[1]);
    if (rc) return rc;
    rc = gate_exit_code(v, nm, NULL);
    const char *verdict = rc == CB_EXIT_REGRESSED ? "regression" : "pass";
    gate_print_table(stdout, v, nm, title, verdict, "");
    FILE *sf = summary ? fopen(summary, "w") : NULL;
    if (summary && !sf) fprintf(stderr, "cortex-bench: %s: cannot write the summary\n", summary);
    if (sf) gate_print_table(sf, v, nm, title, verdict, ""), fclose(sf);
    if (junit && gate_write_junit(junit, v, nm, title, "")) fprintf(stderr, "cortex-bench: %s: cannot write JUnit XML\n", junit);
    return rc;
}
