/*
 * dashboard.c - `cortex-bench dashboard`: the static HTML dashboard (see
 * dashboard.h). Everything comes from one pass over the database: runs with
 * their environments, the headline medians of every run, the latest gates.
 * Only measurements (STORE_MEASUREMENT: complete and VALID) show figures or
 * enter a trend; an INVALID run is shown in red with its reasons.
 */
#include "dashboard.h"
#include "hwreport.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "plot.h"
#include "roofline.h"
#include "store_gate.h"
#include "store_read.h"
#include "hx_err.h"

/* Runs listed in the runs table (newest first); trends use every run. */
#define DB_TABLE_RUNS 300
/* Recent gates listed under the latest one. */
#define DB_RECENT_GATES 10
/* Trend chart size (pixels) and the most x labels drawn before thinning. */
#define DB_W 380
#define DB_H 250
#define DB_MAX_LABELS 16

/* Headline metrics charted per configuration. */
static const struct {
    const char *name, *label, *unit;
    int higher_better, synthetic;
} DB_METRICS[] = {
    {"output_tps", "output TPS", "tok/s", 1, 0},
    {"decode_tps", "decode TPS", "tok/s", 1, 0},
    {"prefill_tps", "prefill TPS", "tok/s", 1, 0},
    {"ttft_ms_p50", "TTFT p50", "ms", 0, 0},
    {"itl_ms_p99", "ITL p99", "ms", 0, 0},
    {"tps", "throughput (tps)", "tok/s", 1, 1},
};
#define DB_NM (int)(sizeof DB_METRICS / sizeof DB_METRICS[0])

/* A run as the dashboard shows it. */
typedef struct db_run {
    int64_t id;
    char started[40], status[16], error[512], commit[48], workload[256], mode[16], model[160], type[16], key[80];
    char cpu[160], kernel[128], compiler[128], governor[32], fpr[20];
    char validity[16], reasons[1024]; /* validity.h: "valid", "invalid" ("" before schema v12 or not complete) */
    char endpoint[512], server[256];  /* measured over HTTP: the server's URL and identity ("" in-process) */
    int measurement;                  /* STORE_MEASUREMENT: complete and VALID; the only runs with figures */
    int64_t sweep;                    /* the rate sweep's saturation run (0: none) */
    double rate;                      /* open loop at this rate (0: none) */
    int dirty, threads, reps, cores;
    double mem_gib;
    double med[DB_NM], lo[DB_NM], hi[DB_NM]; /* summary median/min/max, NAN if absent */
    double order;                            /* commit order (see db_commit_order) */
    double roof_frac;                        /* decode TPS / bandwidth roofline, NAN if unknown */
    int roof_hint;                           /* decoded, but the machine has no hw row */
} db_run;

/* Everything the page is built from. */
typedef struct db_ctx {
    store *s;
    char dir[PATH_MAX], charts[PATH_MAX + 16];
    db_run *runs;  /* by id, ascending */
    int n_runs;
    int have_gp, n_charts;
    char gp[PATH_MAX];
    FILE *all_gp;  /* charts/all.gp: loads every chart script */
    char *err;
    size_t errlen;
} db_ctx;

/* Set the error from the store; -1. */
static int db_fail(db_ctx *c, const char *what) {
    return hx_fail(c->err, c->errlen, "dashboard: %s: %s", what, store_errmsg(c->s));
}

/* See dashboard.h. */
void dashboard_html(FILE *f, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fputc(*s, f);
        }
    }
}

#define db_html dashboard_html

/* Numbers with about three significant digits, for axes and tables. */
static const char *db_short(char *buf, size_t n, double v) {
    double a = fabs(v);
    if (isnan(v)) snprintf(buf, n, "–");
    else if (a >= 1e6 || (a > 0 && a < 1e-3)) snprintf(buf, n, "%.2g", v);
    else if (a >= 100) snprintf(buf, n, "%.0f", v);
    else if (a >= 10) snprintf(buf, n, "%.1f", v);
    else snprintf(buf, n, "%.3g", v);
    return buf;
}

/* Where a run ran: "4 threads", or for a run over HTTP its server (the
 * threads are the server's business, not this harness's: never "0 threads"). */
static void db_where(FILE *out, const db_run *r) {
    if (!*r->endpoint) {
        fprintf(out, "%d thread%s", r->threads, r->threads == 1 ? "" : "s");
        return;
    }
    fprintf(out, "server ");
    db_html(out, *r->server ? r->server : "(unidentified)");
    fprintf(out, " at <code>");
    db_html(out, r->endpoint);
    fprintf(out, "</code>");
}

/* A run of a rate sweep other than its saturation run: shown with the sweep
 * (dashboard_sweep.c), not as a trend of its own rate. */
static int db_sweep_member(const db_run *r) { return r->sweep && r->sweep != r->id; }

/* ---------------------------------------------------------------- loading */

