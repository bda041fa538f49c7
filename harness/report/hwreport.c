/*
 * hwreport.c - see hwreport.h. The report is built in one pass over the
 * store's measurements (store_eval_runs):
 *
 *   runs --group--> configurations (columns: testbed, kernel table, pinning,
 *                   NUMA) x workloads (rows) x thread counts (the newest run
 *                   at each) --pick--> each cell's best thread count
 *        --emit-->  the same tables into hwreport.md and index.html (hr_*
 *                   writes a paragraph or table row to both), gnuplot data
 *                   and scripts into the same folder, rendered when gnuplot
 *                   is installed (the markdown says so when it is not).
 *
 * Figures come from stored medians; a figure a run did not record is "–",
 * an energy the machine could not count is "missing" with its reason.
 */
#include "hwreport.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dashboard.h"
#include "hw_store.h"
#include "hx_err.h"
#include "plot.h"
#include "store_eval.h"
#include "store_read.h"

#define HR_MAX_CONF 16
#define HR_MAX_WL 48
#define HR_MAX_T 16

/* One column: a machine under one kernel table, pinning and NUMA policy. */
typedef struct {
    char testbed[96], isa[32], pinned[128], numa[64], label[8], fingerprint[72];
    int64_t env_id;
    int cores;
    double price; /* USD per hour; NAN: none given */
    hw_ref hw;    /* its newest hw row at its best thread count of the first workload (read roof) */
    hw_peaks peaks;
    int have_hw;
} hr_conf;

/* One cell: a configuration on a workload, at each thread count measured. */
typedef struct {
    int n;
    const store_eval_run *at[HR_MAX_T]; /* ascending threads, the newest run at each */
    int best;                           /* index of the highest tps, -1 when none */
} hr_cell;

typedef struct {
    FILE *md, *html;
    hr_conf conf[HR_MAX_CONF];
    int n_conf;
    char wl[HR_MAX_WL][256];
    int n_wl;
    hr_cell cell[HR_MAX_CONF][HR_MAX_WL];
    int left_out; /* configurations or workloads past the limits */
    int scaling;  /* the scaling chart has lines (some configuration measured several thread counts) */
    double target_gbs;                       /* --target-read-gbs (0: no projection) */
    char energy_reason[HR_MAX_CONF][160];    /* why a configuration's energy is missing (the first run's reason) */
} hr_ctx;

/* ---- writing to both documents ---- */

