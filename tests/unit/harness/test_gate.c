/*
 * test_gate.c - the gate's decisions on hand-made samples: threshold and
 * significance must both hold for "regressed"; directions; the CI fallback
 * when the repetition counts cannot reach alpha; single deterministic values;
 * and the gate file parser's errors naming FILE:LINE.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "gate.h"
#include "cli_util.h"
#include "gatefile.h"
#include "judge.h"
#include "testing.h"

static gate_metric rule(const char *name, int higher, double thr) {
    gate_metric m;
    memset(&m, 0, sizeof m);
    snprintf(m.name, sizeof m.name, "%s", name);
    m.higher_is_better = higher;
    m.threshold = thr;
    return m;
}

static void test_verdicts(void) {
    gate_metric tps = rule("tps", 1, 0.10), lat = rule("ttft_ms_p50", 0, 0.10);
    double base[5] = {100, 101, 99, 100.5, 99.5};
    double slow[5] = {80, 81, 79, 80.5, 79.5};    /* -20%, every value below every base value */
    double fast[5] = {120, 121, 119, 120.5, 119.5};
    double same[5] = {100.2, 99.8, 100.1, 99.9, 100};
    double noisy[5] = {60, 130, 70, 125, 75};      /* median -25% but overlapping widely */
    gate_verdict v;
    gate_judge(&tps, base, 5, slow, 5, 0.05, 2000, &v);
    CHECK(v.v == GATE_REGRESSED && v.p < 0.05 && fabs(v.change + 0.2) < 1e-9, "throughput -20%%, significant: %s p=%g",
          gate_v_name(v.v), v.p);
    gate_judge(&tps, base, 5, fast, 5, 0.05, 2000, &v);
    CHECK(v.v == GATE_IMPROVED, "throughput +20%% is an improvement: %s", gate_v_name(v.v));
    gate_judge(&lat, base, 5, fast, 5, 0.05, 2000, &v);
    CHECK(v.v == GATE_REGRESSED, "latency +20%% is a regression (lower is better): %s", gate_v_name(v.v));
    gate_judge(&tps, base, 5, same, 5, 0.05, 2000, &v);
    CHECK(v.v == GATE_UNCHANGED, "within threshold: unchanged: %s", gate_v_name(v.v));
    gate_judge(&tps, base, 5, noisy, 5, 0.05, 2000, &v);
    CHECK(v.v == GATE_INCONCLUSIVE && v.p >= 0.05, "past threshold but not significant: %s (p=%g)", gate_v_name(v.v), v.p);
    /* 3 vs 3 cannot reach p < 0.05 (min p 0.1): too few samples to decide, whatever the medians say. */
    gate_judge(&tps, base, 3, slow, 3, 0.05, 2000, &v);
    CHECK(v.v == GATE_INCONCLUSIVE && isnan(v.p) && strstr(v.note, "too few repetitions") && strstr(v.note, "needs 4"),
          "3 vs 3, -20%%: inconclusive, never regressed: %s (%s)", gate_v_name(v.v), v.note);
    CHECK(v.ci_lo < -0.15 && v.ci_hi < 0, "the CI is still reported: [%g, %g]", v.ci_lo, v.ci_hi);
    gate_judge(&tps, base, 3, same, 3, 0.05, 2000, &v);
    CHECK(v.v == GATE_INCONCLUSIVE && strstr(v.note, "within the threshold"), "3 vs 3 within the threshold: no"
          " 'unchanged' claim either: %s (%s)", gate_v_name(v.v), v.note);
    /* One repetition a side (an A/A pair at --reps 1): never regressed, however far apart. */
    double one_b = 100, one_c = 50;
    gate_judge(&tps, &one_b, 1, &one_c, 1, 0.05, 2000, &v);
    CHECK(v.v == GATE_INCONCLUSIVE && strstr(v.note, "1 vs 1"), "1 vs 1, -50%%: inconclusive (%s)", v.note);
    /* 2 vs 2 (the A/A pair judged 'regressed -45.7%, p 0.33'). */
    double two_b[2] = {100, 101}, two_c[2] = {54, 55};
    gate_judge(&tps, two_b, 2, two_c, 2, 0.05, 2000, &v);
    CHECK(v.v == GATE_INCONCLUSIVE, "2 vs 2, -46%%: inconclusive: %s", gate_v_name(v.v));
    /* 4 vs 4: the smallest that can decide at 0.05 (complete separation, p = 0.0286). */
    gate_judge(&tps, base, 4, slow, 4, 0.05, 2000, &v);
    CHECK(v.v == GATE_REGRESSED && fabs(v.p - 2.0 / 70) < 1e-9, "4 vs 4 separated: regressed, p = 2/70 (%g)", v.p);
    CHECK(gate_min_reps(0.05) == 4 && gate_min_reps(0.01) == 5 && gate_min_reps(0.1) == 3,
          "fewest repetitions per side: 4 at 0.05, 5 at 0.01, 3 at 0.1 (%d %d %d)", gate_min_reps(0.05),
          gate_min_reps(0.01), gate_min_reps(0.1));
    /* Exit codes: one table for gate and compare. */
    gate_verdict vs[2];
    gate_judge(&tps, base, 5, same, 5, 0.05, 2000, &vs[0]);
    gate_judge(&tps, base, 5, slow, 5, 0.05, 2000, &vs[1]);
    int judged[2] = {1, 0};
    CHECK(gate_exit_code(vs, 1, NULL) == CB_EXIT_OK && gate_exit_code(vs, 2, NULL) == CB_EXIT_REGRESSED &&
          gate_exit_code(vs, 2, judged) == CB_EXIT_OK, "exit codes: 0 unchanged, 1 regressed, ungated ignored");
    /* Deterministic: one value each; 3% more instructions past a 2% threshold. */
    gate_metric ins = rule("instructions", 0, 0.02);
    ins.deterministic = 1;
    double b1 = 1.0e8, c1 = 1.03e8, c2 = 1.01e8;
    gate_judge(&ins, &b1, 1, &c1, 1, 0.05, 2000, &v);
    CHECK(v.v == GATE_REGRESSED, "deterministic +3%% > 2%%: %s", gate_v_name(v.v));
    gate_judge(&ins, &b1, 1, &c2, 1, 0.05, 2000, &v);
    CHECK(v.v == GATE_UNCHANGED, "deterministic +1%% < 2%%: %s", gate_v_name(v.v));
    /* Nothing to compare is inconclusive, never a pass or a regression. */
    gate_judge(&tps, base, 0, slow, 5, 0.05, 2000, &v);
    CHECK(v.v == GATE_INCONCLUSIVE, "no base values: inconclusive");
}