/* Load every run (with its environment) and the headline summaries. */
static int db_load(db_ctx *c) {
    store_run *all;
    int n;
    if (store_runs_all(c->s, &all, &n)) {
        free(all);
        return db_fail(c, "runs");
    }
    c->runs = n ? calloc((size_t)n, sizeof *c->runs) : NULL;
    if (n && !c->runs) {
        free(all);
        return hx_fail(c->err, c->errlen, "dashboard: out of memory");
    }
    static store_summary_row rows[256];
    for (int i = 0; i < n; i++) {
        const store_run *a = &all[i];
        db_run *r = &c->runs[c->n_runs++];
        r->id = a->id;
        snprintf(r->started, sizeof r->started, "%s", a->started);
        snprintf(r->status, sizeof r->status, "%s", a->status);
        snprintf(r->error, sizeof r->error, "%s", a->error);
        snprintf(r->commit, sizeof r->commit, "%s", a->commit);
        r->dirty = a->dirty;
        snprintf(r->workload, sizeof r->workload, "%s", a->workload);
        snprintf(r->mode, sizeof r->mode, "%s", a->mode);
        snprintf(r->model, sizeof r->model, "%s", a->model);
        snprintf(r->type, sizeof r->type, "%s", a->type);
        snprintf(r->key, sizeof r->key, "%s", a->key);
        r->threads = a->threads;
        r->reps = a->reps;
        snprintf(r->validity, sizeof r->validity, "%s", a->validity);
        snprintf(r->reasons, sizeof r->reasons, "%s", a->validity_reasons);
        snprintf(r->endpoint, sizeof r->endpoint, "%s", a->endpoint);
        snprintf(r->server, sizeof r->server, "%s", a->server);
        r->measurement = a->measurement;
        r->sweep = a->sweep;
        r->rate = a->rate;
        snprintf(r->cpu, sizeof r->cpu, "%s", a->cpu_model);
        r->cores = a->logical_cores;
        r->mem_gib = (double)a->mem_bytes / (1 << 30);
        snprintf(r->kernel, sizeof r->kernel, "%s", a->kernel);
        snprintf(r->compiler, sizeof r->compiler, "%s", a->compiler);
        snprintf(r->governor, sizeof r->governor, "%s", a->governor);
        snprintf(r->fpr, sizeof r->fpr, "%.12s", a->fingerprint);
        for (int m = 0; m < DB_NM; m++) r->med[m] = r->lo[m] = r->hi[m] = NAN;
        r->roof_frac = NAN;
        if (!r->measurement) continue; /* no figure of it is a measurement: none is loaded */
        int nr = store_summary_load(c->s, r->id, rows, 256);
        if (nr < 0) {
            free(all);
            return db_fail(c, "summary");
        }
        for (int k = 0; k < nr; k++)
            for (int m = 0; m < DB_NM; m++) {
                if (strcmp(DB_METRICS[m].name, rows[k].name)) continue;
                r->med[m] = rows[k].med;
                r->lo[m] = rows[k].min;
                r->hi[m] = rows[k].max;
            }
        double dec; /* decode against the roofline (roofline.h) */
        roof_fraction(c->s, r->id, &dec, &r->roof_frac);
        r->roof_hint = !isnan(dec) && isnan(r->roof_frac);
    }
    free(all);
    return 0;
}

/* A commit hash and its position in the git history. */
typedef struct db_commit {
    char hash[41];
    long pos;
} db_commit;

/* Order commit hashes for bsearch. */
static int db_cmp_commit(const void *a, const void *b) {
    return strcmp(((const db_commit *)a)->hash, ((const db_commit *)b)->hash);
}

/*
 * Commit order of every run: its commit's position in `git rev-list
 * --topo-order --reverse HEAD` when the working directory is a clone holding
 * it (oldest first), else after all of those in the order the commit was
 * first benchmarked (its lowest run id). Runs of one commit keep id order.
 */
static void db_commit_order(db_ctx *c) {
    db_commit *hist = NULL;
    size_t n = 0, cap = 0;
    FILE *p = popen("git rev-list --topo-order --reverse HEAD 2>/dev/null", "r");
    if (p) {
        char line[128];
        while (fgets(line, sizeof line, p)) {
            size_t len = strcspn(line, "\r\n");
            if (len != 40) continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 1024;
                db_commit *v = realloc(hist, cap * sizeof *v);
                if (!v) break;
                hist = v;
            }
            memcpy(hist[n].hash, line, 40);
            hist[n].hash[40] = 0;
            hist[n].pos = (long)n;
            n++;
        }
        pclose(p);
    }
    if (n) qsort(hist, n, sizeof *hist, db_cmp_commit);
    for (int i = 0; i < c->n_runs; i++) {
        db_run *r = &c->runs[i];
        db_commit key;
        snprintf(key.hash, sizeof key.hash, "%.40s", r->commit);
        const db_commit *hit = n ? bsearch(&key, hist, n, sizeof *hist, db_cmp_commit) : NULL;
        if (hit) {
            r->order = (double)hit->pos;
            continue;
        }
        int64_t first = r->id; /* the lowest run id of this commit */
        for (int j = 0; j < i; j++)
            if (!strcmp(c->runs[j].commit, r->commit)) {
                first = c->runs[j].id;
                break;
            }
        r->order = 1e12 + (double)first;
    }
    free(hist);
}

/* ---------------------------------------------------------------- trends */

/* A y range with a margin, never empty. */
static void db_yrange(double lo, double hi, double *a, double *b) {
    double pad = hi > lo ? (hi - lo) * 0.12 : (fabs(hi) > 0 ? fabs(hi) * 0.05 : 1);
    *a = lo - pad;
    *b = hi + pad;
    if (lo >= 0 && *a < 0) *a = 0;
}

