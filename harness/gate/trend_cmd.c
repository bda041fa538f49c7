/*
 * trend_cmd.c - `cortex-bench trend METRIC`: fit steps to a metric's history
 * (measurements only: complete VALID runs, in commit order, per comparable
 * series), name the commits where it stepped, warn when the newest run is
 * off the last fitted level (a possible step a single run cannot confirm:
 * sig_latest), and optionally chart each series with gnuplot. A metric (or
 * workload) no stored run has is a usage error (exit 2); the warning keeps
 * exit 0 (docs/gates.md, "History: trend", says why).
 */
#include "gate_cmd.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli_util.h"
#include "gatefile.h"
#include "plot.h"
#include "significance.h"
#include "store.h"
#include "store_gate.h"
#include "store_read.h"
#include "hx_err.h"

/*
 * Chart one trend series with its fitted steps: points per run (x = run in
 * commit order, labelled with the commit) and the piecewise-constant fit as a
 * step line, as PNG and SVG via gnuplot. Returns 0, or -1 with a message.
 */
static int trend_chart(const char *dir, const char *mname, const char *wl, int series, const double *y,
                       const int64_t *run, char (*commit)[16], int n, const size_t *cp, size_t ncp, char *err, size_t errlen) {
    char gp[1024], base[512], path[1200];
    if (plot_mkdirs(dir, err, errlen)) return -1;
    snprintf(base, sizeof base, "trend-%s-%d", mname, series);
    snprintf(path, sizeof path, "%s/%s.dat", dir, base);
    FILE *f = fopen(path, "w");
    if (!f) return hx_fail(err, errlen, "%s: cannot write", path);
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
    if (!f) return hx_fail(err, errlen, "%s: cannot write", gp);
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
        return hx_fail(err, errlen,
                       "gnuplot not found: wrote %s/%s.dat and .gp only (apt-get install gnuplot-nox)", dir, base);
    snprintf(path, sizeof path, "%s.gp", base);
    return plot_gnuplot_run(gnuplot, dir, path, err, errlen);
}

/* How far (in the series' robust sigmas) the newest run must be off the
 * last fitted level to be warned about; docs/gates.md says why 3. */
#define TREND_LATEST_SIGMAS 3.0

/* The gate file's threshold for metric `name` (0 when it has none): `path`
 * when given (an error is exit 2), else ci/gates.conf when readable. 0, or
 * a CLI exit code after the message. */
static int trend_threshold(const char *path, const char *name, double *thr, char *used, size_t n) {
    *thr = 0;
    used[0] = 0;
    if (!path && access("ci/gates.conf", R_OK)) return 0;
    static gate_conf c;
    char err[1024];
    if (gate_conf_load(path ? path : "ci/gates.conf", &c, err, sizeof err)) return cli_fail(CB_EXIT_USAGE, "%s", err);
    const gate_metric *m = gate_conf_metric(&c, name);
    if (m) {
        *thr = m->threshold;
        snprintf(used, n, "%s", c.path);
    }
    return 0;
}

/* The warning line of a newest run off the last fitted level (sig_latest's
 * flag): by how much, against what, and that it is not confirmed. */
static void trend_latest(const sig_latest_check *kc, const double *y, const int64_t *run, char (*commit)[16], int n,
                         double thr, const char *thr_file) {
    sig_latest_check k = *kc;
    double sig = k.sigma > 0 ? fabs(y[n - 1] - k.level) / k.sigma : INFINITY;
    char why[160];
    int w = snprintf(why, sizeof why, "%.4g against %.4g, %.1f sigma", y[n - 1], k.level, sig);
    if (thr > 0) snprintf(why + w, sizeof why - (size_t)w, "; threshold %.1f%% in %s", 100 * thr, thr_file);
    if (isnan(k.change))
        printf("    latest run %lld (%s) is off the level of the last %zu runs (%s): a possible step, not confirmed"
               " until another run agrees\n", (long long)run[n - 1], commit[n - 1], k.k, why);
    else
        printf("    latest run %lld (%s) is %.1f%% %s the level of the last %zu runs (%s): a possible step, not"
               " confirmed until another run agrees\n", (long long)run[n - 1], commit[n - 1], 100 * fabs(k.change),
               k.change < 0 ? "below" : "above", k.k, why);
}

/* See gate_cmd.h. */
void trend_opts_init(void *op) {
    trend_opts *o = op;
    memset(o, 0, sizeof *o);
    o->db = cli_default_db();
}

/* Fit steps to a metric's history (commit order) per comparable series and
 * name the commit where it stepped. */
int cmd_trend(void *opts, const cli_args *args) {
    const trend_opts *o = opts;
    const char *db = o->db, *workload = o->workload, *chart = o->chart, *gate_file = o->gate_file;
    if (args->flags->n_pos != 1)
        return cli_fail(2, "%s", "usage: cortex-bench trend METRIC [--workload W] [--chart DIR] [--gate-file F] [--db FILE]");
    const char *mname = args->flags->pos[0];
    double thr;
    char thr_file[512];
    int rc = trend_threshold(gate_file, mname, &thr, thr_file, sizeof thr_file);
    if (rc) return rc;
    store *s;
    if (cli_open_existing(db, &s)) return 1;
    int known = store_metric_known(s, mname, workload);
    if (known <= 0) {
        if (known < 0) rc = cli_fail(CB_EXIT_FAILED, "trend: %s", store_errmsg(s));
        else if (workload && store_metric_known(s, mname, NULL) == 1)
            rc = cli_fail(CB_EXIT_USAGE, "trend: no stored run of workload '%s' has metric '%s'", workload, mname);
        else rc = cli_fail(CB_EXIT_USAGE, "trend: no stored run has metric '%s' (`cortex-bench show RUN` lists a run's"
                           " metrics)", mname);
        store_close(s);
        return rc;
    }
    store_history_point *h;
    int nh;
    if (store_metric_history(s, mname, workload, &h, &nh)) {
        free(h);
        rc = cli_fail(1, "trend: %s", store_errmsg(s));
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
            sig_latest_check late;
            int warn = !sig_latest(y, (size_t)n, cp, ncp, TREND_LATEST_SIGMAS, thr, &late) && late.flag;
            if (!ncp) printf("%s\n", warn ? "no confirmed step" : "no step");
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
            if (warn) trend_latest(&late, y, run, commit, n, thr, thr_file);
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
    if (!series) /* the metric is stored, but only by runs that are no measurement */
        printf("no measurement of %s%s%s: every run that has it is INVALID, failed or incomplete\n", mname,
               workload ? " on " : "", workload ? workload : "");
    return 0;
}