static void hr_para(hr_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void hr_para(hr_ctx *c, const char *fmt, ...) {
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(c->md, "%s\n\n", buf);
    fputs("<p>", c->html);
    dashboard_html(c->html, buf);
    fputs("</p>\n", c->html);
}

static void hr_heading(hr_ctx *c, int level, const char *title) {
    fprintf(c->md, "%.*s %s\n\n", level, "####", title);
    fprintf(c->html, "<h%d>", level);
    dashboard_html(c->html, title);
    fprintf(c->html, "</h%d>\n", level);
}

/* A table row (header when `head`): n cells. */
static void hr_row(hr_ctx *c, int head, int n, char cells[][128]) {
    fputs("|", c->md);
    for (int i = 0; i < n; i++) fprintf(c->md, " %s |", cells[i]);
    fputs("\n", c->md);
    if (head) {
        fputs("|", c->md);
        for (int i = 0; i < n; i++) fputs(i ? " ---: |" : " --- |", c->md);
        fputs("\n", c->md);
        fputs("<table>\n", c->html);
    }
    fputs("<tr>", c->html);
    for (int i = 0; i < n; i++) {
        fputs(head ? "<th>" : "<td>", c->html);
        dashboard_html(c->html, cells[i]);
        fputs(head ? "</th>" : "</td>", c->html);
    }
    fputs("</tr>\n", c->html);
}

static void hr_table_end(hr_ctx *c) {
    fputs("\n", c->md);
    fputs("</table>\n", c->html);
}

/* The header row: `first`, then one column per configuration. */
static void hr_conf_head(hr_ctx *c, const char *first) {
    char cells[HR_MAX_CONF + 1][128];
    snprintf(cells[0], sizeof cells[0], "%s", first);
    for (int k = 0; k < c->n_conf; k++) snprintf(cells[k + 1], sizeof cells[k + 1], "%s", c->conf[k].label);
    hr_row(c, 1, c->n_conf + 1, cells);
}

static const char *num(char *b, size_t n, double v, int prec) {
    if (isnan(v) || isinf(v)) snprintf(b, n, "–");
    else snprintf(b, n, "%.*f", prec, v);
    return b;
}

/* ---- grouping ---- */

static int conf_of(hr_ctx *c, const store_eval_run *r) {
    for (int k = 0; k < c->n_conf; k++) {
        hr_conf *f = &c->conf[k];
        if (!strcmp(f->testbed, r->testbed) && !strcmp(f->isa, r->isa) && !strcmp(f->pinned, r->pinned) &&
            !strcmp(f->numa, r->numa))
            return k;
    }
    if (c->n_conf == HR_MAX_CONF) return -1;
    hr_conf *f = &c->conf[c->n_conf];
    memset(f, 0, sizeof *f);
    snprintf(f->testbed, sizeof f->testbed, "%s", r->testbed);
    snprintf(f->isa, sizeof f->isa, "%s", r->isa);
    snprintf(f->pinned, sizeof f->pinned, "%s", r->pinned);
    snprintf(f->numa, sizeof f->numa, "%s", r->numa);
    snprintf(f->fingerprint, sizeof f->fingerprint, "%s", r->fingerprint);
    snprintf(f->label, sizeof f->label, "%c", 'A' + c->n_conf);
    f->env_id = r->env_id;
    f->cores = r->logical_cores;
    f->price = NAN;
    return c->n_conf++;
}

static int wl_of(hr_ctx *c, const char *wl) {
    for (int w = 0; w < c->n_wl; w++)
        if (!strcmp(c->wl[w], wl)) return w;
    if (c->n_wl == HR_MAX_WL) return -1;
    snprintf(c->wl[c->n_wl], sizeof c->wl[0], "%s", wl);
    return c->n_wl++;
}

/* The model the most configurations measured (its sha256), when none was named. */
static const char *busiest_model(const store_eval_run *r, int n) {
    const char *best = NULL;
    int best_n = 0;
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) seen = !strcmp(r[j].model_sha256, r[i].model_sha256);
        if (seen) continue;
        int cnt = 0;
        for (int j = i; j < n; j++) cnt += !strcmp(r[j].model_sha256, r[i].model_sha256);
        if (cnt > best_n) best = r[i].model_sha256, best_n = cnt;
    }
    return best;
}

/* Place run r in its cell: the newest run at each thread count, ascending threads. */
static void cell_add(hr_cell *cell, const store_eval_run *r) {
    for (int i = 0; i < cell->n; i++)
        if (cell->at[i]->threads == r->threads) {
            if (r->id > cell->at[i]->id) cell->at[i] = r;
            return;
        }
    if (cell->n == HR_MAX_T) return;
    int i = cell->n++;
    while (i > 0 && cell->at[i - 1]->threads > r->threads) {
        cell->at[i] = cell->at[i - 1];
        i--;
    }
    cell->at[i] = r;
}

static void cell_pick(hr_cell *cell) {
    cell->best = -1;
    for (int i = 0; i < cell->n; i++)
        if (!isnan(cell->at[i]->tps) &&
            (cell->best < 0 || cell->at[i]->tps > cell->at[cell->best]->tps))
            cell->best = i;
}

