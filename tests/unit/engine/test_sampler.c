/*
 * test_sampler.c - each sampling stage on small hand-made distributions; the
 * repetition, frequency and presence penalties against hand-computed logits
 * (llama.cpp's semantics); the defaults (llama.cpp's); determinism: the same
 * seed gives the same tokens.
 */
#include <string.h>

#include "cortex.h"
#include "testing.h"

enum { V = 8 };
static const float LOGITS[V] = {1.0f, 3.0f, 2.5f, -1.0f, 0.0f, 2.9f, -5.0f, 0.5f};

/* A sampler over V tokens with these parameters, no presence or frequency
 * penalty, a window of 64. */
static cx_sampler *make(float temp, int top_k, float top_p, float min_p, float pen, uint64_t seed) {
    cx_sampler_params p = {.temperature = temp, .top_k = top_k, .top_p = top_p, .min_p = min_p,
                           .repeat_penalty = pen, .repeat_last_n = 64, .seed = seed};
    cx_sampler *s = NULL;
    cx_err err = {0};
    CHECK(cx_sampler_new(V, &p, &s, &err) == 0, "sampler_new: %s", err.msg);
    return s;
}

/* Draw n tokens, counting how often each id comes up. */
static void draw(cx_sampler *s, int n, int *count) {
    memset(count, 0, sizeof(int) * V);
    for (int i = 0; i < n; i++) count[cx_sampler_sample(s, LOGITS)]++;
}

/* Greedy: the argmax, the lowest id on ties. */
static void test_greedy(void) {
    cx_sampler *s = make(0, 0, 1, 0, 1, 1);
    CHECK(cx_sampler_sample(s, LOGITS) == 1, "greedy picks the argmax");
    cx_sampler_free(s);
    /* Ties resolve to the lowest id. */
    float tie[V] = {0, 2, 2, 0, 0, 0, 0, 0};
    s = make(0, 0, 1, 0, 1, 1);
    CHECK(cx_sampler_sample(s, tie) == 1, "tie -> lowest id");
    cx_sampler_free(s);
}

/* top-k, top-p and min-p keep exactly the tokens worked out by hand. */
static void test_filters(void) {
    int count[V];
    cx_sampler *s = make(1.0f, 2, 1, 0, 1, 7); /* top-k 2: only ids 1 and 5 */
    draw(s, 2000, count);
    CHECK(count[1] + count[5] == 2000 && count[1] > 0 && count[5] > 0, "top-k 2 keeps ids 1 and 5 (%d, %d)", count[1], count[5]);
    cx_sampler_free(s);
    s = make(1.0f, 1, 1, 0, 1, 7); /* top-k 1 is greedy */
    draw(s, 200, count);
    CHECK(count[1] == 200, "top-k 1 is greedy");
    cx_sampler_free(s);
    /* top-p 0.5: probabilities (temp 1) sorted: id1 .305, id5 .276, id2 .185 ... so {1, 5}. */
    s = make(1.0f, 0, 0.5f, 0, 1, 7);
    draw(s, 2000, count);
    CHECK(count[1] + count[5] == 2000 && count[5] > 0, "top-p 0.5 keeps ids 1 and 5");
    cx_sampler_free(s);
    /* min-p 0.6: keep p >= 0.6 p_max: id5 (ratio e^-0.1=.905), id2 (e^-.5=.607); not id0 (e^-2). */
    s = make(1.0f, 0, 1, 0.6f, 1, 7);
    draw(s, 3000, count);
    CHECK(count[1] + count[5] + count[2] == 3000 && count[2] > 0, "min-p 0.6 keeps ids 1, 5, 2");
    cx_sampler_free(s);
}

/* With no filters the draw frequencies follow softmax(logits / T). */
static void test_distribution(void) {
    int count[V];
    const int N = 40000;
    for (int t = 0; t < 2; t++) {
        float temp = t ? 2.0f : 1.0f;
        cx_sampler *s = make(temp, 0, 1, 0, 1, 99);
        draw(s, N, count);
        double z = 0, p[V], chi2 = 0;
        for (int i = 0; i < V; i++) z += exp(LOGITS[i] / temp);
        for (int i = 0; i < V; i++) {
            p[i] = exp(LOGITS[i] / temp) / z;
            double e = N * p[i];
            chi2 += (count[i] - e) * (count[i] - e) / e;
        }
        /* 7 degrees of freedom: P(chi2 > 24.3) = 0.001; fixed seed, so no flakiness. */
        CHECK(chi2 < 24.3, "temperature %g: chi-square %.2f vs softmax", temp, chi2);
        cx_sampler_free(s);
    }
}

/* Repetition penalty: divides positive logits, multiplies negative ones, once
 * per distinct token. */
