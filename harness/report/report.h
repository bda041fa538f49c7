/*
 * report.h - `cortex-bench report RUN`: one run as a markdown report with
 * gnuplot charts (PNG and SVG), written to reports/<run>/ by default.
 *
 * Next to report.md go the charts' data (*.dat) and gnuplot scripts (*.gp),
 * so a reader can re-plot: `cd reports/<run> && gnuplot tps_per_prompt.gp`.
 * Without gnuplot (not on PATH, or $CORTEX_GNUPLOT naming a missing program)
 * one line is printed to stderr and report.md is written with its tables but
 * without images. The gnuplot helpers are in plot.h.
 */
#ifndef CB_REPORT_H
#define CB_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "store.h"

/* The one line printed (to stderr) when a report is written without gnuplot. */
#define REPORT_NO_GNUPLOT_MSG \
    "gnuplot not found: writing a text-only report (apt-get install gnuplot-nox for charts)"

/*
 * Write the report of `run_id` into `out_dir` (NULL: reports/<run_id>, created
 * as needed): report.md with the run header, summary, per-request, per-adapter
 * and counter tables, and the charts it links. `baseline_run` (0 = none) is
 * overlaid on the TPS and latency-distribution charts and compared in the
 * summary. Returns 0, or -1 with a message in err (missing run, database or
 * file error, gnuplot failing on a script; report.md is still written in that
 * last case, without the failed chart).
 */
int report_write(store *s, int64_t run_id, int64_t baseline_run, const char *out_dir, char *err, size_t errlen);



#endif