/* --price: "USD" for all, or "TESTBED=USD,..." */
static int parse_prices(hr_ctx *c, const char *spec, char *err, size_t errlen) {
    if (!spec || !*spec) return 0;
    char *end;
    double all = strtod(spec, &end);
    if (end != spec && !*end) {
        if (!(all >= 0) || isinf(all)) return hx_fail(err, errlen, "--price: '%s' is not a price per hour", spec);
        for (int k = 0; k < c->n_conf; k++) c->conf[k].price = all;
        return 0;
    }
    for (const char *p = spec; *p;) {
        const char *comma = strchr(p, ','), *eq = strchr(p, '=');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (!eq || eq >= p + len || eq == p)
            return hx_fail(err, errlen, "--price: '%.*s' is not TESTBED=USD (or one USD for every machine)", (int)len, p);
        double v = strtod(eq + 1, &end);
        if (end != p + len || !(v >= 0) || isinf(v))
            return hx_fail(err, errlen, "--price: '%.*s': the price is not a number of USD per hour", (int)len, p);
        int hit = 0;
        for (int k = 0; k < c->n_conf; k++)
            if (strlen(c->conf[k].testbed) == (size_t)(eq - p) && !strncmp(c->conf[k].testbed, p, (size_t)(eq - p)))
                c->conf[k].price = v, hit = 1;
        if (!hit) return hx_fail(err, errlen, "--price: no testbed '%.*s' in the report", (int)(eq - p), p);
        p += len + (comma ? 1 : 0);
    }
    return 0;
}

/* The compute peak a run's kernel table reaches on one thread, GOP/s (NAN when not measured): the int8
 * dot products of the quantized kernels, VNNI where the table uses it. */
static double peak_1t(const hr_conf *f) {
    if (strstr(f->isa, "vnni") && !isnan(f->peaks.int8_vnni_1t) && f->peaks.int8_vnni_1t > 0) return f->peaks.int8_vnni_1t;
    if (!strcmp(f->isa, "scalar")) return f->peaks.fp32_scalar_1t;
    return f->peaks.int8_avx2_1t;
}

/* ---- the sections ---- */

static void sec_configs(hr_ctx *c, store *s) {
    hr_heading(c, 2, "Configurations (columns)");
    char h[7][128] = {"column", "testbed", "kernel table", "pinning", "NUMA", "CPUs", "read roof (GB/s, hw row)"};
    hr_row(c, 1, 7, h);
    for (int k = 0; k < c->n_conf; k++) {
        hr_conf *f = &c->conf[k];
        f->have_hw = hw_store_lookup(s, f->fingerprint, f->env_id, f->cores, &f->hw) == 1;
        if (f->have_hw) hw_store_peaks(s, f->hw.id, &f->peaks);
        char r[7][128];
        snprintf(r[0], sizeof r[0], "%s", f->label);
        snprintf(r[1], sizeof r[1], "%s", f->testbed);
        snprintf(r[2], sizeof r[2], "%s", *f->isa ? f->isa : "not recorded");
        snprintf(r[3], sizeof r[3], "%s", *f->pinned ? f->pinned : "none");
        snprintf(r[4], sizeof r[4], "%s", *f->numa ? f->numa : "default (not recorded)");
        snprintf(r[5], sizeof r[5], "%d", f->cores);
        if (f->have_hw) snprintf(r[6], sizeof r[6], "%.2f at %d threads (row %lld)", f->hw.read_gbs, f->hw.threads, (long long)f->hw.id);
        else snprintf(r[6], sizeof r[6], "not measured (cortex-bench hw on that machine)");
        hr_row(c, 0, 7, r);
    }
    hr_table_end(c);
}

/* The run a cell's figures come from: its best thread count's, or NULL. */
static const store_eval_run *best_run(const hr_ctx *c, int k, int w) {
    const hr_cell *cell = &c->cell[k][w];
    return cell->best < 0 ? NULL : cell->at[cell->best];
}

/* Fills one cell's text for configuration k on workload w (out[0] is "–" on entry). */
typedef void (*hr_cell_fn)(hr_ctx *c, int k, int w, const store_eval_run *x, char *out, size_t n);

/* A table with a row per workload and a column per configuration, each cell from `fn`. */
static void hr_wl_table(hr_ctx *c, hr_cell_fn fn) {
    hr_conf_head(c, "workload");
    for (int w = 0; w < c->n_wl; w++) {
        char r[HR_MAX_CONF + 1][128];
        snprintf(r[0], sizeof r[0], "%s", c->wl[w]);
        for (int k = 0; k < c->n_conf; k++) {
            const store_eval_run *x = best_run(c, k, w);
            snprintf(r[k + 1], sizeof r[k + 1], "–");
            if (x) fn(c, k, w, x, r[k + 1], sizeof r[k + 1]);
        }
        hr_row(c, 0, c->n_conf + 1, r);
    }
    hr_table_end(c);
}

