/*
 * report_charts.c - the charts of `cortex-bench report` (see report.c for
 * the list): each one's data file and gnuplot script, from the run loaded by
 * the store's readers (store_read.h). Rendering is report.c's.
 */
#include "report_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plot.h"
#include "stats.h"
#include "hx_err.h"

/* Most points a CDF curve is drawn with (evenly spaced ranks beyond that). */
#define RP_CDF_POINTS 2000
/* A latency axis spanning more than this ratio is drawn log-scaled. */
#define RP_LOG_RATIO 20.0

/* Latency samples, ascending (store_latency_samples). */
typedef struct rp_vec {
    double *v;
    size_t n;
} rp_vec;

/* See report_int.h. */
FILE *rp_open(rp_ctx *c, const char *stem, const char *ext) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s.%s", c->dir, stem, ext);
    FILE *f = fopen(path, "w");
    if (!f) hx_fail(c->err, c->errlen, "cannot write %s: %s", path, strerror(errno));
    return f;
}

/* See report_int.h. */
int rp_close(rp_ctx *c, FILE *f, const char *stem, const char *ext) {
    int bad = fflush(f) != 0 || ferror(f);
    int e = errno;
    if (fclose(f) != 0) bad = 1;
    if (bad) hx_fail(c->err, c->errlen, "cannot write %s/%s.%s: %s", c->dir, stem, ext, strerror(e));
    return bad ? -1 : 0;
}

/* See report_int.h: the PNG terminal is pngcairo when this gnuplot has it, else png. */
void rp_gp_begin(FILE *f, const rp_chart *ch, int w, int h) {
    fprintf(f, "# %s.gp - %s\n# Written by cortex-bench report. Re-plot (in this directory): gnuplot %s.gp\n", ch->stem,
            ch->title, ch->stem);
    fprintf(f, "if (strstrt(GPVAL_TERMINALS, ' pngcairo ') > 0) {\n"
               "    set terminal pngcairo size %d,%d noenhanced font 'sans,10' background rgb 'white'\n"
               "} else {\n"
               "    set terminal png size %d,%d noenhanced background rgb 'white'\n"
               "}\n"
               "set output '%s.png'\n"
               "set encoding utf8\n"
               "set border 3\nset tics nomirror\n",
            w, h, w, h, ch->stem);
}

/* See report_int.h. */
void rp_gp_end(FILE *f, const rp_chart *ch, int w, int h) {
    fprintf(f, "set terminal svg size %d,%d noenhanced font 'sans,10' background rgb 'white'\n"
               "set output '%s.svg'\nreplot\nunset output\n",
            w, h, ch->stem);
}

/* Legend label for a run: "run 5" or "baseline: run 3". */
static void rp_run_label(char *buf, size_t n, const rp_run *r, int baseline) {
    snprintf(buf, n, "%srun %lld (%.8s%s)", baseline ? "baseline: " : "", (long long)r->info.id,
             *r->info.commit ? r->info.commit : "no commit", r->info.dirty ? "+dirty" : "");
}

/* (a) Per-request TPS by prompt, mean over repetitions; the baseline's bars
 * beside them when its prompts match by name. */