static void test_repeat_penalty(void) {
    cx_sampler *s = make(0, 0, 1, 0, 2.0f, 1);
    CHECK(cx_sampler_sample(s, LOGITS) == 1, "before penalty: id 1");
    cx_sampler_accept(s, 1); /* 3.0 / 2 = 1.5 < 2.9 */
    cx_sampler_accept(s, 1); /* penalised once per distinct token, not twice */
    CHECK(cx_sampler_sample(s, LOGITS) == 5, "penalised id 1 loses to id 5");
    cx_sampler_accept(s, 5);
    cx_sampler_accept(s, 2); /* now 1.5, 1.45, 1.25: id 1 wins again */
    CHECK(cx_sampler_sample(s, LOGITS) == 1, "penalty applies to each seen token once");
    cx_sampler_free(s);
    /* Negative logits are multiplied: -1 * 2 = -2. */
    float neg[V] = {-1, -1.5f, -9, -9, -9, -9, -9, -9};
    s = make(0, 0, 1, 0, 2.0f, 1);
    cx_sampler_accept(s, 0);
    CHECK(cx_sampler_sample(s, neg) == 1, "negative logit penalised by multiplying");
    cx_sampler_free(s);
}

/* Same seed, same tokens; another seed, other tokens; bad parameters refused. */
static void test_determinism(void) {
    int a[64], b[64], c[64];
    cx_sampler *s1 = make(1.0f, 0, 1, 0, 1, 5), *s2 = make(1.0f, 0, 1, 0, 1, 5), *s3 = make(1.0f, 0, 1, 0, 1, 6);
    for (int i = 0; i < 64; i++) {
        a[i] = cx_sampler_sample(s1, LOGITS);
        b[i] = cx_sampler_sample(s2, LOGITS);
        c[i] = cx_sampler_sample(s3, LOGITS);
    }
    CHECK(!memcmp(a, b, sizeof a), "same seed, same tokens");
    CHECK(memcmp(a, c, sizeof a) != 0, "different seed, different tokens");
    cx_sampler_free(s1);
    cx_sampler_free(s2);
    cx_sampler_free(s3);
    cx_sampler_params bad = cx_sampler_defaults();
    bad.top_p = -1;
    cx_sampler *s = NULL;
    cx_err err = {0};
    CHECK(cx_sampler_new(V, &bad, &s, &err) == CX_EINVAL && s == NULL, "bad top-p rejected: %s", err.msg);
    bad = cx_sampler_defaults();
    bad.frequency_penalty = NAN;
    CHECK(cx_sampler_new(V, &bad, &s, &err) == CX_EINVAL && s == NULL, "NaN frequency penalty rejected");
    bad = cx_sampler_defaults();
    bad.repeat_penalty = 0;
    CHECK(cx_sampler_new(V, &bad, &s, &err) == CX_EINVAL && s == NULL, "repeat penalty 0 rejected");
}

/* A greedy sampler over V tokens with the three penalties and a window. */
static cx_sampler *make_pen(float repeat, float freq, float presence, int last_n) {
    cx_sampler_params p = cx_sampler_defaults();
    p.temperature = 0;
    p.repeat_penalty = repeat;
    p.frequency_penalty = freq;
    p.presence_penalty = presence;
    p.repeat_last_n = last_n;
    cx_sampler *s = NULL;
    cx_err err = {0};
    CHECK(cx_sampler_new(V, &p, &s, &err) == 0, "sampler_new: %s", err.msg);
    return s;
}

/* Greedy token after accepting `seen` (n tokens) into a fresh sampler. */
static int pick(float repeat, float freq, float presence, int last_n, const int *seen, int n, const float *logits) {
    cx_sampler *s = make_pen(repeat, freq, presence, last_n);
    for (int i = 0; i < n; i++) cx_sampler_accept(s, seen[i]);
    int tok = cx_sampler_sample(s, logits);
    cx_sampler_free(s);
    return tok;
}

/* Frequency penalty: count * f off the logit, the count taken over the window. */
static void test_frequency_penalty(void) {
    /* id 0 at 5.0 seen 3 times against id 1 at 4.0: 5 - 3*0.3 = 4.1 wins, 5 - 3*0.4 = 3.8 loses. */
    const float l[V] = {5.0f, 4.0f, 0, 0, 0, 0, 0, 0};
    const int three[] = {0, 0, 0};
    CHECK(pick(1, 0.3f, 0, 64, three, 3, l) == 0, "frequency 0.3 x 3: 4.1 > 4.0");
    CHECK(pick(1, 0.4f, 0, 64, three, 3, l) == 1, "frequency 0.4 x 3: 3.8 < 4.0");
    /* Only the window counts: last 2 of {0, 0, 0, 5}: id 0 once -> 5 - 0.9 = 4.1 wins. */
    const int four[] = {0, 0, 0, 5};
    CHECK(pick(1, 0.9f, 0, 2, four, 4, l) == 0, "window 2: id 0 counted once (4.1 > 4.0)");
    CHECK(pick(1, 0.9f, 0, 3, four, 4, l) == 1, "window 3: id 0 counted twice (3.2 < 4.0)");
    /* A token that left the window is not penalised at all. */
    const int gone[] = {0, 5, 5};
    CHECK(pick(1, 10, 0, 2, gone, 3, l) == 0, "a token out of the window is not penalised");
    /* Negative frequency penalties favour seen tokens: id 1 at 4.0 + 2*0.6 = 5.2 > 5. */
    const int ones[] = {1, 1};
    CHECK(pick(1, -0.6f, 0, 64, ones, 2, l) == 1, "negative frequency penalty raises a seen token");
}