static void cell_tps(hr_ctx *c, int k, int w, const store_eval_run *x, char *out, size_t n) {
    snprintf(out, n, "%.2f (%d t, run %lld)", x->tps, x->threads, (long long)x->id);
}

/* The share of its machine's read roof a run's decode reached: its own figure (at its thread
 * count), else from the machine's hw row; NAN without one. */
static double read_share(const hr_conf *f, const store_eval_run *x) {
    if (!isnan(x->roofline_frac)) return x->roofline_frac;
    return f->have_hw ? x->bytes_per_token * x->decode_tps / (f->hw.read_gbs * 1e9) : NAN;
}

static void cell_roofs(hr_ctx *c, int k, int w, const store_eval_run *x, char *out, size_t n) {
    const hr_conf *f = &c->conf[k];
    if (!f->have_hw || isnan(x->decode_tps)) return; /* no hw row, or a run that did not decode (pp) */
    double comp = x->flops_per_token * x->decode_tps / (peak_1t(f) * 1e9 * x->threads);
    char b1[32], b2[32];
    snprintf(out, n, "read %s%%, compute %s%%", num(b1, sizeof b1, 100 * read_share(f, x), 0),
             num(b2, sizeof b2, 100 * comp, 1));
}

static void cell_rss(hr_ctx *c, int k, int w, const store_eval_run *x, char *out, size_t n) {
    num(out, n, x->peak_rss_mib, 1);
}

static void cell_energy(hr_ctx *c, int k, int w, const store_eval_run *x, char *out, size_t n) {
    if (isnan(x->energy_j)) {
        snprintf(out, n, "missing");
        if (!c->energy_reason[k][0])
            snprintf(c->energy_reason[k], sizeof c->energy_reason[k], "%s",
                     *x->energy_reason ? x->energy_reason : "not counted (run recorded before energy counters)");
    } else {
        num(out, n, x->gen_tokens > 0 ? x->energy_j / x->gen_tokens : NAN, 4);
    }
}

static void cell_cost(hr_ctx *c, int k, int w, const store_eval_run *x, char *out, size_t n) {
    num(out, n, c->conf[k].price / (x->tps * 3600) * 1e6, 3);
}

static void cell_projection(hr_ctx *c, int k, int w, const store_eval_run *x, char *out, size_t n) {
    num(out, n, read_share(&c->conf[k], x) * c->target_gbs * 1e9 / x->bytes_per_token, 1);
}

static void sec_tps(hr_ctx *c) {
    hr_heading(c, 2, "Tokens per second (at each configuration's best thread count)");
    hr_para(c, "A synthetic test's rate (tg: generated tokens, pp: prompt tokens), a prompt set's or trace's output"
               " tokens; the median over repetitions.");
    hr_wl_table(c, cell_tps);
}

static void sec_scaling(hr_ctx *c) {
    hr_heading(c, 2, "Thread scaling");
    hr_para(c, "Speedup is against the fewest threads measured; efficiency is the speedup over the ratio of thread counts"
               " (1.00: every added thread paid in full).");
    int warned = 0;
    for (int w = 0; w < c->n_wl; w++) {
        int any = 0;
        for (int k = 0; k < c->n_conf; k++) any |= c->cell[k][w].n > 1;
        if (!any) continue;
        hr_heading(c, 3, c->wl[w]);
        char h[4][128] = {"configuration", "threads", "tok/s", "speedup (efficiency)"};
        hr_row(c, 1, 4, h);
        for (int k = 0; k < c->n_conf; k++) {
            hr_cell *cell = &c->cell[k][w];
            for (int i = 0; i < cell->n; i++) {
                const store_eval_run *r0 = cell->at[0], *r = cell->at[i];
                double sp = r->tps / r0->tps, eff = sp / ((double)r->threads / r0->threads);
                char row[4][128], b1[32], b2[32];
                snprintf(row[0], sizeof row[0], "%s", c->conf[k].label);
                snprintf(row[1], sizeof row[1], "%d", r->threads);
                num(row[2], sizeof row[2], r->tps, 2);
                snprintf(row[3], sizeof row[3], "%sx (%s)", num(b1, sizeof b1, sp, 2), num(b2, sizeof b2, eff, 2));
                hr_row(c, 0, 4, row);
            }
        }
        hr_table_end(c);
        for (int k = 0; k < c->n_conf; k++) {
            hr_cell *cell = &c->cell[k][w];
            for (int i = 1; i < cell->n; i++)
                if (cell->at[i]->tps < cell->at[i - 1]->tps) {
                    hr_para(c, "WARNING: %s on %s: %d threads were slower than %d (%.2f vs %.2f tok/s): more threads"
                               " than this machine serves well (shared cores, SMT siblings, or a memory-bound decode)",
                            c->conf[k].label, c->wl[w], cell->at[i]->threads, cell->at[i - 1]->threads,
                            cell->at[i]->tps, cell->at[i - 1]->tps);
                    warned++;
                }
        }
    }
    if (!warned) hr_para(c, "No configuration was slower with more threads.");
}

