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

#include <assert.h>
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
#include "stats.h"
#include "store_read.h"
#include "summary.h"
#include "validity.h"
#include "version.h"
#include "hx_err.h"

#define MAX_VERDICTS 256

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
    int inconclusive = 0;
    for (int k = first; k < g->n; k++) inconclusive += g->v[k].v == GATE_INCONCLUSIVE;
    if (inconclusive && c->budget > 0 && !o->deterministic) {
        fprintf(stderr, "cortex-bench gate: %s: %d inconclusive metric(s), running %d more repetitions\n", wl,
                inconclusive, c->budget);
        int64_t extra = run_once(o->model, wl, o->db, o->threads, c->budget, 1, argc, argv);
        store_run er;
        if (extra < 0 || store_run_load(s, extra, &er) != 1 || strcmp(er.validity, "valid")) {
            snprintf(g->error, sizeof g->error, "the extra repetitions of %s %s", wl,
                     extra < 0 ? "failed" : "are INVALID: no verdict can use them");
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
    for (int k = first; k < g->n; k++) { /* every verdict names the two runs it judged (the dashboard's links) */
        g->v[k].base_run = base;
        g->v[k].cand_run = cand;
    }
}

/* Deterministic mode: count instructions of the micro workload; store it as a
 * run. Returns the run id, -1 on failure, or DET_EUNAVAIL when this machine
 * has no instruction counter for the asked mode (err says why). */
static int64_t deterministic_run(store *s, const gate_conf *c, const gate_opts *o, double *instr, char *err, size_t errlen) {
    char self[1024], mode[32], isa[32];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    if (k <= 0) return hx_fail(err, errlen, "cannot find the cortex-bench binary (/proc/self/exe)");
    self[k] = 0;
    int rc = det_measure(self, o->model, o->det_mode, c->micro_prompt, c->micro_gen, instr, mode,
                         sizeof mode, isa, sizeof isa, err, errlen);
    if (rc) return rc == DET_EUNAVAIL ? DET_EUNAVAIL : -1;
    run_meta m;
    memset(&m, 0, sizeof m);
    snprintf(m.workload, sizeof m.workload, "micro:p%d,g%d", c->micro_prompt, c->micro_gen);
    snprintf(m.workload_kind, sizeof m.workload_kind, "micro");
    snprintf(m.mode, sizeof m.mode, "deterministic");
    snprintf(m.model_path, sizeof m.model_path, "%s", o->model);
    if (sha256_hex_file(o->model, m.model_sha256, err, errlen)) return -1;
    m.threads = 1;
    m.reps = 1;
    m.test_prompt = c->micro_prompt;
    m.test_gen = c->micro_gen;
    snprintf(m.git_commit, sizeof m.git_commit, "%s", CORTEX_GIT_COMMIT);
    m.git_dirty = CORTEX_GIT_DIRTY;
    snprintf(m.build_type, sizeof m.build_type, "%s", CORTEX_BUILD_TYPE);
    snprintf(m.build_flags, sizeof m.build_flags, "%s", CORTEX_BUILD_FLAGS);
    snprintf(m.counter_mode, sizeof m.counter_mode, "%s", mode);
    /* the kernels the child really ran, as it said: under valgrind the AVX2 table even where this process
     * would run AVX-512 (the counts gate that table only: docs/gates.md, "What each gate covers") */
    snprintf(m.isa, sizeof m.isa, "%s", isa);
    env_info e;
    env_collect(&e);
    /* Instruction counts do not depend on the CPU model the way times do, but
     * the build and the mode do: compare only within the same mode. */
    char key[512];
    snprintf(key, sizeof key, "deterministic|%s|v%d|p%d|g%d|%s|%s|kernels=%s", mode, DET_MICRO_VERSION, c->micro_prompt,
             c->micro_gen, m.model_sha256, m.build_type, m.isa);
    sha256_hex(key, strlen(key), m.compare_key);
    int64_t id;
    if (store_begin_run(s, &m, &e, &id, err, errlen)) return -1;
    rep_result r;
    memset(&r, 0, sizeof r);
    rep_set_metric(&r, GATE_DET_METRIC, *instr);
    run_verdict counted = {.valid = 1}; /* one count of a workload that either ran whole or failed above */
    if (store_finish_run(s, id, &r, 1, &counted, NULL, err, errlen)) return -1;
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
        w->base_run = v->base_run;
        w->cand_run = v->cand_run;
    }
    return store_gate_insert(s, &row, rows, g->n);
}

