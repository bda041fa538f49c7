/*
 * show.c - read runs back out of the database for people and tools:
 * `cortex-bench list`, `cortex-bench show RUN`, and the llama-bench-like table
 * `cortex-bench run` prints at the end (markdown, csv, json or jsonl; bmf
 * from export.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "export.h"
#include "jsonx.h"
#include "roofline.h"
#include "show.h"
#include "store.h"
#include "store_read.h"
#include "validity.h"
#include "hx_err.h"

/* Other work (other_load_cpus) past which a run's verdict says the machine was shared. */
#define SHOW_LOADED_CPUS 0.25
/* Share of the engine threads' waits made on shared cores (pool_contended_share) past which it says so. */
#define SHOW_CONTENDED_SHARE 0.10
/* ... said only of a pool that waited less than this share of its time (busy, not idle between requests). */
#define SHOW_IDLE_POOL 0.5

/* See show.h. */
int show_color(FILE *out) {
    const char *nc = getenv("NO_COLOR");
    return isatty(fileno(out)) && !(nc && *nc) && !(getenv("TERM") && !strcmp(getenv("TERM"), "dumb"));
}

/* See show.h. */
const char *show_validity_word(char *buf, size_t n, const char *validity, FILE *out) {
    int invalid = !strcmp(validity, "invalid"), red = invalid && show_color(out);
    snprintf(buf, n, "%s%s%s", red ? "\033[1;31m" : invalid ? "**" : "",
             invalid ? "INVALID" : !strcmp(validity, "valid") ? "VALID" : "complete", red ? "\033[0m" : invalid ? "**" : "");
    return buf;
}

/* See show.h. */
const char *show_num(char *buf, size_t n, const char *fmt, double v) {
    if (isfinite(v)) snprintf(buf, n, fmt, v);
    else snprintf(buf, n, "-");
    return buf;
}

/* See show.h. */
int show_verdict(store *s, int64_t id, FILE *out) {
    store_run r;
    store_request_time *q;
    int n;
    if (store_run_load(s, id, &r) != 1 || store_request_times(s, id, &q, &n)) return -1;
    run_outcomes o;
    memset(&o, 0, sizeof o);
    long long cached = 0, prompt = 0; /* over HTTP: what the server's prompt cache served */
    for (int i = 0; i < n; i++) {
        validity_add(&o, q[i].state, q[i].gen_tokens, q[i].max_tokens, r.ignore_eos,
                     q[i].http && strcmp(r.server_cache, "on") ? q[i].cached_tokens : 0);
        cached += q[i].http ? q[i].cached_tokens : 0;
        prompt += q[i].http ? q[i].prompt_tokens : 0;
    }
    free(q);
    char word[48];
    fprintf(out, "run %lld: %s", (long long)id, show_validity_word(word, sizeof word, r.validity, out));
    if (r.validity_reasons[0]) fprintf(out, "%s%s", !strcmp(r.validity, "invalid") ? ": " : " (", r.validity_reasons);
    fprintf(out, "%s\n", r.validity_reasons[0] && strcmp(r.validity, "invalid") ? ")" : "");
    fprintf(out, "  requests %d over %d repetition%s: %d finished (%d by length, %d at a stop), %d truncated, %d failed,"
                 " %d rejected, %d timed out, %d cancelled\n", o.requests, r.reps, r.reps == 1 ? "" : "s", o.finished,
            o.by_length, o.by_stop, o.truncated, o.failed, o.rejected, o.timed_out, o.cancelled);
    if (!strcmp(r.server_cache, "on")) /* the cache's share, which the figures below include */
        fprintf(out, "  the server's prompt cache (--server-cache on) served %lld of %lld prompt tokens\n", cached, prompt);
    if (strcmp(r.validity, "valid")) return 0; /* no figure of a run that is not a measurement */
    double rps = store_metric_median(s, id, "request_rps"), good = store_metric_median(s, id, "goodput_rps"),
           share = store_metric_median(s, id, "goodput_share"), rss = store_metric_median(s, id, "peak_rss_mib");
    int any = 0;
    if (!isnan(rps)) fprintf(out, "%s request rate %.3f req/s", any++ ? "," : " ", rps);
    if (!isnan(good)) fprintf(out, "%s goodput %.3f req/s (%.1f%% of requests met every SLO: %s)", any++ ? "," : " ", good,
                              100 * share, r.slo);
    else if (!strcmp(r.mode, "open") || !strcmp(r.mode, "closed")) fprintf(out, "%s goodput: no SLO set (--slo)", any++ ? "," : " ");
    if (!isnan(rss)) fprintf(out, "%s peak RSS %.1f MiB", any++ ? "," : " ", rss);
    else if (r.endpoint[0]) fprintf(out, "%s peak RSS: the server's, not measured here", any++ ? "," : " ");
    if (any) fprintf(out, "\n");
    /* a loaded machine's figures are a loaded machine's: said, and refused as a baseline (gates.md) */
    double other = store_metric_median(s, id, "other_load_cpus");
    if (other > SHOW_LOADED_CPUS)
        fprintf(out, "  other work kept %.2f of %d CPUs busy while it ran (median over the repetitions): the figures are"
                     " a shared machine's\n", other, r.cpus_allowed > 0 ? r.cpus_allowed : r.logical_cores);
    /* the engine's own view: its threads waited for cores (another process, or more threads than cores). Only
     * of an engine busy at least half its time: one that mostly waited for work (an open loop's idle gaps)
     * sleeps and wakes all the time, and each wake-up's delay reads as waiting for a core. */
    double contended = store_metric_median(s, id, "pool_contended_share"),
           waited = store_metric_median(s, id, "pool_wait_share");
    if (contended > SHOW_CONTENDED_SHARE && waited < SHOW_IDLE_POOL)
        fprintf(out, "  the engine's threads had to share their cores: %.0f%% of their waits were made on cores other threads"
                     " wanted, they waited %.0f%% of their time, %.0f involuntary context switches/s (medians over the"
                     " repetitions): the figures are a contended machine's\n", 100 * contended, 100 * waited,
                store_metric_median(s, id, "preempted_per_s"));
    return 0;
}