static void sec_roofs(hr_ctx *c) {
    hr_heading(c, 2, "Share of each machine's measured roofs (decode, best thread count)");
    hr_para(c, "Read: bytes read per token x decode tok/s over the read bandwidth `cortex-bench hw` measured at that thread"
               " count. Compute: operations per token x decode tok/s over the kernel table's one-thread peak x threads."
               " – where the machine has no hw row.");
    hr_wl_table(c, cell_roofs);
}

static void sec_memory_energy_cost(hr_ctx *c) {
    hr_heading(c, 2, "Peak memory (RSS, MiB)");
    hr_wl_table(c, cell_rss);
    hr_heading(c, 2, "Energy per generated token (J, RAPL package energy)");
    hr_wl_table(c, cell_energy);
    for (int k = 0; k < c->n_conf; k++)
        if (c->energy_reason[k][0]) hr_para(c, "%s: energy missing: %s", c->conf[k].label, c->energy_reason[k]);
    hr_heading(c, 2, "Cost per million tokens (USD, from --price per hour)");
    int any = 0;
    for (int k = 0; k < c->n_conf; k++) any |= !isnan(c->conf[k].price);
    if (!any) {
        hr_para(c, "No --price given (cortex-bench hwreport --price TESTBED=USD_PER_HOUR,...).");
        return;
    }
    hr_wl_table(c, cell_cost);
    hr_para(c, "At the best thread count's tok/s (the tokens of the table above), one stream of requests as the"
               " workload sends them; a machine without a price reads –.");
}

static void sec_projection(hr_ctx *c) {
    hr_heading(c, 2, "Projection to the challenge machine");
    if (!(c->target_gbs > 0)) {
        hr_para(c, "None: give the challenge machine's measured read bandwidth with --target-read-gbs GBS"
                   " (docs/metrics.md, \"Hardware evaluation\", says what the projection assumes).");
        return;
    }
    hr_para(c, "Decode tok/s if the challenge machine's decode reached the same share of its read roof (%.1f GB/s, both"
               " sockets, weights interleaved) as this configuration did of its own: memory-bound decode assumed"
               " (docs/metrics.md, \"Hardware evaluation\").", c->target_gbs);
    hr_wl_table(c, cell_projection);
}

/* ---- charts ---- */

