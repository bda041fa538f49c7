/*
 * report.c - `cortex-bench report RUN`: a markdown report of one run with
 * gnuplot charts (see report.h). Every chart is a data file (NAME.dat), a
 * gnuplot script (NAME.gp) that draws NAME.png and NAME.svg from it, and an
 * image link in report.md. Charts (report_charts.c):
 *
 *   tps_per_prompt   per-request TPS by prompt, clustered with the baseline's
 *   ttft_cdf         TTFT distribution (CDF), baseline overlaid
 *   itl_cdf          inter-token latency distribution (CDF), baseline overlaid
 *   latency_time     trace replays: arrival time vs TTFT and end-to-end
 *   counters         counters per phase (prefill/decode), log scale
 *   adapter_ttft     TTFT p50/p99 per adapter
 *   rate_sweep       a rate sweep's throughput and latency against offered load
 *   spec_per_prompt  --spec runs: tokens per target pass and acceptance by prompt
 *
 * A chart without data (e.g. latency over time for a closed-loop run) is not
 * written; report.md says why. This file loads the run (store_read.h),
 * renders the charts with gnuplot (plot.h) and writes report.md.
 *
 * An INVALID run (validity.h) is no measurement: its report says INVALID
 * with the reasons first and shows the request outcomes only (no summary,
 * charts, comparison, counters or other figure). The baseline is checked by
 * report_cmd.c: a VALID run comparable with RUN.
 */
#include "report.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "plot.h"
#include "report_int.h"
#include "show.h"
#include "hx_err.h"

/* See report_int.h. */
int rp_db_fail(rp_ctx *c, const char *what) {
    return hx_fail(c->err, c->errlen, "report: %s: %s", what, store_errmsg(c->s));
}

/* ---------------------------------------------------------------- report.md */

/* The run is INVALID: no measurement, outcomes only. */
static int rp_invalid(const rp_ctx *c) { return !strcmp(c->run.info.validity, "invalid"); }

/* Run header: identity, provenance, environment (as `show` prints it). */
static int rp_md_header(rp_ctx *c, FILE *out) {
    fprintf(out, "## Run\n\n");
    if (show_run_facts(c->s, c->run.info.id, out)) return rp_db_fail(c, "runs");
    if (c->base.info.id) /* report_cmd.c held it to a VALID run comparable with this one */
        fprintf(out, "- baseline: run %lld (`%s`, commit %.10s%s, started %s, VALID), same workload and configuration"
                     " (comparable)\n", (long long)c->base.info.id, c->base.info.workload, c->base.info.commit,
                c->base.info.dirty ? " dirty" : "", c->base.info.started);
    fprintf(out, "\n");
    if (rp_invalid(c)) return 0; /* its KV and server figures are no measurement either */
    show_kv(c->s, c->run.info.id, out);
    show_spec(c->s, c->run.info.id, out);
    show_server(c->s, c->run.info.id, out);
    return 0;
}

/* Metrics of the baseline comparison table, in order. */
static const struct { const char *name, *label; int higher_better; } RP_HEAD[] = {
    {"tps", "throughput (tok/s)", 1},
    {"output_tps", "output throughput (tok/s)", 1},
    {"total_tps", "total throughput (tok/s)", 1},
    {"prefill_tps", "prefill (tok/s)", 1},
    {"decode_tps", "decode (tok/s)", 1},
    {"req_tps_median", "per-request TPS, median (tok/s)", 1},
    {"ttft_ms_p50", "TTFT p50 (ms)", 0},
    {"ttft_ms_p99", "TTFT p99 (ms)", 0},
    {"itl_ms_p50", "ITL p50 (ms)", 0},
    {"itl_ms_p99", "ITL p99 (ms)", 0},
    {"e2e_ms_p50", "end-to-end p50 (ms)", 0},
    {"peak_rss_mib", "peak RSS (MiB)", 0},
    {"kv_prefix_hit_rate", "KV prefix hit rate", 1},
};