/* "Nice" tick step for a range: 1, 2 or 5 times a power of ten, ~5 ticks. */
static double db_tick_step(double span) {
    double raw = span / 5, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

/* The x label of a run: "r12 1a2b3c4" (+ "*" when built dirty). */
static void db_xlabel(const db_run *r, char *buf, size_t n) {
    snprintf(buf, n, "r%lld %.7s%s", (long long)r->id, *r->commit ? r->commit : "?", r->dirty ? "*" : "");
}

/* Draw a trend chart as SVG directly (no gnuplot): points joined by a line,
 * min–max bars, labelled axes and title. */
static int db_svg_chart(db_ctx *c, const char *path, const char *title, const char *ylabel, db_run *const *rs, int n,
                        int m, double y0, double y1) {
    FILE *f = fopen(path, "w");
    if (!f) return hx_fail(c->err, c->errlen, "cannot write %s: %s", path, strerror(errno));
    const double L = 62, R = 14, T = 30, B = 78, pw = DB_W - L - R, ph = DB_H - T - B;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\""
               " height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"10\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
               "<text x=\"%.1f\" y=\"17\" text-anchor=\"middle\" font-size=\"12\">",
            DB_W, DB_H, DB_W, DB_H, L + pw / 2);
    db_html(f, title);
    fprintf(f, "</text>\n");
    double step = db_tick_step(y1 - y0);
    for (double t = ceil(y0 / step) * step; t <= y1 + step * 1e-9; t += step) {
        double y = T + ph - (t - y0) / (y1 - y0) * ph;
        int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#dddddd\"/>\n", L, y, L + pw, y);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.*f</text>\n", L - 5, y + 3.5, dec,
                fabs(t) < step * 1e-9 ? 0 : t);
    }
    fprintf(f, "<path d=\"M%.1f %.1fV%.1fH%.1f\" fill=\"none\" stroke=\"black\"/>\n", L, T, T + ph, L + pw);
    fprintf(f, "<text transform=\"translate(14 %.1f) rotate(-90)\" text-anchor=\"middle\">", T + ph / 2);
    db_html(f, ylabel);
    fprintf(f, "</text>\n");
    int every = n > DB_MAX_LABELS ? (n + DB_MAX_LABELS - 1) / DB_MAX_LABELS : 1;
    fprintf(f, "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"");
    for (int i = 0; i < n; i++) {
        if (isnan(rs[i]->med[m])) continue;
        double x = L + (i + 0.5) * pw / n, y = T + ph - (rs[i]->med[m] - y0) / (y1 - y0) * ph;
        fprintf(f, "%.1f,%.1f ", x, y);
    }
    fprintf(f, "\"/>\n");
    for (int i = 0; i < n; i++) {
        double x = L + (i + 0.5) * pw / n;
        if (i % every == 0 || i == n - 1) {
            char lb[64];
            db_xlabel(rs[i], lb, sizeof lb);
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", x, T + ph, x, T + ph + 4);
            fprintf(f, "<text transform=\"translate(%.1f %.1f) rotate(45)\" font-size=\"9\">", x - 3, T + ph + 10);
            db_html(f, lb);
            fprintf(f, "</text>\n");
        }
        if (isnan(rs[i]->med[m])) continue;
        double y = T + ph - (rs[i]->med[m] - y0) / (y1 - y0) * ph;
        if (!isnan(rs[i]->lo[m]) && !isnan(rs[i]->hi[m]) && rs[i]->hi[m] > rs[i]->lo[m]) {
            double ya = T + ph - (rs[i]->lo[m] - y0) / (y1 - y0) * ph, yb = T + ph - (rs[i]->hi[m] - y0) / (y1 - y0) * ph;
            fprintf(f, "<path d=\"M%.1f %.1fV%.1fM%.1f %.1fH%.1fM%.1f %.1fH%.1f\" stroke=\"#1f77b4\"/>\n", x, ya, yb,
                    x - 3, ya, x + 3, x - 3, yb, x + 3);
        }
        char b[32];
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"#1f77b4\"><title>run %lld: %s</title></circle>\n", x,
                y, (long long)rs[i]->id, db_short(b, sizeof b, rs[i]->med[m]));
    }
    fprintf(f, "</svg>\n");
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) return hx_fail(c->err, c->errlen, "cannot write %s", path);
    return 0;
}

/* Write one trend chart (stem.svg; with gnuplot also stem.dat and stem.gp,
 * loaded from charts/all.gp). */
static int db_trend_chart(db_ctx *c, const char *stem, db_run *const *rs, int n, int m) {
    char title[128], ylabel[64], path[PATH_MAX + 160];
    snprintf(title, sizeof title, "%s (%s, %s is better)", DB_METRICS[m].label, DB_METRICS[m].unit,
             DB_METRICS[m].higher_better ? "higher" : "lower");
    snprintf(ylabel, sizeof ylabel, "%s (%s)", DB_METRICS[m].label, DB_METRICS[m].unit);
    double lo = INFINITY, hi = -INFINITY, y0, y1;
    for (int i = 0; i < n; i++) {
        if (isnan(rs[i]->med[m])) continue;
        lo = fmin(lo, isnan(rs[i]->lo[m]) ? rs[i]->med[m] : rs[i]->lo[m]);
        hi = fmax(hi, isnan(rs[i]->hi[m]) ? rs[i]->med[m] : rs[i]->hi[m]);
    }
    db_yrange(lo, hi, &y0, &y1);
    if (!c->have_gp) {
        snprintf(path, sizeof path, "%s/%s.svg", c->charts, stem);
        return db_svg_chart(c, path, title, ylabel, rs, n, m, y0, y1);
    }
    snprintf(path, sizeof path, "%s/%s.dat", c->charts, stem);
    FILE *f = fopen(path, "w");
    if (!f) return hx_fail(c->err, c->errlen, "cannot write %s: %s", path, strerror(errno));
    fprintf(f, "# %s per run in commit order: position\tmedian\tmin\tmax\tlabel\trun\n", DB_METRICS[m].name);
    int every = n > DB_MAX_LABELS ? (n + DB_MAX_LABELS - 1) / DB_MAX_LABELS : 1;
    for (int i = 0; i < n; i++) {
        char lb[64] = "";
        if (i % every == 0 || i == n - 1) db_xlabel(rs[i], lb, sizeof lb);
        double v = rs[i]->med[m], a = isnan(rs[i]->lo[m]) ? v : rs[i]->lo[m], b = isnan(rs[i]->hi[m]) ? v : rs[i]->hi[m];
        if (isnan(v)) fprintf(f, "%d\t?\t?\t?\t", i);
        else fprintf(f, "%d\t%.6g\t%.6g\t%.6g\t", i, v, a, b);
        plot_dat_label(f, lb);
        fprintf(f, "\t%lld\n", (long long)rs[i]->id);
    }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) return hx_fail(c->err, c->errlen, "cannot write %s", path);
    snprintf(path, sizeof path, "%s/%s.gp", c->charts, stem);
    if (!(f = fopen(path, "w"))) return hx_fail(c->err, c->errlen, "cannot write %s: %s", path, strerror(errno));
    fprintf(f, "# %s.gp - %s per run, in commit order (median; bars: min-max over repetitions)\n"
               "# Written by cortex-bench dashboard. Re-plot (in this directory): gnuplot %s.gp\n"
               "reset\nset terminal svg size %d,%d noenhanced font 'sans,11' background rgb 'white'\n"
               "set output '%s.svg'\nset encoding utf8\nset border 3\nset tics nomirror\n"
               "set datafile missing '?'\nset grid ytics lc rgb '#dddddd'\nset key off\n"
               "set xrange [-0.5:%d.5]\nset yrange [%.6g:%.6g]\nset ytics %.6g\nset xtics rotate by -45 left font ',10'\n",
            stem, DB_METRICS[m].name, stem, DB_W, DB_H, stem, n - 1, y0, y1, db_tick_step(y1 - y0));
    fprintf(f, "set title ");
    plot_gp_string(f, title);
    fprintf(f, "\nset ylabel ");
    plot_gp_string(f, ylabel);
    fprintf(f, "\nplot '%s.dat' using 1:2:3:4:xticlabels(5) with yerrorlines pt 7 ps 0.7 lw 1.5 lc rgb '#1f77b4'\n"
               "unset output\n",
            stem);
    bad = ferror(f);
    if (fclose(f) != 0 || bad) return hx_fail(c->err, c->errlen, "cannot write %s", path);
    fprintf(c->all_gp, "load '%s.gp'\n", stem);
    return 0;
}

