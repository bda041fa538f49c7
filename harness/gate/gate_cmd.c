/*
 * gate_cmd.c - `cortex-bench gate`: run the configured suite (wall-clock) or the micro workload under an
 * instruction counter (deterministic), find each run's baseline, judge every
 * configured metric, settle inconclusive ones with more repetitions (within a
 * budget), check the correctness canaries, store the decision, print a verdict
 * table, write JUnit XML and a markdown summary, and exit 0 (pass),
 * 1 (regression), 2 (error) or 3 (deterministic mode, but this machine has no
 * instruction counter for it: no valgrind, and perf_event_open fails with
 * whatever errno, or its counter counts nothing). docs/gates.md explains the statistics.
 */
#include "gate_cmd.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_util.h"
#include "cortex.h"
#include "cortex_env.h"
#include "detmode.h"
#include "env.h"
#include "gate.h"
#include "gatefile.h"
#include "jsonx.h"
#include "run_cmd.h"
#include "sha256.h"
#include "store.h"
#include "store_gate.h"
#include "store_read.h"
#include "validity.h"
#include "version.h"

#define MAX_VERDICTS 256

typedef struct gate_opts {
    const char *model, *baseline, *gate_file, *db, *junit, *summary, *threads, *det_mode;
    const char *baseline_bin; /* wall-clock A/B: measure this binary interleaved with ourselves */
    int deterministic, record_baseline;
    double baseline_instructions; /* deterministic: a count measured elsewhere (ci/baseline.sh) */
} gate_opts;

typedef struct gate_state {
    gate_verdict v[MAX_VERDICTS];
    int n;
    int errors;
    char error[1600];
} gate_state;

static gate_verdict *add_verdict(gate_state *g) { return g->n < MAX_VERDICTS ? &g->v[g->n++] : NULL; }

/* A canary verdict: the item's greedy tokens changed (regressed), or `same`
 * items kept theirs (unchanged). `prefix` is "WORKLOAD/" or "". */
static void add_canary(gate_state *g, const char *prefix, const store_canary_pair *p, int same) {
    gate_verdict *v = add_verdict(g);
    if (!v) return;
    memset(v, 0, sizeof *v);
    v->base_median = v->cand_median = v->change = v->ci_lo = v->ci_hi = v->p = NAN;
    if (p) {
        snprintf(v->metric, sizeof v->metric, "%scanary:%s", prefix, p->item);
        v->v = GATE_REGRESSED;
        snprintf(v->note, sizeof v->note, "greedy tokens changed: %s -> %s (same model file)", *p->base ? p->base : "?",
                 *p->cand ? p->cand : "?");
    } else {
        snprintf(v->metric, sizeof v->metric, "%scanaries", prefix);
        v->v = GATE_UNCHANGED;
        snprintf(v->note, sizeof v->note, "%d items: identical greedy tokens", same);
    }
}

/* Judge canary pairs: any changed item is a regression; otherwise one
 * "unchanged" verdict for the items that kept their tokens. */
static void judge_canary_pairs(gate_state *g, const char *prefix, const store_canary_pair *p, int n) {
    int same = 0, changed = 0;
    for (int i = 0; i < n; i++) {
        if (*p[i].base && !strcmp(p[i].base, p[i].cand)) same++;
        else changed++, add_canary(g, prefix, &p[i], 0);
    }
    if (same && !changed) add_canary(g, prefix, NULL, same);
}

/* Canary verdicts of two runs of the same model file. */
static void judge_canaries(store *s, int64_t base, int64_t cand, const char *wl, gate_state *g) {
    store_canary_pair *p;
    int n;
    char prefix[300];
    snprintf(prefix, sizeof prefix, "%s/", wl);
    if (!store_canary_pairs(s, base, cand, &p, &n)) judge_canary_pairs(g, prefix, p, n);
    free(p);
}

/* Judge every configured metric both runs have, settling inconclusive ones
 * with up to `budget` extra candidate repetitions. */