int rp_chart_tps(rp_ctx *c, rp_chart *ch) {
    int n_ok = 0, n_base = 0, longest = 0;
    double *bv = calloc((size_t)(c->run.n_items ? c->run.n_items : 1), sizeof *bv);
    if (!bv) return hx_fail(c->err, c->errlen, "report: out of memory");
    for (int i = 0; i < c->run.n_items; i++) {
        const store_item *it = &c->run.items[i];
        n_ok += !isnan(it->tps);
        int len = (int)strlen(it->item);
        if (len > longest) longest = len;
        bv[i] = NAN;
        for (int j = 0; j < c->base.n_items; j++)
            if (!strcmp(c->base.items[j].item, it->item)) bv[i] = c->base.items[j].tps;
        n_base += !isnan(bv[i]);
    }
    if (!n_ok) {
        snprintf(ch->why, sizeof ch->why, "no request of this run was served");
        free(bv);
        return 0;
    }
    if (c->base.info.id && !n_base)
        snprintf(ch->why, sizeof ch->why, "baseline run %lld served none of these prompts, so it is not shown",
                 (long long)c->base.info.id);
    FILE *f = rp_open(c, ch->stem, "dat");
    if (!f) {
        free(bv);
        return -1;
    }
    int synth = !strcmp(c->run.info.mode, "synthetic");
    fprintf(f, "# %s\n# item\trun_%lld_tps%s\n", ch->title, (long long)c->run.info.id, n_base ? "\tbaseline_tps" : "");
    for (int i = 0; i < c->run.n_items; i++) {
        const store_item *it = &c->run.items[i];
        plot_dat_label(f, it->item);
        if (isnan(it->tps)) fprintf(f, "\t?");
        else fprintf(f, "\t%.6g", it->tps);
        if (n_base) {
            if (isnan(bv[i])) fprintf(f, "\t?");
            else fprintf(f, "\t%.6g", bv[i]);
        }
        fputc('\n', f);
    }
    free(bv);
    if (rp_close(c, f, ch->stem, "dat")) return -1;
    if (!(f = rp_open(c, ch->stem, "gp"))) return -1;
    int w = c->run.n_items > 24 ? 1200 : 900;
    rp_gp_begin(f, ch, w, 480);
    fprintf(f, "set title ");
    plot_gp_string(f, synth ? "Test throughput (mean over repetitions)"
                              : "Per-request TPS by prompt (mean over repetitions; failed requests have no bar)");
    fprintf(f, "\nset ylabel ");
    plot_gp_string(f, synth ? "tokens/s (the test's tps)" : "tokens/s (generated tokens / service time)");
    fprintf(f, "\nset xlabel ");
    plot_gp_string(f, synth ? "test" : "prompt");
    fputc('\n', f);
    fprintf(f, "set datafile missing '?'\nset style data histograms\nset style histogram clustered gap 1\n"
               "set style fill solid 0.85 border rgb '#333333'\nset boxwidth 0.9 relative\n"
               "set grid ytics lc rgb '#dddddd'\nset yrange [0:*]\nset key outside top center horizontal\n");
    if (c->run.n_items > 12 || longest > 8) fprintf(f, "set xtics rotate by -45 left\n");
    fprintf(f, "set xrange [-0.6:%.1f]\n", c->run.n_items - 0.4);
    /* Mark the prompts that failed in every repetition (no bar). */
    for (int i = 0; i < c->run.n_items; i++)
        if (isnan(c->run.items[i].tps) && c->run.items[i].n_err)
            fprintf(f, "set label %d 'failed' at %d, graph 0.03 left rotate by 90 tc rgb '#b00000'\n", i + 1, i);
    char lr[96], lb[96];
    rp_run_label(lr, sizeof lr, &c->run, 0);
    rp_run_label(lb, sizeof lb, &c->base, 1);
    if (n_base) {
        fprintf(f, "plot '%s.dat' using 3:xtic(1) title ", ch->stem);
        plot_gp_string(f, lb);
        fprintf(f, " lc rgb '#a6a6a6', '' using 2 title ");
        plot_gp_string(f, lr);
        fprintf(f, " lc rgb '#1f77b4'\n");
    } else {
        fprintf(f, "plot '%s.dat' using 2:xtic(1) title ", ch->stem);
        plot_gp_string(f, lr);
        fprintf(f, " lc rgb '#1f77b4'\n");
    }
    rp_gp_end(f, ch, w, 480);
    if (rp_close(c, f, ch->stem, "gp")) return -1;
    ch->made = 1;
    return 0;
}

/* Write one CDF block: (x, fraction <= x), starting at (x0, 0), at most
 * RP_CDF_POINTS points (evenly spaced ranks, always the last). */
static void rp_cdf_block(FILE *f, const rp_vec *v, const char *what) {
    fprintf(f, "# %s: value\tfraction (%zu samples)\n", what, v->n);
    fprintf(f, "%.6g\t0\n", v->v[0]);
    size_t step = v->n > RP_CDF_POINTS ? (v->n + RP_CDF_POINTS - 1) / RP_CDF_POINTS : 1;
    for (size_t i = 0; i < v->n; i += step) fprintf(f, "%.6g\t%.6g\n", v->v[i], (double)(i + 1) / (double)v->n);
    if ((v->n - 1) % step) fprintf(f, "%.6g\t1\n", v->v[v->n - 1]);
}

