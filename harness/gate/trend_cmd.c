/*
 * trend_cmd.c - `cortex-bench trend METRIC`: fit steps to a metric's history
 * (runs in commit order, per comparable series), name the commits where it
 * stepped, and optionally chart each series with gnuplot.
 */
#include "gate_cmd.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "cli_util.h"
#include "plot.h"
#include "significance.h"
#include "store.h"
#include "store_gate.h"
#include "store_read.h"

/*
 * Chart one trend series with its fitted steps: points per run (x = run in
 * commit order, labelled with the commit) and the piecewise-constant fit as a
 * step line, as PNG and SVG via gnuplot. Returns 0, or -1 with a message.
 */
static int trend_chart(const char *dir, const char *mname, const char *wl, int series, const double *y,
                       const int64_t *run, char (*commit)[16], int n, const size_t *cp, size_t ncp, char *err, size_t en) {
    char gp[1024], base[512], path[1200];
    if (plot_mkdirs(dir, err, en)) return -1;
    snprintf(base, sizeof base, "trend-%s-%d", mname, series);
    snprintf(path, sizeof path, "%s/%s.dat", dir, base);
    FILE *f = fopen(path, "w");
    if (!f) return snprintf(err, en, "%s: cannot write", path), -1;
    static double fit[4096], tmp[4096];
    for (size_t seg = 0; seg <= ncp; seg++) { /* each segment's median: the fitted level */
        size_t a = seg ? cp[seg - 1] : 0, b = seg < ncp ? cp[seg] : (size_t)n;
        memcpy(tmp, y + a, sizeof(double) * (b - a));
        double m = sig_median(tmp, b - a);
        for (size_t i = a; i < b; i++) fit[i] = m;
    }
    fprintf(f, "# index run commit value fit\n");
    for (int i = 0; i < n; i++) {
        fprintf(f, "%d %lld ", i, (long long)run[i]);
        plot_dat_label(f, commit[i]);
        fprintf(f, " %.9g %.9g\n", y[i], fit[i]);
    }
    fclose(f);
    snprintf(gp, sizeof gp, "%s/%s.gp", dir, base);
    f = fopen(gp, "w");
    if (!f) return snprintf(err, en, "%s: cannot write", gp), -1;
    for (int t = 0; t < 2; t++) {
        fprintf(f, "set terminal %s size 900,420\nset output '%s.%s'\n", t ? "svg" : "png", base, t ? "svg" : "png");
        fprintf(f, "set title ");
        char title[400];
        snprintf(title, sizeof title, "%s (%s): %zu step%s", mname, wl, ncp, ncp == 1 ? "" : "s");
        plot_gp_string(f, title);
        fprintf(f, "\nset xlabel 'run (commit order)'\nset ylabel ");
        plot_gp_string(f, mname);
        fprintf(f, "\nset grid\nset key top left\nset xtics rotate by -45 font ',8'\n");
        for (size_t i = 0; i < ncp; i++)
            fprintf(f, "set arrow from %g, graph 0 to %g, graph 1 nohead dt 2 lc rgb '#cc0000'\n", cp[i] - 0.5, cp[i] - 0.5);
        fprintf(f, "plot '%s.dat' using 1:4:xtic(stringcolumn(3)) with points pt 7 lc rgb '#1f77b4' title 'run median',"
                   " '' using 1:5 with steps lw 2 lc rgb '#d62728' title 'fitted level (steps dashed)'\n", base);
        fprintf(f, "unset arrow\n");
    }
    fclose(f);
    char gnuplot[1024];
    if (!plot_gnuplot_find(gnuplot, sizeof gnuplot))
        return snprintf(err, en, "gnuplot not found: wrote %s/%s.dat and .gp only (apt-get install gnuplot-nox)", dir, base), -1;
    snprintf(path, sizeof path, "%s.gp", base);
    return plot_gnuplot_run(gnuplot, dir, path, err, en);
}

/* Fit steps to a metric's history (commit order) per comparable series and
 * name the commit where it stepped. */
int cmd_trend(int argc, char **argv) {
    const char *db = CLI_DEFAULT_DB, *mname = NULL, *workload = NULL, *chart = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--db") && i + 1 < argc) db = argv[++i];
        else if (!strcmp(argv[i], "--chart") && i + 1 < argc) chart = argv[++i];
        else if (!strcmp(argv[i], "--workload") && i + 1 < argc) workload = argv[++i];
        else if (argv[i][0] != '-' && !mname) mname = argv[i];
        else return cli_fail(2, "unexpected argument '%s' (trend METRIC [--workload W] [--chart DIR] [--db FILE])", argv[i]);
    }
    if (!mname) return cli_fail(2, "%s", "usage: cortex-bench trend METRIC [--workload W] [--chart DIR] [--db FILE]");
    store *s;
    if (cli_open_existing(db, &s)) return 1;
    store_history_point *h;
    int nh;
    if (store_metric_history(s, mname, workload, &h, &nh)) {
        free(h);
        int rc = cli_fail(1, "trend: %s", store_errmsg(s));
        store_close(s);
        return rc;
    }
    enum { CAP = 4096 };
    static double y[CAP];
    static int64_t run[CAP];
    static char commit[CAP][16];
    char key[80] = "", wl[256] = "";
    int n = 0, series = 0;
    for (int at = 0; at <= nh; at++) {
        int more = at < nh;
        const char *k = more ? h[at].key : "", *w = more ? h[at].workload : "";
        if (n && (!more || strcmp(k, key) || strcmp(w, wl))) { /* a series ends: fit and report */
            size_t cp[CAP], ncp = 0;
            double pen = sig_default_penalty(y, (size_t)n);
            if (n >= 4) sig_steps(y, (size_t)n, 2, pen, cp, &ncp);
            printf("%s%s (%s), %d runs, series %.12s: ", series++ ? "\n" : "", mname, wl, n, key);
            if (!ncp) printf("no step\n");
            char cerr[2048];
            if (chart && trend_chart(chart, mname, wl, series - 1, y, run, commit, n, cp, ncp, cerr, sizeof cerr))
                fprintf(stderr, "cortex-bench: trend chart: %s\n", cerr);
            else if (chart) printf("chart: %s/trend-%s-%d.png (and .svg)\n", chart, mname, series - 1);
            for (size_t i = 0; i < ncp; i++) {
                size_t a = i ? cp[i - 1] : 0, b = cp[i], e = i + 1 < ncp ? cp[i + 1] : (size_t)n;
                static double tmp[CAP];
                memcpy(tmp, y + a, sizeof(double) * (b - a));
                double before = sig_median(tmp, b - a);
                memcpy(tmp, y + b, sizeof(double) * (e - b));
                double after = sig_median(tmp, e - b);
                printf("%sstep at run %lld, commit %s: %.4g -> %.4g (%+.1f%%)\n", i ? "    " : "\n    ",
                       (long long)run[b], commit[b], before, after, (after / before - 1) * 100);
            }
            n = 0;
        }
        if (!more) break;
        snprintf(key, sizeof key, "%s", k);
        snprintf(wl, sizeof wl, "%s", w);
        if (n < CAP) {
            run[n] = h[at].run;
            snprintf(commit[n], sizeof commit[n], "%.10s%s", *h[at].commit ? h[at].commit : "?", h[at].dirty ? "+" : "");
            y[n++] = h[at].median;
        }
    }
    free(h);
    store_close(s);
    if (!series) printf("no complete runs with mname %s%s%s\n", mname, workload ? " on " : "", workload ? workload : "");
    return 0;
}
