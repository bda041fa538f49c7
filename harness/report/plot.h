/*
 * plot.h - gnuplot and output-file helpers shared by report.c, dashboard.c
 * and trend_cmd.c: every chart is a data file, a gnuplot script and the
 * images gnuplot draws from them.
 */
#ifndef CB_PLOT_H
#define CB_PLOT_H

#include <stddef.h>
#include <stdio.h>

/* Find gnuplot: $CORTEX_GNUPLOT when set (a path; used only if executable),
 * else "gnuplot" on $PATH. 1 and the path in `path` if found, else 0. */
int plot_gnuplot_find(char *path, size_t n);

/* Run `gnuplot script` with `dir` as working directory (fork + exec). 0, or -1
 * with gnuplot's first error line (or why it could not start) in err. */
int plot_gnuplot_run(const char *gnuplot, const char *dir, const char *script, char *err, size_t errlen);

/* Write a gnuplot string literal (single-quoted, quotes doubled). */
void plot_gp_string(FILE *f, const char *s);

/* Write a data-file label: double-quoted, with double quotes and control
 * characters replaced so gnuplot reads it as one field. */
void plot_dat_label(FILE *f, const char *s);

/* `v` with `prec` decimals into buf, or "–" when NAN (table cells). */
const char *plot_num(char *buf, size_t n, double v, int prec);

/* mkdir -p: create `path` and its missing parents. 0 or -1 with a message. */
int plot_mkdirs(const char *path, char *err, size_t errlen);

/* Replace `path` by the finished `tmp` (rename); 0 or -1 with a message. */
int plot_commit_file(FILE *f, const char *tmp, const char *path, char *err, size_t errlen);

#endif
