/*
 * show.c - read runs back out of the database for people and tools:
 * `cortex-bench list`, `cortex-bench show RUN`, and the llama-bench-like table
 * `cortex-bench run` prints at the end (markdown, csv or json).
 */
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "json.h"
#include "roofline.h"
#include "show.h"
#include "store.h"

/* A text column, never NULL. */
static const char *col(sqlite3_stmt *st, int i) {
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? (const char *)t : "";
}

int store_list(store *s, FILE *out, int limit, char *err, size_t n) {
    sqlite3_stmt *st;
    const char *sql =
        "SELECT r.id, r.started_at, r.status, r.workload, r.model_name, r.model_type, r.threads, r.reps,"
        " substr(r.git_commit, 1, 10), r.git_dirty,"
        " (SELECT median FROM summary WHERE run_id = r.id AND name IN ('tps', 'output_tps') ORDER BY name = 'tps' DESC LIMIT 1)"
        " FROM runs r ORDER BY r.id DESC LIMIT ?";
    if (sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL) != SQLITE_OK) {
        snprintf(err, n, "list: %s", sqlite3_errmsg(store_db(s)));
        return -1;
    }
    sqlite3_bind_int(st, 1, limit);
    fprintf(out, "| id | started (UTC) | status | workload | model | type | threads | reps | commit | TPS (median) |\n");
    fprintf(out, "| ---: | --- | --- | --- | --- | --- | ---: | ---: | --- | ---: |\n");
    while (sqlite3_step(st) == SQLITE_ROW) {
        char tps[32] = "";
        if (sqlite3_column_type(st, 10) != SQLITE_NULL) snprintf(tps, sizeof tps, "%.2f", sqlite3_column_double(st, 10));
        fprintf(out, "| %lld | %.19s | %s | %s | %s | %s | %d | %d | %s%s | %s |\n", (long long)sqlite3_column_int64(st, 0),
                col(st, 1), col(st, 2), col(st, 3), col(st, 4), col(st, 5), sqlite3_column_int(st, 6),
                sqlite3_column_int(st, 7), col(st, 8), sqlite3_column_int(st, 9) ? "+dirty" : "", tps);
    }
    sqlite3_finalize(st);
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
    {"ttft_ms_p50", "TTFT p50", "ms"}, {"ttft_ms_p90", "TTFT p90", "ms"}, {"ttft_ms_p99", "TTFT p99", "ms"},
    {"tpot_ms_p50", "TPOT p50", "ms"}, {"tpot_ms_p90", "TPOT p90", "ms"}, {"tpot_ms_p99", "TPOT p99", "ms"},
    {"itl_ms_p50", "ITL p50", "ms"}, {"itl_ms_p90", "ITL p90", "ms"}, {"itl_ms_p99", "ITL p99", "ms"},
    {"e2e_ms_p50", "end-to-end p50", "ms"}, {"e2e_ms_p99", "end-to-end p99", "ms"},
    {"queue_ms_p50", "queue wait p50", "ms"}, {"queue_ms_p99", "queue wait p99", "ms"},
    {"peak_rss_mib", "peak RSS", "MiB"},
    {"prompt_tokens", "prompt tokens", ""}, {"gen_tokens", "generated tokens", ""},
    {"requests", "requests", ""}, {"errors", "failed requests", ""},
    {"decode_ctx_mean", "KV positions attended per decode step (mean)", ""},
    {"bytes_per_token", "bytes read per decoded token", "B"},
    {"roofline_tps", "bandwidth roofline for decode", "tok/s"},
    {"roofline_frac", "decode / roofline", "fraction"},
};
#define NHEAD (int)(sizeof HEADLINE / sizeof HEADLINE[0])

/* A summary row of one run. */
typedef struct sum_row { char name[40]; double med, min, max, sd; int cnt; } sum_row;

/* Identity of a run as the tables show it. */
typedef struct run_id_info {
    char model[128], type[16], wl[256], mode[16];
    int threads, reps;
    double params, bytes;
} run_id_info;

