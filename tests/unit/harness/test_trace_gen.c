/*
 * test_trace_gen.c - the trace generator (harness/run/trace_gen.c): Zipf
 * adapter popularity, Poisson arrivals, length distributions and their specs,
 * trace files (reproducible, loadable by the workload loader, streams
 * independent, text size, failures leaving no partial file), their sidecars
 * (and the loader's checks of them), and the committed traces reproduced byte
 * for byte by their commands.
 *
 * Statistical checks run at fixed seeds, so they are deterministic; their
 * thresholds are still the textbook ones (a test that passes only by luck of
 * the seed would fail at the stated significance level about that often):
 *   - Zipf/uniform adapter draws: Pearson chi-square with K - 1 = 7 degrees of
 *     freedom against 24.322, the 0.999 quantile of chi2(7) (p = 0.001);
 *   - Poisson arrivals: Kolmogorov-Smirnov distance of the gaps to Exp(R)
 *     against 1.63 / sqrt(n) (alpha = 0.01, large-n asymptotic);
 *   - means: within 4 standard errors (sigma / sqrt(n), CLT), a 6e-5 chance
 *     of a false alarm per check.
 * Run from the repository root (tests/run.sh does): it reads prompts/.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cortex.h"
#include "fixture.h"
#include "jsonx.h"
#include "rng.h"
#include "sha256.h"
#include "trace_gen.h"
#include "workload.h"

/* ---- distributions ------------------------------------------------------- */

/* Pearson chi-square of counts[0..k) against n * p[0..k). */
static double chi_square(const int *counts, const double *p, int k, int n) {
    double chi2 = 0;
    for (int i = 0; i < k; i++) {
        double e = n * p[i];
        chi2 += (counts[i] - e) * (counts[i] - e) / e;
    }
    return chi2;
}

/* Zipf table against theory and chi-square goodness of fit; S = 0 uniform. */
static void test_zipf(void) {
    enum { K = 8, DRAWS = 20000 };
    /* 24.322 = chi2.ppf(0.999, df = 7): the p = 0.001 critical value for K - 1 = 7 degrees of freedom. */
    const double CRIT_7 = 24.322;
    double theory[K], norm = 0;
    for (int i = 0; i < K; i++) norm += pow(i + 1, -1.1);
    for (int i = 0; i < K; i++) theory[i] = pow(i + 1, -1.1) / norm;
    trace_zipf z;
    char err[256];
    CHECK(trace_zipf_init(&z, K, 1.1, err, sizeof err) == 0, "zipf init: %s", err);
    for (int i = 0; i < K; i++) CHECK_NEAR(trace_zipf_prob(&z, i + 1), theory[i], 1e-14, "zipf table P(k)");
    rng r;
    rng_seed(&r, 1, 2);
    int counts[K] = {0};
    for (int i = 0; i < DRAWS; i++) {
        int v = trace_zipf_draw(&z, &r);
        CHECK(v >= 1 && v <= K, "zipf draw %d in 1..8", v);
        if (v >= 1 && v <= K) counts[v - 1]++;
    }
    double chi2 = chi_square(counts, theory, K, DRAWS);
    printf("zipf(1.1, K=8): chi-square %.3f (critical %.3f)\n", chi2, CRIT_7);
    CHECK(chi2 < CRIT_7, "Zipf(1.1) chi-square %.3f < %.3f", chi2, CRIT_7);
    CHECK(counts[0] > counts[1] && counts[1] > counts[K - 1], "skewed: %d > %d > %d", counts[0], counts[1], counts[K - 1]);
    trace_zipf_free(&z);

    /* S = 0: exactly uniform table, and uniform draws. */
    CHECK(trace_zipf_init(&z, K, 0, err, sizeof err) == 0, "zipf S=0");
    double uni[K];
    for (int i = 0; i < K; i++) {
        uni[i] = 1.0 / K;
        CHECK(trace_zipf_prob(&z, i + 1) == 0.125, "S=0 P(%d) = %.17g", i + 1, trace_zipf_prob(&z, i + 1));
    }
    memset(counts, 0, sizeof counts);
    for (int i = 0; i < DRAWS; i++) counts[trace_zipf_draw(&z, &r) - 1]++;
    chi2 = chi_square(counts, uni, K, DRAWS);
    printf("zipf(0, K=8): chi-square %.3f (critical %.3f)\n", chi2, CRIT_7);
    CHECK(chi2 < CRIT_7, "S=0 uniform chi-square %.3f < %.3f", chi2, CRIT_7);
    trace_zipf_free(&z);

    /* One value; bad parameters. */
    CHECK(trace_zipf_init(&z, 1, 2.0, err, sizeof err) == 0 && trace_zipf_draw(&z, &r) == 1, "K = 1");
    trace_zipf_free(&z);
    CHECK(trace_zipf_init(&z, 0, 1.0, err, sizeof err) == CX_EINVAL, "K = 0 rejected");
    CHECK(trace_zipf_init(&z, 4, -1.0, err, sizeof err) == CX_EINVAL, "S < 0 rejected");
    CHECK(trace_zipf_init(&z, 4, NAN, err, sizeof err) == CX_EINVAL, "S NaN rejected");
}