/* `cortex-bench list`: the newest runs as a markdown table. */
int show_list(store *s, FILE *out, int limit, char *err, size_t errlen) {
    store_list_row *rows;
    int nr;
    if (store_list_runs(s, limit, &rows, &nr)) {
        free(rows);
        return hx_fail(err, errlen, "list: %s", store_errmsg(s));
    }
    fprintf(out, "| id | started (UTC) | status | workload | model | type | threads | reps | commit | TPS (median) |\n");
    fprintf(out, "| ---: | --- | --- | --- | --- | --- | ---: | ---: | --- | ---: |\n");
    for (int i = 0; i < nr; i++) {
        const store_list_row *w = &rows[i];
        char tps[32] = "", status[64], threads[16] = "server";
        int invalid = !strcmp(w->validity, "invalid");
        /* an INVALID run's figures are no measurement: never printed as one */
        if (!isnan(w->tps) && !invalid) snprintf(tps, sizeof tps, "%.2f", w->tps);
        if (!strcmp(w->status, "complete")) show_validity_word(status, sizeof status, w->validity, out);
        else snprintf(status, sizeof status, "%s", w->status);
        if (!w->http) snprintf(threads, sizeof threads, "%d", w->threads);
        fprintf(out, "| %lld | %.19s | %s | %s | %s | %s | %s | %d | %s%s | %s |\n", (long long)w->id, w->started, status,
                w->workload, w->model, w->type, threads, w->reps, w->commit, w->dirty ? "+dirty" : "", tps);
    }
    free(rows);
    return 0;
}