/* (b) TTFT and (c) ITL distributions as CDFs, the baseline's overlaid. */
int rp_chart_cdf(rp_ctx *c, rp_chart *ch, int itl) {
    if (!itl && !strcmp(c->run.info.mode, "synthetic")) {
        snprintf(ch->why, sizeof ch->why, "synthetic test: no requests to time to a first token");
        return 0;
    }
    rp_vec a = {0}, b = {0};
    int rc = -1;
    if (store_latency_samples(c->s, c->run.info.id, itl, &a.v, &a.n) ||
        (c->base.info.id && store_latency_samples(c->s, c->base.info.id, itl, &b.v, &b.n))) {
        rp_db_fail(c, "requests");
        goto out;
    }
    rc = 0;
    if (a.n == 0) {
        snprintf(ch->why, sizeof ch->why, itl ? "no inter-token gaps: no request generated two tokens"
                                              : "no request of this run was served");
        goto out;
    }
    if (c->base.info.id && !b.n)
        snprintf(ch->why, sizeof ch->why, "baseline run %lld has no samples, so it is not shown", (long long)c->base.info.id);
    rc = -1;
    FILE *f = rp_open(c, ch->stem, "dat");
    if (!f) goto out;
    const char *unit = itl ? "inter-token gap (ms)" : "time to first token (ms)";
    char lr[96], lb[96];
    rp_run_label(lr, sizeof lr, &c->run, 0);
    rp_run_label(lb, sizeof lb, &c->base, 1);
    fprintf(f, "# %s\n", ch->title);
    rp_cdf_block(f, &a, lr);
    if (b.n) {
        fprintf(f, "\n\n");
        rp_cdf_block(f, &b, lb);
    }
    if (rp_close(c, f, ch->stem, "dat")) goto out;
    if (!(f = rp_open(c, ch->stem, "gp"))) goto out;
    double lo = a.v[0], hi = a.v[a.n - 1];
    if (b.n) {
        lo = fmin(lo, b.v[0]);
        hi = fmax(hi, b.v[b.n - 1]);
    }
    rp_gp_begin(f, ch, 900, 480);
    fprintf(f, "set title '%s'\n", itl ? "Inter-token latency: CDF of every gap of every request, all repetitions"
                                       : "Time to first token: CDF over every request, all repetitions");
    fprintf(f, "set xlabel '%s%s'\nset ylabel 'fraction of %s <= x'\n", unit, lo > 0 && hi / lo > RP_LOG_RATIO ? ", log scale" : "",
            itl ? "gaps" : "requests");
    if (lo > 0 && hi / lo > RP_LOG_RATIO) fprintf(f, "set logscale x\nset xrange [%.6g:%.6g]\n", lo / 1.25, hi * 1.25);
    else if (hi > lo) fprintf(f, "set xrange [%.6g:%.6g]\n", fmax(0, lo - (hi - lo) * 0.05), hi + (hi - lo) * 0.05);
    fprintf(f, "set yrange [0:1.02]\nset ytics 0.1\nset grid lc rgb '#dddddd'\nset key top left box opaque\n");
    char ta[200], tb[200];
    snprintf(ta, sizeof ta, "%s: n=%zu, p50 %.3g ms, p99 %.3g ms", lr, a.n, stats_percentile(a.v, a.n, 50),
             stats_percentile(a.v, a.n, 99));
    fprintf(f, "plot '%s.dat' index 0 using 1:2 with steps lw 2 lc rgb '#1f77b4' title ", ch->stem);
    plot_gp_string(f, ta);
    if (b.n) {
        snprintf(tb, sizeof tb, "%s: n=%zu, p50 %.3g ms, p99 %.3g ms", lb, b.n, stats_percentile(b.v, b.n, 50),
                 stats_percentile(b.v, b.n, 99));
        fprintf(f, ", '' index 1 using 1:2 with steps lw 2 dt 2 lc rgb '#7f7f7f' title ");
        plot_gp_string(f, tb);
    }
    fputc('\n', f);
    rp_gp_end(f, ch, 900, 480);
    if (rp_close(c, f, ch->stem, "gp")) goto out;
    ch->made = 1;
    rc = 0;
out:
    free(a.v);
    free(b.v);
    return rc;
}