/* Presence penalty: a fixed amount off a seen token's logit, whatever its count. */
static void test_presence_penalty(void) {
    const float l[V] = {5.0f, 4.0f, 0, 0, 0, 0, 0, 0};
    const int three[] = {0, 0, 0};
    CHECK(pick(1, 0, 0.9f, 64, three, 3, l) == 0, "presence 0.9: 4.1 > 4.0, not scaled by the count of 3");
    CHECK(pick(1, 0, 1.1f, 64, three, 1, l) == 1, "presence 1.1: 3.9 < 4.0");
    CHECK(pick(1, 0, 1.1f, 0, three, 3, l) == 0, "window 0: every penalty off");
}

/* All three, in llama.cpp's order: the repeat penalty first, then
 * - count * frequency - presence. */
static void test_penalty_order(void) {
    /* id 0 at 6 seen twice: 6 / 2 = 3; 3 - 2*0.25 - 0.25 = 2.25. (Subtracting
     * first would give (6 - 0.75) / 2 = 2.625.) */
    const float a[V] = {6.0f, 2.3f, 0, 0, 0, 0, 0, 0}, b[V] = {6.0f, 2.2f, 0, 0, 0, 0, 0, 0};
    const int two[] = {0, 0};
    CHECK(pick(2, 0.25f, 0.25f, 64, two, 2, a) == 1, "6 -> 2.25 < 2.3");
    CHECK(pick(2, 0.25f, 0.25f, 64, two, 2, b) == 0, "6 -> 2.25 > 2.2");
    /* Negative logit: -1 * 2 = -2, - 0.5 - 0.25 = -2.75; against -2.7 it loses, against -2.8 it wins. */
    const float c[V] = {-1, -2.7f, -9, -9, -9, -9, -9, -9}, d[V] = {-1, -2.8f, -9, -9, -9, -9, -9, -9};
    CHECK(pick(2, 0.25f, 0.25f, 64, two, 2, c) == 1, "-1 -> -2.75 < -2.7");
    CHECK(pick(2, 0.25f, 0.25f, 64, two, 2, d) == 0, "-1 -> -2.75 > -2.8");
    /* A logit of exactly 0 is multiplied (stays 0), then penalised: 0 - 0.25 < -0.2. */
    const float e[V] = {0, -0.2f, -9, -9, -9, -9, -9, -9};
    const int one[] = {0};
    CHECK(pick(2, 0, 0.25f, 64, one, 1, e) == 1, "0 -> -0.25 < -0.2");
    /* Tokens outside the vocabulary are not remembered (and do not crash). */
    const int odd[] = {-1, V, 1 << 30};
    CHECK(pick(2, 1, 1, 64, odd, 3, a) == 0, "out-of-vocabulary tokens are ignored");
}

/* The defaults are llama.cpp's common_params_sampling (and a fixed seed). */
static void test_defaults(void) {
    cx_sampler_params p = cx_sampler_defaults();
    CHECK(p.temperature == 0.80f && p.top_k == 40 && p.top_p == 0.95f && p.min_p == 0.05f, "temp/top-k/top-p/min-p");
    CHECK(p.repeat_penalty == 1.0f && p.repeat_last_n == 64, "repeat penalty off, window 64");
    CHECK(p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f, "presence and frequency penalties off");
    CHECK(p.seed == 42, "fixed default seed");
    /* With the defaults at temperature 0, the repeated best token stays the best. */
    p.temperature = 0;
    cx_sampler *s = NULL;
    cx_err err = {0};
    CHECK(cx_sampler_new(V, &p, &s, &err) == 0, "%s", err.msg);
    for (int i = 0; i < 10; i++) cx_sampler_accept(s, 1);
    CHECK(cx_sampler_sample(s, LOGITS) == 1, "default greedy: no penalty on a repeated token");
    cx_sampler_free(s);
}

TEST_MAIN({
    test_greedy();
    test_filters();
    test_distribution();
    test_repeat_penalty();
    test_frequency_penalty();
    test_presence_penalty();
    test_penalty_order();
    test_defaults();
    test_determinism();
})