/* Which metrics head the table, in order, with units; the rest follow. */
static const struct { const char *name, *label, *unit; } HEADLINE[] = {
    {"tps", "throughput", "tok/s"},
    {"output_tps", "output throughput", "tok/s"},
    {"total_tps", "total throughput (prompt + output)", "tok/s"},
    {"prefill_tps", "prefill", "tok/s"},
    {"decode_tps", "decode", "tok/s"},
    {"req_tps_min", "per-request TPS, min", "tok/s"},
    {"req_tps_median", "per-request TPS, median", "tok/s"},
    {"req_tps_max", "per-request TPS, max", "tok/s"},
    {"req_decode_tps_min", "per-request decode TPS, min", "tok/s"},
    {"req_decode_tps_median", "per-request decode TPS, median", "tok/s"},
    {"req_decode_tps_max", "per-request decode TPS, max", "tok/s"},
    {"ttft_ms_p50", "TTFT p50", "ms"}, {"ttft_ms_p90", "TTFT p90", "ms"}, {"ttft_ms_p99", "TTFT p99", "ms"},
    {"tpot_ms_p50", "TPOT p50", "ms"}, {"tpot_ms_p90", "TPOT p90", "ms"}, {"tpot_ms_p99", "TPOT p99", "ms"},
    {"itl_ms_p50", "ITL p50", "ms"}, {"itl_ms_p90", "ITL p90", "ms"}, {"itl_ms_p99", "ITL p99", "ms"},
    {"e2e_ms_p50", "end-to-end p50", "ms"}, {"e2e_ms_p99", "end-to-end p99", "ms"},
    {"queue_ms_p50", "queue wait p50", "ms"}, {"queue_ms_p99", "queue wait p99", "ms"},
    {"peak_rss_mib", "peak RSS", "MiB"},
    {"weights_hugepage_pct", "weights in 2 MiB pages", "%"},
    {"prompt_tokens", "prompt tokens", ""}, {"gen_tokens", "generated tokens", ""},
    {"requests", "requests", ""}, {"errors", "failed requests", ""},
    {"request_rps", "request throughput (finished)", "req/s"},
    {"goodput_share", "goodput: share meeting every SLO", "fraction"},
    {"goodput_rps", "goodput: requests meeting every SLO", "req/s"},
    {"requests_finished", "requests finished", ""}, {"requests_rejected", "requests rejected (queue full)", ""},
    {"requests_timed_out", "requests timed out", ""}, {"requests_cancelled", "requests cancelled", ""},
    {"requests_failed", "requests failed", ""},
    {"steps", "scheduler steps", ""}, {"batch_tokens_mean", "tokens per step (mean)", ""},
    {"preemptions", "preemptions", ""}, {"sched_overhead_pct", "scheduler overhead (share of step time)", "%"},
    {"decode_ctx_mean", "KV positions attended per decode step (mean)", ""},
    {"lora_loads", "adapter loads (first uses and reloads)", ""},
    {"lora_evictions", "adapters unloaded to make room", ""},
    {"lora_load_ms_mean", "adapter load time (mean)", "ms"}, {"lora_load_ms_max", "adapter load time (max)", "ms"},
    {"lora_resident_mib", "resident adapters at the end", "MiB"},
    {"bytes_per_token", "bytes read per decoded token", "B"},
    {"flops_per_token", "arithmetic per decoded token", "FLOP"},
    {"roofline_tps", "bandwidth roofline for decode", "tok/s"},
    {"roofline_frac", "decode / roofline", "fraction"},
};
#define NHEAD (int)(sizeof HEADLINE / sizeof HEADLINE[0])

typedef store_summary_row sum_row;

/* A run and its summary rows (at most `cap`); the row count, or -1. */
static int load_run(store *s, int64_t id, store_run *ri, sum_row *rows, int cap) {
    if (store_run_load(s, id, ri) < 0) return -1;
    return store_summary_load(s, id, rows, cap);
}

/* The summary row of metric `name`, or NULL. */
static const sum_row *find_row(const sum_row *rows, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(rows[i].name, name)) return &rows[i];
    return NULL;
}

/* Rows in display order: headline metrics first (all others too when `full`). */
static int ordered(const sum_row *rows, int n, int full, const sum_row **out, const char **label, const char **unit) {
    int k = 0;
    for (int h = 0; h < NHEAD; h++) {
        const sum_row *w = find_row(rows, n, HEADLINE[h].name);
        if (!w || (!full && h >= 22)) continue; /* token counts only in full tables */
        out[k] = w;
        label[k] = HEADLINE[h].label;
        unit[k++] = HEADLINE[h].unit;
    }
    for (int i = 0; full && i < n; i++) {
        int known = 0;
        for (int h = 0; h < NHEAD; h++) known |= !strcmp(rows[i].name, HEADLINE[h].name);
        if (known) continue;
        out[k] = &rows[i];
        label[k] = rows[i].name;
        unit[k++] = "";
    }
    return k;
}