/* Values of one metric from a `run -o json` table (one object per line). */
typedef struct ab_values { double v[GATE_MAX_METRICS][GATE_MAX_VALUES]; size_t n[GATE_MAX_METRICS]; } ab_values;

/*
 * Run `bin run ... --reps 1 -o json` in a child process and append each
 * configured metric's value to `out`. Both sides of an A/B comparison go
 * through this same path, so process start-up and model loading treat them alike.
 */
static int ab_rep(const char *bin, const gate_opts *o, const gate_conf *c, const char *wl, const char *db, int warmup,
                  ab_values *out, char *err, size_t errlen) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' run --model '%s' --workload '%s' --reps 1 --warmup %d -t %s --db '%s' -o json --no-progress",
             bin, o->model, wl, warmup, o->threads ? o->threads : "1", db);
    FILE *p = popen(cmd, "r");
    if (!p) return hx_fail(err, errlen, "cannot start %s", bin);
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
    if (st != 0) return hx_fail(err, errlen, "%s run %s failed (status %d)", bin, wl, st);
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

/* See gate_cmd.h. */
void gate_opts_init(void *op) {
    gate_opts *o = op;
    memset(o, 0, sizeof *o);
    o->baseline = "baseline";
    o->gate_file = "ci/gates.conf";
    o->db = cli_default_db();
    o->det_mode = "auto";
    o->baseline_instructions = NAN;
}

/* The checks across gate's flags; 0 or 2 after the message. */
static int gate_check(const gate_opts *o) {
    if (!o->model) return cli_fail(2, "%s", "gate needs --model MODEL");
    if (o->threads && strchr(o->threads, ','))
        return cli_fail(2, "-t: the gate compares one thread count at a time, not a list ('%s')", o->threads);
    if (o->record_baseline && o->advance_baseline)
        return cli_fail(2, "%s", "--record-baseline records without judging; --advance-baseline judges, then records: give one");
    if (o->baseline_bin && (o->record_baseline || o->advance_baseline))
        return cli_fail(2, "%s", "--baseline-bin measures its baseline anew each time: nothing to record");
    return 0;
}

/* Robust relative spread of n values: 1.4826 * MAD / median (a normal
 * sample's coefficient of variation, unmoved by one slow repetition). */
static double robust_spread(double *v, size_t n) {
    if (n < 2) return 0;
    stats_sort(v, n);
    double med = stats_percentile(v, n, 50);
    double *d = malloc(sizeof(double) * n);
    if (!d || !(med > 0)) {
        free(d);
        return NAN;
    }
    for (size_t i = 0; i < n; i++) d[i] = fabs(v[i] - med);
    stats_sort(d, n);
    double mad = stats_percentile(d, n, 50);
    free(d);
    return 1.4826 * mad / med;
}

/* May run `id` become a baseline? A VALID run measured on a quiet machine
 * (median other_load_cpus <= max_load) whose gated metrics repeat within
 * max_spread. 1, or 0 with the reason in err. */
static int baseline_fit(store *s, const gate_conf *c, int64_t id, char *err, size_t errlen) {
    static double v[GATE_MAX_VALUES];
    store_run r;
    if (store_run_load(s, id, &r) != 1 || strcmp(r.validity, "valid"))
        return hx_fail_code(err, errlen, 0, "run %lld is not a VALID run", (long long)id);
    double load = store_metric_median(s, id, "other_load_cpus");
    if (load > c->max_load)
        return hx_fail_code(err, errlen, 0,
                            "run %lld was measured under load: %.2f CPUs busy with other work (max_load %.2f in %.200s)",
                            (long long)id, load, c->max_load, c->path);
    for (int i = 0; i < c->n_metrics; i++) {
        if (c->metrics[i].deterministic) continue;
        size_t k = store_metric_values(s, id, c->metrics[i].name, v, GATE_MAX_VALUES);
        double sp = robust_spread(v, k);
        if (sp > c->max_spread)
            return hx_fail_code(err, errlen, 0,
                                "run %lld repeats too loosely: %s spreads %.1f%% (1.4826 MAD / median over %zu"
                                " repetitions; max_spread %.1f%% in %.200s)", (long long)id, c->metrics[i].name, 100 * sp, k,
                                100 * c->max_spread, c->path);
    }
    return 1;
}

/* Make run `id` the baseline `tag` of its configuration (store_move_tag), if
 * it is fit to be one; prints what happened. 0, or -1 with why in err. */
