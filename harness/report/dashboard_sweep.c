/*
 * dashboard_sweep.c - the dashboard's rate sweeps (`cortex-bench run --rate
 * sweep`): for each sweep one SVG chart, drawn here without gnuplot like the
 * trend charts, of latency (TTFT p50 and p99, TPOT p50) and achieved
 * request rate against the offered load, with the saturation rate of the
 * sweep's closed-loop run marked, and a table of its runs. Points are
 * measurements only (store_sweep_load); the sweep's INVALID runs are listed
 * under it in red with their reasons, never as points. A sweep is one item:
 * the trend charts take its saturation run alone (dashboard.c).
 */
#include "dashboard.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_read.h"
#include "hx_err.h"

#define SW_W 720
#define SW_H 360

/* The largest finite value of field k over the open-loop points (0 if none). */
static double sweep_max(const store_sweep_point *p, int n, size_t off) {
    double m = 0;
    for (int i = 0; i < n; i++) {
        double v = *(const double *)((const char *)&p[i] + off);
        if (p[i].rate > 0 && isfinite(v) && v > m) m = v;
    }
    return m;
}

/* One series as a polyline over the open-loop points: x offered rate, y field at off scaled to ymax. */
static void sweep_line(FILE *f, const store_sweep_point *p, int n, size_t off, double xmax, double ymax,
                       const char *color, const char *dash) {
    const double L = 60, R = 60, T = 34, B = 44, pw = SW_W - L - R, ph = SW_H - T - B;
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"%s%s%s points=\"", color,
            dash ? " stroke-dasharray=\"" : "", dash ? dash : "", dash ? "\"" : "");
    for (int i = 0; i < n; i++) {
        double v = *(const double *)((const char *)&p[i] + off);
        if (p[i].rate <= 0 || !isfinite(v)) continue;
        fprintf(f, "%.1f,%.1f ", L + p[i].rate / xmax * pw, T + ph - v / ymax * ph);
    }
    fprintf(f, "\"/>\n");
}

/* The SVG of one sweep into path. 0, or -1 with a message. */
static int sweep_svg(const char *path, int64_t sweep, const store_sweep_point *p, int n, double sat, char *err,
                     size_t errlen) {
    FILE *f = fopen(path, "w");
    if (!f) return hx_fail(err, errlen, "cannot write %s: %s", path, strerror(errno));
    const double L = 60, R = 60, T = 34, B = 44, pw = SW_W - L - R, ph = SW_H - T - B;
    double xmax = 0;
    for (int i = 0; i < n; i++) xmax = p[i].rate > xmax ? p[i].rate : xmax;
    if (isfinite(sat) && sat > xmax) xmax = sat;
    xmax *= 1.05;
    double lat = fmax(sweep_max(p, n, offsetof(store_sweep_point, ttft_p99)),
                      sweep_max(p, n, offsetof(store_sweep_point, ttft_p50))) * 1.1;
    double rps = fmax(xmax, sweep_max(p, n, offsetof(store_sweep_point, request_rps)) * 1.1);
    if (!(lat > 0)) lat = 1;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\""
               " height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"10\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
               "<text x=\"%.1f\" y=\"16\" text-anchor=\"middle\" font-size=\"12\">Rate sweep of run %lld: latency and"
               " throughput against offered load</text>\n"
               "<path d=\"M%.1f %.1fV%.1fH%.1fV%.1f\" fill=\"none\" stroke=\"black\"/>\n",
            SW_W, SW_H, SW_W, SW_H, L + pw / 2, (long long)sweep, L, T, T + ph, L + pw, T);
    for (int k = 0; k <= 4; k++) { /* ticks: latency left, request rate right, offered rate below */
        double y = T + ph - k * ph / 4;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#dddddd\"/>\n"
                   "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.3g</text>\n"
                   "<text x=\"%.1f\" y=\"%.1f\">%.3g</text>\n"
                   "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.3g</text>\n",
                L, y, L + pw, y, L - 4, y + 3.5, lat * k / 4, L + pw + 4, y + 3.5, rps * k / 4, L + k * pw / 4,
                T + ph + 14, xmax * k / 4);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">offered load (requests/s, Poisson)</text>\n"
               "<text transform=\"translate(14 %.1f) rotate(-90)\" text-anchor=\"middle\">latency (ms)</text>\n"
               "<text transform=\"translate(%d %.1f) rotate(90)\" text-anchor=\"middle\">achieved (requests/s)</text>\n",
            L + pw / 2, SW_H - 8, T + ph / 2, SW_W - 10, T + ph / 2);
    if (isfinite(sat) && sat > 0) {
        double x = L + sat / xmax * pw;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#555555\" stroke-dasharray=\"4 3\"/>\n"
                   "<text x=\"%.1f\" y=\"%.1f\" fill=\"#555555\">saturation %.3g req/s</text>\n",
                x, T, x, T + ph, x + 4, T + 12, sat);
    }
    /* latency on the left scale, request rates rescaled onto it */
    sweep_line(f, p, n, offsetof(store_sweep_point, ttft_p50), xmax, lat, "#1f77b4", NULL);
    sweep_line(f, p, n, offsetof(store_sweep_point, ttft_p99), xmax, lat, "#d62728", NULL);
    sweep_line(f, p, n, offsetof(store_sweep_point, tpot_p50), xmax, lat, "#9467bd", NULL);
    sweep_line(f, p, n, offsetof(store_sweep_point, request_rps), xmax, rps, "#2ca02c", "5 3");
    sweep_line(f, p, n, offsetof(store_sweep_point, goodput_rps), xmax, rps, "#ff7f0e", "2 2");
    static const char *const key[5][2] = {{"#1f77b4", "TTFT p50"}, {"#d62728", "TTFT p99"}, {"#9467bd", "TPOT p50"},
                                          {"#2ca02c", "achieved req/s"}, {"#ff7f0e", "goodput req/s"}};
    for (int k = 0; k < 5; k++)
        fprintf(f, "<rect x=\"%.1f\" y=\"22\" width=\"10\" height=\"4\" fill=\"%s\"/><text x=\"%.1f\" y=\"27\">%s</text>\n",
                L + k * 120, key[k][0], L + k * 120 + 14, key[k][1]);
    fprintf(f, "</svg>\n");
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) return hx_fail(err, errlen, "cannot write %s", path);
    return 0;
}