/* Read a run's identity and its summary rows (at most `cap`); returns the row count or -1. */
static int load_run(sqlite3 *db, int64_t id, run_id_info *ri, sum_row *rows, int cap) {
    sqlite3_stmt *st;
    memset(ri, 0, sizeof *ri);
    if (sqlite3_prepare_v2(db, "SELECT model_name, model_type, threads, workload, mode, reps, model_params, model_bytes"
                               " FROM runs WHERE id = ?", -1, &st, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_int64(st, 1, id);
    if (sqlite3_step(st) == SQLITE_ROW) {
        snprintf(ri->model, sizeof ri->model, "%s", col(st, 0));
        snprintf(ri->type, sizeof ri->type, "%s", col(st, 1));
        ri->threads = sqlite3_column_int(st, 2);
        snprintf(ri->wl, sizeof ri->wl, "%s", col(st, 3));
        snprintf(ri->mode, sizeof ri->mode, "%s", col(st, 4));
        ri->reps = sqlite3_column_int(st, 5);
        ri->params = sqlite3_column_double(st, 6);
        ri->bytes = sqlite3_column_double(st, 7);
    }
    sqlite3_finalize(st);
    if (sqlite3_prepare_v2(db, "SELECT name, median, min, max, stddev, n FROM summary WHERE run_id = ? ORDER BY rowid",
                           -1, &st, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_int64(st, 1, id);
    int n = 0;
    while (sqlite3_step(st) == SQLITE_ROW && n < cap) {
        sum_row *w = &rows[n++];
        snprintf(w->name, sizeof w->name, "%s", col(st, 0));
        w->med = sqlite3_column_double(st, 1);
        w->min = sqlite3_column_double(st, 2);
        w->max = sqlite3_column_double(st, 3);
        w->sd = sqlite3_column_double(st, 4);
        w->cnt = sqlite3_column_int(st, 5);
    }
    sqlite3_finalize(st);
    return n;
}

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
static void show_roofline(sqlite3 *db, const int64_t *ids, int n_ids, FILE *out) {
    int any = 0, hint = 0;
    for (int r = 0; r < n_ids; r++) {
        char line[512];
        int rc = roof_describe(db, ids[r], line, sizeof line);
        if (rc == 1 && n_ids > 1) fprintf(out, "%sroofline, run %lld: %s\n", any++ ? "" : "\n", (long long)ids[r], line);
        else if (rc == 1) fprintf(out, "\nroofline: %s\n", line);
        hint |= rc < 0;
    }
    if (hint) fprintf(out, "\n%s\n", ROOF_HINT);
}

/* llama-bench's table, for synthetic tests: one line per run. */
static void synthetic_md(sqlite3 *db, const int64_t *ids, int n_ids, FILE *out) {
    fprintf(out, "| model | size | params | type | threads | test | t/s |\n| --- | ---: | ---: | --- | ---: | --- | ---: |\n");
    for (int r = 0; r < n_ids; r++) {
        run_id_info ri;
        sum_row rows[128];
        int n = load_run(db, ids[r], &ri, rows, 128);
        const sum_row *t = n > 0 ? find_row(rows, n, "tps") : NULL;
        char tps[48] = "failed (see show)";
        if (t) snprintf(tps, sizeof tps, "%.2f ± %.2f", t->med, t->sd);
        fprintf(out, "| %s | %.2f MiB | %.2f M | %s | %d | %s | %s |\n", ri.model, ri.bytes / (1 << 20), ri.params / 1e6,
                ri.type, ri.threads, ri.wl, tps);
    }
}

int show_table(store *s, const int64_t *ids, int n_ids, const char *fmt, int full, FILE *out, char *err, size_t n) {
    int json = !strcmp(fmt, "json"), csv = !strcmp(fmt, "csv");
    if (!json && !csv && strcmp(fmt, "md")) {
        snprintf(err, n, "unknown output format '%s' (md, csv, json)", fmt);
        return -1;
    }
    sqlite3 *db = store_db(s);
    int all_synthetic = 1;
    for (int r = 0; r < n_ids; r++) {
        run_id_info ri;
        sum_row dummy[1];
        load_run(db, ids[r], &ri, dummy, 0);
        all_synthetic &= !strcmp(ri.mode, "synthetic");
    }
    if (!csv && !json && all_synthetic && !full) {
        synthetic_md(db, ids, n_ids, out);
        show_roofline(db, ids, n_ids, out);
        return 0;
    }
    if (csv) fprintf(out, "run,model,type,threads,workload,metric,unit,median,min,max,stddev,n\n");
    else if (json) fprintf(out, "[");
    int first = 1;
    for (int r = 0; r < n_ids; r++) {
        run_id_info ri;
        sum_row rows[128];
        int nr = load_run(db, ids[r], &ri, rows, 128);
        if (nr < 0) {
            snprintf(err, n, "show: %s", sqlite3_errmsg(db));
            return -1;
        }
        const sum_row *ord[128];
        const char *label[128], *unit[128];
        int k = ordered(rows, nr, full || csv || json, ord, label, unit);
        if (!csv && !json)
            fprintf(out, "%s**run %lld**: %s (%s), %d threads, `%s`, %s loop, median of %d repetitions\n\n"
                         "| metric | median | min | max | ± sd |\n| --- | ---: | ---: | ---: | ---: |\n",
                    r ? "\n" : "", (long long)ids[r], ri.model, ri.type, ri.threads, ri.wl, ri.mode, ri.reps);
        for (int i = 0; i < k; i++) {
            const sum_row *w = ord[i];
            if (csv) {
                fprintf(out, "%lld,\"%s\",%s,%d,\"%s\",%s,%s,%.6g,%.6g,%.6g,%.6g,%d\n", (long long)ids[r], ri.model,
                        ri.type, ri.threads, ri.wl, w->name, unit[i], w->med, w->min, w->max, w->sd, w->cnt);
            } else if (json) {
                fprintf(out, "%s\n  {\"run\": %lld, \"model\": ", first ? "" : ",", (long long)ids[r]);
                json_write_string(out, ri.model, strlen(ri.model));
                fprintf(out, ", \"type\": \"%s\", \"threads\": %d, \"workload\": ", ri.type, ri.threads);
                json_write_string(out, ri.wl, strlen(ri.wl));
                fprintf(out, ", \"metric\": \"%s\", \"unit\": \"%s\", \"median\": ", w->name, unit[i]);
                json_write_number(out, w->med);
                fprintf(out, ", \"min\": ");
                json_write_number(out, w->min);
                fprintf(out, ", \"max\": ");
                json_write_number(out, w->max);
                fprintf(out, ", \"stddev\": ");
                json_write_number(out, w->sd);
                fprintf(out, ", \"n\": %d}", w->cnt);
            } else {
                fprintf(out, "| %s%s%s%s | %.2f | %.2f | %.2f | %.2f |\n", label[i], *unit[i] ? " (" : "", unit[i],
                        *unit[i] ? ")" : "", w->med, w->min, w->max, w->sd);
            }
            first = 0;
        }
    }
    if (json) fprintf(out, "\n]\n");
    else if (!csv) show_roofline(db, ids, n_ids, out);
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

int show_run_facts(sqlite3 *db, int64_t id, FILE *out) {
    sqlite3_stmt *st;
    const char *sql =
        "SELECT r.status, r.started_at, r.finished_at, r.error, r.workload, r.workload_kind, r.workload_hash, r.mode,"
        " r.concurrency, r.model_path, r.model_sha256, r.model_type, r.model_params, r.threads, r.reps, r.warmup,"
        " r.n_ctx, r.pinned, r.git_commit, r.git_dirty, r.build_type, r.build_flags, r.counter_mode,"
        " e.cpu_model, e.isa_flags, e.logical_cores, e.mem_bytes, e.kernel, e.compiler, e.governor, e.fingerprint,"
        " r.cmdline, r.isa"
        " FROM runs r LEFT JOIN environments e ON e.id = r.env_id WHERE r.id = ?";
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return -1;
    sqlite3_bind_int64(st, 1, id);
    if (sqlite3_step(st) != SQLITE_ROW) {
        sqlite3_finalize(st);
        return 1;
    }
    fprintf(out, "- status **%s**, started %s, finished %s%s", col(st, 0), col(st, 1),
            *col(st, 2) ? col(st, 2) : "(never)", *col(st, 3) ? ", error: " : "");
    show_md_inline(out, col(st, 3));
    fprintf(out, "\n- workload `%s` (%s, sha256 %.16s), %s loop, concurrency %d\n", col(st, 4), col(st, 5), col(st, 6),
            col(st, 7), sqlite3_column_int(st, 8));
    fprintf(out, "- model `%s` (%s, %lld parameters, sha256 %.16s)\n", col(st, 9), col(st, 11),
            (long long)sqlite3_column_int64(st, 12), col(st, 10));
    fprintf(out, "- threads %d, repetitions %d (+%d warm-up), context %d, pinned to %s\n", sqlite3_column_int(st, 13),
            sqlite3_column_int(st, 14), sqlite3_column_int(st, 15), sqlite3_column_int(st, 16),
            *col(st, 17) ? col(st, 17) : "no CPUs (not pinned)");
    fprintf(out, "- build %s `%s`, commit %s%s, kernels %s, counters %s\n", col(st, 20), col(st, 21), col(st, 18),
            sqlite3_column_int(st, 19) ? " (dirty)" : "", *col(st, 32) ? col(st, 32) : "unknown (recorded before schema v5)",
            col(st, 22));
    fprintf(out, "- environment %.12s: %s [%s], %d CPUs, %.1f GiB, %s, %s, governor %s\n", col(st, 30), col(st, 23),
            col(st, 24), sqlite3_column_int(st, 25), (double)sqlite3_column_int64(st, 26) / (1 << 30), col(st, 27),
            col(st, 28), col(st, 29));
    if (*col(st, 31)) fprintf(out, "- command `%s`\n", col(st, 31));
    sqlite3_finalize(st);
    return 0;
}

/* Per item (prompt / trace entry / test): medians over repetitions. */
static void show_items(sqlite3 *db, int64_t id, FILE *out) {
    sqlite3_stmt *st;
    const char *sql =
        "SELECT q.item, max(q.adapter), max(q.prompt_tokens), max(q.gen_tokens), avg(q.queue_ms), avg(q.ttft_ms),"
        " avg(q.tpot_ms), avg(q.gen_tokens / ((q.e2e_ms - q.queue_ms) / 1000.0)), max(q.error), c.token_hash, c.stable"
        " FROM requests q LEFT JOIN canaries c ON c.run_id = q.run_id AND c.item = q.item"
        " WHERE q.run_id = ? GROUP BY q.idx ORDER BY q.idx";
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return;
    sqlite3_bind_int64(st, 1, id);
    fprintf(out, "### requests (mean over repetitions)\n\n| item | adapter | prompt tok | gen tok | queue ms | TTFT ms |"
                 " TPOT ms | TPS | canary |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (*col(st, 8)) {
            fprintf(out, "| %s | | %d | | | | | | error: %s |\n", col(st, 0), sqlite3_column_int(st, 2), col(st, 8));
            continue;
        }
        char ad[16] = "";
        if (sqlite3_column_int(st, 1) >= 0) snprintf(ad, sizeof ad, "%d", sqlite3_column_int(st, 1));
        fprintf(out, "| %s | %s | %d | %d | %.2f | %.2f | %.2f | %.2f | %s%s |\n", col(st, 0), ad, sqlite3_column_int(st, 2),
                sqlite3_column_int(st, 3), sqlite3_column_double(st, 4), sqlite3_column_double(st, 5),
                sqlite3_column_double(st, 6), sqlite3_column_double(st, 7), col(st, 9),
                sqlite3_column_type(st, 10) != SQLITE_NULL && !sqlite3_column_int(st, 10) ? " (UNSTABLE)" : "");
    }
    sqlite3_finalize(st);
    fprintf(out, "\n");
}

static void show_counters(sqlite3 *db, int64_t id, FILE *out) {
    sqlite3_stmt *st;
    const char *sql = "SELECT phase, name, unit, status, avg(value), max(reason) FROM counters WHERE run_id = ?"
                      " GROUP BY phase, name ORDER BY phase DESC, rowid";
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return;
    sqlite3_bind_int64(st, 1, id);
    int any = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (!any++) fprintf(out, "### counters (mean over repetitions)\n\n| phase | counter | value | unit |\n| --- | --- | ---: | --- |\n");
        if (!strcmp(col(st, 3), "ok"))
            fprintf(out, "| %s | %s | %.0f | %s |\n", col(st, 0), col(st, 1), sqlite3_column_double(st, 4), col(st, 2));
        else
            fprintf(out, "| %s | %s | missing | %s |\n", col(st, 0), col(st, 1), col(st, 5));
    }
    sqlite3_finalize(st);
    if (any) fprintf(out, "\n");
}

void show_adapters(sqlite3 *db, int64_t id, FILE *out) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT * FROM adapter_stats WHERE run_id = ? ORDER BY adapter", -1, &st, NULL) != SQLITE_OK)
        return;
    sqlite3_bind_int64(st, 1, id);
    int any = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (!any++)
            fprintf(out, "### per adapter (all repetitions)\n\n| adapter | requests | TTFT p50 | TTFT p90 | TTFT p99 |"
                         " ITL p50 | ITL p90 | ITL p99 | e2e p50 |\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
        fprintf(out, "| %d | %d |", sqlite3_column_int(st, 1), sqlite3_column_int(st, 2));
        for (int c = 3; c <= 9; c++) fprintf(out, " %.2f |", sqlite3_column_double(st, c));
        fprintf(out, "\n");
    }
    sqlite3_finalize(st);
    if (any) fprintf(out, "\n");
}

int store_show(store *s, int64_t id, const char *fmt, FILE *out, char *err, size_t n) {
    if (strcmp(fmt, "md")) return show_table(s, &id, 1, fmt, 1, out, err, n);
    fprintf(out, "## run %lld\n\n", (long long)id);
    int rc = show_run_facts(store_db(s), id, out);
    fprintf(out, "\n");
    if (rc) {
        snprintf(err, n, rc > 0 ? "no run %lld in the database" : "show: query failed", (long long)id);
        return -1;
    }
    fprintf(out, "### summary (over repetitions)\n\n");
    if (show_table(s, &id, 1, "md", 1, out, err, n)) return -1;
    fprintf(out, "\n");
    show_items(store_db(s), id, out);
    show_adapters(store_db(s), id, out);
    show_kv(store_db(s), id, out);
    show_counters(store_db(s), id, out);
    return 0;
}