/* Write `text` to a temp gate file and parse it. */
static int parse(const char *text, gate_conf *c, char *err, size_t n) {
    char path[] = "/tmp/cortex-gate-XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w");
    fputs(text, f);
    fclose(f);
    int rc = gate_conf_load(path, c, err, n);
    unlink(path);
    return rc;
}

static void test_gatefile(void) {
    gate_conf c;
    char err[512];
    CHECK(gate_conf_load("ci/gates.conf", &c, err, sizeof err) == 0, "the committed gate file parses: %s", err);
    CHECK(c.n_metrics > 0 && c.n_workloads > 0 && gate_conf_metric(&c, "instructions"), "it has metrics and workloads");
    CHECK(parse("version 1\nmetric tps higher 0.1\n", &c, err, sizeof err) == 0 && c.metrics[0].higher_is_better &&
          c.metrics[0].threshold == 0.1, "minimal file");
    CHECK(c.max_load == GATE_DEFAULT_MAX_LOAD && c.max_spread == GATE_DEFAULT_MAX_SPREAD && !c.metrics[0].deterministic,
          "baseline limits default; a wall-clock metric is not deterministic");
    CHECK(parse("version 1\nmax_load 0.25\nmax_spread 0.05\nmetric instructions lower 0.02\n", &c, err, sizeof err) == 0 &&
          c.max_load == 0.25 && c.max_spread == 0.05 && c.metrics[0].deterministic, "max_load, max_spread; instructions"
          " is deterministic: %s", err);
    static const struct { const char *text, *want; } bad[] = {
        {"metric tps higher 0.1\n", "missing 'version 1'"},
        {"version 2\n", ":1: version must be 1"},
        {"version 1\nmetric tps sideways 0.1\n", ":2: expected 'metric NAME higher|lower THRESHOLD'"},
        {"version 1\nmetric tps higher 0.1\nmetric tps lower 0.2\n", ":3: metric tps is listed twice"},
        {"version 1\nalpha 2\nmetric a higher 1\n", ":2: alpha takes one number"},
        {"version 1\nfrobnicate 3\n", ":2: unknown setting 'frobnicate'"},
        {"version 1\n# only comments\n", "no metric lines"},
        {"version 1\nreps 3\nworkload tg32\nmetric tps higher 0.1\n",
         "reps 3 cannot decide: the exact Mann-Whitney U test needs 4 repetitions per side to reach p < 0.05"},
        {"version 1\nalpha 0.01\nreps 4\nworkload tg32\nmetric tps higher 0.1\n", "needs 5 repetitions per side"},
        {"version 1\nmax_load -1\nmetric tps higher 0.1\n", ":2: max_load takes one number of CPUs"},
        {"version 1\nmax_spread x\nmetric tps higher 0.1\n", ":2: max_spread takes one relative spread"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(parse(bad[i].text, &c, err, sizeof err) != 0 && strstr(err, bad[i].want), "bad gate file %zu: '%s' (want %s)",
              i, err, bad[i].want);
}

/* A configured wall-clock metric that no workload produced is named, with
 * the workloads, in one line; the deterministic metric is not asked for. */
static void test_unmeasured(void) {
    gate_conf c;
    char err[512], msg[1024];
    CHECK(parse("version 1\nworkload tg32\nworkload pp64\nmetric tps higher 0.1\nmetric ttft_ms_p50 lower 0.1\n"
                "metric output_tps higher 0.1\nmetric instructions lower 0.02\n", &c, err, sizeof err) == 0, "parses: %s", err);
    int all[4] = {1, 1, 1, 0}, some[4] = {1, 0, 0, 0};
    msg[0] = 0;
    CHECK(gate_conf_unmeasured(&c, all, msg, sizeof msg) == 0 && !msg[0], "every wall-clock metric produced: %s", msg);
    CHECK(gate_conf_unmeasured(&c, some, msg, sizeof msg) == 2, "two metrics unmeasured");
    CHECK(strstr(msg, "metrics 'ttft_ms_p50', 'output_tps' are measured by none of the gate's workloads (tg32, pp64)") &&
          !strchr(msg, '\n') && !strstr(msg, "instructions"), "one line naming them and the workloads: %s", msg);
}

/* `cortex-bench judge`'s sample lines: untrusted input, one error per problem. */
static void test_judge_lines(void) {
    judge_sample s;
    char err[256];
    CHECK(judge_parse_line("kernel: q8_0 gemm\tlower\tcand\t1234.5", &s, err, sizeof err) == 1 &&
          !strcmp(s.metric, "kernel: q8_0 gemm") && !s.higher_is_better && s.cand && s.value == 1234.5, "a sample line");
    CHECK(judge_parse_line("tps\thigher\tbase\t7e2\r", &s, err, sizeof err) == 1 && s.higher_is_better && !s.cand &&
          s.value == 700, "higher, base, a trailing CR");
    CHECK(judge_parse_line("", &s, err, sizeof err) == 0 && judge_parse_line("# a comment", &s, err, sizeof err) == 0,
          "blank and comment lines are skipped");
    static const struct { const char *line, *want; } bad[] = {
        {"tps\thigher\tbase", "expected 4 tab-separated fields"},
        {"tps\thigher\tbase\t1\t2", "more than 4 fields"},
        {"\thigher\tbase\t1", "the metric name must be 1..95 bytes"},
        {"tps\tfaster\tbase\t1", "the direction must be lower or higher"},
        {"tps\thigher\tnew\t1", "the side must be base or cand"},
        {"tps\thigher\tbase\t1x", "the value '1x' is not a finite number"},
        {"tps\thigher\tbase\tnan", "is not a finite number"},
        {"tps\thigher\tbase\t1e999", "is not a finite number"},
        {"tps\thigher\tbase\t", "the value is not a number"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(judge_parse_line(bad[i].line, &s, err, sizeof err) == -1 && strstr(err, bad[i].want),
              "bad sample line %zu: '%s' (want %s)", i, err, bad[i].want);
    char longname[200];
    memset(longname, 'k', sizeof longname);
    snprintf(longname + 120, sizeof longname - 120, "\tlower\tbase\t1");
    CHECK(judge_parse_line(longname, &s, err, sizeof err) == -1, "a 120-byte name is refused, not truncated");
}

TEST_MAIN({
    test_judge_lines();
    test_verdicts();
    test_gatefile();
    test_unmeasured();
})