/* Under a markdown table: each run's decode speed against the bandwidth
 * roofline, or (once) how to get a roofline when the machine has none. */
static void show_roofline(store *db, const int64_t *ids, int n_ids, FILE *out) {
    int any = 0, hint = 0;
    for (int r = 0; r < n_ids; r++) {
        char line[512];
        store_run ri;
        if (store_run_load(db, ids[r], &ri) == 1 && !strcmp(ri.validity, "invalid")) continue; /* no measurement */
        int rc = roof_describe(db, ids[r], line, sizeof line);
        if (rc == 1 && n_ids > 1) fprintf(out, "%sroofline, run %lld: %s\n", any++ ? "" : "\n", (long long)ids[r], line);
        else if (rc == 1) fprintf(out, "\nroofline: %s\n", line);
        hint |= rc < 0;
    }
    if (hint) fprintf(out, "\n%s\n", ROOF_HINT);
}

/* llama-bench's table, for synthetic tests: one line per run. */
static void synthetic_md(store *db, const int64_t *ids, int n_ids, FILE *out) {
    fprintf(out, "| model | size | params | type | threads | test | t/s |\n| --- | ---: | ---: | --- | ---: | --- | ---: |\n");
    for (int r = 0; r < n_ids; r++) {
        store_run ri;
        sum_row rows[128];
        int n = load_run(db, ids[r], &ri, rows, 128);
        const sum_row *t = n > 0 ? find_row(rows, n, "tps") : NULL;
        char tps[48] = "failed (see show)";
        if (!strcmp(ri.validity, "invalid")) snprintf(tps, sizeof tps, "INVALID (see show %lld)", (long long)ids[r]);
        else if (t) snprintf(tps, sizeof tps, "%.2f ± %.2f", t->med, t->sd);
        fprintf(out, "| %s | %.2f MiB | %.2f M | %s | %d | %s | %s |\n", ri.model, (double)ri.model_bytes / (1 << 20), (double)ri.model_params / 1e6,
                ri.type, ri.threads, ri.workload, tps);
    }
}