/* qsort order for doubles. */
static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Poisson arrivals: first after 0, monotone, mean gap 1/R, KS vs Exp(R). */
static void test_arrivals(void) {
    enum { N = 20000 };
    const double R = 4.0;
    trace_params p = {0};
    char err[256];
    p.requests = N;
    p.rate = R;
    p.zipf_s = 1.1;
    p.adapters = 8;
    p.seed = 7;
    CHECK(trace_len_parse("fixed:1", "--prompt-len", &p.prompt_len, err, sizeof err) == 0, "%s", err);
    CHECK(trace_len_parse("fixed:1", "--gen-len", &p.gen_len, err, sizeof err) == 0, "%s", err);
    trace_gen g;
    if (trace_gen_init(&g, &p, err, sizeof err) != 0) {
        CHECK(0, "trace_gen_init: %s", err);
        return;
    }
    double *gap = malloc(N * sizeof *gap);
    trace_request r;
    int64_t prev = 0;
    int n = 0, monotone = 1, first_positive = 0;
    while (trace_gen_next(&g, &r) == 1) {
        if (n == 0) first_positive = r.arrival_us > 0;
        monotone &= r.arrival_us >= prev;
        gap[n++] = (double)(r.arrival_us - prev) / 1e6;
        prev = r.arrival_us;
    }
    trace_gen_free(&g);
    CHECK(n == N && monotone && first_positive, "N=%d arrivals, non-decreasing, first after 0", n);
    /* Mean gap 1/R, standard error (1/R)/sqrt(N) (exponential: sd = mean). */
    double mean = 0;
    for (int i = 0; i < N; i++) mean += gap[i];
    mean /= N;
    CHECK_NEAR(mean, 1 / R, 4 / (R * sqrt((double)N)), "mean gap = 1/R (4 standard errors)");
    /* KS distance to Exp(R). */
    qsort(gap, N, sizeof *gap, cmp_d);
    double d = 0;
    for (int i = 0; i < N; i++) {
        double F = 1 - exp(-R * gap[i]);
        double d1 = F - (double)i / N, d2 = (double)(i + 1) / N - F;
        if (d1 > d) d = d1;
        if (d2 > d) d = d2;
    }
    printf("arrivals (n=%d, R=%g): mean gap %.5f s (1/R = %.5f), KS D_n %.5f (critical %.5f)\n", N, R, mean, 1 / R, d,
           1.63 / sqrt((double)N));
    CHECK(d < 1.63 / sqrt((double)N), "KS D_n = %.5f < 1.63/sqrt(n) = %.5f (alpha 0.01)", d, 1.63 / sqrt((double)N));
    free(gap);
}

/* Draw n lengths from spec; check bounds [lo, hi] and the mean and sd. */
static void check_len(const char *spec, int lo, int hi, double mean, double sd) {
    enum { N = 20000 };
    trace_len d;
    char err[256];
    if (trace_len_parse(spec, "--gen-len", &d, err, sizeof err) != 0) {
        CHECK(0, "parse %s: %s", spec, err);
        return;
    }
    rng r;
    rng_seed(&r, 99, 3);
    double s1 = 0, s2 = 0;
    int mn = 1 << 30, mx = -1;
    for (int i = 0; i < N; i++) {
        int v = trace_len_draw(&d, &r);
        s1 += v;
        s2 += (double)v * v;
        if (v < mn) mn = v;
        if (v > mx) mx = v;
    }
    double m = s1 / N, var = (s2 - s1 * s1 / N) / (N - 1);
    CHECK(mn >= lo && mx <= hi, "%s: values in [%d, %d] (saw %d..%d)", spec, lo, hi, mn, mx);
    if (sd == 0) {
        CHECK(mn == lo && mx == hi, "%s: constant", spec);
        return;
    }
    CHECK(fabs(m - mean) <= 4 * sd / sqrt((double)N), "%s: mean %.3f vs %.3f (4 se = %.3f)", spec, m, mean,
          4 * sd / sqrt((double)N));
    /* sd of the sample sd is about sd / sqrt(2N) for near-normal shapes; allow 6 se. */
    CHECK(fabs(sqrt(var) - sd) <= 6 * sd / sqrt(2.0 * N) + 0.05 * sd * (d.kind == TRACE_LEN_LOGNORMAL),
          "%s: sd %.3f vs %.3f", spec, sqrt(var), sd);
}

