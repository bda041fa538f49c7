/*
 * export.c - runs written for other tools (see export.h): Bencher Metric
 * Format JSON of the headline metrics of measurements, and every request
 * of a run as md, csv, json or jsonl. The summary tables themselves (md,
 * csv, json, jsonl) are show_table's (show.c), which hands bmf here.
 *
 * What is never written: a figure of an INVALID or incomplete run as a
 * measurement (BMF skips the run, saying so on stderr; the request export
 * keeps an INVALID run's outcomes but no timing), and `nan` (JSON gets
 * null, csv an empty field, md an empty cell).
 */
#include "export.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "jsonx.h"
#include "show.h"
#include "store_read.h"
#include "hx_err.h"

/* See export.h. */
int export_format_known(const char *fmt) {
    return !strcmp(fmt, "md") || !strcmp(fmt, "csv") || !strcmp(fmt, "json") || !strcmp(fmt, "jsonl") ||
           !strcmp(fmt, "bmf");
}

/* See export.h. */
int export_request_format_known(const char *fmt) { return export_format_known(fmt) && strcmp(fmt, "bmf"); }

/* ---- Bencher Metric Format ------------------------------------------------- */

/* The headline metrics as Bencher measures: slugs (kebab case, at most 64
 * characters, Bencher's limit) with the unit in the name, since a measure's
 * unit is fixed when Bencher first sees it (its built-in `latency` is in ns
 * and `throughput` in ops/s, neither ours). Runs write the ones they have. */
static const struct { const char *metric, *measure; } BMF_MEASURES[] = {
    {"tps", "throughput-tok-s"},
    {"output_tps", "output-throughput-tok-s"},
    {"total_tps", "total-throughput-tok-s"},
    {"prefill_tps", "prefill-tok-s"},
    {"decode_tps", "decode-tok-s"},
    {"req_tps_median", "request-tps-median-tok-s"},
    {"ttft_ms_p50", "ttft-p50-ms"}, {"ttft_ms_p90", "ttft-p90-ms"}, {"ttft_ms_p99", "ttft-p99-ms"},
    {"tpot_ms_p50", "tpot-p50-ms"}, {"tpot_ms_p90", "tpot-p90-ms"}, {"tpot_ms_p99", "tpot-p99-ms"},
    {"itl_ms_p50", "itl-p50-ms"}, {"itl_ms_p99", "itl-p99-ms"},
    {"e2e_ms_p50", "e2e-latency-p50-ms"}, {"e2e_ms_p99", "e2e-latency-p99-ms"},
    {"queue_ms_p50", "queue-wait-p50-ms"}, {"queue_ms_p99", "queue-wait-p99-ms"},
    {"request_rps", "request-throughput-req-s"},
    {"goodput_rps", "goodput-req-s"},
    {"peak_rss_mib", "peak-rss-mib"},
};
#define N_BMF (int)(sizeof BMF_MEASURES / sizeof BMF_MEASURES[0])

/* The last path component of p. */
static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/*
 * A run's benchmark name: what was measured, and nothing that changes from
 * one CI job to the next (no run id, no date, no checkout directory), so
 * Bencher lines up the same benchmark across commits:
 *   MODEL/TYPE/WORKLOAD/tTHREADS   in-process (a file workload by its file
 *                                  name: "trace:zipf-smoke.jsonl")
 *   MODEL/WORKLOAD/http            over HTTP (the server's threads)
 * then "/open" or "/closed" when the loop is not the workload's default,
 * "/cC" for a closed loop of C > 1 clients, "/rateR" for a Poisson rate.
 */
static void bmf_name(const store_run *r, char *buf, size_t cap) {
    char wl[256];
    const char *colon = strchr(r->workload, ':');
    if (colon && strchr(colon, '/')) /* prompts:DIR/FILE, trace:DIR/FILE */
        snprintf(wl, sizeof wl, "%.*s%s", (int)(colon - r->workload + 1), r->workload, base_name(colon + 1));
    else
        snprintf(wl, sizeof wl, "%s", r->workload);
    const char *model = r->model[0] ? r->model : base_name(r->model_path);
    size_t k;
    if (r->endpoint[0]) k = (size_t)snprintf(buf, cap, "%s/%s/http", model, wl);
    else k = (size_t)snprintf(buf, cap, "%s/%s/%s/t%d", model, r->type, wl, r->threads);
    if (!strcmp(r->mode, "synthetic") || k >= cap) return;
    const char *def = !strcmp(r->kind, "trace") ? "open" : "closed";
    if (strcmp(r->mode, def) && k < cap) k += (size_t)snprintf(buf + k, cap - k, "/%s", r->mode);
    if (!strcmp(r->mode, "closed") && r->concurrency > 1 && k < cap)
        k += (size_t)snprintf(buf + k, cap - k, "/c%d", r->concurrency);
    if (r->rate > 0 && k < cap) {
        char rate[40];
        jx_format_number(rate, sizeof rate, r->rate);
        snprintf(buf + k, cap - k, "/rate%s", rate);
    }
}