/* (d) Trace replays: arrival time against TTFT and end-to-end latency, one
 * point per served request of every repetition. */
int rp_chart_time(rp_ctx *c, rp_chart *ch) {
    if (strcmp(c->run.info.kind, "trace") && strcmp(c->run.info.mode, "open")) {
        snprintf(ch->why, sizeof ch->why, "not a trace replay");
        return 0;
    }
    store_request_time *rq;
    int nq;
    if (store_request_times(c->s, c->run.info.id, &rq, &nq)) {
        free(rq);
        return rp_db_fail(c, "requests");
    }
    FILE *f = rp_open(c, ch->stem, "dat");
    if (!f) {
        free(rq);
        return -1;
    }
    fprintf(f, "# %s\n# arrival_s\tttft_ms\te2e_ms\trep\titem\n", ch->title);
    int n = 0, n_err = 0;
    double lo = INFINITY, hi = 0;
    for (int i = 0; i < nq; i++) {
        const store_request_time *q = &rq[i];
        if (q->failed) {
            n_err++;
            continue;
        }
        fprintf(f, "%.6f\t%.6g\t%.6g\t%d\t", q->arrival_s, q->ttft_ms, q->e2e_ms, q->rep);
        plot_dat_label(f, q->item);
        fputc('\n', f);
        lo = fmin(lo, fmin(q->ttft_ms, q->e2e_ms));
        hi = fmax(hi, fmax(q->ttft_ms, q->e2e_ms));
        n++;
    }
    free(rq);
    if (rp_close(c, f, ch->stem, "dat")) return -1;
    if (!n) {
        snprintf(ch->why, sizeof ch->why, "no request of this trace replay was served (%d failed)", n_err);
        return 0;
    }
    if (n_err) snprintf(ch->why, sizeof ch->why, "%d failed request(s) have no latency and are not plotted", n_err);
    if (!(f = rp_open(c, ch->stem, "gp"))) return -1;
    int logy = lo > 0 && hi / lo > RP_LOG_RATIO;
    rp_gp_begin(f, ch, 900, 480);
    fprintf(f, "set title 'Latency over time: one point per served request (%d repetition%s overlaid)'\n", c->run.info.reps,
            c->run.info.reps == 1 ? "" : "s");
    fprintf(f, "set xlabel 'arrival time in the trace (s)'\nset ylabel 'latency (ms%s)'\n", logy ? ", log scale" : "");
    if (logy) fprintf(f, "set logscale y\n");
    else fprintf(f, "set yrange [0:*]\n");
    fprintf(f, "set grid lc rgb '#dddddd'\nset key outside top center horizontal\n"
               "plot '%s.dat' using 1:3 with points pt 7 ps 0.9 lc rgb '#ff7f0e' title 'end-to-end',"
               " '' using 1:2 with points pt 9 ps 1.1 lc rgb '#1f77b4' title 'time to first token'\n",
            ch->stem);
    rp_gp_end(f, ch, 900, 480);
    if (rp_close(c, f, ch->stem, "gp")) return -1;
    ch->made = 1;
    return 0;
}

/* (e) Counters per phase: prefill, decode and the whole repetition side by
 * side, log scale (served runs have the total only: a scheduler step mixes
 * both phases). Only counted values are plotted; the missing ones are
 * listed in report.md. */
static int counted(const store_counter *k) {
    for (int p = 0; p < 3; p++)
        if (k->ok[p] && k->v[p] > 0) return 1;
    return 0;
}