int show_table(store *s, const int64_t *ids, int n_ids, const char *fmt, int full, FILE *out, char *err, size_t errlen) {
    /* jsonl: json's objects, one a line, no enclosing array */
    int jsonl = !strcmp(fmt, "jsonl"), json = jsonl || !strcmp(fmt, "json"), csv = !strcmp(fmt, "csv");
    if (!export_format_known(fmt)) {
        return hx_fail(err, errlen, "unknown output format '%s' (%s)", fmt, EXPORT_FORMATS);
    }
    if (!strcmp(fmt, "bmf")) return export_bmf(s, ids, n_ids, out, err, errlen); /* export.c */
    store *db = s;
    int all_synthetic = 1;
    for (int r = 0; r < n_ids; r++) {
        store_run ri;
        sum_row dummy[1];
        load_run(db, ids[r], &ri, dummy, 0);
        all_synthetic &= !strcmp(ri.mode, "synthetic");
    }
    if (!csv && !json && all_synthetic && !full) {
        synthetic_md(db, ids, n_ids, out);
        show_roofline(db, ids, n_ids, out);
        return 0;
    }
    if (csv) fprintf(out, "run,model,type,threads,workload,metric,unit,median,min,max,stddev,n,validity\n");
    else if (json && !jsonl) fprintf(out, "[");
    int first = 1, oom = 0; /* oom: jansson could not encode a string */
    for (int r = 0; r < n_ids; r++) {
        store_run ri;
        sum_row rows[128];
        int nr = load_run(db, ids[r], &ri, rows, 128);
        if (nr < 0) {
            return hx_fail(err, errlen, "show: %s", store_errmsg(s));
        }
        const sum_row *ord[128];
        const char *label[128], *unit[128];
        int k = ordered(rows, nr, full || csv || json, ord, label, unit);
        if (!strcmp(ri.validity, "invalid")) { /* not a measurement: its verdict instead of figures */
            if (csv) {
                fprintf(out, "%lld,\"%s\",%s,%d,\"%s\",,,,,,,,\"invalid: ", (long long)ids[r], ri.model, ri.type, ri.threads,
                        ri.workload);
                for (const char *c = ri.validity_reasons; *c; c++) fprintf(out, *c == '"' ? "\"\"" : "%c", *c);
                fprintf(out, "\"\n");
            } else if (json) {
                fprintf(out, "%s{\"run\": %lld, \"workload\": ", jsonl ? "" : first ? "\n  " : ",\n  ", (long long)ids[r]);
                oom |= jx_write_string(out, ri.workload, strlen(ri.workload));
                fprintf(out, ", \"validity\": \"invalid\", \"reasons\": ");
                oom |= jx_write_string(out, ri.validity_reasons, strlen(ri.validity_reasons));
                fprintf(out, "}%s", jsonl ? "\n" : "");
            } else {
                char word[48];
                fprintf(out, "%s**run %lld**: `%s`: %s: %s. No figure of it is a measurement (`cortex-bench show %lld`"
                             " lists its requests).\n", r ? "\n" : "", (long long)ids[r], ri.workload,
                        show_validity_word(word, sizeof word, "invalid", out), ri.validity_reasons, (long long)ids[r]);
            }
            first = 0;
            continue;
        }
        if (!csv && !json && ri.endpoint[0]) /* over HTTP: the server, not our threads */
            fprintf(out, "%s**run %lld**: %s at %s (HTTP), `%s`, %s loop, median of %d repetitions\n\n"
                         "| metric | median | min | max | ± sd |\n| --- | ---: | ---: | ---: | ---: |\n",
                    r ? "\n" : "", (long long)ids[r], ri.model, ri.endpoint, ri.workload, ri.mode, ri.reps);
        else if (!csv && !json)
            fprintf(out, "%s**run %lld**: %s (%s), %d threads, `%s`, %s loop, median of %d repetitions\n\n"
                         "| metric | median | min | max | ± sd |\n| --- | ---: | ---: | ---: | ---: |\n",
                    r ? "\n" : "", (long long)ids[r], ri.model, ri.type, ri.threads, ri.workload, ri.mode, ri.reps);
        for (int i = 0; i < k; i++) {
            const sum_row *w = ord[i];
            if (csv) {
                fprintf(out, "%lld,\"%s\",%s,%d,\"%s\",%s,%s,%.6g,%.6g,%.6g,%.6g,%d,%s\n", (long long)ids[r], ri.model,
                        ri.type, ri.threads, ri.workload, w->name, unit[i], w->med, w->min, w->max, w->sd, w->cnt,
                        ri.validity[0] ? ri.validity : "unknown");
            } else if (json) {
                fprintf(out, "%s{\"run\": %lld, \"model\": ", jsonl ? "" : first ? "\n  " : ",\n  ", (long long)ids[r]);
                oom |= jx_write_string(out, ri.model, strlen(ri.model));
                fprintf(out, ", \"type\": \"%s\", \"threads\": %d, \"workload\": ", ri.type, ri.threads);
                oom |= jx_write_string(out, ri.workload, strlen(ri.workload));
                fprintf(out, ", \"metric\": \"%s\", \"unit\": \"%s\", \"median\": ", w->name, unit[i]);
                jx_write_number(out, w->med);
                fprintf(out, ", \"min\": ");
                jx_write_number(out, w->min);
                fprintf(out, ", \"max\": ");
                jx_write_number(out, w->max);
                fprintf(out, ", \"stddev\": ");
                jx_write_number(out, w->sd);
                fprintf(out, ", \"n\": %d, \"validity\": \"%s\"}%s", w->cnt, ri.validity[0] ? ri.validity : "unknown",
                        jsonl ? "\n" : "");
            } else {
                fprintf(out, "| %s%s%s%s | %.2f | %.2f | %.2f | %.2f |\n", label[i], *unit[i] ? " (" : "", unit[i],
                        *unit[i] ? ")" : "", w->med, w->min, w->max, w->sd);
            }
            first = 0;
        }
    }
    if (json) fprintf(out, "%s", jsonl ? "" : "\n]\n");
    else if (!csv) show_roofline(db, ids, n_ids, out);
    if (oom) {
        return hx_fail(err, errlen, "show: out of memory writing JSON");
    }
    return 0;
}

/* Text on one markdown line: '|' escaped, newlines flattened. */
void show_md_inline(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '|') fputs("\\|", f);
        else if (*s == '\n' || *s == '\r') fputc(' ', f);
        else fputc(*s, f);
    }
}