/* Headline medians of the run against the baseline's. */
static void rp_md_baseline(rp_ctx *c, FILE *out) {
    int any = 0;
    for (size_t i = 0; i < sizeof RP_HEAD / sizeof RP_HEAD[0]; i++) {
        double b = store_metric_median(c->s, c->base.info.id, RP_HEAD[i].name);
        double r = store_metric_median(c->s, c->run.info.id, RP_HEAD[i].name);
        if (isnan(b) || isnan(r)) continue;
        if (!any++)
            fprintf(out, "### Against the baseline (medians)\n\n| metric | baseline run %lld | run %lld | change |\n"
                         "| --- | ---: | ---: | ---: |\n",
                    (long long)c->base.info.id, (long long)c->run.info.id);
        char ch[48] = "–";
        if (b != 0) {
            double d = r / b - 1;
            int better = RP_HEAD[i].higher_better ? d > 0 : d < 0;
            snprintf(ch, sizeof ch, "%+.1f %%%s", 100 * d, fabs(d) < 0.005 ? "" : better ? " (better)" : " (worse)");
        }
        fprintf(out, "| %s | %.2f | %.2f | %s |\n", RP_HEAD[i].label, b, r, ch);
    }
    if (any) fprintf(out, "\nChanges are between medians only; `cortex-bench compare %lld %lld` checks comparability"
                          " and correctness canaries.\n\n",
                     (long long)c->base.info.id, (long long)c->run.info.id);
    else fprintf(out, "_The baseline shares no headline metric with this run._\n\n");
}

/* The per-request table (means over repetitions), with the baseline's TPS. */
static void rp_md_requests(rp_ctx *c, FILE *out) {
    if (!c->run.n_items) {
        fprintf(out, "## Requests\n\n_No requests recorded._\n\n");
        return;
    }
    int base = c->base.info.id != 0;
    fprintf(out, "## Requests (mean over repetitions)\n\n| item | adapter | prompt tok | gen tok | queue ms | TTFT ms |"
                 " TPOT ms | e2e ms | TPS |%s canary |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |%s --- |\n",
            base ? " baseline TPS |" : "", base ? " ---: |" : "");
    for (int i = 0; i < c->run.n_items; i++) {
        const store_item *it = &c->run.items[i];
        char b[8][32];
        fprintf(out, "| ");
        show_md_inline(out, it->item);
        if (it->adapter >= 0) snprintf(b[0], sizeof b[0], "%d", it->adapter);
        else b[0][0] = 0;
        fprintf(out, " | %s | %d | %s | %s | %s | %s | %s | %s |", b[0], it->prompt_tokens, plot_num(b[1], 32, it->gen_tokens, 0),
                plot_num(b[2], 32, it->queue, 2), plot_num(b[3], 32, it->ttft, 2), plot_num(b[4], 32, it->tpot, 2),
                plot_num(b[5], 32, it->e2e, 2), plot_num(b[6], 32, it->tps, 2));
        if (base) {
            double bt = NAN;
            for (int j = 0; j < c->base.n_items; j++)
                if (!strcmp(c->base.items[j].item, it->item)) bt = c->base.items[j].tps;
            fprintf(out, " %s |", plot_num(b[7], 32, bt, 2));
        }
        if (it->n_err) {
            fprintf(out, " error%s: ", it->n_err < it->n ? " in some repetitions" : "");
            show_md_inline(out, it->error);
            fprintf(out, " |\n");
        } else {
            fprintf(out, " %s%s |\n", it->hash, it->stable == 0 ? " (UNSTABLE)" : "");
        }
    }
    fprintf(out, "\nTPS = generated tokens / service time (end-to-end minus queueing); for synthetic tests, the test's"
                 " tps. `–`: no repetition served the request.\n\n");
}