static int charts(hr_ctx *c, const char *dir, char *err, size_t errlen) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/tps.dat", dir);
    FILE *d = fopen(path, "w");
    if (!d) return hx_fail(err, errlen, "cannot write %s: %s", path, strerror(errno));
    fprintf(d, "# workload");
    for (int k = 0; k < c->n_conf; k++) fprintf(d, " %s", c->conf[k].label);
    fprintf(d, "\n");
    for (int w = 0; w < c->n_wl; w++) {
        plot_dat_label(d, c->wl[w]);
        for (int k = 0; k < c->n_conf; k++) {
            hr_cell *cell = &c->cell[k][w];
            if (cell->best < 0) fprintf(d, " NaN");
            else fprintf(d, " %.6g", cell->at[cell->best]->tps);
        }
        fprintf(d, "\n");
    }
    fclose(d);
    snprintf(path, sizeof path, "%s/scaling.dat", dir);
    if (!(d = fopen(path, "w"))) return hx_fail(err, errlen, "cannot write %s: %s", path, strerror(errno));
    /* one block per configuration x workload with several thread counts: threads, tok/s */
    int blocks = 0;
    char titles[HR_MAX_CONF * 4][160];
    for (int k = 0; k < c->n_conf; k++)
        for (int w = 0; w < c->n_wl && blocks < HR_MAX_CONF * 4; w++) {
            hr_cell *cell = &c->cell[k][w];
            if (cell->n < 2) continue;
            for (int i = 0; i < cell->n; i++) fprintf(d, "%d %.6g\n", cell->at[i]->threads, cell->at[i]->tps);
            fprintf(d, "\n\n");
            snprintf(titles[blocks++], sizeof titles[0], "%s %s", c->conf[k].label, c->wl[w]);
        }
    fclose(d);
    snprintf(path, sizeof path, "%s/hwreport.gp", dir);
    FILE *g = fopen(path, "w");
    if (!g) return hx_fail(err, errlen, "cannot write %s: %s", path, strerror(errno));
    fprintf(g, "# hwreport.gp - written by cortex-bench hwreport. Re-plot (in this directory): gnuplot hwreport.gp\n"
               "if (strstrt(GPVAL_TERMINALS, ' pngcairo ') > 0) {\n"
               "    set terminal pngcairo size 900,480 noenhanced font 'sans,10' background rgb 'white'\n"
               "} else {\n    set terminal png size 900,480 noenhanced background rgb 'white'\n}\n"
               "set border 3\nset tics nomirror\nset key outside right\nset grid ytics\n"
               "set output 'tps.png'\nset title 'tok/s at the best thread count'\n"
               "set style data histograms\nset style histogram clustered gap 1\nset style fill solid 0.8 border -1\n"
               "set ylabel 'tok/s'\nset xtics rotate by -30\nset yrange [0:*]\n"
               "plot ");
    for (int k = 0; k < c->n_conf; k++)
        fprintf(g, "%s'tps.dat' using %d:xtic(1) title '%s'", k ? ", " : "", k + 2, c->conf[k].label);
    fprintf(g, "\n");
    c->scaling = blocks > 0;
    if (blocks) {
        fprintf(g, "unset style\nset style data linespoints\nset output 'scaling.png'\nset title 'thread scaling'\n"
                   "set xlabel 'threads'\nset xtics norotate\nset logscale x 2\nset format x '%%g'\n"
                   "set xrange [0.8:*]\nset yrange [0:*]\nplot "); /* thread counts double: 1, 2, 4, ... evenly spaced */
        for (int b = 0; b < blocks; b++) {
            fprintf(g, "%s'scaling.dat' index %d using 1:2 with linespoints title ", b ? ", " : "", b);
            plot_gp_string(g, titles[b]);
        }
        fprintf(g, "\n");
    }
    fclose(g);
    char gp[PATH_MAX];
    if (!plot_gnuplot_find(gp, sizeof gp)) return 1;
    return plot_gnuplot_run(gp, dir, "hwreport.gp", err, errlen) ? -1 : 0;
}