int rp_chart_counters(rp_ctx *c, rp_chart *ch) {
    int n = 0;
    for (int i = 0; i < c->n_counters; i++) n += counted(&c->counters[i]);
    if (!n) {
        snprintf(ch->why, sizeof ch->why, c->n_counters ? "no counter was counted in any phase"
                                                        : "the run has no counters");
        return 0;
    }
    FILE *f = rp_open(c, ch->stem, "dat");
    if (!f) return -1;
    fprintf(f, "# %s\n# counter\tprefill\tdecode\ttotal   ('?': missing or zero, not plotted)\n", ch->title);
    for (int i = 0; i < c->n_counters; i++) {
        const store_counter *k = &c->counters[i];
        if (!counted(k)) continue;
        char label[80];
        snprintf(label, sizeof label, "%s%s%s%s", k->name, strcmp(k->unit, "count") && *k->unit ? " (" : "",
                 strcmp(k->unit, "count") && *k->unit ? k->unit : "", strcmp(k->unit, "count") && *k->unit ? ")" : "");
        plot_dat_label(f, label);
        for (int p = 0; p < 3; p++) {
            if (k->ok[p] && k->v[p] > 0) fprintf(f, "\t%.6g", k->v[p]);
            else fprintf(f, "\t?");
        }
        fputc('\n', f);
    }
    if (rp_close(c, f, ch->stem, "dat")) return -1;
    if (!(f = rp_open(c, ch->stem, "gp"))) return -1;
    rp_gp_begin(f, ch, 900, 520);
    fprintf(f, "set title 'Counters per phase (mean over repetitions; missing counters are not plotted)'\n"
               "set ylabel 'events per phase (log scale)'\nset xlabel 'counter'\n"
               "set datafile missing '?'\nset style data histograms\nset style histogram clustered gap 1\n"
               "set style fill solid 0.85 border rgb '#333333'\nset boxwidth 0.9 relative\n"
               "set logscale y\nset format y '%%.0e'\nset grid ytics lc rgb '#dddddd'\n"
               "set xtics rotate by -30 left\nset key outside top center horizontal\n"
               "plot '%s.dat' using 2:xtic(1) title 'prefill' lc rgb '#2ca02c', '' using 3 title 'decode' lc rgb '#9467bd',"
               " '' using 4 title 'total' lc rgb '#8c564b'\n",
            ch->stem);
    rp_gp_end(f, ch, 900, 520);
    if (rp_close(c, f, ch->stem, "gp")) return -1;
    ch->made = 1;
    return 0;
}

/* (f) TTFT p50 and p99 per adapter (adapter_stats, all repetitions). */
int rp_chart_adapters(rp_ctx *c, rp_chart *ch) {
    store_adapter *ad;
    int n;
    if (store_adapters_load(c->s, c->run.info.id, &ad, &n)) {
        free(ad);
        return rp_db_fail(c, "adapter_stats");
    }
    FILE *f = NULL;
    for (int i = 0; i < n; i++) {
        if (!f) {
            if (!(f = rp_open(c, ch->stem, "dat"))) {
                free(ad);
                return -1;
            }
            fprintf(f, "# %s\n# adapter (requests)\tttft_p50_ms\tttft_p99_ms\n", ch->title);
        }
        char label[64];
        snprintf(label, sizeof label, "%d (n=%d)", ad[i].adapter, ad[i].requests);
        plot_dat_label(f, label);
        double p50 = ad[i].ttft_p50, p99 = ad[i].ttft_p99;
        if (isnan(p50)) fprintf(f, "\t?");
        else fprintf(f, "\t%.6g", p50);
        if (isnan(p99)) fprintf(f, "\t?\n");
        else fprintf(f, "\t%.6g\n", p99);
    }
    free(ad);
    if (f && rp_close(c, f, ch->stem, "dat")) return -1;
    if (!n) {
        snprintf(ch->why, sizeof ch->why, "no per-adapter statistics (only trace replays have adapters)");
        return 0;
    }
    if (!(f = rp_open(c, ch->stem, "gp"))) return -1;
    rp_gp_begin(f, ch, 900, 480);
    fprintf(f, "set title 'Time to first token per adapter (all repetitions)'\n"
               "set ylabel 'TTFT (ms)'\nset xlabel 'adapter id (served requests)'\n"
               "set datafile missing '?'\nset style data histograms\nset style histogram clustered gap 1\n"
               "set style fill solid 0.85 border rgb '#333333'\nset boxwidth 0.9 relative\n"
               "set grid ytics lc rgb '#dddddd'\nset yrange [0:*]\nset key outside top center horizontal\n"
               "plot '%s.dat' using 2:xtic(1) title 'TTFT p50' lc rgb '#1f77b4', '' using 3 title 'TTFT p99' lc rgb '#d62728'\n",
            ch->stem);
    rp_gp_end(f, ch, 900, 480);
    if (rp_close(c, f, ch->stem, "gp")) return -1;
    ch->made = 1;
    return 0;
}

