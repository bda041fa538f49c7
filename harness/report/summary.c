/*
 * summary.c - the CI step summary (see summary.h): markdown blocks appended
 * to $GITHUB_STEP_SUMMARY or --step-summary FILE by `run` and `gate`.
 *
 * Appending, never truncating: GitHub gives each step its own file and
 * several commands of one step each add their block. A run that is not a
 * measurement (INVALID, incomplete) shows its verdict and no figure.
 */
#include "summary.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "show.h"
#include "store_read.h"

/* See summary.h. */
FILE *summary_open(const char *path) {
    if (!path) path = getenv("GITHUB_STEP_SUMMARY");
    if (!path || !*path) return NULL;
    FILE *f = fopen(path, "a");
    if (!f) fprintf(stderr, "cortex-bench: warning: step summary %s: cannot append: %s\n", path, strerror(errno));
    return f;
}

/* See summary.h. */
void summary_close(FILE *f) {
    if (!f) return;
    int bad = ferror(f);
    if (fclose(f) || bad) fprintf(stderr, "cortex-bench: warning: the step summary could not be written completely\n");
}

/* "abc1234567" or "abc1234567+dirty", or "unknown". */
static void commit_text(const store_run *r, char *buf, size_t n) {
    snprintf(buf, n, "%.10s%s", r->commit[0] ? r->commit : "unknown", r->dirty ? "+dirty" : "");
}

/* VALID / INVALID (bold) / the status of a run that did not complete. */
static void verdict_cell(FILE *f, const store_run *r) {
    if (strcmp(r->status, "complete")) {
        fprintf(f, "%s", r->status);
        return;
    }
    /* the file is read as markdown, never on a terminal: no colour */
    int invalid = !strcmp(r->validity, "invalid");
    fprintf(f, "%s", invalid ? "**INVALID**" : !strcmp(r->validity, "valid") ? "VALID" : "complete");
    if (r->validity_reasons[0]) {
        fprintf(f, "%s", invalid ? ": " : " (");
        show_md_inline(f, r->validity_reasons);
        fprintf(f, "%s", invalid ? "" : ")");
    }
}

/* A median as a cell ("" when the run has no such metric). */
static void num_cell(FILE *f, store *s, int64_t id, const char *name, const char *fmt) {
    double v = store_metric_median(s, id, name);
    fprintf(f, " |");
    if (isfinite(v)) {
        fprintf(f, " ");
        fprintf(f, fmt, v);
    }
}

/* A --spec run's speculation as a cell: its configuration, then the
 * acceptance and tokens per target pass it measured (each only when it has
 * it: over HTTP a server reports no passes); "" for a run without. */
static void spec_cell(FILE *f, store *s, const store_run *r) {
    double acc = store_metric_median(s, r->id, "spec_acceptance"), tpp = store_metric_median(s, r->id, "spec_tokens_per_pass");
    fprintf(f, " |");
    if (r->spec_config[0]) {
        fprintf(f, " `");
        show_md_inline(f, r->spec_config);
        fprintf(f, "`");
    }
    if (isfinite(acc)) fprintf(f, "%s %.1f%% accepted", r->spec_config[0] ? "," : "", 100 * acc);
    if (isfinite(tpp)) fprintf(f, ", %.2f tokens/pass", tpp);
}

/* See summary.h. */
void summary_runs(FILE *f, store *s, const int64_t *ids, int n_ids) {
    fprintf(f, "\n### cortex-bench run\n\n| run | workload | model | threads | commit | verdict | throughput (tok/s) |"
               " TTFT p50 (ms) | TPOT p50 (ms) | e2e p50 (ms) | requests/s | speculation |\n"
               "| ---: | --- | --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |\n");
    for (int i = 0; i < n_ids; i++) {
        store_run r;
        if (store_run_load(s, ids[i], &r) != 1) continue;
        char commit[48], threads[16] = "server";
        commit_text(&r, commit, sizeof commit);
        if (!r.endpoint[0]) snprintf(threads, sizeof threads, "%d", r.threads);
        fprintf(f, "| %lld | `", (long long)r.id);
        show_md_inline(f, r.workload);
        fprintf(f, "` | ");
        show_md_inline(f, r.model[0] ? r.model : r.model_path);
        fprintf(f, " (%s) | %s | `%s` | ", r.type, threads, commit);
        verdict_cell(f, &r);
        if (!strcmp(r.status, "complete") && !strcmp(r.validity, "valid")) { /* figures of measurements only */
            int synthetic = !strcmp(r.mode, "synthetic");
            num_cell(f, s, r.id, synthetic ? "tps" : "output_tps", "%.2f");
            num_cell(f, s, r.id, "ttft_ms_p50", "%.1f");
            num_cell(f, s, r.id, "tpot_ms_p50", "%.2f");
            num_cell(f, s, r.id, "e2e_ms_p50", "%.1f");
            num_cell(f, s, r.id, "request_rps", "%.3f");
            spec_cell(f, s, &r);
            fprintf(f, " |\n");
        } else
            fprintf(f, " | | | | | | |\n");
    }
}

/* "run N (commit C, VALID)" for the gate's line. */
static void run_phrase(FILE *f, store *s, const char *role, int64_t id) {
    store_run r;
    if (id <= 0 || store_run_load(s, id, &r) != 1) {
        fprintf(f, "%s: no stored run", role);
        return;
    }
    char commit[48];
    commit_text(&r, commit, sizeof commit);
    fprintf(f, "%s: run %lld (`", role, (long long)id);
    show_md_inline(f, r.workload);
    fprintf(f, "`, commit `%s`, ", commit);
    verdict_cell(f, &r);
    fprintf(f, ")");
}

/* See summary.h. */
void summary_gate_runs(FILE *f, store *s, int64_t base, int64_t cand) {
    fprintf(f, "\n");
    run_phrase(f, s, "baseline", base);
    fprintf(f, "; ");
    run_phrase(f, s, "candidate", cand);
    fprintf(f, "\n");
}