int hwreport_write(store *s, const hwreport_params *p, char *md_path, size_t md_n, char *err, size_t errlen) {
    store_eval_run *runs = NULL;
    int n = 0;
    if (store_eval_runs(s, p->model, &runs, &n))
        return hx_fail(err, errlen, "%s: read the measurements: %s", store_name(s), store_errmsg(s));
    const char *model = p->model && *p->model ? NULL : busiest_model(runs, n);
    hr_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        free(runs);
        return hx_fail(err, errlen, "out of memory");
    }
    int used = 0, other_models = 0;
    char model_name[300] = "";
    for (int i = 0; i < n; i++) {
        if (model && strcmp(runs[i].model_sha256, model)) {
            other_models++;
            continue;
        }
        int k = conf_of(c, &runs[i]), w = wl_of(c, runs[i].workload);
        if (k < 0 || w < 0) {
            c->left_out++;
            continue;
        }
        cell_add(&c->cell[k][w], &runs[i]);
        if (!model_name[0]) snprintf(model_name, sizeof model_name, "%s (sha256 %.16s)", runs[i].model, runs[i].model_sha256);
        used++;
    }
    int rc = 0;
    if (!used) {
        rc = hx_fail(err, errlen, "%s: no VALID measurement%s%s to report (cortex-bench run on each machine first)",
                     store_name(s), p->model ? " of model " : "", p->model ? p->model : "");
        goto done;
    }
    for (int k = 0; k < c->n_conf; k++)
        for (int w = 0; w < c->n_wl; w++) cell_pick(&c->cell[k][w]);
    if ((rc = parse_prices(c, p->price, err, errlen))) goto done;
    if ((rc = plot_mkdirs(p->out_dir, err, errlen))) goto done;
    char html_path[PATH_MAX];
    snprintf(md_path, md_n, "%s/hwreport.md", p->out_dir);
    snprintf(html_path, sizeof html_path, "%s/index.html", p->out_dir);
    c->md = fopen(md_path, "w");
    c->html = fopen(html_path, "w");
    if (!c->md || !c->html) {
        rc = hx_fail(err, errlen, "cannot write %s: %s", !c->md ? md_path : html_path, strerror(errno));
        goto done;
    }
    fprintf(c->md, "# Hardware evaluation: %s\n\n", model_name);
    fprintf(c->html, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Cortex hardware"
                     " evaluation</title>\n<style>\nbody{font-family:sans-serif;max-width:1100px;margin:2em auto;}"
                     "table{border-collapse:collapse;margin:1em 0;}td,th{border:1px solid #ccc;padding:3px 8px;"
                     "text-align:right;}td:first-child,th:first-child{text-align:left;}img{max-width:100%%;}\n"
                     "</style>\n</head>\n<body>\n<h1>Hardware evaluation: ");
    dashboard_html(c->html, model_name);
    fprintf(c->html, "</h1>\n");
    hr_para(c, "From %s: %d VALID measurement%s of this model on %d configuration%s (machines, and a machine under"
               " another kernel table, pinning or NUMA policy). Configurations are columns side by side: nothing here is"
               " a regression verdict.%s",
            store_name(s), used, used == 1 ? "" : "s", c->n_conf, c->n_conf == 1 ? "" : "s",
            other_models ? " Runs of other models are left out (--model names one)." : "");
    if (c->left_out)
        hr_para(c, "%d run%s left out: more than %d configurations or %d workloads.", c->left_out,
                c->left_out == 1 ? " was" : "s were", HR_MAX_CONF, HR_MAX_WL);
    if (c->n_conf < 2)
        hr_para(c, "Only one configuration: run the same workloads on another machine (or under another kernel table,"
                   " CORTEX_ISA, or pinning, --pin) and push them to this store to compare.");
    sec_configs(c, s);
    sec_tps(c);
    int ch = charts(c, p->out_dir, err, errlen);
    if (ch == 0) {
        fprintf(c->md, "![tok/s](tps.png)\n\n");
        fprintf(c->html, "<p><img src=\"tps.png\" alt=\"tok/s\"></p>\n");
        if (c->scaling) {
            fprintf(c->md, "![thread scaling](scaling.png)\n\n");
            fprintf(c->html, "<p><img src=\"scaling.png\" alt=\"thread scaling\"></p>\n");
        }
    } else {
        hr_para(c, "Charts not drawn: %s (the data and script are in this folder: gnuplot hwreport.gp).",
                ch > 0 ? "gnuplot is not installed" : err);
        err[0] = 0;
    }
    sec_scaling(c);
    sec_roofs(c);
    sec_memory_energy_cost(c);
    c->target_gbs = p->target_read_gbs;
    sec_projection(c);
    fprintf(c->html, "</body>\n</html>\n");
done:
    if (c->md && fclose(c->md) && !rc) rc = hx_fail(err, errlen, "cannot write %s: %s", md_path, strerror(errno));
    if (c->html && fclose(c->html) && !rc) rc = hx_fail(err, errlen, "cannot write the HTML page: %s", strerror(errno));
    free(c);
    free(runs);
    return rc;
}