/* See export.h. */
int export_bmf(store *s, const int64_t *ids, int n_ids, FILE *out, char *err, size_t errlen) {
    char (*names)[600] = calloc((size_t)(n_ids > 0 ? n_ids : 1), sizeof *names);
    if (!names) return hx_fail(err, errlen, "out of memory");
    int first = 1;
    fprintf(out, "{");
    for (int r = 0; r < n_ids; r++) {
        store_run ri;
        int found = store_run_load(s, ids[r], &ri);
        if (found <= 0) {
            if (found < 0) hx_fail(err, errlen, "bmf: %s", store_errmsg(s));
            else hx_fail(err, errlen, "no run %lld in the database", (long long)ids[r]);
            free(names);
            return -1;
        }
        if (strcmp(ri.status, "complete") || !strcmp(ri.validity, "invalid")) { /* no measurement: no entry */
            fprintf(stderr, "cortex-bench: run %lld is %s%s%s: no BMF entry (not a measurement)\n", (long long)ids[r],
                    strcmp(ri.status, "complete") ? ri.status : "INVALID", ri.validity_reasons[0] ? ": " : "",
                    strcmp(ri.status, "complete") ? "" : ri.validity_reasons);
            continue;
        }
        store_summary_row rows[128];
        int nr = store_summary_load(s, ids[r], rows, 128);
        if (nr < 0) {
            hx_fail(err, errlen, "bmf: %s", store_errmsg(s));
            free(names);
            return -1;
        }
        char *name = names[r];
        bmf_name(&ri, name, sizeof names[r]);
        for (int q = 0; q < r; q++) /* two runs of one configuration in one document: keys stay unique */
            if (!strcmp(names[q], name)) {
                size_t k = strlen(name);
                snprintf(name + k, sizeof names[r] - k, "/run%lld", (long long)ids[r]);
                break;
            }
        int any = 0;
        for (int m = 0; m < N_BMF; m++) {
            const store_summary_row *w = NULL;
            for (int i = 0; i < nr && !w; i++)
                if (!strcmp(rows[i].name, BMF_MEASURES[m].metric)) w = &rows[i];
            if (!w || !isfinite(w->med)) continue;
            if (!any++) {
                fprintf(out, "%s\n  ", first ? "" : ",");
                jx_write_string(out, name, strlen(name));
                fprintf(out, ": {");
                first = 0;
            }
            fprintf(out, "%s\n    \"%s\": {\"value\": ", any > 1 ? "," : "", BMF_MEASURES[m].measure);
            jx_write_number(out, w->med);
            if (isfinite(w->min) && isfinite(w->max) && w->min <= w->med && w->med <= w->max) {
                fprintf(out, ", \"lower_value\": ");
                jx_write_number(out, w->min);
                fprintf(out, ", \"upper_value\": ");
                jx_write_number(out, w->max);
            }
            fprintf(out, "}");
        }
        if (any) fprintf(out, "\n  }");
        else fprintf(stderr, "cortex-bench: run %lld has no headline metric: no BMF entry\n", (long long)ids[r]);
    }
    fprintf(out, "%s}\n", first ? "" : "\n");
    free(names);
    return 0;
}

/* ---- every request --------------------------------------------------------- */

/* The columns of the request export, in order (csv header, json keys, md). */
static const char *const REQ_COLS[] = {"run", "validity", "rep", "idx", "item", "adapter", "state", "max_tokens",
                                       "prompt_tokens", "gen_tokens", "cached_tokens", "arrival_s", "queue_ms",
                                       "ttft_ms", "tpot_ms", "e2e_ms", "spec_passes", "spec_verified",
                                       "draft_tokens", "accepted_tokens", "draft_ms", "verify_ms", "canary", "error"};
#define REQ_SPEC_COL 16 /* the first speculation column */
#define N_REQ_COLS (int)(sizeof REQ_COLS / sizeof REQ_COLS[0])