static void judge_runs(store *s, const gate_conf *c, const gate_opts *o, const char *wl, int64_t base, int64_t cand,
                       gate_state *g, int argc, char **argv) {
    static double bv[GATE_MAX_VALUES], cv[GATE_MAX_VALUES];
    int first = g->n;
    for (int i = 0; i < c->n_metrics; i++) {
        size_t nb = store_metric_values(s, base, c->metrics[i].name, bv, GATE_MAX_VALUES);
        size_t nc = store_metric_values(s, cand, c->metrics[i].name, cv, GATE_MAX_VALUES);
        if (!nb) continue; /* the baseline never had it: nothing to hold the candidate to */
        gate_verdict *v = add_verdict(g);
        if (!v) return;
        gate_judge(&c->metrics[i], bv, nb, cv, nc, c->alpha, c->bootstrap, v);
        if (!nc) { /* the candidate lost a metric the baseline had: its requests failed */
            v->v = GATE_REGRESSED;
            snprintf(v->note, sizeof v->note, "missing in the candidate (its requests failed?)");
        }
    }
    if (g->n == first) {
        snprintf(g->error, sizeof g->error, "%s: no gated metric in both runs %lld and %lld", wl, (long long)base,
                 (long long)cand);
        return;
    }
    /* More failed requests than the baseline is a regression whatever the speed. */
    size_t ne_b = store_metric_values(s, base, "errors", bv, 1), ne_c = store_metric_values(s, cand, "errors", cv, 1);
    if (ne_b && ne_c && cv[0] > bv[0]) {
        gate_verdict *v = add_verdict(g);
        if (v) {
            gate_metric rule = {"errors", 0, 0};
            gate_judge(&rule, bv, 1, cv, 1, c->alpha, c->bootstrap, v);
            v->base_median = bv[0];
            v->cand_median = cv[0];
            v->v = GATE_REGRESSED;
            snprintf(v->note, sizeof v->note, "failed requests: %.0f -> %.0f", bv[0], cv[0]);
        }
    }
    int inconclusive = 0;
    for (int k = first; k < g->n; k++) inconclusive += g->v[k].v == GATE_INCONCLUSIVE;
    if (inconclusive && c->budget > 0 && !o->deterministic) {
        fprintf(stderr, "cortex-bench gate: %s: %d inconclusive metric(s), running %d more repetitions\n", wl,
                inconclusive, c->budget);
        int64_t extra = run_once(o->model, wl, o->db, o->threads, c->budget, 1, argc, argv);
        if (extra < 0) {
            snprintf(g->error, sizeof g->error, "the extra repetitions of %s failed", wl);
            return;
        }
        for (int k = first; k < g->n; k++) {
            if (g->v[k].v != GATE_INCONCLUSIVE) continue;
            const gate_metric *rule = gate_conf_metric(c, g->v[k].metric);
            if (!rule) continue;
            size_t nb = store_metric_values(s, base, rule->name, bv, GATE_MAX_VALUES);
            size_t nc = store_metric_values(s, cand, rule->name, cv, GATE_MAX_VALUES);
            nc += store_metric_values(s, extra, rule->name, cv + nc, GATE_MAX_VALUES - nc);
            gate_judge(rule, bv, nb, cv, nc, c->alpha, c->bootstrap, &g->v[k]);
        }
    }
    for (int k = first; k < g->n; k++) {
        char name[96];
        snprintf(name, sizeof name, "%s/%s", wl, g->v[k].metric);
        snprintf(g->v[k].metric, sizeof g->v[k].metric, "%s", name);
    }
    judge_canaries(s, base, cand, wl, g);
}

/* Deterministic mode: count instructions of the micro workload; store it as a
 * run. Returns the run id, -1 on failure, or DET_EUNAVAIL when this machine
 * has no instruction counter for the asked mode (err says why). */
