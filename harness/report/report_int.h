/*
 * report_int.h - what report.c (loading, rendering, report.md) and
 * report_charts.c (each chart's data and script) share: the report's
 * context and its charts. Internal to `cortex-bench report`.
 */
#ifndef CB_REPORT_INT_H
#define CB_REPORT_INT_H

#include <limits.h>
#include <stdio.h>

#include "store.h"
#include "store_read.h"

/* A run's identity and its items. */
typedef struct rp_run {
    store_run info;
    store_item *items;
    int n_items;
} rp_run;

/* A chart: written (data + script), rendered (images exist), or why not. */
typedef struct rp_chart {
    const char *stem, *title;
    int made, rendered;
    char why[256]; /* not made: why; made: a note for the reader (may be empty) */
} rp_chart;

enum { CH_TPS, CH_TTFT, CH_ITL, CH_TIME, CH_COUNTERS, CH_ADAPTERS, CH_SWEEP, CH_SPEC, CH_N };

/* Everything a report is made from. */
typedef struct rp_ctx {
    store *s;
    char dir[PATH_MAX];
    rp_run run, base; /* base.info.id == 0: no baseline */
    rp_chart charts[CH_N];
    store_counter *counters;
    int n_counters;
    char *err;
    size_t errlen;
} rp_ctx;

/* Set the error message from the store's last error and return -1. */
int rp_db_fail(rp_ctx *c, const char *what);

/* Chart files (report_charts.c), shared by report.c and challenge.c: open
 * c->dir/STEM.EXT for writing (NULL with a message in c->err); close it (-1
 * with a message if writing failed); a gnuplot script's prologue (what it
 * draws, the PNG terminal, w x h pixels) and epilogue (the same plot again
 * as SVG). */
FILE *rp_open(rp_ctx *c, const char *stem, const char *ext);
int rp_close(rp_ctx *c, FILE *f, const char *stem, const char *ext);
void rp_gp_begin(FILE *f, const rp_chart *ch, int w, int h);
void rp_gp_end(FILE *f, const rp_chart *ch, int w, int h);

/* report.c, shared with challenge.c: remove the n charts' old files from
 * c->dir (so the directory never shows a chart this report did not draw). */
void rp_charts_clear(rp_ctx *c, const rp_chart *charts, int n);
/* Draw the made charts of `charts` with gnuplot in c->dir, setting their
 * `rendered`; 1 when gnuplot was found (else one line on stderr), and the
 * first failure in err ("" when none). */
int rp_charts_render(rp_ctx *c, rp_chart *charts, int n, char *err, size_t errlen);
/* The charts section of a markdown report: drawn charts, then the ones that
 * do not apply and why. */
void rp_md_charts(FILE *out, const rp_chart *charts, int n, int have_gp, const char *gp_error);

/* Each chart: write DIR/STEM.dat and STEM.gp and set ch->made, or say in
 * ch->why why there is nothing to draw. 0, or -1 with a message in c->err. */
int rp_chart_tps(rp_ctx *c, rp_chart *ch);
int rp_chart_cdf(rp_ctx *c, rp_chart *ch, int itl);
int rp_chart_time(rp_ctx *c, rp_chart *ch);
int rp_chart_counters(rp_ctx *c, rp_chart *ch);
int rp_chart_adapters(rp_ctx *c, rp_chart *ch);
int rp_chart_sweep(rp_ctx *c, rp_chart *ch);
int rp_chart_spec(rp_ctx *c, rp_chart *ch);

#endif