/* The workload's sidecar, when the run stored one: the command that made it,
 * then its other scalar fields as key=value (the file hash is already shown). */
static void show_workload_meta(store *st, int64_t id, FILE *out) {
    char *meta = store_run_workload_meta(st, id);
    json_t *o;
    char err[256];
    if (!meta || jx_parse_object(meta, strlen(meta), &o, NULL, err, sizeof err) != 0) {
        free(meta);
        return;
    }
    const json_t *cmd = json_object_get(o, "cmdline");
    if (json_is_string(cmd)) {
        fprintf(out, "- workload made by `");
        show_md_inline(out, json_string_value(cmd));
        fprintf(out, "`\n");
    }
    fprintf(out, "- workload parameters (sidecar):");
    const char *key;
    json_t *f;
    json_object_foreach(o, key, f) { /* in the file's order: jansson keeps insertion order */
        if (f == cmd || !strcmp(key, "trace_sha256") || json_is_object(f) || json_is_array(f)) continue;
        char num[40];
        const char *v = num;
        if (json_is_string(f)) v = json_string_value(f);
        else if (json_is_number(f)) jx_format_number(num, sizeof num, json_number_value(f));
        else if (json_is_boolean(f)) v = json_is_true(f) ? "true" : "false";
        else v = "null";
        fprintf(out, " ");
        show_md_inline(out, key);
        fprintf(out, "=");
        show_md_inline(out, v);
    }
    fprintf(out, "\n");
    json_decref(o);
    free(meta);
}

/* See show.h. */
int show_run_facts(store *s, int64_t id, FILE *out) {
    store_run r;
    int found = store_run_load(s, id, &r);
    if (found <= 0) return found < 0 ? -1 : 1;
    char word[48];
    if (!strcmp(r.status, "complete") && r.validity[0]) {
        fprintf(out, "- %s", show_validity_word(word, sizeof word, r.validity, out));
        if (r.validity_reasons[0]) {
            fprintf(out, "%s", !strcmp(r.validity, "invalid") ? ": " : " (");
            show_md_inline(out, r.validity_reasons);
            fprintf(out, "%s", !strcmp(r.validity, "invalid") ? "; not a measurement: no figure of it is shown, gated,"
                                                                 " trended or used as a baseline" : ")");
        }
        fprintf(out, "\n");
    }
    fprintf(out, "- status **%s**, started %s, finished %s%s", r.status, r.started, *r.finished ? r.finished : "(never)",
            *r.error ? ", error: " : "");
    show_md_inline(out, r.error);
    fprintf(out, "\n- workload `%s` (%s, sha256 %.16s), %s loop, concurrency %d\n", r.workload, r.kind, r.workload_hash,
            r.mode, r.concurrency);
    if (r.endpoint[0]) {
        fprintf(out, "- measured over HTTP: model `%s` at `%s`, server ", r.model, r.endpoint);
        show_md_inline(out, r.server);
        fprintf(out, "\n- server build ");
        show_md_inline(out, r.server_build[0] ? r.server_build : "unknown (no system_fingerprint, /props or /version)");
        fprintf(out, ", prompt cache %s\n", !strcmp(r.server_cache, "on") ? "on (--server-cache on: the server's own policy)"
                                        : !strcmp(r.server_cache, "off") ? "off (each request asked it not to reuse prompts)"
                                                                          : "not asked (recorded before schema v12)");
    } else
        fprintf(out, "- model `%s` (%s, %lld parameters, sha256 %.16s)\n", r.model_path, r.type, (long long)r.model_params,
                r.model_sha256);
    if (r.endpoint[0]) fprintf(out, "- repetitions %d (+%d warm-up)\n", r.reps, r.warmup);
    else
        fprintf(out, "- threads %d, repetitions %d (+%d warm-up), context %d, %s %s\n", r.threads, r.reps, r.warmup, r.n_ctx,
                !strcmp(r.pinned, "compact") || !strcmp(r.pinned, "spread") || !strcmp(r.pinned, "none")
                    ? "threads placed" : "pinned to", /* a --pin policy, or a CPU list */
                *r.pinned ? r.pinned : "no CPUs (not pinned)");
    if (r.uuid[0])
        fprintf(out, "- run %s, testbed %s, NUMA policy %s\n", r.uuid,
                r.testbed[0] ? r.testbed : "not named (recorded before schema v13)", r.numa[0] ? r.numa : "default");
    fprintf(out, "- build %s `%s`, commit %s%s, kernels %s, counters %s\n", r.build_type, r.build_flags, r.commit,
            r.dirty ? " (dirty)" : "", *r.isa ? r.isa : "unknown (recorded before schema v5)", r.counter_mode);
    fprintf(out, "- environment %.12s: %s [%s], %d CPUs, %.1f GiB, %s, %s, governor %s", r.fingerprint, r.cpu_model,
            r.isa_flags, r.logical_cores, (double)r.mem_bytes / (1 << 30), r.kernel, r.compiler, r.governor);
    if (r.cpu_vendor[0]) { /* the CPU's identity, schema v12 (-1: unknown) */
        fprintf(out, "; %s", r.cpu_vendor);
        const char *what[] = {"family", "model", "stepping"};
        int v[] = {r.cpu_family, r.cpu_model_id, r.cpu_stepping};
        for (int i = 0; i < 3; i++) fprintf(out, v[i] >= 0 ? " %s %d" : " %s unknown", what[i], v[i]);
        fprintf(out, ", microcode %s", r.microcode[0] ? r.microcode : "unknown");
    }
    fprintf(out, "\n");
    if (r.affinity[0]) { /* the machine as the run had it, schema v12 */
        char quota[32] = "none";
        if (r.cgroup_cpus > 0) snprintf(quota, sizeof quota, "%g CPUs", r.cgroup_cpus);
        fprintf(out, "- during the run: CPUs %s (%d allowed), cgroup CPU quota %s, transparent huge pages %s, load %s before,"
                     " %s after\n", r.affinity, r.cpus_allowed, quota, r.thp[0] ? r.thp : "unknown",
                r.load_before[0] ? r.load_before : "unknown", r.load_after[0] ? r.load_after : "unknown");
    }
    if (r.spec_config[0]) { /* schema v14: it speculated (a configuration of its own: compare refuses a run without) */
        fprintf(out, "- speculative decoding `%s`, drafter ", r.spec_config);
        show_md_inline(out, r.spec_drafter[0] ? r.spec_drafter : "unknown");
        fprintf(out, "\n");
    }
    if (*r.cmdline) fprintf(out, "- command `%s`\n", r.cmdline);
    show_workload_meta(s, id, out);
    return 0;
}