/* Each length distribution: bounds, mean and sd within CLT tolerances, clamps. */
static void test_lengths(void) {
    check_len("fixed:7", 7, 7, 7, 0);
    /* Discrete uniform on A..B: mean (A+B)/2, variance ((B-A+1)^2 - 1)/12. */
    check_len("uniform:16,96", 16, 96, 56, sqrt((81.0 * 81 - 1) / 12));
    check_len("uniform:8,32", 8, 32, 20, sqrt((25.0 * 25 - 1) / 12));
    /* Rounding to the nearest integer adds variance 1/12. */
    check_len("normal:200,30", 1, 1000000, 200, sqrt(900 + 1.0 / 12));
    /* Lognormal: mean exp(mu + sigma^2/2), sd mean * sqrt(exp(sigma^2) - 1). */
    double lm = exp(4.5 + 0.18);
    check_len("lognormal:4.5,0.6", 1, 1000000, lm, lm * sqrt(exp(0.36) - 1));
    /* Clamps: at 1 below and at max= above. */
    trace_len d;
    char err[256];
    rng r;
    rng_seed(&r, 5, 5);
    int ones = 0, tops = 0, ok = 1;
    CHECK(trace_len_parse("normal:2,10", "--gen-len", &d, err, sizeof err) == 0, "%s", err);
    for (int i = 0; i < 2000; i++) {
        int v = trace_len_draw(&d, &r);
        ok &= v >= 1;
        ones += v == 1;
    }
    CHECK(ok && ones > 500, "normal:2,10 clamps at 1 (%d ones)", ones);
    CHECK(trace_len_parse("lognormal:6,1,max=300", "--prompt-len", &d, err, sizeof err) == 0 && d.max == 300, "%s", err);
    ok = 1;
    for (int i = 0; i < 2000; i++) {
        int v = trace_len_draw(&d, &r);
        ok &= v >= 1 && v <= 300;
        tops += v == 300;
    }
    CHECK(ok && tops > 1000, "max=300 clamps (%d at the top)", tops);
    CHECK(trace_len_parse("uniform:10,20,max=15", "--gen-len", &d, err, sizeof err) == 0, "%s", err);
    ok = 1;
    for (int i = 0; i < 1000; i++) ok &= trace_len_draw(&d, &r) <= 15;
    CHECK(ok, "uniform with max= clamps");
    CHECK(trace_len_parse("lognormal:100,1", "--gen-len", &d, err, sizeof err) == 0 && trace_len_draw(&d, &r) == TRACE_MAX_LEN,
          "huge values clamp at TRACE_MAX_LEN");
    /* Canonical formatting. */
    char buf[64];
    trace_len_parse("normal:40.0,1e1,max=90", "--gen-len", &d, err, sizeof err);
    trace_len_format(&d, buf, sizeof buf);
    CHECK(strcmp(buf, "normal:40,10,max=90") == 0, "format: %s", buf);
    trace_len_parse("fixed:64", "--gen-len", &d, err, sizeof err);
    trace_len_format(&d, buf, sizeof buf);
    CHECK(strcmp(buf, "fixed:64") == 0, "format: %s", buf);
}

/* Expect trace_len_parse(spec) to fail with exactly `want`. */
static void len_bad(const char *spec, const char *want) {
    trace_len d;
    char err[256];
    int rc = trace_len_parse(spec, "--prompt-len", &d, err, sizeof err);
    CHECK(rc == CX_EINVAL && strcmp(err, want) == 0, "spec '%s'\n  got:  %s\n  want: %s", spec, err, want);
}

/* Bad length specs are rejected with messages naming flag and spec. */
static void test_length_specs(void) {
    len_bad("uniform:5", "--prompt-len: 'uniform:5' needs two numbers A,B");
    len_bad("fixed:", "--prompt-len: 'fixed:': '' is not a number");
    len_bad("fixed:1,2", "--prompt-len: 'fixed:1,2' has too many numbers ('fixed' needs one number N)");
    len_bad("normal:5", "--prompt-len: 'normal:5' needs two numbers MEAN,SD");
    len_bad("lognormal:4.5", "--prompt-len: 'lognormal:4.5' needs two numbers MU,SIGMA");
    len_bad("uniform:5,x", "--prompt-len: 'uniform:5,x': 'x' is not a number");
    len_bad("uniform:9,5", "--prompt-len: 'uniform:9,5': A and B must be integers with 1 <= A <= B <= 1000000");
    len_bad("uniform:0,5", "--prompt-len: 'uniform:0,5': A and B must be integers with 1 <= A <= B <= 1000000");
    len_bad("uniform:1.5,5", "--prompt-len: 'uniform:1.5,5': A and B must be integers with 1 <= A <= B <= 1000000");
    len_bad("fixed:0", "--prompt-len: 'fixed:0': N must be an integer in 1..1000000");
    len_bad("fixed:2000000", "--prompt-len: 'fixed:2000000': N must be an integer in 1..1000000");
    len_bad("normal:100,-1", "--prompt-len: 'normal:100,-1': the standard deviation SD must be >= 0 (and both numbers within +-1e6)");
    len_bad("normal:nan,1", "--prompt-len: 'normal:nan,1': 'nan' is not a number");
    len_bad("fixed:10,max=0", "--prompt-len: 'fixed:10,max=0': max=M needs an integer M in 1..1000000");
    len_bad("fixed:10,max=5,3", "--prompt-len: 'fixed:10,max=5,3': max=M must come last");
    len_bad("fixed:10,max=", "--prompt-len: 'fixed:10,max=': max=M needs an integer M in 1..1000000");
    len_bad("gamma:1,2",
            "--prompt-len: 'gamma:1,2' is not a length distribution (use fixed:N, uniform:A,B, normal:MEAN,SD or "
            "lognormal:MU,SIGMA, optionally followed by ,max=M)");
    len_bad("fixed", "--prompt-len: 'fixed' is not a length distribution (use fixed:N, uniform:A,B, normal:MEAN,SD or "
                     "lognormal:MU,SIGMA, optionally followed by ,max=M)");
    len_bad("", "--prompt-len: '' is not a length distribution (use fixed:N, uniform:A,B, normal:MEAN,SD or "
                "lognormal:MU,SIGMA, optionally followed by ,max=M)");
    len_bad("uniform: 5,6", "--prompt-len: 'uniform: 5,6': ' 5' is not a number");
}