static int64_t deterministic_run(store *s, const gate_conf *c, const gate_opts *o, double *instr, char *err, size_t n) {
    char self[1024], mode[32];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    if (k <= 0) return snprintf(err, n, "cannot find the cortex-bench binary (/proc/self/exe)"), -1;
    self[k] = 0;
    int rc = det_measure(self, o->model, o->det_mode ? o->det_mode : "auto", c->micro_prompt, c->micro_gen, instr, mode,
                         sizeof mode, err, n);
    if (rc) return rc == DET_EUNAVAIL ? DET_EUNAVAIL : -1;
    run_meta m;
    memset(&m, 0, sizeof m);
    snprintf(m.workload, sizeof m.workload, "micro:p%d,g%d", c->micro_prompt, c->micro_gen);
    snprintf(m.workload_kind, sizeof m.workload_kind, "micro");
    snprintf(m.mode, sizeof m.mode, "deterministic");
    snprintf(m.model_path, sizeof m.model_path, "%s", o->model);
    if (sha256_hex_file(o->model, m.model_sha256, err, n)) return -1;
    m.threads = 1;
    m.reps = 1;
    m.test_prompt = c->micro_prompt;
    m.test_gen = c->micro_gen;
    snprintf(m.git_commit, sizeof m.git_commit, "%s", CORTEX_GIT_COMMIT);
    m.git_dirty = CORTEX_GIT_DIRTY;
    snprintf(m.build_type, sizeof m.build_type, "%s", CORTEX_BUILD_TYPE);
    snprintf(m.build_flags, sizeof m.build_flags, "%s", CORTEX_BUILD_FLAGS);
    snprintf(m.counter_mode, sizeof m.counter_mode, "%s", mode);
    cx_model_params mp; /* the micro child inherits CORTEX_ISA, so it runs these kernels */
    const char *isa = cx_model_params_from_env(&mp, NULL) ? NULL : cx_isa_resolve(mp.isa, NULL);
    snprintf(m.isa, sizeof m.isa, "%s", isa ? isa : "");
    env_info e;
    env_collect(&e);
    /* Instruction counts do not depend on the CPU model the way times do, but
     * the build and the mode do: compare only within the same mode. */
    char key[512];
    snprintf(key, sizeof key, "deterministic|%s|v%d|p%d|g%d|%s|%s|kernels=%s", mode, DET_MICRO_VERSION, c->micro_prompt,
             c->micro_gen, m.model_sha256, m.build_type, m.isa);
    sha256_hex(key, strlen(key), m.compare_key);
    int64_t id;
    if (store_begin_run(s, &m, &e, &id, err, n)) return -1;
    rep_result r;
    memset(&r, 0, sizeof r);
    rep_set_metric(&r, GATE_DET_METRIC, *instr);
    run_verdict counted = {.valid = 1}; /* one count of a workload that either ran whole or failed above */
    if (store_finish_run(s, id, &r, 1, &counted, NULL, err, n)) return -1;
    return id;
}

/* Write the gate decision and its verdicts (store_gate_insert). */
static int64_t store_gate(store *s, const gate_conf *c, const char *mode, int64_t base, int64_t cand, const char *verdict,
                          const gate_state *g) {
    static store_gate_row row;
    static store_verdict_row rows[MAX_VERDICTS];
    memset(&row, 0, sizeof row);
    row.base_run = base;
    row.cand_run = cand;
    snprintf(row.mode, sizeof row.mode, "%s", mode);
    snprintf(row.gate_file, sizeof row.gate_file, "%s", c->path);
    snprintf(row.gate_file_hash, sizeof row.gate_file_hash, "%s", c->sha256);
    snprintf(row.verdict, sizeof row.verdict, "%s", verdict);
    snprintf(row.summary, sizeof row.summary, "%s", g->error);
    for (int i = 0; i < g->n; i++) {
        const gate_verdict *v = &g->v[i];
        store_verdict_row *w = &rows[i];
        memset(w, 0, sizeof *w);
        snprintf(w->metric, sizeof w->metric, "%s", v->metric);
        snprintf(w->direction, sizeof w->direction, "%s", v->higher_is_better ? "higher" : "lower");
        snprintf(w->verdict, sizeof w->verdict, "%s", gate_v_name(v->v));
        snprintf(w->note, sizeof w->note, "%s", v->note);
        w->threshold = v->threshold;
        w->base_median = v->base_median;
        w->cand_median = v->cand_median;
        w->change = v->change;
        w->ci_lo = v->ci_lo;
        w->ci_hi = v->ci_hi;
        w->p = v->p;
        w->n_base = (int)v->n_base;
        w->n_cand = (int)v->n_cand;
    }
    return store_gate_insert(s, &row, rows, g->n);
}

/* A percentage, or "-" for NAN. */
static const char *pct(double x, char *buf, size_t n) {
    if (isnan(x)) snprintf(buf, n, "-");
    else snprintf(buf, n, "%+.2f%%", x * 100);
    return buf;
}