/* See dashboard.h. */
int dashboard_sweeps(store *s, FILE *out, const char *charts_dir, char *err, size_t errlen) {
    store_run *runs;
    int n_runs;
    if (store_runs_all(s, &runs, &n_runs)) {
        free(runs);
        return hx_fail(err, errlen, "runs: %s", store_errmsg(s));
    }
    int shown = 0, rc = 0;
    for (int i = 0; i < n_runs && !rc; i++) {
        if (runs[i].sweep != runs[i].id) continue; /* one section per sweep, at its saturation run */
        store_sweep_point *p;
        int n;
        if (store_sweep_load(s, runs[i].id, &p, &n)) {
            free(p);
            rc = hx_fail(err, errlen, "sweep %lld: %s", (long long)runs[i].id, store_errmsg(s));
            break;
        }
        double sat = NAN;
        for (int k = 0; k < n; k++)
            if (p[k].rate == 0) sat = p[k].request_rps;
        if (!shown++) fprintf(out, "<section id=\"sweeps\">\n<h2>Rate sweeps</h2>\n");
        char path[4200], file[64];
        snprintf(file, sizeof file, "sweep-%lld.svg", (long long)runs[i].id);
        snprintf(path, sizeof path, "%s/%s", charts_dir, file);
        rc = sweep_svg(path, runs[i].id, p, n, sat, err, errlen);
        fprintf(out, "<h3 id=\"sweep-%lld\">run %lld: <code>", (long long)runs[i].id, (long long)runs[i].id);
        dashboard_html(out, runs[i].workload);
        if (runs[i].endpoint[0]) { /* over HTTP: the server's threads, not ours */
            fprintf(out, "</code>, server ");
            dashboard_html(out, runs[i].server[0] ? runs[i].server : "(unidentified)");
            fprintf(out, " at <code>");
            dashboard_html(out, runs[i].endpoint);
            fprintf(out, "</code>");
        } else fprintf(out, "</code>, %d thread%s", runs[i].threads, runs[i].threads == 1 ? "" : "s");
        fprintf(out, ", ");
        dashboard_html(out, runs[i].sched_config);
        fprintf(out, "</h3>\n");
        int bad = 0; /* the sweep's INVALID runs: named, in red, never points */
        for (int k = 0; k < n_runs; k++) {
            const store_run *q = &runs[k];
            if ((q->sweep != runs[i].id && q->id != runs[i].id) || strcmp(q->validity, "invalid")) continue;
            if (!bad++) fprintf(out, "<ul class=\"invalid\">\n");
            fprintf(out, "<li><span class=\"badge bad\">INVALID</span> run %lld (", (long long)q->id);
            if (q->rate > 0) fprintf(out, "offered %.4g req/s", q->rate);
            else fprintf(out, "the closed-loop saturation run");
            fprintf(out, "), not a measurement: ");
            dashboard_html(out, q->validity_reasons);
            fprintf(out, "</li>\n");
        }
        if (bad) fprintf(out, "</ul>\n");
        fprintf(out, "<img src=\"charts/%s\" alt=\"rate sweep %lld\">\n"
                     "<table><tr><th>run</th><th>offered req/s</th><th>achieved req/s</th><th>output tok/s</th>"
                     "<th>TTFT p50 ms</th><th>TTFT p99 ms</th><th>TPOT p50 ms</th><th>goodput req/s</th></tr>\n",
                file, (long long)runs[i].id);
        for (int k = 0; k < n; k++) {
            double v[7] = {p[k].rate, p[k].request_rps, p[k].output_tps, p[k].ttft_p50, p[k].ttft_p99, p[k].tpot_p50,
                           p[k].goodput_rps};
            fprintf(out, "<tr><td>%lld</td>", (long long)p[k].id);
            for (int j = 0; j < 7; j++) {
                if (j == 0 && v[0] == 0) fprintf(out, "<td>closed loop (saturation)</td>");
                else if (isfinite(v[j])) fprintf(out, "<td>%.4g</td>", v[j]);
                else fprintf(out, "<td>-</td>");
            }
            fprintf(out, "</tr>\n");
        }
        fprintf(out, "</table>\n");
        free(p);
    }
    if (shown) fprintf(out, "</section>\n");
    free(runs);
    return rc;
}