/* The per-adapter table (trace runs). */
static void rp_md_adapters(rp_ctx *c, FILE *out) {
    store_adapter *ad;
    int n, any = 0;
    if (store_adapters_load(c->s, c->run.info.id, &ad, &n)) n = 0;
    for (int i = 0; i < n; i++) {
        if (!any++)
            fprintf(out, "## Per adapter (all repetitions)\n\n| adapter | requests | TTFT p50 | TTFT p90 | TTFT p99 |"
                         " ITL p50 | ITL p90 | ITL p99 | e2e p50 |\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
        fprintf(out, "| %d | %d |", ad[i].adapter, ad[i].requests);
        const double v[7] = {ad[i].ttft_p50, ad[i].ttft_p90, ad[i].ttft_p99, ad[i].itl_p50, ad[i].itl_p90, ad[i].itl_p99,
                             ad[i].e2e_p50};
        for (int k = 0; k < 7; k++) {
            char b[32];
            fprintf(out, " %s |", plot_num(b, sizeof b, v[k], 2));
        }
        fputc('\n', out);
    }
    free(ad);
    if (any) fprintf(out, "\nLatencies in ms.\n\n");
}

/* The counters table per phase, then every missing counter with its reason. */
static void rp_md_counters(rp_ctx *c, FILE *out) {
    if (!c->n_counters) {
        fprintf(out, "## Counters\n\n_The run has no counters._\n\n");
        return;
    }
    fprintf(out, "## Counters (mean over repetitions)\n\n| counter | unit | prefill | decode | total |\n"
                 "| --- | --- | ---: | ---: | ---: |\n");
    int missing = 0;
    for (int i = 0; i < c->n_counters; i++) {
        const store_counter *k = &c->counters[i];
        fprintf(out, "| %s | %s |", k->name, k->unit);
        for (int p = 0; p < 3; p++) {
            if (!k->seen[p]) fprintf(out, " |");
            else if (k->ok[p]) fprintf(out, " %.*f |", strcmp(k->unit, "J") ? 0 : 3, k->v[p]); /* joules keep a fraction */
            else {
                fprintf(out, " missing |");
                missing++;
            }
        }
        fputc('\n', out);
    }
    fputc('\n', out);
    if (!missing) return;
    fprintf(out, "Missing counters (not plotted):\n\n");
    for (int i = 0; i < c->n_counters; i++) {
        const store_counter *k = &c->counters[i];
        for (int p = 0; p < 3; p++) {
            if (!k->seen[p] || k->ok[p]) continue;
            /* One line per counter and reason: the phases sharing it listed together. */
            int first = 1;
            for (int q = 0; q < p; q++) first &= !(k->seen[q] && !k->ok[q] && !strcmp(k->reason[q], k->reason[p]));
            if (!first) continue;
            fprintf(out, "- `%s` (%s", k->name, STORE_PHASES[p]);
            for (int q = p + 1; q < 3; q++)
                if (k->seen[q] && !k->ok[q] && !strcmp(k->reason[q], k->reason[p])) fprintf(out, ", %s", STORE_PHASES[q]);
            fprintf(out, "): ");
            show_md_inline(out, k->reason[p]);
            fputc('\n', out);
        }
    }
    fputc('\n', out);
}

/* One chart in a markdown report: the PNG inline, links to the SVG, data and script. */
static void rp_md_chart(FILE *out, const rp_chart *ch) {
    fprintf(out, "### %s\n\n", ch->title);
    if (ch->rendered) fprintf(out, "![%s](%s.png)\n\n[SVG](%s.svg) · ", ch->title, ch->stem, ch->stem);
    fprintf(out, "[data](%s.dat) · [gnuplot script](%s.gp)\n\n", ch->stem, ch->stem);
    if (*ch->why) fprintf(out, "_Note: %s._\n\n", ch->why);
}

/* See report_int.h. */
void rp_md_charts(FILE *out, const rp_chart *charts, int n, int have_gp, const char *gp_error) {
    fprintf(out, "## Charts\n\n");
    if (!have_gp)
        fprintf(out, "_Charts not drawn: gnuplot was not found (`apt-get install gnuplot-nox`). Their data (`*.dat`)"
                     " and gnuplot scripts (`*.gp`) are in this directory: `gnuplot NAME.gp` draws NAME.png and"
                     " NAME.svg._\n\n");
    else if (gp_error)
        fprintf(out, "_Some charts could not be drawn: %s_\n\n", gp_error);
    for (int i = 0; i < n; i++)
        if (charts[i].made) rp_md_chart(out, &charts[i]);
    int skipped = 0;
    for (int i = 0; i < n; i++) {
        const rp_chart *ch = &charts[i];
        if (ch->made) continue;
        if (!skipped++) fprintf(out, "Not applicable to this run:\n\n");
        fprintf(out, "- %s: %s\n", ch->title, ch->why);
    }
    if (skipped) fputc('\n', out);
}

/* See report_int.h. */
void rp_charts_clear(rp_ctx *c, const rp_chart *charts, int n) {
    static const char *const EXT[] = {"png", "svg", "dat", "gp"};
    for (int i = 0; i < n; i++)
        for (int e = 0; e < 4; e++) {
            char p[PATH_MAX + 64];
            snprintf(p, sizeof p, "%s/%s.%s", c->dir, charts[i].stem, EXT[e]);
            unlink(p);
        }
}

/* See report_int.h. */
int rp_charts_render(rp_ctx *c, rp_chart *charts, int n, char *err, size_t errlen) {
    char gp[PATH_MAX];
    err[0] = 0;
    int have_gp = plot_gnuplot_find(gp, sizeof gp);
    if (!have_gp) fprintf(stderr, "%s\n", REPORT_NO_GNUPLOT_MSG);
    for (int i = 0; have_gp && i < n; i++) {
        rp_chart *ch = &charts[i];
        if (!ch->made) continue;
        char script[96], e1[512];
        snprintf(script, sizeof script, "%s.gp", ch->stem);
        if (plot_gnuplot_run(gp, c->dir, script, e1, sizeof e1)) {
            if (!*err) hx_fail(err, errlen, "%s", e1);
            continue;
        }
        int ok = 1;
        for (int e = 0; e < 2; e++) {
            char p[PATH_MAX + 64];
            struct stat st;
            snprintf(p, sizeof p, "%s/%s.%s", c->dir, ch->stem, e ? "svg" : "png");
            if (stat(p, &st) != 0 || st.st_size == 0) {
                ok = 0;
                if (!*err) hx_fail(err, errlen, "gnuplot (%.200s) wrote no %.300s", gp, p);
            }
        }
        ch->rendered = ok;
    }
    return have_gp;
}

/* ---------------------------------------------------------------- entry */

/* Free what a context holds. */
static void rp_free(rp_ctx *c) {
    free(c->run.items);
    free(c->base.items);
    free(c->counters);
}

/* Write report.md (via a temporary file). */
static int rp_write_md(rp_ctx *c, int have_gp, const char *gp_error) {
    char path[PATH_MAX + 32], tmp[PATH_MAX + 48];
    snprintf(path, sizeof path, "%s/report.md", c->dir);
    snprintf(tmp, sizeof tmp, "%s/report.md.tmp", c->dir);
    FILE *out = fopen(tmp, "w");
    if (!out) return hx_fail(c->err, c->errlen, "cannot write %s: %s", tmp, strerror(errno));
    char now[32];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", &tm);
    fprintf(out, "# cortex-bench report: run %lld\n\n", (long long)c->run.info.id);
    int invalid = rp_invalid(c);
    if (invalid) {
        char word[48];
        fprintf(out, "> %s: ", show_validity_word(word, sizeof word, "invalid", out));
        show_md_inline(out, c->run.info.validity_reasons);
        fprintf(out, ". **Not a measurement**: this report shows the run's request outcomes only; no figure of it is"
                     " shown, charted, compared%s, gated or trended.\n\n",
                c->base.info.id ? " (with the baseline given, either)" : "");
    }
    fprintf(out, "`%s` on %s (%s), ", c->run.info.workload, c->run.info.model, c->run.info.type);
    if (c->run.info.endpoint[0]) fprintf(out, "over HTTP at `%s`", c->run.info.endpoint);
    else fprintf(out, "%d thread%s", c->run.info.threads, c->run.info.threads == 1 ? "" : "s");
    fprintf(out, ". Generated %s by `cortex-bench report`", now);
    if (c->base.info.id && !invalid) fprintf(out, ", against baseline run %lld", (long long)c->base.info.id);
    fprintf(out, ". Metric definitions: docs/metrics.md.\n\n");
    if (!strcmp(c->run.info.status, "incomplete"))
        fprintf(out, "> **This run is incomplete**: it was killed or is still running, so it has no results.\n\n");
    else if (strcmp(c->run.info.status, "complete"))
        fprintf(out, "> **This run %s** (the error is below): its results are partial or absent.\n\n", c->run.info.status);
    if (rp_md_header(c, out)) {
        fclose(out);
        unlink(tmp);
        return -1;
    }
    if (invalid) { /* the verdict and the outcomes; nothing else */
        fprintf(out, "## Outcomes\n\n");
        show_verdict(c->s, c->run.info.id, out);
        fprintf(out, "\n");
        show_items(c->s, c->run.info.id, out);
        return plot_commit_file(out, tmp, path, c->err, c->errlen);
    }
    fprintf(out, "## Summary (over repetitions)\n\n");
    char serr[256];
    if (show_table(c->s, &c->run.info.id, 1, "md", 1, out, serr, sizeof serr)) fprintf(out, "_%s_\n", serr);
    fprintf(out, "\n");
    if (c->base.info.id) rp_md_baseline(c, out);
    rp_md_charts(out, c->charts, CH_N, have_gp, gp_error);
    rp_md_requests(c, out);
    rp_md_adapters(c, out);
    rp_md_counters(c, out);
    return plot_commit_file(out, tmp, path, c->err, c->errlen);
}

/* Load the run (and baseline), write every chart's data and script, draw
 * them with gnuplot when it is there, then write report.md. */
int report_write(store *s, int64_t run_id, int64_t baseline_run, const char *out_dir, char *err, size_t errlen) {
    rp_ctx c;
    memset(&c, 0, sizeof c);
    c.s = s;
    c.err = err;
    c.errlen = errlen;
    static const struct { const char *stem, *title; } CH[CH_N] = {
        {"tps_per_prompt", "TPS per prompt"},
        {"ttft_cdf", "TTFT distribution (CDF)"},
        {"itl_cdf", "Inter-token latency distribution (CDF)"},
        {"latency_time", "Latency over time"},
        {"counters", "Counters per phase"},
        {"adapter_ttft", "TTFT per adapter"},
        {"rate_sweep", "Rate sweep: throughput and latency against offered load"},
        {"spec_per_prompt", "Speculative decoding per prompt"},
    };
    for (int i = 0; i < CH_N; i++) {
        c.charts[i].stem = CH[i].stem;
        c.charts[i].title = CH[i].title;
    }
    int rc = -1, found = store_run_load(s, run_id, &c.run.info);
    if (found < 0) {
        rp_db_fail(&c, "runs");
        goto out;
    }
    if (!found) {
        hx_fail(err, errlen, "no run %lld in the database", (long long)run_id);
        goto out;
    }
    if (baseline_run) {
        found = store_run_load(s, baseline_run, &c.base.info);
        if (found <= 0) {
            if (found < 0) rp_db_fail(&c, "runs");
            else hx_fail(err, errlen, "no baseline run %lld in the database", (long long)baseline_run);
            goto out;
        }
    }
    if (out_dir) snprintf(c.dir, sizeof c.dir, "%s", out_dir);
    else snprintf(c.dir, sizeof c.dir, "reports/%lld", (long long)run_id);
    if (plot_mkdirs(c.dir, err, errlen)) goto out;
    if (store_items_load(s, &c.run.info, &c.run.items, &c.run.n_items) ||
        (c.base.info.id && store_items_load(s, &c.base.info, &c.base.items, &c.base.n_items))) {
        rp_db_fail(&c, "requests");
        goto out;
    }
    if (store_counters_load(s, run_id, &c.counters, &c.n_counters)) {
        rp_db_fail(&c, "counters");
        goto out;
    }

    /* Data and scripts; stale images of a previous report are removed first. An INVALID run has no chart. */
    rp_charts_clear(&c, c.charts, CH_N);
    if (rp_invalid(&c)) {
        rc = rp_write_md(&c, 0, NULL);
        goto out;
    }
    if (rp_chart_tps(&c, &c.charts[CH_TPS]) || rp_chart_cdf(&c, &c.charts[CH_TTFT], 0) ||
        rp_chart_cdf(&c, &c.charts[CH_ITL], 1) || rp_chart_time(&c, &c.charts[CH_TIME]) ||
        rp_chart_counters(&c, &c.charts[CH_COUNTERS]) || rp_chart_adapters(&c, &c.charts[CH_ADAPTERS]) ||
        rp_chart_sweep(&c, &c.charts[CH_SWEEP]) || rp_chart_spec(&c, &c.charts[CH_SPEC]))
        goto out;
    char gp_err[768];
    int have_gp = rp_charts_render(&c, c.charts, CH_N, gp_err, sizeof gp_err);
    if (rp_write_md(&c, have_gp, *gp_err ? gp_err : NULL)) goto out;
    if (*gp_err) {
        hx_fail(err, errlen, "%s (report.md written without that chart)", gp_err);
        goto out;
    }
    rc = 0;
out:
    rp_free(&c);
    return rc;
}