/* (g) A rate sweep's throughput-latency curve (the run's sweep): TTFT p50
 * and p99 and TPOT p50 against the offered rate (left axis, log), the
 * achieved request rate and goodput (right axis), the saturation rate of
 * the closed-loop run marked. */
int rp_chart_sweep(rp_ctx *c, rp_chart *ch) {
    if (!c->run.info.sweep) {
        snprintf(ch->why, sizeof ch->why, "the run is not part of a rate sweep (cortex-bench run --rate sweep)");
        return 0;
    }
    store_sweep_point *pt;
    int n;
    if (store_sweep_load(c->s, c->run.info.sweep, &pt, &n)) {
        free(pt);
        return rp_db_fail(c, "runs (sweep)");
    }
    double sat = NAN;
    int open = 0;
    for (int i = 0; i < n; i++) {
        if (pt[i].rate == 0) sat = pt[i].request_rps;
        else open++;
    }
    FILE *f = open ? rp_open(c, ch->stem, "dat") : NULL;
    if (open && !f) {
        free(pt);
        return -1;
    }
    if (f) {
        fprintf(f, "# %s (sweep of run %lld; saturation %.6g req/s)\n# offered_rps\tachieved_rps\tgoodput_rps\t"
                   "ttft_p50_ms\tttft_p99_ms\ttpot_p50_ms\trun\n", ch->title, (long long)c->run.info.sweep, sat);
        for (int i = 0; i < n; i++) {
            if (pt[i].rate == 0) continue;
            double v[6] = {pt[i].rate, pt[i].request_rps, pt[i].goodput_rps, pt[i].ttft_p50, pt[i].ttft_p99, pt[i].tpot_p50};
            for (int k = 0; k < 6; k++) {
                if (isnan(v[k])) fprintf(f, "%s?", k ? "\t" : "");
                else fprintf(f, "%s%.6g", k ? "\t" : "", v[k]);
            }
            fprintf(f, "\t%lld\n", (long long)pt[i].id);
        }
    }
    free(pt);
    if (f && rp_close(c, f, ch->stem, "dat")) return -1;
    if (!open) {
        snprintf(ch->why, sizeof ch->why, "the sweep of run %lld has no open-loop run yet", (long long)c->run.info.sweep);
        return 0;
    }
    if (!(f = rp_open(c, ch->stem, "gp"))) return -1;
    rp_gp_begin(f, ch, 900, 520);
    fprintf(f, "set title 'Rate sweep: latency and throughput against offered load (saturation %.3g req/s)'\n"
               "set xlabel 'offered load (requests/s, Poisson)'\nset ylabel 'latency (ms, log scale)'\n"
               "set y2label 'achieved (requests/s)'\nset logscale y\nset ytics nomirror\nset y2tics\n"
               "set datafile missing '?'\nset grid xtics ytics lc rgb '#dddddd'\nset key outside top center horizontal\n"
               "set xrange [0:*]\nset y2range [0:*]\n",
            sat);
    if (!isnan(sat))
        fprintf(f, "set arrow from %.6g, graph 0 to %.6g, graph 1 nohead dt 2 lc rgb '#555555'\n"
                   "set label 'saturation' at %.6g, graph 0.95 left offset 0.5,0 tc rgb '#555555'\n",
                sat, sat, sat);
    fprintf(f, "plot '%s.dat' using 1:4 with linespoints title 'TTFT p50' lc rgb '#1f77b4',"
               " '' using 1:5 with linespoints title 'TTFT p99' lc rgb '#d62728',"
               " '' using 1:6 with linespoints title 'TPOT p50' lc rgb '#9467bd',"
               " '' using 1:2 axes x1y2 with linespoints title 'achieved req/s' lc rgb '#2ca02c' dt 3,"
               " '' using 1:3 axes x1y2 with linespoints title 'goodput req/s' lc rgb '#ff7f0e' dt 4\n",
            ch->stem);
    rp_gp_end(f, ch, 900, 520);
    if (rp_close(c, f, ch->stem, "gp")) return -1;
    ch->made = 1;
    return 0;
}

