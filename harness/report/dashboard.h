/*
 * dashboard.h - `cortex-bench dashboard`: a static HTML page (index.html, no
 * server, no external resources) over the whole benchmark database:
 *
 *   - the latest gate verdicts (tables gates, verdicts), each naming the runs
 *     it judged (verdicts.base_run/cand_run, else the gate's), or a note that
 *     none exist;
 *   - trend charts of the headline metrics (output_tps, decode_tps,
 *     prefill_tps, ttft_ms_p50, itl_ms_p99; tps for synthetic tests) per
 *     comparable configuration (runs.compare_key), runs in commit order: SVG
 *     files in charts/, drawn by gnuplot (with their .dat and .gp) or, without
 *     gnuplot, by built-in SVG code. Measurements only (complete and VALID);
 *     a rate sweep enters by its saturation run, its rates are charted with it;
 *   - each rate sweep: one chart of its rates, its runs, its INVALID runs;
 *   - every run with its environment and verdict (VALID green; INVALID red
 *     with its reasons and no figure), threads or, over HTTP, the server,
 *     linked to its report when reports/<run>/report.md exists.
 *
 * A small inline script sets data-charts-loaded / data-charts-total on <body>
 * once the page has loaded, so a headless browser can check the charts render.
 */
#ifndef CB_DASHBOARD_H
#define CB_DASHBOARD_H

#include <stddef.h>
#include <stdio.h>

#include "store.h"

#define DASHBOARD_DEFAULT_DIR "dashboards/site"

/* The one line printed (to stderr) when the charts are drawn without gnuplot. */
#define DASHBOARD_NO_GNUPLOT_MSG \
    "gnuplot not found: drawing the dashboard's charts with the built-in SVG writer (apt-get install gnuplot-nox for gnuplot charts)"

/* Write `out_dir`/index.html and `out_dir`/charts/ (NULL: dashboards/site,
 * created as needed). 0, or -1 with a message (database, file or gnuplot error). */
int dashboard_write(store *s, const char *out_dir, char *err, size_t errlen);

/* Write text HTML-escaped (also fine inside attributes and SVG). */
void dashboard_html(FILE *f, const char *s);

/* dashboard_sweep.c: the "Rate sweeps" section (nothing when there is no
 * sweep), its SVG charts written into charts_dir. 0, or -1 with a message. */
int dashboard_sweeps(store *s, FILE *out, const char *charts_dir, char *err, size_t errlen);

#endif