/* A csv field: quoted, '"' doubled (item ids and errors are free text). */
static void csv_text(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* One number in the format's way: every digit for tools, three decimals
 * for people (md); json null / an empty csv field or md cell when x is not
 * a number. */
static void req_num(FILE *f, int json, int csv, double x) {
    if (json) jx_write_number(f, x);
    else if (isfinite(x) && !csv) fprintf(f, "%.3f", x);
    else if (isfinite(x)) {
        char b[40];
        jx_format_number(b, sizeof b, x);
        fputs(b, f);
    }
}

/* One text in the format's way. */
static void req_text(FILE *f, int json, int csv, const char *s) {
    if (json) jx_write_string(f, s, strlen(s));
    else if (csv) csv_text(f, s);
    else show_md_inline(f, s);
}

/* See export.h. */
int export_requests(store *s, int64_t id, const char *fmt, FILE *out, char *err, size_t errlen) {
    if (!export_request_format_known(fmt))
        return hx_fail(err, errlen, "--requests: unknown format '%s' (%s)", fmt, EXPORT_REQUEST_FORMATS);
    store_run r;
    int found = store_run_load(s, id, &r);
    if (found <= 0) {
        if (found < 0) hx_fail(err, errlen, "show: %s", store_errmsg(s));
        else hx_fail(err, errlen, "no run %lld in the database", (long long)id);
        return -1;
    }
    store_request_time *q;
    int nq;
    if (store_request_times(s, id, &q, &nq)) return hx_fail(err, errlen, "show: %s", store_errmsg(s));
    int jsonl = !strcmp(fmt, "jsonl"), json = jsonl || !strcmp(fmt, "json"), csv = !strcmp(fmt, "csv");
    /* An INVALID run's outcomes are data; its timings are no measurement. */
    int timed = strcmp(r.validity, "invalid") != 0;
    const char *validity = r.validity[0] ? r.validity : "unknown";
    if (csv) { /* a header line */
        for (int c = 0; c < N_REQ_COLS; c++) fprintf(out, "%s%s", c ? "," : "", REQ_COLS[c]);
        fprintf(out, "\n");
    } else if (!json) { /* a markdown table: text left, numbers right */
        for (int c = 0; c < N_REQ_COLS; c++) fprintf(out, "| %s ", REQ_COLS[c]);
        fprintf(out, "|\n");
        for (int c = 0; c < N_REQ_COLS; c++)
            fprintf(out, "| %s ", c == 1 || c == 4 || c == 6 || c >= N_REQ_COLS - 2 ? "---" : "---:");
        fprintf(out, "|\n");
    } else if (!jsonl)
        fprintf(out, "[");
    for (int i = 0; i < nq; i++) {
        const store_request_time *t = &q[i];
        const double nums[] = {timed ? t->arrival_s : NAN, timed ? t->queue_ms : NAN, timed ? t->ttft_ms : NAN,
                               timed ? t->tpot_ms : NAN, timed ? t->e2e_ms : NAN};
        const char *sep = json ? ", " : csv ? "," : " | ";
        if (json) fprintf(out, "%s{\"run\": %lld, \"validity\": \"%s\", \"rep\": %d, \"idx\": %d, \"item\": ",
                          jsonl ? "" : i ? ",\n  " : "\n  ", (long long)id, validity, t->rep, t->idx);
        else fprintf(out, "%s%lld%s%s%s%d%s%d%s", csv ? "" : "| ", (long long)id, sep, validity, sep, t->rep, sep,
                     t->idx, sep);
        req_text(out, json, csv, t->item);
        fprintf(out, "%s", sep);
        if (json) fprintf(out, "\"adapter\": ");
        if (t->adapter >= 0) fprintf(out, "%d", t->adapter); /* prompt sets have none */
        else if (json) fprintf(out, "null");
        fprintf(out, "%s%s", sep, json ? "\"state\": " : "");
        req_text(out, json, csv, t->state);
        const int ivals[] = {t->max_tokens, t->prompt_tokens, t->gen_tokens, t->cached_tokens};
        for (int k = 0; k < 4; k++) {
            fprintf(out, "%s", sep);
            if (json) fprintf(out, "\"%s\": ", REQ_COLS[7 + k]);
            if (k == 0 && ivals[k] <= 0) fprintf(out, "%s", json ? "null" : ""); /* not recorded before schema v12 */
            else fprintf(out, "%d", ivals[k]);
        }
        for (int k = 0; k < 5; k++) {
            fprintf(out, "%s", sep);
            if (json) fprintf(out, "\"%s\": ", REQ_COLS[11 + k]);
            req_num(out, json, csv, nums[k]);
        }
        /* speculation: counts (null when not recorded), then its times (no measurement in an INVALID run) */
        const int svals[] = {t->spec_passes, t->spec_verified, t->draft_tokens, t->accepted_tokens};
        for (int k = 0; k < 4; k++) {
            fprintf(out, "%s", sep);
            if (json) fprintf(out, "\"%s\": ", REQ_COLS[REQ_SPEC_COL + k]);
            if (svals[k] >= 0) fprintf(out, "%d", svals[k]);
            else if (json) fprintf(out, "null");
        }
        const double stimes[] = {timed ? t->draft_ms : NAN, timed ? t->verify_ms : NAN};
        for (int k = 0; k < 2; k++) {
            fprintf(out, "%s", sep);
            if (json) fprintf(out, "\"%s\": ", REQ_COLS[REQ_SPEC_COL + 4 + k]);
            req_num(out, json, csv, stimes[k]);
        }
        fprintf(out, "%s%s", sep, json ? "\"canary\": " : "");
        if (json && !t->token_hash[0]) fprintf(out, "null");
        else req_text(out, json, csv, t->token_hash);
        fprintf(out, "%s%s", sep, json ? "\"error\": " : "");
        if (json && !t->error[0]) fprintf(out, "null");
        else req_text(out, json, csv, t->error);
        fprintf(out, "%s", json ? jsonl ? "}\n" : "}" : csv ? "\n" : " |\n");
    }
    if (json && !jsonl) fprintf(out, "%s]\n", nq ? "\n" : "");
    free(q);
    return 0;
}