/* See show.h. */
void show_items(store *s, int64_t id, FILE *out) {
    store_run r;
    store_item *it;
    int n;
    if (store_run_load(s, id, &r) != 1 || store_items_load(s, &r, &it, &n)) return;
    int valid = !strcmp(r.validity, "valid") || !r.validity[0];
    fprintf(out, "### requests (%s)\n\n| item | adapter | outcome | prompt tok | gen tok / asked | queue ms | TTFT ms |"
                 " TPOT ms | TPS | canary |\n| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n",
            valid ? "mean over repetitions" : "outcomes only: the run is INVALID, its timings are no measurement");
    for (int i = 0; i < n; i++) {
        const store_item *q = &it[i];
        char ad[16] = "", asked[16] = "";
        if (q->adapter >= 0) snprintf(ad, sizeof ad, "%d", q->adapter);
        if (q->max_tokens > 0) snprintf(asked, sizeof asked, " / %d", q->max_tokens);
        if ((*q->error && q->n_err == q->n) || !valid) {
            fprintf(out, "| %s | %s | %s | %d | %.0f%s | | | | | %s%s |\n", q->item, ad, q->outcome, q->prompt_tokens,
                    isnan(q->gen_tokens) ? 0 : q->gen_tokens, asked, *q->error ? "error: " : q->hash, q->error);
            continue;
        }
        char queue[24], ttft[24], tpot[24], tps[24]; /* "-" where not measured (no queue over HTTP, one chunk) */
        fprintf(out, "| %s | %s | %s | %d | %.0f%s | %s | %s | %s | %s | %s%s%s%s |\n", q->item, ad, q->outcome,
                q->prompt_tokens, q->gen_tokens, asked, show_num(queue, sizeof queue, "%.2f", q->queue),
                show_num(ttft, sizeof ttft, "%.2f", q->ttft), show_num(tpot, sizeof tpot, "%.2f", q->tpot),
                show_num(tps, sizeof tps, "%.2f", q->tps), q->hash, q->stable == 0 ? " (UNSTABLE)" : "",
                *q->error ? ", error: " : "", q->error);
    }
    free(it);
    fprintf(out, "\n");
}