/* ---- traces ---------------------------------------------------------------- */

/* Fill p from the flag values a CLI would pass. */
static int params(trace_params *p, int n, double rate, double zipf, int k, const char *pl, const char *gl, uint64_t seed) {
    char err[256];
    memset(p, 0, sizeof *p);
    p->requests = n;
    p->rate = rate;
    p->zipf_s = zipf;
    p->adapters = k;
    p->seed = seed;
    int rc = trace_len_parse(pl, "--prompt-len", &p->prompt_len, err, sizeof err);
    if (!rc) rc = trace_len_parse(gl, "--gen-len", &p->gen_len, err, sizeof err);
    CHECK(rc == 0, "params: %s", err);
    return rc;
}

/* Are two files byte-identical? */
static int same_file(const char *a, const char *b) {
    size_t na, nb;
    char *x = fx_slurp(a, &na), *y = fx_slurp(b, &nb);
    int same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

/* PATH.meta.json (a static buffer: use before the next call). */
static const char *meta_of(const char *path) {
    static char buf[160];
    snprintf(buf, sizeof buf, "%s" WL_META_SUFFIX, path);
    return buf;
}

/* The file is plain JSONL: exactly `n` lines, each one JSON object, no
 * comment; the line count is the request count. */
static void check_plain_jsonl(const char *path, int n) {
    size_t len;
    char *text = fx_slurp(path, &len);
    int lines = 0, objects = 0;
    for (size_t pos = 0; text && pos < len;) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - text) : len;
        json_t *o;
        char err[256];
        lines++;
        if (jx_parse_object(text + pos, end - pos, &o, NULL, err, sizeof err) == 0) {
            objects++;
            json_decref(o);
        }
        pos = end + 1;
    }
    CHECK(text && len > 0 && text[len - 1] == '\n' && lines == n && objects == n,
          "%s: %d lines, %d JSON objects, want %d of each", path, lines, objects, n);
    free(text);
}

/* The sidecar of trace `path` holds exactly p's parameters, the trace's
 * hash and `cmdline`, and wl_load keeps it as the workload's meta. */
static void check_sidecar(const trace_params *p, const char *path, const char *cmdline) {
    char sha[65], err[512], pl[128], gl[128], rate[40], zipf[40], want[4096], cmd[1024] = "";
    CHECK(sha256_hex_file(path, sha, err, sizeof err) == 0, "%s", err);
    trace_len_format(&p->prompt_len, pl, sizeof pl);
    trace_len_format(&p->gen_len, gl, sizeof gl);
    jx_format_number(rate, sizeof rate, p->rate);
    jx_format_number(zipf, sizeof zipf, p->zipf_s);
    if (cmdline) { /* escaped as JSON: the test command lines hold no control characters */
        size_t k = (size_t)snprintf(cmd, sizeof cmd, ",\n  \"cmdline\": \"");
        for (const char *c = cmdline; *c && k + 4 < sizeof cmd; c++) {
            if (*c == '"' || *c == '\\') cmd[k++] = '\\';
            cmd[k++] = *c;
        }
        snprintf(cmd + k, sizeof cmd - k, "\"");
    }
    snprintf(want, sizeof want,
             "{\n  \"format\": \"cortex-bench trace\",\n  \"version\": 2,\n  \"requests\": %d,\n  \"rate\": %s,\n"
             "  \"zipf\": %s,\n  \"adapters\": %d,\n  \"prompt_len\": \"%s\",\n  \"gen_len\": \"%s\",\n"
             "  \"system_prefix\": %d,\n  \"seed\": %llu,\n  \"trace_sha256\": \"%s\"%s\n}\n",
             p->requests, rate, zipf, p->adapters, pl, gl, p->system_prefix, (unsigned long long)p->seed, sha, cmd);
    size_t n;
    char *got = fx_slurp(meta_of(path), &n);
    CHECK(got && strcmp(got, want) == 0, "sidecar of %s:\n%s\nwant:\n%s", path, got ? got : "(missing)", want);
    wl_workload w;
    if (wl_load(path, &w, err, sizeof err) == 0) {
        want[strlen(want) - 1] = 0; /* kept without the final newline */
        CHECK(w.meta && strcmp(w.meta, want) == 0, "wl_load keeps the sidecar of %s: %s", path, w.meta ? w.meta : "(none)");
        wl_free(&w);
    } else {
        CHECK(0, "wl_load %s: %s", path, err);
    }
    free(got);
}