static int record_baseline(store *s, const gate_conf *c, const char *tag, const char *wl, int64_t id, char *err, size_t errlen) {
    char why[380];
    if (!baseline_fit(s, c, id, why, sizeof why))
        return hx_fail(err, errlen, "%.60s: not recorded as baseline '%.40s': %s", wl, tag, why);
    int64_t prev = 0;
    if (store_move_tag(s, id, tag, &prev)) return hx_fail(err, errlen, "%s: cannot tag run %lld: %s", wl, (long long)id,
                                                          store_errmsg(s));
    if (prev) printf("baseline '%s' for %s: run %lld (was run %lld)\n", tag, wl, (long long)id, (long long)prev);
    else printf("baseline '%s' for %s: run %lld (the first of its configuration)\n", tag, wl, (long long)id);
    return 0;
}

int cmd_gate(void *opts, const cli_args *a) {
    gate_opts o = *(const gate_opts *)opts;
    int argc = a->argc;
    char **full = a->argv; /* "cortex-bench gate ...", recorded with the runs */
    int rc = gate_check(&o);
    if (rc) return rc;
    gate_conf c;
    char err[1024];
    if (gate_conf_load(o.gate_file, &c, err, sizeof err)) return cli_fail(2, "%s", err);
    cli_ensure_default_dir(o.db);
    store *s;
    if (store_open(o.db, &s, err, sizeof err)) return cli_fail(2, "%s", err);
    static gate_state g;
    memset(&g, 0, sizeof g);
    const char *mode = o.deterministic ? "deterministic" : o.baseline_bin ? "wallclock-ab" : "wallclock";
    int64_t last_base = 0, last_cand = 0;
    int unavailable = 0; /* deterministic mode without an instruction counter: exit 3 */
    int invalid = 0;     /* candidate runs that are INVALID: exit 4 */
    int64_t advance[GATE_MAX_WORKLOADS + 1]; /* --advance-baseline: candidates to record if the gate passes */
    int n_advance = 0;
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
            if (o.record_baseline || (isnan(base) && o.advance_baseline)) { /* a count needs no quiet machine */
                int64_t prev = 0;
                if (store_move_tag(s, cand, o.baseline, &prev))
                    snprintf(g.error, sizeof g.error, "cannot tag run %lld: %s", (long long)cand, store_errmsg(s));
                else printf("deterministic baseline '%s': run %lld (%.0f instructions)%s\n", o.baseline, (long long)cand,
                            instr, prev ? "; it replaces an earlier one" : "");
                base = NAN;
            } else if (isnan(base)) {
                snprintf(g.error, sizeof g.error, "no deterministic baseline '%s' comparable with run %lld%s%s "
                         "(tag one: cortex-bench tag RUN %s)", o.baseline, (long long)cand, err[0] ? ": " : "",
                         err[0] ? err : "", o.baseline);
            } else {
                gate_verdict *v = add_verdict(&g);
                assert(v); /* the first verdict of the state: room for MAX_VERDICTS */
                gate_judge(rule, &base, 1, &instr, 1, c.alpha, c.bootstrap, v);
                snprintf(v->metric, sizeof v->metric, "micro:p%d,g%d/instructions", c.micro_prompt, c.micro_gen);
                v->base_run = bid > 0 ? bid : 0;
                v->cand_run = cand;
                if (o.advance_baseline) advance[n_advance++] = cand;
            }
            last_base = bid;
            last_cand = cand;
        }
    } else if (o.baseline_bin) {
        ab_gate(&c, &o, &g);
    } else {
        int missing = 0, produced[GATE_MAX_METRICS] = {0}, ran = 0;
        size_t k = 0;
        for (int w = 0; w < c.n_workloads; w++) {
            int64_t cand = run_once(o.model, c.workloads[w], o.db, o.threads, c.reps, 1, argc, full);
            if (cand < 0) {
                snprintf(g.error, sizeof g.error, "the candidate run of %s failed", c.workloads[w]);
                break;
            }
            ran++;
            for (int m = 0; m < c.n_metrics; m++) {
                double x;
                produced[m] |= store_metric_values(s, cand, c.metrics[m].name, &x, 1) > 0;
            }
            store_run cr;
            if (store_run_load(s, cand, &cr) != 1 || strcmp(cr.validity, "valid")) { /* no measurement: nothing to judge */
                invalid++;
                k += (size_t)snprintf(g.error + k, sizeof g.error - k, "%sthe candidate run %lld of %s is INVALID: %.300s",
                                      k ? "; " : "", (long long)cand, c.workloads[w], cr.validity_reasons);
                if (k >= sizeof g.error) k = sizeof g.error - 1;
                continue;
            }
            if (o.record_baseline) { /* record, do not judge */
                if (record_baseline(s, &c, o.baseline, c.workloads[w], cand, err, sizeof err)) {
                    k += (size_t)snprintf(g.error + k, sizeof g.error - k, "%s%s", k ? "; " : "", err);
                    if (k >= sizeof g.error) k = sizeof g.error - 1;
                }
                continue;
            }
            int64_t base = gate_resolve(s, o.baseline, cand, err, sizeof err);
            if (base <= 0 && o.advance_baseline) { /* first night of a configuration: its run becomes the baseline */
                advance[n_advance++] = cand;
                continue;
            }
            if (base <= 0) {
                k += (size_t)snprintf(g.error + k, sizeof g.error - k, "%sno baseline '%s' comparable with run %lld (%s)%s%.600s",
                                      missing++ ? "; " : "", o.baseline, (long long)cand, c.workloads[w],
                                      err[0] ? ": " : "", err[0] ? err : "");
                if (k >= sizeof g.error) k = sizeof g.error - 1;
                continue;
            }
            judge_runs(s, &c, &o, c.workloads[w], base, cand, &g, argc, full);
            if (o.advance_baseline) advance[n_advance++] = cand;
            last_base = base;
            last_cand = cand;
        }
        if (missing && k < sizeof g.error)
            snprintf(g.error + k, sizeof g.error - k, " (record one with: cortex-bench gate --record-baseline, or tag a"
                     " VALID run: cortex-bench tag RUN %s)", o.baseline);
        /* a configured metric no workload produced could never fail the gate: refuse (this error replaces any other) */
        if (ran == c.n_workloads) gate_conf_unmeasured(&c, produced, g.error, sizeof g.error);
    }
    int regressed = gate_exit_code(g.v, g.n, NULL) == CB_EXIT_REGRESSED, inconclusive = 0;
    for (int i = 0; i < g.n; i++) inconclusive += g.v[i].v == GATE_INCONCLUSIVE;
    const char *verdict = g.error[0] ? "error" : regressed ? "regression" : "pass";
    store_gate(s, &c, mode, last_base, last_cand, verdict, &g);
    gate_print_table(stdout, g.v, g.n, mode, verdict, g.error);
    if (inconclusive && !regressed && !g.error[0])
        printf("\n%d metric(s) inconclusive (too few repetitions, or not significant after the extra ones): not a proven"
               " regression, the gate passes.\n", inconclusive);
    /* The baseline advances only on a VALID, passing night, and only to runs fit to be baselines. */
    for (int i = 0; i < n_advance && !g.error[0] && !regressed; i++) {
        store_run r;
        if (store_run_load(s, advance[i], &r) != 1) continue;
        if (o.deterministic) {
            int64_t prev = 0;
            if (!store_move_tag(s, advance[i], o.baseline, &prev))
                printf("deterministic baseline '%s': run %lld\n", o.baseline, (long long)advance[i]);
        } else if (record_baseline(s, &c, o.baseline, r.workload, advance[i], err, sizeof err)) {
            printf("%s; the baseline stays\n", err);
        }
    }
    if (o.summary) {
        FILE *f = fopen(o.summary, "w");
        if (!f) fprintf(stderr, "cortex-bench: %s: cannot write the summary\n", o.summary);
        else {
            gate_print_table(f, g.v, g.n, mode, verdict, g.error);
            fclose(f);
        }
    }
    if (o.junit && gate_write_junit(o.junit, g.v, g.n, mode, g.error)) fprintf(stderr, "cortex-bench: %s: cannot write JUnit XML\n", o.junit);
    FILE *ss = summary_open(o.step_summary); /* the CI step summary: the verdict table, the runs judged */
    if (ss) {
        gate_print_table(ss, g.v, g.n, mode, verdict, g.error);
        summary_gate_runs(ss, s, last_base, last_cand);
        summary_close(ss);
    }
    store_close(s);
    if (g.error[0]) fprintf(stderr, "cortex-bench: gate: %s\n", g.error);
    return unavailable ? CB_EXIT_UNAVAILABLE : invalid ? CB_EXIT_INVALID : g.error[0] ? CB_EXIT_USAGE
         : regressed ? CB_EXIT_REGRESSED : CB_EXIT_OK;
}
