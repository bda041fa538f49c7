/*
 * gate_print.c - a judgement for people and CI systems (see gate.h): the
 * markdown verdict table that `gate`, `judge` and their --summary files
 * print, and JUnit XML (one test case per verdict, a regression a failure,
 * an error a setup error).
 */
#include <math.h>
#include <stdio.h>

#include "gate.h"

/* A percentage, or "-" for NAN. */
static const char *pct(double x, char *buf, size_t n) {
    if (isnan(x)) snprintf(buf, n, "-");
    else snprintf(buf, n, "%+.2f%%", x * 100);
    return buf;
}

void gate_print_table(FILE *f, const gate_verdict *vs, int n, const char *mode, const char *verdict, const char *error) {
    fprintf(f, "## cortex-bench gate (%s): %s\n\n", mode, verdict);
    if (error[0]) fprintf(f, "**error:** %s\n\n", error);
    fprintf(f, "| metric | base | candidate | change | 95%% CI | p | verdict | note |\n"
               "| --- | ---: | ---: | ---: | --- | ---: | --- | --- |\n");
    for (int i = 0; i < n; i++) {
        const gate_verdict *v = &vs[i];
        char a[32], b[32], c[32], p[32];
        char bm[32], cm[32];
        snprintf(bm, sizeof bm, isnan(v->base_median) ? "-" : "%.6g", v->base_median);
        snprintf(cm, sizeof cm, isnan(v->cand_median) ? "-" : "%.6g", v->cand_median);
        fprintf(f, "| %s | %s | %s | %s | [%s, %s] | %s | **%s** | %s |\n", v->metric, bm, cm,
                pct(v->change, a, sizeof a), pct(v->ci_lo, b, sizeof b), pct(v->ci_hi, c, sizeof c),
                isnan(v->p) ? "-" : (snprintf(p, sizeof p, "%.4f", v->p), p), gate_v_name(v->v), v->note);
    }
}

/* XML-escape into f. */
static void xml(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

int gate_write_junit(const char *path, const gate_verdict *vs, int n, const char *mode, const char *error) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    int failures = 0;
    for (int i = 0; i < n; i++) failures += vs[i].v == GATE_REGRESSED;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n  <testsuite name=\"cortex-bench gate (%s)\""
               " tests=\"%d\" failures=\"%d\" errors=\"%d\">\n", mode, n + (error[0] ? 1 : 0), failures,
            error[0] ? 1 : 0);
    for (int i = 0; i < n; i++) {
        const gate_verdict *v = &vs[i];
        char a[32];
        fprintf(f, "    <testcase classname=\"gate.%s\" name=\"", mode);
        xml(f, v->metric);
        fprintf(f, "\">");
        if (v->v == GATE_REGRESSED) {
            fprintf(f, "<failure message=\"regressed %s\">", pct(v->change, a, sizeof a));
            xml(f, v->note);
            fprintf(f, "</failure>");
        } else {
            fprintf(f, "<system-out>%s %s: ", gate_v_name(v->v), pct(v->change, a, sizeof a));
            xml(f, v->note);
            fprintf(f, "</system-out>");
        }
        fprintf(f, "</testcase>\n");
    }
    if (error[0]) {
        fprintf(f, "    <testcase classname=\"gate.%s\" name=\"setup\"><error message=\"", mode);
        xml(f, error);
        fprintf(f, "\"/></testcase>\n");
    }
    fprintf(f, "  </testsuite>\n</testsuites>\n");
    return fclose(f);
}