/* trace_write: reproducibility, loadability, stream independence, text
 * size, and failures that leave no partial file. */
static void test_trace_files(void) {
    trace_params p;
    char err[512];
    if (params(&p, 40, 2.5, 1.1, 4, "uniform:16,96", "uniform:8,32", 1)) return;
    const char *a = fx_path("a.jsonl"), *b = fx_path("b.jsonl"), *c = fx_path("c.jsonl"), *d = fx_path("d.jsonl");
    CHECK(trace_write(&p, a, NULL, err, sizeof err) == 0, "trace_write: %s", err);
    CHECK(trace_write(&p, b, NULL, err, sizeof err) == 0, "trace_write again: %s", err);
    CHECK(same_file(a, b), "same parameters and seed -> identical bytes");
    CHECK(same_file(meta_of(a), meta_of(b)), "... and identical sidecars");
    p.seed = 2;
    CHECK(trace_write(&p, c, NULL, err, sizeof err) == 0, "trace_write seed 2: %s", err);
    CHECK(!same_file(a, c), "different seed -> different bytes");
    p.seed = 1;

    /* The file loads as a trace and matches the generator request by request. */
    wl_workload w;
    int rc = wl_load(a, &w, err, sizeof err);
    CHECK(rc == 0 && w.kind == WL_TRACE && w.n == 40, "generated trace loads: %s", err);
    trace_gen g;
    trace_request r;
    if (rc == 0 && trace_gen_init(&g, &p, err, sizeof err) == 0) {
        int all = 1;
        for (size_t i = 0; i < w.n && trace_gen_next(&g, &r) == 1; i++) {
            const wl_request *q = &w.req[i];
            all &= strcmp(q->id, r.id) == 0 && q->arrival_s == r.arrival_s && q->adapter == r.adapter &&
                   q->prompt_len == r.prompt_len && q->max_tokens == r.max_tokens && q->text_len == r.text_len &&
                   memcmp(q->text, r.text, r.text_len) == 0 && q->adapter >= 1 && q->adapter <= 4 &&
                   q->prompt_len >= 16 && q->prompt_len <= 96 && q->max_tokens >= 8 && q->max_tokens <= 32;
        }
        CHECK(all, "file = generator output, values within their ranges");
        CHECK(strcmp(w.req[0].id, "r0001") == 0 && strcmp(w.req[39].id, "r0040") == 0, "ids r0001..r0040");
        trace_gen_free(&g);
    }
    wl_free(&w);
    check_plain_jsonl(a, 40);
    check_sidecar(&p, a, NULL);

    /* Separate streams: a different Zipf exponent keeps arrivals and lengths. */
    p.zipf_s = 0;
    CHECK(trace_write(&p, d, NULL, err, sizeof err) == 0, "%s", err);
    wl_workload w1, w2;
    if (wl_load(a, &w1, err, sizeof err) == 0 && wl_load(d, &w2, err, sizeof err) == 0) {
        int same = 1, adapters_differ = 0;
        for (size_t i = 0; i < w1.n; i++) {
            same &= w1.req[i].arrival_s == w2.req[i].arrival_s && w1.req[i].prompt_len == w2.req[i].prompt_len &&
                    strcmp(w1.req[i].text, w2.req[i].text) == 0 && w1.req[i].max_tokens == w2.req[i].max_tokens;
            adapters_differ += w1.req[i].adapter != w2.req[i].adapter;
        }
        CHECK(same && adapters_differ > 0, "--zipf changes adapters only");
        wl_free(&w1);
        wl_free(&w2);
    }
    p.zipf_s = 1.1;

    /* A plain trace (--adapters 0): every request asks for adapter 0, and
     * nothing else changes (no stream is drawn from for the adapters). */
    const char *e = fx_path("plain.jsonl");
    p.adapters = 0;
    p.zipf_s = 0;
    CHECK(trace_write(&p, e, NULL, err, sizeof err) == 0, "plain trace: %s", err);
    if (wl_load(a, &w1, err, sizeof err) == 0 && wl_load(e, &w2, err, sizeof err) == 0) {
        int same = w1.n == w2.n, zero = 1;
        for (size_t i = 0; same && i < w1.n; i++) {
            same &= strcmp(w1.req[i].id, w2.req[i].id) == 0 && w1.req[i].arrival_s == w2.req[i].arrival_s &&
                    w1.req[i].prompt_len == w2.req[i].prompt_len && strcmp(w1.req[i].text, w2.req[i].text) == 0 &&
                    w1.req[i].max_tokens == w2.req[i].max_tokens;
            zero &= w2.req[i].adapter == 0 && w1.req[i].adapter >= 1;
        }
        CHECK(same && zero, "--adapters 0: adapter 0 everywhere, arrivals, lengths and texts as with --adapters 4");
        wl_free(&w1);
        wl_free(&w2);
    }
    check_sidecar(&p, e, NULL);
    p.adapters = 4;
    p.zipf_s = 1.1;

    /* Text is about prompt_len / 1.3 words, English-like sentences. */
    rng tr;
    rng_seed(&tr, 3, 3);
    trace_zipf words;
    trace_zipf_init(&words, trace_word_count(), 1.0, err, sizeof err);
    char *buf = NULL;
    size_t cap = 0;
    int targets[] = {1, 2, 13, 100, 1000};
    for (int i = 0; i < 5; i++) {
        size_t len = trace_text(&tr, &words, targets[i], &buf, &cap);
        int spaces = 0;
        for (size_t j = 0; j < len; j++) spaces += buf[j] == ' ';
        long want = lround(targets[i] / 1.3);
        if (want < 1) want = 1;
        CHECK(len > 0 && spaces + 1 == want && buf[len - 1] == '.' && buf[0] >= 'A' && buf[0] <= 'Z' && strlen(buf) == len,
              "text for %d tokens: %d words, want %ld: %s", targets[i], spaces + 1, want, buf);
    }
    CHECK(trace_word_count() >= 200, "a few hundred words (%d)", trace_word_count());
    free(buf);
    trace_zipf_free(&words);

    /* Failures: bad parameters, unwritable path; no partial file left. */
    trace_params bad = p;
    bad.rate = 0;
    rc = trace_write(&bad, fx_path("bad.jsonl"), NULL, err, sizeof err);
    CHECK(rc == CX_EINVAL && strcmp(err, "--rate must be a number of requests per second in (0, 1e9] (got 0)") == 0, "%s", err);
    bad = p;
    bad.requests = 0;
    CHECK(trace_write(&bad, fx_path("bad.jsonl"), NULL, err, sizeof err) == CX_EINVAL && strstr(err, "--requests"), "%s", err);
    bad = p;
    bad.adapters = -1;
    CHECK(trace_write(&bad, fx_path("bad.jsonl"), NULL, err, sizeof err) == CX_EINVAL &&
          strcmp(err, "--adapters must be in 0..1000000 (got -1)") == 0, "%s", err);
    bad = p;
    bad.zipf_s = -1;
    CHECK(trace_write(&bad, fx_path("bad.jsonl"), NULL, err, sizeof err) == CX_EINVAL && strstr(err, "--zipf"), "%s", err);
    rc = trace_write(&p, "/nonexistent-dir/t.jsonl", NULL, err, sizeof err);
    CHECK(rc == CX_EIO && strstr(err, "/nonexistent-dir/t.jsonl.tmp: cannot create: ") == err, "%s", err);
    /* A directory in the way of the sidecar: the new trace is removed again. */
    const char *lone = fx_path("lone.jsonl");
    char lone_meta[160], lone_sub[170];
    snprintf(lone_meta, sizeof lone_meta, "%s", meta_of(lone));
    snprintf(lone_sub, sizeof lone_sub, "%s/x", lone_meta);
    FILE *lf = NULL;
    if (mkdir(lone_meta, 0700) == 0) lf = fopen(lone_sub, "w");
    if (!lf) {
        CHECK(0, "mkdir %s", lone_meta);
    } else {
        fclose(lf);
        rc = trace_write(&p, lone, NULL, err, sizeof err);
        char t1[170], t2[180];
        snprintf(t1, sizeof t1, "%s.tmp", lone);
        snprintf(t2, sizeof t2, "%s.tmp", lone_meta);
        CHECK(rc == CX_EIO && strstr(err, "cannot rename") && strstr(err, WL_META_SUFFIX) && access(lone, F_OK) != 0 &&
                  access(t1, F_OK) != 0 && access(t2, F_OK) != 0,
              "sidecar rename failure leaves no trace and no temporaries: %s", err);
        remove(lone_sub);
        rmdir(lone_meta);
    }
    /* A directory in the way of the rename: the .tmp is removed. */
    const char *dir = fx_path("isdir.jsonl");
    if (mkdir(dir, 0700) != 0) {
        CHECK(0, "mkdir %s", dir);
    } else {
        char sub[140];
        snprintf(sub, sizeof sub, "%.127s/x", dir);
        FILE *f = fopen(sub, "w");
        if (f) fclose(f);
        rc = trace_write(&p, dir, NULL, err, sizeof err);
        char tmpf[140], meta_tmp[160];
        snprintf(tmpf, sizeof tmpf, "%.127s.tmp", dir);
        snprintf(meta_tmp, sizeof meta_tmp, "%.127s" WL_META_SUFFIX ".tmp", dir);
        CHECK(rc == CX_EIO && strstr(err, "cannot rename") && access(tmpf, F_OK) != 0 && access(meta_tmp, F_OK) != 0 &&
                  access(meta_of(dir), F_OK) != 0,
              "rename failure cleans up: %s", err);
        remove(sub);
        rmdir(dir);
    }
}