static void print_table(FILE *f, const gate_state *g, const char *mode, const char *verdict) {
    fprintf(f, "## cortex-bench gate (%s): %s\n\n", mode, verdict);
    if (g->error[0]) fprintf(f, "**error:** %s\n\n", g->error);
    fprintf(f, "| metric | base | candidate | change | 95%% CI | p | verdict | note |\n"
               "| --- | ---: | ---: | ---: | --- | ---: | --- | --- |\n");
    for (int i = 0; i < g->n; i++) {
        const gate_verdict *v = &g->v[i];
        char a[32], b[32], c[32], p[32];
        char bm[32], cm[32];
        snprintf(bm, sizeof bm, isnan(v->base_median) ? "-" : "%.6g", v->base_median);
        snprintf(cm, sizeof cm, isnan(v->cand_median) ? "-" : "%.6g", v->cand_median);
        fprintf(f, "| %s | %s | %s | %s | [%s, %s] | %s | **%s** | %s |\n", v->metric, bm, cm,
                pct(v->change, a, sizeof a), pct(v->ci_lo, b, sizeof b), pct(v->ci_hi, c, sizeof c),
                isnan(v->p) ? "-" : (snprintf(p, sizeof p, "%.4f", v->p), p), gate_v_name(v->v), v->note);
    }
}

/* XML-escape into f. */
static void xml(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

static int write_junit(const char *path, const gate_state *g, const char *mode) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    int failures = 0;
    for (int i = 0; i < g->n; i++) failures += g->v[i].v == GATE_REGRESSED;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n  <testsuite name=\"cortex-bench gate (%s)\""
               " tests=\"%d\" failures=\"%d\" errors=\"%d\">\n", mode, g->n + (g->error[0] ? 1 : 0), failures,
            g->error[0] ? 1 : 0);
    for (int i = 0; i < g->n; i++) {
        const gate_verdict *v = &g->v[i];
        char a[32];
        fprintf(f, "    <testcase classname=\"gate.%s\" name=\"", mode);
        xml(f, v->metric);
        fprintf(f, "\">");
        if (v->v == GATE_REGRESSED) {
            fprintf(f, "<failure message=\"regressed %s\">", pct(v->change, a, sizeof a));
            xml(f, v->note);
            fprintf(f, "</failure>");
        } else {
            fprintf(f, "<system-out>%s %s: ", gate_v_name(v->v), pct(v->change, a, sizeof a));
            xml(f, v->note);
            fprintf(f, "</system-out>");
        }
        fprintf(f, "</testcase>\n");
    }
    if (g->error[0]) {
        fprintf(f, "    <testcase classname=\"gate.%s\" name=\"setup\"><error message=\"", mode);
        xml(f, g->error);
        fprintf(f, "\"/></testcase>\n");
    }
    fprintf(f, "  </testsuite>\n</testsuites>\n");
    return fclose(f);
}

/* Values of one metric from a `run -o json` table (one object per line). */
typedef struct ab_values { double v[GATE_MAX_METRICS][GATE_MAX_VALUES]; size_t n[GATE_MAX_METRICS]; } ab_values;

/*
 * Run `bin run ... --reps 1 -o json` in a child process and append each
 * configured metric's value to `out`. Both sides of an A/B comparison go
 * through this same path, so process start-up and model loading treat them alike.
 */
static int ab_rep(const char *bin, const gate_opts *o, const gate_conf *c, const char *wl, const char *db, int warmup,
                  ab_values *out, char *err, size_t n) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' run --model '%s' --workload '%s' --reps 1 --warmup %d -t %s --db '%s' -o json --no-progress",
             bin, o->model, wl, warmup, o->threads ? o->threads : "1", db);
    FILE *p = popen(cmd, "r");
    if (!p) return snprintf(err, n, "cannot start %s", bin), -1;
    char line[4096];
    while (fgets(line, sizeof line, p)) {
        char *b = strchr(line, '{'), *e = strrchr(line, '}');
        if (!b || !e) continue;
        json_t *obj;
        char jerr[128];
        if (jx_parse_object(b, (size_t)(e - b + 1), &obj, NULL, jerr, sizeof jerr)) continue;
        const json_t *m = json_object_get(obj, "metric"), *v = json_object_get(obj, "median");
        for (int k = 0; json_is_string(m) && json_is_number(v) && k < c->n_metrics; k++)
            if (!strcmp(json_string_value(m), c->metrics[k].name) && out->n[k] < GATE_MAX_VALUES)
                out->v[k][out->n[k]++] = json_number_value(v);
        json_decref(obj);
    }
    int st = pclose(p);
    if (st != 0) return snprintf(err, n, "%s run %s failed (status %d)", bin, wl, st), -1;
    return 0;
}