/* (h) Speculative decoding per prompt (--spec runs): tokens per target pass
 * (Σ (gen_tokens - 1) / Σ spec_passes over the repetitions) as bars, and the
 * acceptance rate (Σ accepted / Σ drafted) as points on the right axis. */
int rp_chart_spec(rp_ctx *c, rp_chart *ch) {
    if (!c->run.info.spec_config[0]) {
        snprintf(ch->why, sizeof ch->why, "the run did not speculate (no --spec)");
        return 0;
    }
    store_request_time *q;
    int nq, n = c->run.n_items, drawn = 0;
    if (store_request_times(c->s, c->run.info.id, &q, &nq)) return rp_db_fail(c, "requests");
    double *sum = calloc((size_t)(n ? n : 1) * 4, sizeof *sum); /* per item: decode tokens, passes, drafted, accepted */
    if (!sum) {
        free(q);
        return hx_fail(c->err, c->errlen, "report: out of memory");
    }
    for (int k = 0; k < nq; k++) {
        const store_request_time *t = &q[k];
        if (t->failed || t->spec_passes < 0) continue;
        for (int i = 0; i < n; i++)
            if (!strcmp(c->run.items[i].item, t->item)) {
                double *s = sum + 4 * i;
                s[0] += t->gen_tokens > 1 ? t->gen_tokens - 1 : 0;
                s[1] += t->spec_passes;
                s[2] += t->draft_tokens > 0 ? t->draft_tokens : 0;
                s[3] += t->accepted_tokens > 0 ? t->accepted_tokens : 0;
                break;
            }
    }
    free(q);
    for (int i = 0; i < n; i++) drawn += sum[4 * i + 1] > 0;
    if (!drawn) {
        snprintf(ch->why, sizeof ch->why, "no request recorded target passes (a server reports only its draft counts)");
        free(sum);
        return 0;
    }
    FILE *f = rp_open(c, ch->stem, "dat");
    if (!f) {
        free(sum);
        return -1;
    }
    fprintf(f, "# %s\n# item\ttokens_per_pass\tacceptance\n", ch->title);
    for (int i = 0; i < n; i++) {
        const double *s = sum + 4 * i;
        plot_dat_label(f, c->run.items[i].item);
        if (s[1] > 0) fprintf(f, "\t%.6g", s[0] / s[1]);
        else fprintf(f, "\t?");
        if (s[2] > 0) fprintf(f, "\t%.6g\n", s[3] / s[2]);
        else fprintf(f, "\t?\n"); /* nothing drafted: no rate, not 0 */
    }
    free(sum);
    if (rp_close(c, f, ch->stem, "dat")) return -1;
    if (!(f = rp_open(c, ch->stem, "gp"))) return -1;
    int w = n > 24 ? 1200 : 900;
    rp_gp_begin(f, ch, w, 480);
    fprintf(f, "set title ");
    plot_gp_string(f, "Speculative decoding by prompt (over the repetitions)");
    fprintf(f, "\nset ylabel ");
    plot_gp_string(f, "tokens per target pass (1: plain decoding)");
    fprintf(f, "\nset y2label ");
    plot_gp_string(f, "acceptance rate (accepted / drafted)");
    fprintf(f, "\nset xlabel ");
    plot_gp_string(f, "prompt");
    fprintf(f, "\nset datafile missing '?'\nset style fill solid 0.85 border rgb '#333333'\nset boxwidth 0.6\n"
               "set grid ytics lc rgb '#dddddd'\nset yrange [0:*]\nset y2range [0:1.05]\nset y2tics 0.2\n"
               "set ytics nomirror\nset key outside top center horizontal\n");
    if (n > 12) fprintf(f, "set xtics rotate by -45 left\n");
    fprintf(f, "set xrange [-0.6:%.1f]\n", n - 0.4);
    fprintf(f, "plot '%s.dat' using 0:2:xtic(1) with boxes lc rgb '#1f77b4' title 'tokens per target pass', "
               "'' using 0:3 axes x1y2 with points pt 7 ps 1.2 lc rgb '#d62728' title 'acceptance rate'\n",
            ch->stem);
    rp_gp_end(f, ch, w, 480);
    if (rp_close(c, f, ch->stem, "gp")) return -1;
    ch->made = 1;
    return 0;
}