/* Write `content` as the sidecar of `trace` and return wl_load's result. */
static int load_with_meta(const char *trace, const char *content, wl_workload *w, char *err, size_t errlen) {
    FILE *f = fopen(meta_of(trace), "wb");
    if (!f || fputs(content, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", meta_of(trace));
        exit(2);
    }
    return wl_load(trace, w, err, errlen);
}

/* Sidecars: the command line is recorded (escaped), old-format files with a
 * "# cortex-bench trace v1" header still load, and a sidecar that is not
 * one JSON object, or describes another file, is a one-line error. */
static void test_sidecars(void) {
    trace_params p;
    char err[512], want[512];
    if (params(&p, 12, 3, 1.0, 3, "fixed:20", "normal:10,3,max=16", 7)) return;
    p.system_prefix = 30;
    const char *t = fx_path("cmd.jsonl");
    const char *cmdline = "cortex-bench trace --requests 12 --seed 7 -o \"a \\ b.jsonl\"";
    CHECK(trace_write(&p, t, cmdline, err, sizeof err) == 0, "%s", err);
    check_plain_jsonl(t, 12);
    check_sidecar(&p, t, cmdline);

    /* An old trace: the v1 header line, then the same requests, no sidecar. */
    size_t n;
    char *body = fx_slurp(t, &n);
    const char *hdr = "# cortex-bench trace v1 requests=12 rate=3 zipf=1 adapters=3 prompt_len=fixed:20 "
                      "gen_len=normal:10,3,max=16 seed=7 system_prefix=30\n";
    char *old = malloc(strlen(hdr) + n + 1);
    wl_workload w, w0;
    if (body && old) {
        memcpy(old, hdr, strlen(hdr));
        memcpy(old + strlen(hdr), body, n + 1);
        const char *oldp = fx_write("old.jsonl", old, strlen(old));
        int rc = wl_load(oldp, &w, err, sizeof err);
        CHECK(rc == 0 && w.kind == WL_TRACE && w.n == 12 && w.meta == NULL && w.req[0].line == 2, "old format loads: %s", err);
        if (rc == 0 && wl_load(t, &w0, err, sizeof err) == 0) {
            int same = 1;
            for (size_t i = 0; i < w.n; i++)
                same &= !strcmp(w.req[i].id, w0.req[i].id) && !strcmp(w.req[i].text, w0.req[i].text) &&
                        w.req[i].arrival_s == w0.req[i].arrival_s;
            CHECK(same && strcmp(w.sha256, w0.sha256) != 0, "the same requests (the file hash differs)");
            wl_free(&w0);
        }
        if (rc == 0) wl_free(&w);

        /* The new trace's sidecar next to the old file: it names another hash. */
        char *meta = fx_slurp(meta_of(t), &n);
        rc = meta ? load_with_meta(oldp, meta, &w, err, sizeof err) : -1;
        snprintf(want, sizeof want, "%s: describes another file (\"trace_sha256\" ", meta_of(oldp));
        CHECK(rc == CX_EFORMAT && strncmp(err, want, strlen(want)) == 0 && strstr(err, "delete the sidecar") && w.n == 0 &&
                  w.meta == NULL,
              "stale sidecar: %s", err);
        free(meta);
        /* A hand-written sidecar without a hash is kept as it is. */
        rc = load_with_meta(oldp, "{\"source\": \"production log, 2026-11-01\"}\n\n", &w, err, sizeof err);
        CHECK(rc == 0 && w.meta && !strcmp(w.meta, "{\"source\": \"production log, 2026-11-01\"}"), "hand-written: %s", err);
        if (rc == 0) wl_free(&w);
        /* Not a JSON object, a hash that is not a string, too large. */
        rc = load_with_meta(oldp, "{\"requests\": 12,}", &w, err, sizeof err);
        snprintf(want, sizeof want, "%s:1: column 17: string or '}' expected near '}'", meta_of(oldp));
        CHECK(rc == CX_EFORMAT && !strcmp(err, want), "bad JSON: %s", err);
        rc = load_with_meta(oldp, "{\n  \"requests\": 12,\n  \"rate\": 4\n  \"zipf\": 1\n}\n", &w, err, sizeof err);
        snprintf(want, sizeof want, "%s:4: column 8: '}' expected near '\"zipf\"'", meta_of(oldp));
        CHECK(rc == CX_EFORMAT && !strcmp(err, want), "bad JSON on line 4: %s", err);
        rc = load_with_meta(oldp, "[1, 2]", &w, err, sizeof err);
        snprintf(want, sizeof want, "%s:1: column 1: expected a JSON object, found an array", meta_of(oldp));
        CHECK(rc == CX_EFORMAT && !strcmp(err, want), "an array: %s", err);
        rc = load_with_meta(oldp, "{\"trace_sha256\": 5}", &w, err, sizeof err);
        snprintf(want, sizeof want, "%s: \"trace_sha256\" must be a string, not a number", meta_of(oldp));
        CHECK(rc == CX_EFORMAT && !strcmp(err, want), "numeric hash: %s", err);
        char *big = malloc(WL_META_MAX + 64);
        if (big) {
            memset(big, ' ', WL_META_MAX + 63);
            memcpy(big, "{\"x\": 1}", 8);
            big[WL_META_MAX + 63] = 0;
            rc = load_with_meta(oldp, big, &w, err, sizeof err);
            snprintf(want, sizeof want, "%s: larger than %d bytes: too large for a sidecar", meta_of(oldp), WL_META_MAX);
            CHECK(rc == CX_EFORMAT && !strcmp(err, want), "huge sidecar: %s", err);
            free(big);
        }
        /* An unreadable sidecar (a directory) fails the load, naming it. */
        remove(meta_of(oldp));
        if (mkdir(meta_of(oldp), 0700) == 0) {
            rc = wl_load(oldp, &w, err, sizeof err);
            CHECK(rc == CX_EIO && strstr(err, WL_META_SUFFIX ": read error: Is a directory"), "directory sidecar: %s", err);
            rmdir(meta_of(oldp));
        }
    }
    free(body);
    free(old);
}

/* The committed traces and their sidecars are exactly what their commands
 * write (prompts/README.md lists the commands), and are plain JSONL. */
static void test_committed_traces(void) {
#define CMD(args, file) "cortex-bench trace " args " -o prompts/traces/" file
    static const struct {
        const char *file;
        int n;
        double rate, zipf;
        int k;
        const char *pl, *gl;
        uint64_t seed;
        int system_prefix;
        const char *cmdline;
    } traces[] = {
        {"zipf-smoke.jsonl", 16, 4, 1.1, 4, "uniform:16,96", "uniform:8,32", 1, 0,
         CMD("--requests 16 --rate 4 --zipf 1.1 --adapters 4 --prompt-len uniform:16,96 --gen-len uniform:8,32 --seed 1",
             "zipf-smoke.jsonl")},
        {"zipf-chat.jsonl", 64, 1, 1.2, 8, "lognormal:4.5,0.6", "uniform:32,128", 2, 0,
         CMD("--requests 64 --rate 1 --zipf 1.2 --adapters 8 --prompt-len lognormal:4.5,0.6 --gen-len uniform:32,128 --seed 2",
             "zipf-chat.jsonl")},
        {"uniform-burst.jsonl", 32, 16, 0, 4, "normal:128,32,max=256", "fixed:32", 3, 0,
         CMD("--requests 32 --rate 16 --zipf 0 --adapters 4 --prompt-len normal:128,32,max=256 --gen-len fixed:32 --seed 3",
             "uniform-burst.jsonl")},
        {"plain-smoke.jsonl", 16, 8, 0, 0, "uniform:8,40", "uniform:8,24", 5, 0,
         CMD("--requests 16 --rate 8 --adapters 0 --prompt-len uniform:8,40 --gen-len uniform:8,24 --seed 5",
             "plain-smoke.jsonl")},
        {"plain-chat.jsonl", 64, 1, 0, 0, "lognormal:4.5,0.6", "uniform:32,128", 2, 0,
         CMD("--requests 64 --rate 1 --adapters 0 --prompt-len lognormal:4.5,0.6 --gen-len uniform:32,128 --seed 2",
             "plain-chat.jsonl")},
        {"shared-prefix.jsonl", 16, 1, 0, 1, "uniform:16,48", "fixed:16", 4, 400,
         CMD("--requests 16 --rate 1 --zipf 0 --adapters 1 --prompt-len uniform:16,48 --gen-len fixed:16 --system-prefix 400 "
             "--seed 4", "shared-prefix.jsonl")},
    };
#undef CMD
    for (size_t i = 0; i < sizeof traces / sizeof traces[0]; i++) {
        trace_params p;
        char err[512], committed[128], committed_meta[160];
        if (params(&p, traces[i].n, traces[i].rate, traces[i].zipf, traces[i].k, traces[i].pl, traces[i].gl, traces[i].seed))
            continue;
        p.system_prefix = traces[i].system_prefix;
        const char *out = fx_path("%s", traces[i].file);
        CHECK(trace_write(&p, out, traces[i].cmdline, err, sizeof err) == 0, "%s", err);
        snprintf(committed, sizeof committed, "prompts/traces/%s", traces[i].file);
        snprintf(committed_meta, sizeof committed_meta, "%s", meta_of(committed));
        CHECK(same_file(out, committed), "%s is reproduced byte for byte by its command", committed);
        CHECK(same_file(meta_of(out), committed_meta), "%s is reproduced byte for byte by its command", committed_meta);
        check_plain_jsonl(committed, traces[i].n);
        wl_workload w;
        CHECK(wl_load(committed, &w, err, sizeof err) == 0 && w.kind == WL_TRACE && w.n == (size_t)traces[i].n && w.meta,
              "%s", err);
        int plain = 1; /* the plain traces name no adapter: they replay against any server */
        for (size_t j = 0; j < w.n; j++) plain &= w.req[j].adapter == 0;
        CHECK(plain == (traces[i].k == 0), "%s: adapter 0 on every request exactly when --adapters 0", committed);
        wl_free(&w);
    }
}

TEST_MAIN({
    test_zipf();
    test_arrivals();
    test_lengths();
    test_length_specs();
    test_trace_files();
    test_sidecars();
    test_committed_traces();
    fx_cleanup();
})