/* A/B canaries: compare each item's greedy-token hash between the newest run
 * of the baseline's database and of the candidate's (same model file). */
static void ab_canaries(const char *dba, const char *dbb, gate_state *g) {
    store *sa = NULL, *sb = NULL;
    store_canary *ca = NULL, *cb = NULL;
    int na = 0, nb = 0;
    char err[256];
    if (!store_open(dba, &sa, err, sizeof err) && !store_open(dbb, &sb, err, sizeof err) &&
        !store_latest_canaries(sa, &ca, &na) && !store_latest_canaries(sb, &cb, &nb)) {
        store_canary_pair *p = calloc((size_t)(na ? na : 1), sizeof *p);
        int n = 0;
        for (int i = 0; p && i < na; i++)
            for (int j = 0; j < nb; j++)
                if (!strcmp(ca[i].item, cb[j].item)) {
                    snprintf(p[n].item, sizeof p[n].item, "%s", ca[i].item);
                    snprintf(p[n].base, sizeof p[n].base, "%s", ca[i].hash);
                    snprintf(p[n].cand, sizeof p[n].cand, "%s", cb[j].hash);
                    n++;
                }
        if (p) judge_canary_pairs(g, "", p, n);
        free(p);
    }
    free(ca);
    free(cb);
    if (sa) store_close(sa);
    if (sb) store_close(sb);
}

/*
 * Wall-clock A/B: candidate (this binary) and baseline binary measured in
 * the same time window, alternating one repetition each (ABAB...), so drift
 * and neighbours' load hit both sides alike. Inconclusive metrics get up to
 * `budget` more pairs.
 */
static void ab_gate(const gate_conf *c, const gate_opts *o, gate_state *g) {
    static ab_values A, B;
    char self[1024], tmp[] = "/tmp/cortex-ab-XXXXXX", dba[1100], dbb[1100], err[512];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    if (k <= 0 || !mkdtemp(tmp)) {
        snprintf(g->error, sizeof g->error, "cannot set up the A/B runs");
        return;
    }
    self[k] = 0;
    snprintf(dba, sizeof dba, "%s/base.db", tmp);
    snprintf(dbb, sizeof dbb, "%s/cand.db", tmp);
    int produced[GATE_MAX_METRICS] = {0};
    for (int w = 0; w < c->n_workloads && !g->error[0]; w++) {
        memset(&A, 0, sizeof A);
        memset(&B, 0, sizeof B);
        int first = g->n, pairs = c->reps;
        for (int r = 0; r < pairs && !g->error[0]; r++) {
            if (ab_rep(o->baseline_bin, o, c, c->workloads[w], dba, r == 0, &A, err, sizeof err) ||
                ab_rep(self, o, c, c->workloads[w], dbb, r == 0, &B, err, sizeof err))
                snprintf(g->error, sizeof g->error, "%s", err);
            if (r == pairs - 1 && pairs == c->reps && !g->error[0]) { /* judge; settle inconclusive ones */
                g->n = first;
                int inconclusive = 0;
                for (int m = 0; m < c->n_metrics; m++) {
                    if (!A.n[m] || !B.n[m]) continue;
                    gate_verdict *v = add_verdict(g);
                    if (!v) break;
                    gate_judge(&c->metrics[m], A.v[m], A.n[m], B.v[m], B.n[m], c->alpha, c->bootstrap, v);
                    inconclusive += v->v == GATE_INCONCLUSIVE;
                }
                if (inconclusive) pairs += c->budget;
            }
        }
        g->n = first;
        for (int m = 0; m < c->n_metrics; m++) produced[m] |= B.n[m] > 0;
        for (int m = 0; m < c->n_metrics && !g->error[0]; m++) {
            if (!A.n[m] || !B.n[m]) continue;
            gate_verdict *v = add_verdict(g);
            if (!v) break;
            gate_judge(&c->metrics[m], A.v[m], A.n[m], B.v[m], B.n[m], c->alpha, c->bootstrap, v);
            char name[96];
            snprintf(name, sizeof name, "%s/%s", c->workloads[w], v->metric);
            snprintf(v->metric, sizeof v->metric, "%s", name);
        }
    }
    if (!g->error[0]) gate_conf_unmeasured(c, produced, g->error, sizeof g->error);
    ab_canaries(dba, dbb, g);
    unlink(dba);
    unlink(dbb);
    char wal[1200];
    snprintf(wal, sizeof wal, "%s-wal", dba); unlink(wal);
    snprintf(wal, sizeof wal, "%s-shm", dba); unlink(wal);
    snprintf(wal, sizeof wal, "%s-wal", dbb); unlink(wal);
    snprintf(wal, sizeof wal, "%s-shm", dbb); unlink(wal);
    rmdir(tmp);
}