/* Order runs by configuration and workload, then commit order, then id. */
static int db_cmp_group(const void *a, const void *b) {
    const db_run *x = *(db_run *const *)a, *y = *(db_run *const *)b;
    int k = strcmp(x->key, y->key);
    if (!k) k = strcmp(x->workload, y->workload);
    if (k) return k;
    if (x->order != y->order) return x->order < y->order ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* A trend group: runs sharing a compare_key and a workload, in commit order. */
typedef struct db_group {
    db_run **rs;
    int n;
    int64_t latest;
} db_group;

/* Newest group first. */
static int db_cmp_latest(const void *a, const void *b) {
    const db_group *x = a, *y = b;
    return (y->latest > x->latest) - (y->latest < x->latest);
}

/* FNV-1a 32 of a string: names a workload's chart files stably. */
static unsigned db_hash(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return (unsigned)h;
}

/* One group: heading, then a chart per headline metric it has values for. */
static int db_group_html(db_ctx *c, FILE *out, const db_group *g) {
    db_run *const *rs = g->rs;
    const db_run *r0 = rs[0], *last = rs[g->n - 1];
    int synth = !strcmp(r0->mode, "synthetic");
    fprintf(out, "<div class=\"group\">\n<h3><code>");
    db_html(out, r0->workload);
    fprintf(out, "</code> · ");
    db_html(out, r0->model);
    fprintf(out, " · ");
    db_where(out, r0);
    fprintf(out, " · %s</h3>\n<p class=\"meta\">",
            synth ? "synthetic test" : !strcmp(r0->mode, "open") ? "open loop (trace replay)" : "closed loop");
    db_html(out, last->cpu);
    fprintf(out, ", %d CPUs · configuration <code>%.12s</code> · %d run%s, latest run %lld", last->cores, r0->key, g->n,
            g->n == 1 ? "" : "s", (long long)g->latest);
    int sweeps = 0;
    int64_t newest_sweep = 0;
    for (int k = 0; k < g->n; k++)
        if (rs[k]->sweep == rs[k]->id) {
            sweeps++;
            if (rs[k]->id > newest_sweep) newest_sweep = rs[k]->id;
        }
    if (sweeps) /* saturation runs: their sweeps' other rates are charted under Rate sweeps, not here */
        fprintf(out, " · %d saturation run%s of rate sweeps (the newest: <a href=\"#sweep-%lld\">sweep of run %lld</a>)",
                sweeps, sweeps == 1 ? "" : "s", (long long)newest_sweep, (long long)newest_sweep);
    fprintf(out, "</p>\n<div class=\"charts\">\n");
    for (int m = 0; m < DB_NM; m++) {
        if (DB_METRICS[m].synthetic != synth) continue;
        int any = 0;
        for (int k = 0; k < g->n; k++) any |= !isnan(rs[k]->med[m]);
        if (!any) continue;
        char stem[96], b[32];
        snprintf(stem, sizeof stem, "trend_%.12s_%08x_%s", r0->key, db_hash(r0->workload), DB_METRICS[m].name);
        if (db_trend_chart(c, stem, rs, g->n, m)) return -1;
        c->n_charts++;
        fprintf(out, "<figure><img class=\"chart\" src=\"charts/%s.svg\" width=\"%d\" height=\"%d\" alt=\"", stem,
                DB_W, DB_H);
        db_html(out, DB_METRICS[m].label);
        fprintf(out, " trend\"><figcaption><code>%s</code> · latest %s %s</figcaption></figure>\n", DB_METRICS[m].name,
                db_short(b, sizeof b, last->med[m]), DB_METRICS[m].unit);
    }
    fprintf(out, "</div>\n</div>\n");
    return 0;
}

/* The trends section: complete runs grouped by configuration and workload. */
static int db_trends(db_ctx *c, FILE *out) {
    db_run **rs = malloc((size_t)(c->n_runs ? c->n_runs : 1) * sizeof *rs);
    db_group *gs = malloc((size_t)(c->n_runs ? c->n_runs : 1) * sizeof *gs);
    if (!rs || !gs) {
        free(rs);
        free(gs);
        return hx_fail(c->err, c->errlen, "dashboard: out of memory");
    }
    int n = 0, ng = 0, rc = 0;
    for (int i = 0; i < c->n_runs; i++) /* measurements only; a sweep as its saturation run */
        if (c->runs[i].measurement && !db_sweep_member(&c->runs[i])) rs[n++] = &c->runs[i];
    qsort(rs, (size_t)n, sizeof *rs, db_cmp_group);
    for (int i = 0; i < n;) {
        int j = i;
        int64_t latest = 0;
        while (j < n && !strcmp(rs[j]->key, rs[i]->key) && !strcmp(rs[j]->workload, rs[i]->workload)) {
            if (rs[j]->id > latest) latest = rs[j]->id;
            j++;
        }
        gs[ng++] = (db_group){rs + i, j - i, latest};
        i = j;
    }
    qsort(gs, (size_t)ng, sizeof *gs, db_cmp_latest);
    fprintf(out, "<section id=\"trends\">\n<h2>Trends by configuration</h2>\n");
    if (!ng) fprintf(out, "<p class=\"none\">No measurements yet (complete VALID runs): <code>cortex-bench run</code>"
                          " records them.</p>\n");
    else
        fprintf(out, "<p class=\"help\">One group per workload and comparable configuration (same CPU, ISA flags, core"
                     " count, model file, quantization, threads, build type and context: <code>runs.compare_key</code>)."
                     " Only measurements are charted: complete VALID runs (INVALID, failed and incomplete runs are"
                     " listed under Runs, never as points); a rate sweep is charted by its saturation run, its other"
                     " rates under Rate sweeps."
                     " Points are medians over repetitions, bars span min–max; x: runs in commit order (git history"
                     " when available, else order of first benchmark), labelled r<em>run</em> and commit (* = dirty"
                     " tree). Charts: %s.</p>\n",
                c->have_gp ? "gnuplot (data and scripts in <code>charts/</code>)" : "built-in SVG (gnuplot not found)");
    for (int g = 0; g < ng && !rc; g++) rc = db_group_html(c, out, &gs[g]);
    fprintf(out, "</section>\n");
    free(rs);
    free(gs);
    return rc;
}

/* ---------------------------------------------------------------- gates */

/* CSS class of a verdict word. */
static const char *db_verdict_class(const char *v) {
    if (!strcmp(v, "pass") || !strcmp(v, "improved")) return "good";
    if (!strcmp(v, "regression") || !strcmp(v, "regressed") || !strcmp(v, "error")) return "bad";
    if (!strcmp(v, "inconclusive")) return "warn";
    return "neutral";
}

/* The latest gate with its per-metric verdicts, then the recent gates. */
static int db_gates(db_ctx *c, FILE *out) {
    fprintf(out, "<section id=\"gates\">\n<h2>Latest gate verdicts</h2>\n");
    store_gate_row *gs;
    int ng;
    if (store_gates_recent(c->s, DB_RECENT_GATES, &gs, &ng)) {
        free(gs);
        return db_fail(c, "gates");
    }
    if (!ng) {
        fprintf(out, "<p class=\"none\">No gate verdicts yet: <code>cortex-bench gate</code> records them.</p>\n</section>\n");
        return 0;
    }
    const store_gate_row *g = &gs[0];
    fprintf(out, "<div class=\"gate\"><p><span class=\"badge %s\">", db_verdict_class(g->verdict));
    db_html(out, g->verdict);
    fprintf(out, "</span> gate %lld, ", (long long)g->id);
    db_html(out, g->created);
    fprintf(out, ": candidate run %lld", (long long)g->cand_run);
    if (*g->cand_workload) {
        fprintf(out, " (<code>");
        db_html(out, g->cand_workload);
        fprintf(out, "</code>, commit <code>%.10s</code>)", g->cand_commit);
    }
    if (g->base_run) fprintf(out, " against baseline run %lld", (long long)g->base_run);
    fprintf(out, ", mode ");
    db_html(out, g->mode);
    if (*g->gate_file) {
        fprintf(out, ", rules <code>");
        db_html(out, g->gate_file);
        fprintf(out, "</code>");
    }
    fprintf(out, ". Each verdict below names the two runs it judged.</p>\n");
    if (*g->summary) {
        fprintf(out, "<p class=\"summary\">");
        db_html(out, g->summary);
        fprintf(out, "</p>\n");
    }
    fprintf(out, "</div>\n");
    store_verdict_row *vs;
    int nv;
    if (store_verdicts_load(c->s, g->id, &vs, &nv)) {
        free(vs);
        free(gs);
        return db_fail(c, "verdicts");
    }
    fprintf(out, "<table class=\"verdicts\">\n<thead><tr><th>metric</th><th>verdict</th><th>runs (baseline → candidate)</th>"
                 "<th>change</th><th>95%% CI</th><th>p</th><th>baseline</th><th>candidate</th><th>threshold</th><th>n</th>"
                 "<th>note</th></tr></thead>\n<tbody>\n");
    for (int i = 0; i < nv; i++) {
        const store_verdict_row *v = &vs[i];
        char b[3][40];
        fprintf(out, "<tr><td><code>");
        db_html(out, v->metric);
        fprintf(out, "</code></td><td><span class=\"badge %s\">", db_verdict_class(v->verdict));
        db_html(out, v->verdict);
        /* the verdict's own runs (a gate over several workloads judges a pair per workload; rows
         * stored before schema v12 fall back to the gate's pair: store_verdicts_load) */
        char vb[24] = "–", vc[24] = "–";
        if (v->base_run) snprintf(vb, sizeof vb, "%lld", (long long)v->base_run);
        if (v->cand_run) snprintf(vc, sizeof vc, "%lld", (long long)v->cand_run);
        fprintf(out, "</span></td><td class=\"num\">%s → %s</td><td class=\"num\">", vb, vc);
        if (isnan(v->change)) fprintf(out, "–");
        else fprintf(out, "%+.2f %%", 100 * v->change);
        fprintf(out, "</td><td class=\"num\">");
        if (isnan(v->ci_lo) || isnan(v->ci_hi)) fprintf(out, "–");
        else fprintf(out, "[%+.2f, %+.2f] %%", 100 * v->ci_lo, 100 * v->ci_hi);
        fprintf(out, "</td><td class=\"num\">%s</td><td class=\"num\">%s</td><td class=\"num\">%s</td><td class=\"num\">",
                plot_num(b[0], 40, v->p, 4), db_short(b[1], 40, v->base_median), db_short(b[2], 40, v->cand_median));
        if (isnan(v->threshold)) fprintf(out, "–");
        else fprintf(out, "%.1f %%", 100 * v->threshold);
        if (*v->direction) {
            fprintf(out, " (");
            db_html(out, v->direction);
            fprintf(out, ")");
        }
        fprintf(out, "</td><td class=\"num\">%d / %d</td><td>", v->n_base, v->n_cand);
        db_html(out, v->note);
        fprintf(out, "</td></tr>\n");
    }
    free(vs);
    if (!nv) fprintf(out, "<tr><td colspan=\"11\" class=\"none\">This gate recorded no per-metric verdicts.</td></tr>\n");
    fprintf(out, "</tbody></table>\n");

    /* Recent gates. */
    fprintf(out, "<h3>Recent gates</h3>\n<table>\n<thead><tr><th>gate</th><th>when (UTC)</th><th>verdict</th>"
                 "<th>baseline → candidate</th><th>mode</th><th>summary</th></tr></thead>\n<tbody>\n");
    for (int i = 0; i < ng; i++) {
        char base[24] = "–", cand[24] = "–";
        if (gs[i].base_run) snprintf(base, sizeof base, "%lld", (long long)gs[i].base_run);
        if (gs[i].cand_run) snprintf(cand, sizeof cand, "%lld", (long long)gs[i].cand_run);
        fprintf(out, "<tr><td class=\"num\">%lld</td><td>", (long long)gs[i].id);
        db_html(out, gs[i].created);
        fprintf(out, "</td><td><span class=\"badge %s\">", db_verdict_class(gs[i].verdict));
        db_html(out, gs[i].verdict);
        fprintf(out, "</span></td><td>%s → %s</td><td>", base, cand);
        db_html(out, gs[i].mode);
        fprintf(out, "</td><td>");
        db_html(out, gs[i].summary);
        fprintf(out, "</td></tr>\n");
    }
    free(gs);
    fprintf(out, "</tbody></table>\n</section>\n");
    return 0;
}

/* ---------------------------------------------------------------- runs */

/* Relative path from directory `from` to `to` (both absolute, canonical). */
static void db_relpath(const char *from, const char *to, char *out, size_t n) {
    size_t common = 0, i = 0;
    /* Longest common prefix ending at a path separator. */
    while (from[i] && to[i] && from[i] == to[i]) {
        i++;
        if (from[i - 1] == '/') common = i;
    }
    if (!from[i] && to[i] == '/') common = i + 1;
    size_t used = 0;
    out[0] = 0;
    for (const char *p = from + common; *p;) {
        used += (size_t)snprintf(out + used, used < n ? n - used : 0, "../");
        const char *s = strchr(p, '/');
        if (!s) break;
        p = s + 1;
        if (!*p) break;
    }
    if (used < n) snprintf(out + used, n - used, "%s", to + common);
}

/* Link to a run's report when reports/<id>/report.md exists (relative to the
 * working directory), as a path relative to the dashboard. */
static int db_report_link(db_ctx *c, int64_t id, char *out, size_t n) {
    char rel[64], abs_report[PATH_MAX], abs_dir[PATH_MAX];
    snprintf(rel, sizeof rel, "reports/%lld/report.md", (long long)id);
    if (access(rel, R_OK) != 0 || !realpath(rel, abs_report) || !realpath(c->dir, abs_dir)) return 0;
    db_relpath(abs_dir, abs_report, out, n);
    return 1;
}

/* The runs table: newest first, with environment, status and report link. */
static void db_runs(db_ctx *c, FILE *out) {
    fprintf(out, "<section id=\"runs\">\n<h2>Runs</h2>\n");
    if (!c->n_runs) {
        fprintf(out, "<p class=\"none\">The database has no runs yet.</p>\n</section>\n");
        return;
    }
    if (c->n_runs > DB_TABLE_RUNS) fprintf(out, "<p class=\"help\">The latest %d of %d runs.</p>\n", DB_TABLE_RUNS, c->n_runs);
    int hint = 0;
    for (int i = c->n_runs - 1, k = 0; i >= 0 && k < DB_TABLE_RUNS; i--, k++) hint |= c->runs[i].roof_hint;
    fprintf(out, "<p class=\"help\">Decode: median decode tok/s and, in parentheses, its fraction of the memory-bandwidth"
                 " roofline (read bandwidth / bytes read per token; docs/metrics.md).%s</p>\n",
            hint ? " " ROOF_HINT " (no hw row for some machines)." : "");
    fprintf(out, "<table class=\"runs\">\n<thead><tr><th>run</th><th>started (UTC)</th><th>verdict</th><th>commit</th>"
                 "<th>workload</th><th>model</th><th>threads or server</th><th>reps</th><th>TPS (median)</th><th>decode (roofline)</th>"
                 "<th>TTFT p50</th><th>environment</th><th>report</th></tr></thead>\n<tbody>\n");
    for (int i = c->n_runs - 1, k = 0; i >= 0 && k < DB_TABLE_RUNS; i--, k++) {
        const db_run *r = &c->runs[i];
        int complete = !strcmp(r->status, "complete"), invalid = complete && !strcmp(r->validity, "invalid");
        /* green only for a measurement; INVALID (and a failed run) red; the rest grey */
        const char *cls = r->measurement ? "good" : invalid || !strcmp(r->status, "failed") ? "bad" : "neutral";
        const char *word = r->measurement ? "VALID" : invalid ? "INVALID" : complete ? "not judged" : r->status;
        const char *why = invalid ? r->reasons : r->error;
        fprintf(out, "<tr%s><td class=\"num\">%lld</td><td class=\"nowrap\">%.10s %.8s</td><td><span class=\"badge %s\"",
                invalid ? " class=\"invalid\"" : "", (long long)r->id, r->started,
                strlen(r->started) > 11 ? r->started + 11 : "", cls);
        if (*why) {
            fprintf(out, " title=\"");
            db_html(out, why);
            fprintf(out, "\"");
        }
        fprintf(out, ">");
        db_html(out, word);
        fprintf(out, "</span></td><td><code>%.10s</code>%s</td><td><code>", *r->commit ? r->commit : "?",
                r->dirty ? " <span class=\"dirty\" title=\"built from a modified tree\">dirty</span>" : "");
        db_html(out, r->workload);
        fprintf(out, "</code>");
        if (db_sweep_member(r)) /* charted with its sweep, not as a trend of its own */
            fprintf(out, "<br><small><a href=\"#sweep-%lld\">rate sweep of run %lld</a> at %.3g req/s</small>",
                    (long long)r->sweep, (long long)r->sweep, r->rate);
        else if (r->sweep) fprintf(out, "<br><small><a href=\"#sweep-%lld\">rate sweep</a>: saturation run</small>", (long long)r->id);
        fprintf(out, "</td><td>");
        db_html(out, r->model);
        fprintf(out, " <small>");
        db_html(out, r->type);
        fprintf(out, "</small></td><td>");
        db_where(out, r);
        fprintf(out, "</td><td class=\"num\">%d</td>", r->reps);
        if (r->measurement) {
            char b[3][32], dec[64];
            double tps = !isnan(r->med[0]) ? r->med[0] : r->med[5];
            plot_num(dec, sizeof dec, r->med[1], 2);
            if (!isnan(r->med[1]) && !isnan(r->roof_frac))
                snprintf(dec + strlen(dec), sizeof dec - strlen(dec), " (%.0f%%)", 100 * r->roof_frac);
            fprintf(out, "<td class=\"num\">%s</td><td class=\"num\">%s</td><td class=\"num\">%s</td><td>",
                    plot_num(b[0], 32, tps, 2), dec, isnan(r->med[3]) ? "–" : plot_num(b[2], 32, r->med[3], 2));
        } else { /* no figure of a run that is not a measurement */
            fprintf(out, "<td colspan=\"3\" class=\"nofig\">%s</td><td>",
                    invalid ? "INVALID: not a measurement" : complete ? "not judged: no figure" : "no result");
        }
        db_html(out, r->cpu);
        fprintf(out, ", %d CPUs, %.1f GiB<br><small>", r->cores, r->mem_gib);
        db_html(out, r->kernel);
        fprintf(out, " · ");
        db_html(out, r->compiler);
        fprintf(out, " · governor ");
        db_html(out, *r->governor ? r->governor : "?");
        fprintf(out, " · <code>%s</code></small></td><td>", r->fpr);
        char link[PATH_MAX];
        if (db_report_link(c, r->id, link, sizeof link)) {
            fprintf(out, "<a href=\"");
            db_html(out, link);
            fprintf(out, "\">report</a>");
        } else {
            fprintf(out, "<small title=\"cortex-bench report %lld writes it\">–</small>", (long long)r->id);
        }
        fprintf(out, "</td></tr>\n");
        if (*why && !r->measurement) { /* why it is no measurement, in red under it */
            fprintf(out, "<tr class=\"err\"><td></td><td colspan=\"11\">%s", invalid ? "<strong>INVALID</strong>: " : "");
            db_html(out, why);
            fprintf(out, "</td></tr>\n");
        }
    }
    fprintf(out, "</tbody></table>\n</section>\n");
}

/* ---------------------------------------------------------------- page */

static const char DB_CSS[] =
    "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:0 auto;max-width:1500px;padding:0 24px 40px;"
    "color:#1d1d1f;background:#fafafa;font-size:14px}\n"
    "header{border-bottom:1px solid #ddd;margin-bottom:8px}h1{font-size:24px;margin:20px 0 4px}\n"
    "h2{font-size:19px;margin:28px 0 10px;border-bottom:1px solid #e4e4e4;padding-bottom:4px}h3{font-size:15px;margin:16px 0 4px}\n"
    "nav a{margin-right:14px}a{color:#0b62c4}code{font-size:12.5px}\n"
    ".help,.meta{color:#555;margin:4px 0 10px}.none{color:#666;font-style:italic}\n"
    ".group{background:#fff;border:1px solid #e2e2e2;border-radius:6px;padding:6px 14px 10px;margin:12px 0}\n"
    ".charts{display:flex;flex-wrap:wrap;gap:10px}figure{margin:0}figure img{display:block;max-width:100%;height:auto;"
    "border:1px solid #eee}\n"
    "figcaption{font-size:12px;color:#555;text-align:center}\n"
    "table{border-collapse:collapse;background:#fff;font-size:13px;margin:6px 0}th,td{border:1px solid #e0e0e0;"
    "padding:4px 7px;text-align:left;vertical-align:top}\n"
    "th{background:#f1f3f5}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\n"
    "tr.err td{color:#a40000;font-size:12px;border-top:none}small{color:#666}.nowrap{white-space:nowrap}\n"
    "tr.invalid td{background:#fff4f4}td.nofig{color:#a40000;font-style:italic;text-align:center}\n"
    ".badge{display:inline-block;padding:1px 7px;border-radius:9px;font-size:12px;font-weight:600}\n"
    ".good{background:#d9f2dd;color:#145c22}.bad{background:#fbd9d9;color:#8a1010}.warn{background:#fff0c2;color:#7a5200}"
    ".neutral{background:#ebebeb;color:#444}\n"
    ".dirty{color:#9a5b00;font-size:11px}.gate p{margin:6px 0}.summary{color:#333}\n";

/* Counts the chart images that really loaded, for headless checks. */
static const char DB_JS[] =
    "window.addEventListener('load', function () {\n"
    "  var imgs = document.querySelectorAll('img.chart'), ok = 0;\n"
    "  for (var i = 0; i < imgs.length; i++) if (imgs[i].complete && imgs[i].naturalWidth > 0) ok++;\n"
    "  document.body.dataset.chartsLoaded = ok;\n"
    "  document.body.dataset.chartsTotal = imgs.length;\n"
    "});\n";

/* Remove the chart files of a previous dashboard (trend_*, all.gp). */
static void db_clean_charts(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "trend_", 6) && strcmp(e->d_name, "all.gp")) continue;
        char p[PATH_MAX + 300];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
}

