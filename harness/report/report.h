/*
 * report.h - `cortex-bench report RUN`: one run as a markdown report with
 * gnuplot charts (PNG and SVG), written to reports/<run>/ by default.
 *
 * Next to report.md go the charts' data (*.dat) and gnuplot scripts (*.gp),
 * so a reader can re-plot: `cd reports/<run> && gnuplot tps_per_prompt.gp`.
 * Without gnuplot (not on PATH, or $CORTEX_GNUPLOT naming a missing program)
 * one line is printed to stderr and report.md is written with its tables but
 * without images. The gnuplot helpers are shared with dashboard.c.
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

/*
 * Resolve a --baseline reference: a run id, or a tag name (tags table): the
 * latest run with that tag of the same configuration (compare_key) as
 * `run_id`, else of the same workload, else the latest tagged run. Returns 0
 * with *out set, or -1 with a message (no such run or tag).
 */
int report_resolve_run(store *s, const char *ref, int64_t run_id, int64_t *out, char *err, size_t errlen);

/* Shared gnuplot helpers. */

/* Find gnuplot: $CORTEX_GNUPLOT when set (a path; used only if executable),
 * else "gnuplot" on $PATH. 1 and the path in `path` if found, else 0. */
int report_gnuplot_find(char *path, size_t n);

/* Run `gnuplot script` with `dir` as working directory (fork + exec). 0, or -1
 * with gnuplot's first error line (or why it could not start) in err. */
int report_gnuplot_run(const char *gnuplot, const char *dir, const char *script, char *err, size_t errlen);

/* Write a gnuplot string literal (single-quoted, quotes doubled). */
void report_gp_string(FILE *f, const char *s);

/* Write a data-file label: double-quoted, with double quotes and control
 * characters replaced so gnuplot reads it as one field. */
void report_dat_label(FILE *f, const char *s);

/* mkdir -p: create `path` and its missing parents. 0 or -1 with a message. */
int report_mkdirs(const char *path, char *err, size_t errlen);

/* Replace `path` by the finished `tmp` (rename); 0 or -1 with a message. */
int report_commit_file(FILE *f, const char *tmp, const char *path, char *err, size_t errlen);

#endif