static int parse_gate(int argc, char **argv, gate_opts *o) {
    memset(o, 0, sizeof *o);
    o->baseline = "baseline";
    o->gate_file = "ci/gates.conf";
    o->db = CLI_DEFAULT_DB;
    o->baseline_instructions = NAN;
    for (int i = 0; i < argc;) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--record-baseline")) { o->record_baseline = 1; i++; continue; }
        if (!v) return cli_fail(2, "%s needs a value", a);
        if (!strcmp(a, "--model") || !strcmp(a, "-m")) o->model = v;
        else if (!strcmp(a, "--baseline")) o->baseline = v;
        else if (!strcmp(a, "--gate-file")) o->gate_file = v;
        else if (!strcmp(a, "--db")) o->db = v;
        else if (!strcmp(a, "--junit")) o->junit = v;
        else if (!strcmp(a, "--summary")) o->summary = v;
        else if (!strcmp(a, "-t")) o->threads = v;
        else if (!strcmp(a, "--det-mode")) o->det_mode = v;
        else if (!strcmp(a, "--baseline-bin")) o->baseline_bin = v;
        else if (!strcmp(a, "--baseline-instructions")) {
            if (cli_parse_double(a, v, 1, 1e18, &o->baseline_instructions)) return 2;
        } else if (!strcmp(a, "--mode")) {
            if (!strcmp(v, "deterministic")) o->deterministic = 1;
            else if (strcmp(v, "wallclock")) return cli_fail(2, "--mode: '%s' is not wallclock or deterministic", v);
        } else return cli_fail(2, "unknown option '%s' (see cortex-bench --help)", a);
        i += 2;
    }
    if (!o->model) return cli_fail(2, "%s", "gate needs --model MODEL");
    if (o->threads && strchr(o->threads, ','))
        return cli_fail(2, "-t: the gate compares one thread count at a time, not a list ('%s')", o->threads);
    return 0;
}