/* The counters per phase (total first), missing ones with their reason. */
static void show_counters(store *s, int64_t id, FILE *out) {
    store_counter *k;
    int n;
    if (store_counters_load(s, id, &k, &n)) return;
    static const int order[3] = {2, 0, 1}; /* total, prefill, decode */
    int any = 0;
    for (int o = 0; o < 3; o++) {
        int p = order[o];
        for (int i = 0; i < n; i++) {
            if (!k[i].seen[p]) continue;
            if (!any++) fprintf(out, "### counters (mean over repetitions)\n\n| phase | counter | value | unit |\n| --- | --- | ---: | --- |\n");
            if (k[i].ok[p]) /* counts are whole; joules (energy-pkg, energy-ram) keep their fraction */
                fprintf(out, "| %s | %s | %.*f | %s |\n", STORE_PHASES[p], k[i].name, strcmp(k[i].unit, "J") ? 0 : 3,
                        k[i].v[p], k[i].unit);
            else fprintf(out, "| %s | %s | missing | %s |\n", STORE_PHASES[p], k[i].name, k[i].reason[p]);
        }
    }
    free(k);
    if (any) fprintf(out, "\n");
}

/* See show.h. */
void show_adapters(store *s, int64_t id, FILE *out) {
    store_adapter *a;
    int n;
    if (store_adapters_load(s, id, &a, &n)) return;
    for (int i = 0; i < n; i++) {
        if (!i)
            fprintf(out, "### per adapter (all repetitions; ms, output tok/s)\n\n| adapter | requests | TTFT p50 | TTFT p90 |"
                         " TTFT p99 | ITL p50 | ITL p90 | ITL p99 | e2e p50 | tokens | output tok/s |\n"
                         "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
        char tok[32] = "-", tps[32], f[7][24]; /* "-" where not measured (no ITL: one chunk each) */
        if (a[i].gen_tokens >= 0) snprintf(tok, sizeof tok, "%lld", (long long)a[i].gen_tokens);
        const double v[7] = {a[i].ttft_p50, a[i].ttft_p90, a[i].ttft_p99, a[i].itl_p50, a[i].itl_p90, a[i].itl_p99,
                             a[i].e2e_p50};
        for (int k = 0; k < 7; k++) show_num(f[k], sizeof f[k], "%.2f", v[k]);
        fprintf(out, "| %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", a[i].adapter, a[i].requests, f[0], f[1],
                f[2], f[3], f[4], f[5], f[6], tok, show_num(tps, sizeof tps, "%.2f", a[i].output_tps));
    }
    free(a);
    if (n) fprintf(out, "\n");
}

/* `cortex-bench show RUN`: md (facts, summary, items, adapters, KV, counters), or csv/json of the summary. */
int show_run(store *s, int64_t id, const char *fmt, FILE *out, char *err, size_t errlen) {
    if (strcmp(fmt, "md")) return show_table(s, &id, 1, fmt, 1, out, err, errlen);
    fprintf(out, "## run %lld\n\n", (long long)id);
    int rc = show_run_facts(s, id, out);
    fprintf(out, "\n");
    if (rc) {
        return hx_fail(err, errlen, rc > 0 ? "no run %lld in the database" : "show: query failed", (long long)id);
    }
    show_verdict(s, id, out);
    store_run r;
    if (store_run_load(s, id, &r) == 1 && !strcmp(r.validity, "invalid")) { /* its outcomes; no figure */
        fprintf(out, "\n");
        show_items(s, id, out);
        return 0;
    }
    fprintf(out, "\n### summary (over repetitions)\n\n");
    if (show_table(s, &id, 1, "md", 1, out, err, errlen)) return -1;
    fprintf(out, "\n");
    show_items(s, id, out);
    show_adapters(s, id, out);
    show_kv(s, id, out);
    show_server(s, id, out);
    show_spec(s, id, out);
    show_counters(s, id, out);
    return 0;
}