/* Load, order, write index.html (via a temporary file) and the trend charts;
 * with gnuplot, draw them all in one run of charts/all.gp. */
int dashboard_write(store *s, const char *out_dir, char *err, size_t errlen) {
    db_ctx c;
    memset(&c, 0, sizeof c);
    c.s = s;
    c.err = err;
    c.errlen = errlen;
    snprintf(c.dir, sizeof c.dir, "%s", out_dir ? out_dir : DASHBOARD_DEFAULT_DIR);
    snprintf(c.charts, sizeof c.charts, "%s/charts", c.dir);
    int rc = -1;
    FILE *out = NULL;
    char path[PATH_MAX + 32], tmp[PATH_MAX + 48];
    if (plot_mkdirs(c.charts, err, errlen) || db_load(&c)) goto done;
    db_commit_order(&c);
    db_clean_charts(c.charts);
    c.have_gp = plot_gnuplot_find(c.gp, sizeof c.gp);
    if (!c.have_gp) fprintf(stderr, "%s\n", DASHBOARD_NO_GNUPLOT_MSG);
    else {
        snprintf(path, sizeof path, "%s/all.gp", c.charts);
        if (!(c.all_gp = fopen(path, "w"))) {
            hx_fail(err, errlen, "cannot write %s: %s", path, strerror(errno));
            goto done;
        }
        fprintf(c.all_gp, "# all.gp - every trend chart of the dashboard: gnuplot all.gp (in this directory)\n");
    }
    snprintf(path, sizeof path, "%s/index.html", c.dir);
    snprintf(tmp, sizeof tmp, "%s/index.html.tmp", c.dir);
    if (!(out = fopen(tmp, "w"))) {
        hx_fail(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
        goto done;
    }
    char now[32];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(now, sizeof now, "%Y-%m-%d %H:%M:%S UTC", &tm);
    /* The hardware report of the store's machines (hwreport.h) as a page of the site, linked when
     * there is something to report (a VALID measurement) */
    char hw_dir[PATH_MAX + 16], hw_md[PATH_MAX + 48], hw_err[512];
    snprintf(hw_dir, sizeof hw_dir, "%s/hardware", c.dir);
    hwreport_params hp = {.out_dir = hw_dir};
    int hw_page = hwreport_write(s, &hp, hw_md, sizeof hw_md, hw_err, sizeof hw_err) == 0;
    int valid = 0, invalid = 0, complete = 0, failed = 0; /* only VALID runs count as green */
    for (int i = 0; i < c.n_runs; i++) {
        valid += c.runs[i].measurement;
        complete += !strcmp(c.runs[i].status, "complete");
        invalid += !strcmp(c.runs[i].status, "complete") && !strcmp(c.runs[i].validity, "invalid");
        failed += !strcmp(c.runs[i].status, "failed");
    }
    fprintf(out, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                 "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                 "<title>Cortex benchmark dashboard</title>\n<style>\n%s</style>\n</head>\n<body>\n"
                 "<header>\n<h1>Cortex benchmark dashboard</h1>\n<p class=\"meta\">Generated %s by"
                 " <code>cortex-bench dashboard</code> from %d run%s: <span class=\"badge good\">%d VALID</span>"
                 " <span class=\"badge %s\">%d INVALID</span> %d failed, %d incomplete%s. Only VALID runs are"
                 " measurements: the others show no figure and are in no trend."
                 " Metric definitions: docs/metrics.md.</p>\n"
                 "<nav><a href=\"#gates\">Gate verdicts</a><a href=\"#trends\">Trends</a><a href=\"#sweeps\">Rate sweeps</a>"
                 "<a href=\"#runs\">Runs</a>%s</nav>\n"
                 "</header>\n",
            DB_CSS, now, c.n_runs, c.n_runs == 1 ? "" : "s", valid, invalid ? "bad" : "neutral", invalid, failed,
            c.n_runs - complete - failed, complete - valid - invalid ? ", some complete but not judged" : "",
            hw_page ? "<a href=\"hardware/index.html\">Hardware (machines side by side)</a>" : "");
    if (db_gates(&c, out) || db_trends(&c, out) || dashboard_sweeps(s, out, c.charts, err, errlen)) goto done;
    db_runs(&c, out);
    fprintf(out, "<script>\n%s</script>\n</body>\n</html>\n", DB_JS);
    if (c.all_gp) {
        int bad = ferror(c.all_gp);
        if (fclose(c.all_gp) != 0 || bad) {
            c.all_gp = NULL;
            hx_fail(err, errlen, "cannot write %s/all.gp", c.charts);
            goto done;
        }
        c.all_gp = NULL;
        if (c.n_charts && plot_gnuplot_run(c.gp, c.charts, "all.gp", err, errlen)) goto done;
    }
    FILE *f = out;
    out = NULL;
    if (plot_commit_file(f, tmp, path, err, errlen)) goto done;
    rc = 0;
done:
    if (out) {
        fclose(out);
        unlink(tmp);
    }
    if (c.all_gp) fclose(c.all_gp);
    free(c.runs);
    return rc;
}