int cmd_gate(int argc, char **argv) {
    gate_opts o;
    int rc = parse_gate(argc, argv, &o);
    if (rc) return rc;
    gate_conf c;
    char err[512];
    if (gate_conf_load(o.gate_file, &c, err, sizeof err)) return cli_fail(2, "%s", err);
    cli_ensure_default_dir(o.db);
    store *s;
    if (store_open(o.db, &s, err, sizeof err)) return cli_fail(2, "%s", err);
    static gate_state g;
    memset(&g, 0, sizeof g);
    const char *mode = o.deterministic ? "deterministic" : o.baseline_bin ? "wallclock-ab" : "wallclock";
    int64_t last_base = 0, last_cand = 0;
    int unavailable = 0; /* deterministic mode without an instruction counter: exit 3 */
    if (o.deterministic) {
        double instr = 0;
        int64_t cand = deterministic_run(s, &c, &o, &instr, err, sizeof err);
        const gate_metric *rule = gate_conf_metric(&c, GATE_DET_METRIC);
        if (cand < 0) {
            unavailable = cand == DET_EUNAVAIL;
            snprintf(g.error, sizeof g.error, "%s%s", unavailable ? "no instruction counter on this machine: " : "", err);
        } else if (!rule) {
            snprintf(g.error, sizeof g.error, "%s has no 'metric %s' rule", c.path, GATE_DET_METRIC);
        } else {
            double base = o.baseline_instructions;
            int64_t bid = 0;
            if (isnan(base)) {
                bid = gate_resolve(s, o.baseline, cand, err, sizeof err);
                if (bid > 0) store_metric_values(s, bid, GATE_DET_METRIC, &base, 1);
            }
            if (isnan(base) && o.record_baseline) {
                store_tag_run(s, cand, o.baseline);
                printf("no deterministic baseline '%s': tagged run %lld (%.0f instructions) as the baseline\n", o.baseline,
                       (long long)cand, instr);
            } else if (isnan(base)) {
                snprintf(g.error, sizeof g.error, "no deterministic baseline '%s' comparable with run %lld%s%s "
                         "(tag one: cortex-bench tag RUN %s)", o.baseline, (long long)cand, bid < 0 ? ": " : "",
                         bid < 0 ? err : "", o.baseline);
            } else {
                gate_verdict *v = add_verdict(&g);
                gate_judge(rule, &base, 1, &instr, 1, c.alpha, c.bootstrap, v);
                snprintf(v->metric, sizeof v->metric, "micro:p%d,g%d/instructions", c.micro_prompt, c.micro_gen);
            }
            last_base = bid;
            last_cand = cand;
        }
    } else if (o.baseline_bin) {
        ab_gate(&c, &o, &g);
    } else {
        char **full = argv - 2;
        int missing = 0, produced[GATE_MAX_METRICS] = {0}, ran = 0;
        size_t k = 0;
        for (int w = 0; w < c.n_workloads; w++) {
            int64_t cand = run_once(o.model, c.workloads[w], o.db, o.threads, c.reps, 1, argc + 2, full);
            if (cand < 0) {
                snprintf(g.error, sizeof g.error, "the candidate run of %s failed", c.workloads[w]);
                break;
            }
            ran++;
            for (int m = 0; m < c.n_metrics; m++) {
                double x;
                produced[m] |= store_metric_values(s, cand, c.metrics[m].name, &x, 1) > 0;
            }
            int64_t base = gate_resolve(s, o.baseline, cand, err, sizeof err);
            if (base <= 0 && o.record_baseline) { /* first run of a new configuration: it becomes the baseline */
                store_tag_run(s, cand, o.baseline);
                printf("no baseline '%s' for %s: tagged run %lld as the baseline\n", o.baseline, c.workloads[w],
                       (long long)cand);
                continue;
            }
            if (base <= 0) {
                k += (size_t)snprintf(g.error + k, sizeof g.error - k, "%sno baseline '%s' comparable with run %lld (%s)%s%.200s",
                                      missing++ ? "; " : "", o.baseline, (long long)cand, c.workloads[w],
                                      base < 0 ? ": " : "", base < 0 ? err : "");
                if (k >= sizeof g.error) k = sizeof g.error - 1;
                continue;
            }
            judge_runs(s, &c, &o, c.workloads[w], base, cand, &g, argc + 2, full);
            last_base = base;
            last_cand = cand;
        }
        if (missing && k < sizeof g.error)
            snprintf(g.error + k, sizeof g.error - k, " (tag runs with: cortex-bench tag RUN %s, or rerun with --record-baseline)",
                     o.baseline);
        /* a configured metric no workload produced could never fail the gate: refuse (this error replaces any other) */
        if (ran == c.n_workloads) gate_conf_unmeasured(&c, produced, g.error, sizeof g.error);
    }
    int regressed = 0, inconclusive = 0;
    for (int i = 0; i < g.n; i++) {
        regressed += g.v[i].v == GATE_REGRESSED;
        inconclusive += g.v[i].v == GATE_INCONCLUSIVE;
    }
    const char *verdict = g.error[0] ? "error" : regressed ? "regression" : "pass";
    store_gate(s, &c, mode, last_base, last_cand, verdict, &g);
    print_table(stdout, &g, mode, verdict);
    if (inconclusive && !regressed && !g.error[0])
        printf("\n%d metric(s) stayed inconclusive after the extra repetitions: not a proven regression, the gate passes.\n",
               inconclusive);
    if (o.summary) {
        FILE *f = fopen(o.summary, "w");
        if (!f) fprintf(stderr, "cortex-bench: %s: cannot write the summary\n", o.summary);
        else {
            print_table(f, &g, mode, verdict);
            fclose(f);
        }
    }
    if (o.junit && write_junit(o.junit, &g, mode)) fprintf(stderr, "cortex-bench: %s: cannot write JUnit XML\n", o.junit);
    store_close(s);
    if (g.error[0]) fprintf(stderr, "cortex-bench: gate: %s\n", g.error);
    return unavailable ? 3 : g.error[0] ? 2 : regressed ? 1 : 0;
}
